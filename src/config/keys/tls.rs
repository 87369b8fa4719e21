//! `[listener.tls]`.

use super::*;
const T: &str = "listener.tls";

pub(crate) const CERTIFICATES: Key = Key {
    table: T,
    name: "certificates",
    kind: Kind::Tables,
    default: Default::Words("required unless `acme` is set"),
    meaning: "certificates from files, chosen by SNI",
};
pub(crate) const ACME: Key = Key {
    table: T,
    name: "acme",
    kind: Kind::Table,
    default: Default::Words("none"),
    meaning: "obtain and renew certificates over ACME",
};
