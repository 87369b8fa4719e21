//! Identity from the company's IdP (docs/decisions/084): an
//! `Authorization: Bearer <JWT>` checked against the issuer's signing
//! keys — its signature, `exp` and `nbf` (with a small leeway), `iss` and
//! `aud` — and the person and team read from the configured claims. A
//! person is then served as a runtime key is: a [`Key`] with the id
//! `idp:<sub>`, whose models, concurrency and budget are their team's
//! policy, each person on their own.
//!
//! The keys are fetched at start and every `refresh`, off the request
//! path; a token signed by a key not seen yet (the IdP rotated) makes one
//! request fetch them again (one at a time, at most every
//! [`REFETCH_AFTER`]). A token verified once is remembered until it
//! expires, so an agent's every request costs a hash and a lookup.

mod jwks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::Value;

use crate::config::{IdpSettings, TeamPolicy};
use crate::keys::{Key, Keys};
use crate::store::unix_now;
use crate::sync::Locked;

/// The soonest the keys are fetched again for an unknown `kid` after the
/// last such fetch.
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// The soonest they are fetched again while there are none at all (the
/// IdP was down at start): every token waits on them.
const RETRY_EMPTY_AFTER: Duration = Duration::from_secs(1);
/// Tokens remembered as verified, at most.
const MAX_REMEMBERED: usize = 10_000;

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 401: not a valid token from the issuer, with why.
    Invalid(String),
    /// 403: valid, but the person is in no team this gateway serves.
    Forbidden(String),
    /// 503: the issuer's keys have not been fetched yet.
    Unavailable,
}

/// The issuer, its keys and the tokens verified.
pub(crate) struct Idp {
    settings: IdpSettings,
    http: jwks::Https,
    keys: ArcSwap<HashMap<String, jwks::Signing>>,
    /// When the keys were last fetched, and last fetched for an unknown
    /// `kid` (one fetch at a time).
    fetched: tokio::sync::Mutex<Fetched>,
    remembered: Mutex<HashMap<[u8; 32], Remembered>>,
    /// The database's teams, whose policies apply to the groups of their
    /// names (after the config's `[[idp.teams]]`).
    db: Option<Arc<Keys>>,
}

/// A token verified: the person it made, their claims, and the change
/// number of the database's teams they were made under (a change to a
/// team makes the person again from the claims).
struct Remembered {
    key: Arc<Key>,
    claims: Arc<Value>,
    teams_at: Option<i64>,
}

/// When the keys were fetched.
#[derive(Default)]
struct Fetched {
    any: Option<tokio::time::Instant>,
    for_unknown: Option<tokio::time::Instant>,
}

/// Whether a credential looks like a JWT (three base64url parts, a JSON
/// header): only those are checked against the issuer.
pub(crate) fn looks_like_jwt(text: &str) -> bool {
    text.starts_with("eyJ") && text.split('.').count() == 3
}

impl Idp {
    /// The IdP of `settings`, its keys fetched now and every `refresh` in
    /// the background.
    /// `db`: the database's teams, when there is one.
    pub(crate) fn start(settings: &IdpSettings, db: Option<Arc<Keys>>) -> Result<Arc<Idp>, String> {
        let idp = Arc::new(Idp {
            http: jwks::client(settings.ca_file.as_deref())?,
            settings: settings.clone(),
            keys: ArcSwap::from_pointee(HashMap::new()),
            fetched: tokio::sync::Mutex::new(Fetched::default()),
            remembered: Mutex::new(HashMap::new()),
            db,
        });
        tokio::spawn(idp.clone().keep_fresh());
        Ok(idp)
    }

