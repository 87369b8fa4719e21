//! `[idp]` and `[[idp.teams]]`.

use super::*;
const T: &str = "idp";

pub(crate) const ISSUER: Key = Key {
    table: T,
    name: "issuer",
    kind: Kind::String,
    default: Default::Words("required"),
    meaning: "the issuer (`iss`) tokens must name, an https URL",
};
pub(crate) const AUDIENCE: Key = Key {
    table: T,
    name: "audience",
    kind: Kind::List,
    default: Default::Words("required"),
    meaning: "the audience (`aud`) tokens must name, one of these",
};
pub(crate) const JWKS_URL: Key = Key {
    table: T,
    name: "jwks_url",
    kind: Kind::String,
    default: Default::Words("discovered"),
    meaning: "where the signing keys are, else the issuer's openid-configuration says",
};
pub(crate) const USER_CLAIM: Key = Key {
    table: T,
    name: "user_claim",
    kind: Kind::String,
    default: Default::Str("email"),
    meaning: "the claim naming the person",
};
pub(crate) const TEAM_CLAIM: Key = Key {
    table: T,
    name: "team_claim",
    kind: Kind::String,
    default: Default::Str("groups"),
    meaning: "the claim naming the person's groups (a list or a text)",
};
pub(crate) const LEEWAY: Key = Key {
    table: T,
    name: "leeway",
    kind: Kind::Duration(secs(0)..=secs(300)),
    default: Default::Duration(secs(60)),
    meaning: "clock skew allowed on exp and nbf",
};
pub(crate) const REFRESH: Key = Key {
    table: T,
    name: "refresh",
    kind: Kind::Duration(secs(60)..=secs(86_400)),
    default: Default::Duration(secs(3600)),
    meaning: "how often the signing keys are fetched again",
};
pub(crate) const CA_FILE: Key = Key {
    table: T,
    name: "ca_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "extra CA certificates the IdP's certificate may chain to",
};
pub(crate) const TEAMS: Key = Key {
    table: T,
    name: "teams",
    kind: Kind::Tables,
    default: Default::Words("none"),
    meaning: "policies per group: models, limits and budgets per person",
};
