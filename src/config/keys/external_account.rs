//! `[listener.tls.acme.external_account]`.

use super::*;
const T: &str = "listener.tls.acme.external_account";

pub(crate) const KEY_ID: Key = Key {
    table: T,
    name: "key_id",
    kind: Kind::String,
    default: Default::Words("required"),
    meaning: "the key id (kid) the CA issued",
};
pub(crate) const HMAC_KEY_FILE: Key = Key {
    table: T,
    name: "hmac_key_file",
    kind: Kind::Path,
    default: Default::Words("required unless `hmac_key_env`"),
    meaning: "a file holding the HMAC key",
};
pub(crate) const HMAC_KEY_ENV: Key = Key {
    table: T,
    name: "hmac_key_env",
    kind: Kind::String,
    default: Default::Words("none"),
    meaning: "an environment variable holding the HMAC key",
};
