//! `[idp]`: identity from the company's IdP — JWTs checked against the
//! issuer's signing keys, and a policy per team; and `[[teams]]`: the
//! budgets a whole team shares.

use std::path::PathBuf;
use std::time::Duration;

use super::{AllowedModels, Budget};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdpSettings {
    /// The `iss` tokens must carry.
    pub(crate) issuer: String,
    /// One of these must be in `aud`.
    pub(crate) audience: Vec<String>,
    /// Where the JWKS is; `None`: from the issuer's
    /// `/.well-known/openid-configuration`.
    pub(crate) jwks_url: Option<String>,
    pub(crate) user_claim: String,
    pub(crate) team_claim: String,
    pub(crate) leeway: Duration,
    pub(crate) refresh: Duration,
    pub(crate) ca_file: Option<PathBuf>,
    /// Policies by group, in order: a person is under the first with one
    /// of their groups. Empty: every valid token is served.
    pub(crate) teams: Vec<TeamPolicy>,
}

/// What the members of one group may do, each person on their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TeamPolicy {
    pub(crate) name: String,
    /// The groups (as the token's `team_claim` names them) whose members
    /// are this team: its `name` unless listed (an IdP that sends group
    /// ids, as Entra ID does, or several groups for one team).
    pub(crate) groups: Vec<String>,
    pub(crate) models: AllowedModels,
    /// Each person's budget.
    pub(crate) budget: Budget,
    /// Each person's requests in flight; 0 = no bound.
    pub(crate) max_concurrent: usize,
}

/// A budget every member of a team shares (`[[teams]]`): the runtime keys
/// whose team it is and the IdP's people under it, on every route, beside
/// each one's own budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TeamBudget {
    pub(crate) name: String,
    pub(crate) budget: Budget,
}
