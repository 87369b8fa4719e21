//! `[http1]`.

use super::*;
const T: &str = "http1";

pub(crate) const MAX_HEADERS: Key = Key {
    table: T,
    name: "max_headers",
    kind: Kind::Uint { max: 10_000 },
    default: Default::Uint(100),
    meaning: "header fields per request",
};
pub(crate) const MAX_HEAD_SIZE: Key = Key {
    table: T,
    name: "max_head_size",
    kind: Kind::Size {
        min: 8 * KIB,
        max: HEAD_SIZE_MAX,
    },
    default: Default::Size(64 * KIB),
    meaning: "request line plus headers, in bytes",
};
