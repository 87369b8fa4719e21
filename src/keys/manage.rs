//! Issuing and changing keys: a key's settings read from the admin API's
//! JSON (every problem at once), the secret made and shown once, and a
//! key as the API shows it (never its secret or hash).

use base64::Engine as _;
use serde_json::{Map, Value};

use super::{Keys, SECRET_PREFIX, hash};
use crate::config::SPEND_UNIT;
use crate::store::{KeyChange, KeyRow, Report, ReportLine, StoreError, unix_now};

/// The settings of a key to create, or the changes to one.
#[derive(Debug, Default)]
pub(crate) struct KeySpec(KeyChange);

/// Why a key's settings were refused: every problem found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SpecError(pub(crate) Vec<String>);

const FIELDS: &[&str] = &[
    "name",
    "user",
    "team",
    "metadata",
    "routes",
    "models",
    "max_concurrent",
    "rate_limit_per_second",
    "rate_limit_burst",
    "tokens_per_minute",
    "tokens_per_day",
    "spend_per_day",
    "tokens_per_week",
    "spend_per_week",
    "tokens_per_month",
    "spend_per_month",
    "warn_at",
    "expires_in",
    "expires_at",
];
const MAX_TEXT: usize = 128;
const MAX_LIST: usize = 100;
const MAX_METADATA: usize = 4096;
/// The highest request rate and burst a key may have: more than any
/// agent sends, well inside the limiters' arithmetic.
pub(super) const MAX_RATE: u64 = 1_000_000;

/// One field's reading, adding what is wrong to `problems`.
pub(super) struct Reader<'a> {
    pub(super) fields: &'a Map<String, Value>,
    pub(super) problems: Vec<String>,
}

impl Reader<'_> {
    pub(super) fn text(&mut self, name: &str) -> Option<Option<String>> {
        match self.fields.get(name)? {
            Value::Null => Some(None),
            Value::String(s)
                if !s.is_empty() && s.len() <= MAX_TEXT && !s.contains(char::is_control) =>
            {
                Some(Some(s.clone()))
            }
            _ => {
                self.problems.push(format!(
                    "`{name}` must be a text of 1 to {MAX_TEXT} characters (or null)"
                ));
                None
            }
        }
    }

    pub(super) fn list(&mut self, name: &str) -> Option<Vec<String>> {
        let v = self.fields.get(name)?;
        let items: Option<Vec<String>> = v.as_array().and_then(|a| {
            a.iter()
                .map(|i| {
                    i.as_str()
                        .filter(|s| !s.is_empty() && s.len() <= MAX_TEXT)
                        .map(String::from)
                })
                .collect()
        });
        match items {
            Some(items) if items.len() <= MAX_LIST => Some(items),
            _ => {
                self.problems.push(format!(
                    "`{name}` must be a list of at most {MAX_LIST} texts of 1 to {MAX_TEXT} characters"
                ));
                None
            }
        }
    }

    pub(super) fn count(&mut self, name: &str) -> Option<Option<u64>> {
        match self.fields.get(name)? {
            Value::Null => Some(None),
            v => match v.as_u64() {
                Some(n) if n > 0 => Some(Some(n)),
                _ => {
                    self.problems
                        .push(format!("`{name}` must be a whole number above 0 (or null)"));
                    None
                }
            },
        }
    }

    /// A request rate or burst: a whole number from 1 to [`MAX_RATE`].
    pub(super) fn rate(&mut self, name: &str) -> Option<Option<u64>> {
        match self.fields.get(name)? {
            Value::Null => Some(None),
            v => match v.as_u64() {
                Some(n) if (1..=MAX_RATE).contains(&n) => Some(Some(n)),
                _ => {
                    self.problems.push(format!(
                        "`{name}` must be a whole number of requests from 1 to {MAX_RATE} (or null)"
                    ));
                    None
                }
            },
        }
    }

    /// A burst given with the rate cleared in the same change: a burst
    /// needs a rate (as a route's `rate_limit_burst` does).
    pub(super) fn burst_needs_rate(&mut self) {
        let cleared = matches!(self.fields.get("rate_limit_per_second"), Some(Value::Null));
        let burst = self
            .fields
            .get("rate_limit_burst")
            .is_some_and(|b| !b.is_null());
        if cleared && burst {
            self.problems.push(
                "`rate_limit_burst` needs a rate: give `rate_limit_per_second` too, or clear both"
                    .into(),
            );
        }
    }

    pub(super) fn percent(&mut self, name: &str) -> Option<Option<u64>> {
        match self.fields.get(name)? {
            Value::Null => Some(None),
            v => match v.as_u64() {
                Some(n) if (1..100).contains(&n) => Some(Some(n)),
                _ => {
                    self.problems
                        .push(format!("`{name}` must be a percent from 1 to 99 (or null)"));
                    None
                }
            },
        }
    }

    pub(super) fn money(&mut self, name: &str) -> Option<Option<u64>> {
        match self.fields.get(name)? {
            Value::Null => Some(None),
            v => match v.as_f64() {
                Some(m) if m > 0.0 && m < 1e6 => Some(Some((m * SPEND_UNIT).round() as u64)),
                _ => {
                    self.problems.push(format!(
                        "`{name}` must be an amount of the price table's currency above 0 and below 1,000,000 (or null)"
                    ));
                    None
                }
            },
        }
    }

    fn expiry(&mut self) -> Option<Option<i64>> {
        let within = self.fields.get("expires_in");
        let at = self.fields.get("expires_at");
        if within.is_some() && at.is_some() {
            self.problems
                .push("give `expires_in` or `expires_at`, not both".to_string());
            return None;
        }
        if let Some(v) = within {
            let parsed = v.as_str().and_then(|s| humantime::parse_duration(s).ok());
            return match parsed {
                Some(d) if d.as_secs() > 0 && d.as_secs() < 100 * 365 * 86_400 => {
                    Some(Some(unix_now().saturating_add(d.as_secs() as i64)))
                }
                _ => {
                    self.problems.push(
                        "`expires_in` must be a duration such as \"90d\" or \"12h\" (under 100 years)".to_string(),
                    );
                    None
                }
            };
        }
        match at? {
            Value::Null => Some(None),
            v => match v
                .as_str()
                .and_then(|s| humantime::parse_rfc3339_weak(s).ok())
            {
                Some(t) => Some(Some(
                    t.duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs() as i64),
                )),
                None => {
                    self.problems.push(
                        "`expires_at` must be a time such as \"2027-03-01T00:00:00Z\" (or null)"
                            .to_string(),
                    );
                    None
                }
            },
        }
    }
}

