//! `[[listener]]`.

use super::*;
const T: &str = "listener";

pub(crate) const NAME: Key = Key {
    table: T,
    name: "name",
    kind: Kind::String,
    default: Default::Words("the address"),
    meaning: "the name used in logs",
};
pub(crate) const ADDRESS: Key = Key {
    table: T,
    name: "address",
    kind: Kind::String,
    default: Default::Words("required"),
    meaning: "IP:port to listen on",
};
pub(crate) const TLS: Key = Key {
    table: T,
    name: "tls",
    kind: Kind::Table,
    default: Default::Words("none"),
    meaning: "makes this an HTTPS listener",
};
pub(crate) const REDIRECT_HTTPS: Key = Key {
    table: T,
    name: "redirect_https",
    kind: Kind::Bool,
    default: Default::Bool(false),
    meaning: "only answer with redirects to https://",
};
pub(crate) const HTTPS_PORT: Key = Key {
    table: T,
    name: "https_port",
    kind: Kind::Uint { max: 65535 },
    default: Default::Uint(443),
    meaning: "the port written in redirects",
};
pub(crate) const PROXY_PROTOCOL_FROM: Key = Key {
    table: T,
    name: "proxy_protocol_from",
    kind: Kind::List,
    default: Default::Empty,
    meaning: "load balancers that open every connection with a PROXY header",
};
pub(crate) const ACCESS: Key = Key {
    table: T,
    name: "access",
    kind: Kind::List,
    default: Default::Empty,
    meaning: "allow/deny rules by client address, checked before TLS",
};
