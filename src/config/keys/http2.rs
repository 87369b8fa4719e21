//! `[http2]`.

use super::*;
const T: &str = "http2";

pub(crate) const MAX_CONCURRENT_STREAMS: Key = Key {
    table: T,
    name: "max_concurrent_streams",
    kind: Kind::Uint {
        max: u32::MAX as u64,
    },
    default: Default::Uint(100),
    meaning: "streams open at once per connection",
};
pub(crate) const MAX_HEADER_LIST_SIZE: Key = Key {
    table: T,
    name: "max_header_list_size",
    kind: Kind::Size {
        min: 0,
        max: HEAD_SIZE_MAX,
    },
    default: Default::Size(64 * KIB),
    meaning: "decoded header block size per request",
};
pub(crate) const MAX_PENDING_RESETS: Key = Key {
    table: T,
    name: "max_pending_resets",
    kind: Kind::Uint { max: 1_000_000 },
    default: Default::Uint(20),
    meaning: "streams a client may open and reset before weir accepts them",
};
pub(crate) const MAX_CONTROL_FRAMES_PER_SECOND: Key = Key {
    table: T,
    name: "max_control_frames_per_second",
    kind: Kind::Uint {
        max: u32::MAX as u64,
    },
    default: Default::Uint(1000),
    meaning: "PING, SETTINGS, PRIORITY and RST_STREAM frames a client may send per second",
};