impl KeySpec {
    /// Read a key's settings from a JSON object: every problem at once.
    pub(crate) fn parse(body: &[u8]) -> Result<KeySpec, SpecError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| SpecError(vec![format!("the body is not JSON: {e}")]))?;
        let Some(fields) = value.as_object() else {
            return Err(SpecError(vec!["the body must be a JSON object".into()]));
        };
        let mut r = Reader {
            fields,
            problems: Vec::new(),
        };
        for name in fields.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
            r.problems.push(format!(
                "unknown field `{name}`; a key has: {}",
                FIELDS.join(", ")
            ));
        }
        let metadata = match fields.get("metadata") {
            None => None,
            Some(m @ Value::Object(_)) if m.to_string().len() <= MAX_METADATA => Some(m.clone()),
            Some(_) => {
                r.problems.push(format!(
                    "`metadata` must be a JSON object of at most {MAX_METADATA} bytes"
                ));
                None
            }
        };
        r.burst_needs_rate();
        let change = KeyChange {
            name: r.text("name").flatten(),
            user: r.text("user"),
            team: r.text("team"),
            metadata,
            routes: r.list("routes"),
            models: r.list("models"),
            max_concurrent: r.count("max_concurrent"),
            rate_limit_per_second: r.rate("rate_limit_per_second"),
            rate_limit_burst: r.rate("rate_limit_burst"),
            tokens_per_minute: r.count("tokens_per_minute"),
            tokens_per_day: r.count("tokens_per_day"),
            spend_per_day: r.money("spend_per_day"),
            tokens_per_week: r.count("tokens_per_week"),
            spend_per_week: r.money("spend_per_week"),
            tokens_per_month: r.count("tokens_per_month"),
            spend_per_month: r.money("spend_per_month"),
            warn_at: r.percent("warn_at"),
            expires_at: r.expiry(),
        };
        if r.problems.is_empty() {
            Ok(KeySpec(change))
        } else {
            Err(SpecError(r.problems))
        }
    }
}