    /// Fetch the keys now, then every `refresh` (sooner, every 10 s, while
    /// they cannot be fetched).
    async fn keep_fresh(self: Arc<Self>) {
        loop {
            let wait = match self.fetch_once(None).await {
                Ok(()) => self.settings.refresh,
                Err(e) => {
                    tracing::error!(issuer = %self.settings.issuer, error = %e, "idp: signing keys not fetched; tokens signed by keys not known yet are refused");
                    if self.keys.load().is_empty() {
                        RETRY_EMPTY_AFTER
                    } else {
                        REFETCH_AFTER
                    }
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn fetch(&self) -> Result<(), String> {
        let url = jwks::locate(
            &self.http,
            &self.settings.issuer,
            self.settings.jwks_url.as_deref(),
        )
        .await?;
        let keys = jwks::fetch(&self.http, &url).await?;
        tracing::info!(issuer = %self.settings.issuer, keys = keys.len(), "idp: signing keys fetched");
        self.keys.store(Arc::new(keys));
        Ok(())
    }

    /// Fetch the keys, one fetch at a time: for `kid`, unless it arrived
    /// while this waited or the keys were fetched within
    /// [`REFETCH_AFTER`] ([`RETRY_EMPTY_AFTER`] while there are none);
    /// for the periodic refresh (`None`), unless they were fetched in the
    /// last second.
    async fn fetch_once(&self, kid: Option<&str>) -> Result<(), String> {
        let mut fetched = self.fetched.lock().await;
        let now = tokio::time::Instant::now();
        let within =
            |t: Option<tokio::time::Instant>, d| t.is_some_and(|t| now.duration_since(t) < d);
        let skip = match kid {
            Some(kid) if self.keys.load().contains_key(kid) => true,
            Some(_) if self.keys.load().is_empty() => within(fetched.any, RETRY_EMPTY_AFTER),
            Some(_) => within(fetched.for_unknown, REFETCH_AFTER),
            None => within(fetched.any, RETRY_EMPTY_AFTER),
        };
        if skip {
            return Ok(());
        }
        fetched.any = Some(now);
        if kid.is_some() {
            fetched.for_unknown = Some(now);
        }
        self.fetch().await
    }

    /// Fetch the keys again for a `kid` not known.
    async fn refetch(&self, kid: &str) {
        if let Err(e) = self.fetch_once(Some(kid)).await {
            tracing::warn!(issuer = %self.settings.issuer, error = %e, "idp: signing keys not fetched again");
        }
    }

    /// The person `token` identifies.
    pub(crate) async fn identify(&self, token: &str) -> Result<Arc<Key>, Refusal> {
        let hash = crate::keys::hash(token);
        let now = unix_now();
        let teams_at = self.db.as_ref().and_then(|d| d.version());
        let known = self.remembered.locked().get(&hash).and_then(|r| {
            let live = r.key.expires_at.is_some_and(|at| at > now);
            live.then(|| {
                (r.teams_at == teams_at)
                    .then(|| r.key.clone())
                    .ok_or(r.claims.clone())
            })
        });
        let claims = match known {
            Some(Ok(key)) => return Ok(key),
            // Verified, but the teams changed since: its policy again.
            Some(Err(claims)) => claims,
            None => Arc::new(self.verify(token).await?),
        };
        let key = Arc::new(self.person(&claims)?);
        let mut remembered = self.remembered.locked();
        if remembered.len() >= MAX_REMEMBERED {
            remembered.retain(|_, r| r.key.expires_at.is_some_and(|at| at > now));
            if remembered.len() >= MAX_REMEMBERED {
                remembered.clear();
            }
        }
        let entry = Remembered {
            key: key.clone(),
            claims,
            teams_at,
        };
        remembered.insert(hash, entry);
        Ok(key)
    }

    /// The token's claims, once its signature and times and names hold.
    async fn verify(&self, token: &str) -> Result<Value, Refusal> {
        let invalid = |why: &str| Refusal::Invalid(format!("the identity token {why}"));
        let header = decode_header(token).map_err(|_| invalid("is not a JWT weir accepts"))?;
        let Some(kid) = header.kid else {
            return Err(invalid("names no signing key (`kid`)"));
        };
        if !self.keys.load().contains_key(&kid) {
            self.refetch(&kid).await;
            if self.keys.load().is_empty() {
                return Err(Refusal::Unavailable);
            }
        }
        let keys = self.keys.load();
        let Some(signing) = keys.get(&kid) else {
            return Err(invalid("is signed by a key the issuer does not publish"));
        };
        if header.alg != signing.alg {
            return Err(invalid("is signed with an algorithm its key is not for"));
        }
        let mut validation = Validation::new(signing.alg);
        validation.leeway = self.settings.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&self.settings.audience);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        match decode::<Value>(token, &signing.key, &validation) {
            Ok(data) => Ok(data.claims),
            Err(e) => Err(invalid(match e.kind() {
                ErrorKind::ExpiredSignature => "has expired",
                ErrorKind::ImmatureSignature => "is not valid yet (`nbf`)",
                ErrorKind::InvalidIssuer => "is from another issuer",
                ErrorKind::InvalidAudience => "is for another audience",
                ErrorKind::InvalidSignature => "has a signature that does not verify",
                ErrorKind::MissingRequiredClaim(_) => "lacks `exp`, `iss` or `aud`",
                ErrorKind::InvalidAlgorithm => "is signed with an algorithm its key is not for",
                _ => "could not be verified",
            })),
        }
    }

    /// The person and team in `claims`, under their team's policy.
    fn person(&self, claims: &Value) -> Result<Key, Refusal> {
        let text = |v: &Value| {
            v.as_str()
                .filter(|s| !s.is_empty() && s.len() <= 256)
                .map(str::to_string)
        };
        let sub = claims.get("sub").and_then(text);
        let user = claims
            .get(&self.settings.user_claim)
            .and_then(text)
            .or_else(|| sub.clone())
            .ok_or_else(|| {
                Refusal::Invalid(format!(
                    "the identity token has no `{}` or `sub`",
                    self.settings.user_claim
                ))
            })?;
        let groups: Vec<String> = match claims.get(&self.settings.team_claim) {
            Some(Value::Array(items)) => items.iter().take(256).filter_map(text).collect(),
            Some(v) => text(v).into_iter().collect(),
            None => Vec::new(),
        };
        let exp = claims.get("exp").and_then(Value::as_i64);
        let mut key = Key {
            id: format!("idp:{}", sub.as_deref().unwrap_or(&user)).into(),
            name: user.as_str().into(),
            user: Some(user.as_str().into()),
            team: groups.first().map(|g| g.as_str().into()),
            routes: Vec::new(),
            models: Default::default(),
            budget: Default::default(),
            max_concurrent: 0,
            rate: None,
            expires_at: exp,
        };
        // The config's first policy with one of the person's groups; else
        // the database's team of the first group that is one.
        let teams = &self.settings.teams;
        if let Some(p) = teams
            .iter()
            .find(|t| t.groups.iter().any(|g| groups.contains(g)))
        {
            let p: &TeamPolicy = p;
            key.team = Some(p.name.as_str().into());
            key.models = p.models.clone();
            key.budget = p.budget;
            key.max_concurrent = p.max_concurrent;
            return Ok(key);
        }
        let db = self.db.as_deref();
        if let Some(team) = db.and_then(|d| groups.iter().find_map(|g| d.team(g))) {
            key.team = Some(team.name.clone());
            team.fill(&mut key);
            return Ok(key);
        }
        if !teams.is_empty() || db.is_some_and(Keys::has_teams) {
            return Err(Refusal::Forbidden(format!(
                "`{user}` is in no team this gateway serves"
            )));
        }
        Ok(key)
    }
}
