//! `[[listener.tls.certificates]]`.

use super::*;
const T: &str = "listener.tls.certificates";

pub(crate) const CERT: Key = Key {
    table: T,
    name: "cert",
    kind: Kind::Path,
    default: Default::Words("required"),
    meaning: "PEM file: the certificate, then its chain",
};
pub(crate) const KEY: Key = Key {
    table: T,
    name: "key",
    kind: Kind::Path,
    default: Default::Words("required"),
    meaning: "PEM file: the certificate's private key",
};