/// A new secret: the prefix and 256 random bits, base64url.
fn secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "the system's random generator failed")?;
    Ok(format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// What the API shows of a secret: its first characters.
fn prefix(secret: &str) -> String {
    secret.chars().take(SECRET_PREFIX.len() + 6).collect()
}

fn new_id() -> Result<String, String> {
    let mut bytes = [0u8; 6];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "the system's random generator failed")?;
    Ok(format!(
        "key_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

pub(super) fn failed(e: StoreError) -> String {
    e.to_string()
}

impl Keys {
    /// Issue a key: it, and its secret (shown this once).
    pub(crate) async fn create(&self, spec: KeySpec) -> Result<(KeyRow, String), String> {
        let secret = secret()?;
        let now = unix_now();
        let id = new_id()?;
        let mut row = KeyRow {
            id: id.clone(),
            hash: hash(&secret).to_vec(),
            prefix: prefix(&secret),
            name: id,
            user: None,
            team: None,
            metadata: Value::Object(Map::new()),
            routes: Vec::new(),
            models: Vec::new(),
            max_concurrent: None,
            rate_limit_per_second: None,
            rate_limit_burst: None,
            tokens_per_minute: None,
            tokens_per_day: None,
            spend_per_day: None,
            tokens_per_week: None,
            spend_per_week: None,
            tokens_per_month: None,
            spend_per_month: None,
            warn_at: None,
            expires_at: None,
            created_at: now,
            updated_at: now,
            revoked_at: None,
        };
        let named = spec.0.name.is_some();
        spec.0.apply_to(&mut row);
        if !named && let Some(user) = &row.user {
            row.name = user.clone();
        }
        self.store.insert_key(row.clone()).await.map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok((row, secret))
    }

    /// Change a live key's settings.
    pub(crate) async fn change(&self, id: &str, spec: KeySpec) -> Result<Option<KeyRow>, String> {
        let row = self
            .store
            .change_key(id, spec.0, None)
            .await
            .map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok(row)
    }

    /// Give a live key a new secret (the old one stops at once): it, and
    /// the new secret.
    pub(crate) async fn rotate(&self, id: &str) -> Result<Option<(KeyRow, String)>, String> {
        let secret = secret()?;
        let new = (hash(&secret).to_vec(), prefix(&secret));
        let row = self
            .store
            .change_key(id, KeyChange::default(), Some(new))
            .await
            .map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok(row.map(|r| (r, secret)))
    }

    /// Revoke a key: whether it was live.
    pub(crate) async fn revoke(&self, id: &str) -> Result<bool, String> {
        let revoked = self.store.revoke_key(id).await.map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok(revoked)
    }
}

impl Keys {
    /// Every key, revoked ones included.
    pub(crate) async fn rows(&self) -> Result<Vec<KeyRow>, String> {
        self.store.keys().await.map_err(failed)
    }

    /// One key by id.
    pub(crate) async fn row(&self, id: &str) -> Result<Option<KeyRow>, String> {
        self.store.key(id).await.map_err(failed)
    }

    /// A key's requests, tokens and spend since `from_ms`, from its rows.
    pub(crate) async fn used_since(
        &self,
        id: &str,
        from_ms: i64,
    ) -> Result<(u64, u64, u64), String> {
        self.store
            .used_since(crate::store::By::Key, id, from_ms)
            .await
            .map_err(failed)
    }

    /// Usage summed by the report's groups.
    pub(crate) async fn report(&self, report: Report) -> Result<Vec<ReportLine>, String> {
        self.store.report(report).await.map_err(failed)
    }
}

/// A time in Unix seconds as the API shows it (RFC 3339, UTC).
pub(super) fn time(t: Option<i64>) -> Option<String> {
    t.and_then(|t| u64::try_from(t).ok()).map(|t| {
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t))
            .to_string()
    })
}

/// A key as the API shows it.
pub(crate) fn view(row: &KeyRow) -> Value {
    let now = unix_now();
    let status = if row.revoked_at.is_some() {
        "revoked"
    } else if row.expires_at.is_some_and(|t| t <= now) {
        "expired"
    } else {
        "active"
    };
    serde_json::json!({
        "id": row.id,
        "name": row.name,
        "prefix": row.prefix,
        "user": row.user,
        "team": row.team,
        "metadata": row.metadata,
        "routes": row.routes,
        "models": row.models,
        "max_concurrent": row.max_concurrent,
        "rate_limit_per_second": row.rate_limit_per_second,
        "rate_limit_burst": row.rate_limit_burst,
        "tokens_per_minute": row.tokens_per_minute,
        "tokens_per_day": row.tokens_per_day,
        "spend_per_day": row.spend_per_day.map(|s| s as f64 / SPEND_UNIT),
        "tokens_per_week": row.tokens_per_week,
        "spend_per_week": row.spend_per_week.map(|s| s as f64 / SPEND_UNIT),
        "tokens_per_month": row.tokens_per_month,
        "spend_per_month": row.spend_per_month.map(|s| s as f64 / SPEND_UNIT),
        "warn_at": row.warn_at,
        "expires_at": time(row.expires_at),
        "created_at": time(Some(row.created_at)),
        "updated_at": time(Some(row.updated_at)),
        "revoked_at": time(row.revoked_at),
        "status": status,
    })
}
