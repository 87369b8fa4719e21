//! `weir keys` and `weir usage`: runtime keys and usage reports through
//! the running weir's admin API (`/admin/keys`, `/admin/usage`), so the
//! database is only ever written by weir itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::reload::call;
use crate::config::Secret;

/// Where the running weir's admin API is.
#[derive(Args, Debug)]
pub(crate) struct AdminTarget {
    #[arg(short, long, value_name = "FILE")]
    pub(crate) config: PathBuf,
    /// The admin API's address, instead of the config's `[admin] address`.
    #[arg(long, value_name = "ADDR")]
    pub(crate) admin: Option<SocketAddr>,
    /// A file holding the admin token, instead of the config's.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
}

/// A key's settings, as flags.
#[derive(Args, Debug, Default)]
pub(crate) struct KeyFlags {
    #[arg(long)]
    name: Option<String>,
    /// The person the key is for.
    #[arg(long)]
    user: Option<String>,
    #[arg(long)]
    team: Option<String>,
    /// Model patterns it may use, comma-separated (`claude-*,gpt-5*`).
    #[arg(long)]
    models: Option<String>,
    /// Routes it may be used on, comma-separated (default: every route
    /// with `runtime_keys = true`).
    #[arg(long)]
    routes: Option<String>,
    /// Spend per day, in the price table's currency.
    #[arg(long, value_name = "AMOUNT")]
    spend_per_day: Option<f64>,
    #[arg(long, value_name = "N")]
    tokens_per_day: Option<u64>,
    /// Spend per week (Monday to Sunday, UTC).
    #[arg(long, value_name = "AMOUNT")]
    spend_per_week: Option<f64>,
    /// Spend per calendar month (UTC).
    #[arg(long, value_name = "AMOUNT")]
    spend_per_month: Option<f64>,
    /// The soft limit: past this percent of a bound, answers carry a
    /// warning header and a line is logged.
    #[arg(long, value_name = "PERCENT")]
    warn_at: Option<u64>,
    #[arg(long, value_name = "N")]
    tokens_per_minute: Option<u64>,
    /// Requests in flight at once.
    #[arg(long, value_name = "N")]
    max_concurrent: Option<u64>,
    /// Requests a second (`rate_limit_per_second`), on every route and,
    /// with `[cluster]`, across the fleet.
    #[arg(long, value_name = "N")]
    rps: Option<u64>,
    /// Requests at once before `--rps` applies (`rate_limit_burst`;
    /// default: the rate).
    #[arg(long, value_name = "N")]
    burst: Option<u64>,
    /// When it stops working: a duration from now (`90d`).
    #[arg(long, value_name = "DURATION")]
    expires: Option<String>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeysAction {
    /// Issue a key; its secret is printed once.
    Create(Box<KeyFlags>),
    /// List every key (never their secrets).
    List,
    /// Show one key, with today's usage.
    Show { id: String },
    /// Change a key's settings (only the flags given).
    Update {
        id: String,
        #[command(flatten)]
        flags: Box<KeyFlags>,
    },
    /// Give a key a new secret (printed once); the old one stops at once.
    Rotate { id: String },
    /// Revoke a key: it stops on every instance within a second.
    Revoke { id: String },
}

pub(super) fn list(text: &str) -> Value {
    json!(
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
    )
}

impl KeyFlags {
    fn body(&self) -> String {
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("name", self.name.clone().map(Value::from));
        put("user", self.user.clone().map(Value::from));
        put("team", self.team.clone().map(Value::from));
        put("models", self.models.as_deref().map(list));
        put("routes", self.routes.as_deref().map(list));
        put("spend_per_day", self.spend_per_day.map(Value::from));
        put("tokens_per_day", self.tokens_per_day.map(Value::from));
        put("spend_per_week", self.spend_per_week.map(Value::from));
        put("spend_per_month", self.spend_per_month.map(Value::from));
        put("warn_at", self.warn_at.map(Value::from));
        put("tokens_per_minute", self.tokens_per_minute.map(Value::from));
        put("max_concurrent", self.max_concurrent.map(Value::from));
        put("rate_limit_per_second", self.rps.map(Value::from));
        put("rate_limit_burst", self.burst.map(Value::from));
        put("expires_in", self.expires.clone().map(Value::from));
        Value::Object(m).to_string()
    }
}

/// Run a `weir keys` action against `(addr, token)`.
pub(crate) fn keys(action: &KeysAction, (addr, token): (SocketAddr, Secret)) -> ExitCode {
    let (method, path, body) = match action {
        KeysAction::Create(flags) => ("POST", "/admin/keys".to_string(), Some(flags.body())),
        KeysAction::List => ("GET", "/admin/keys".to_string(), None),
        KeysAction::Show { id } => ("GET", format!("/admin/keys/{}", segment(id)), None),
        KeysAction::Update { id, flags } => (
            "PATCH",
            format!("/admin/keys/{}", segment(id)),
            Some(flags.body()),
        ),
        KeysAction::Rotate { id } => ("POST", format!("/admin/keys/{}/rotate", segment(id)), None),
        KeysAction::Revoke { id } => ("DELETE", format!("/admin/keys/{}", segment(id)), None),
    };
    match call(addr, &token, method, &path, body.as_deref()) {
        Ok((status, text)) if (200..300).contains(&status) => {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            match action {
                KeysAction::List => {
                    for k in v["keys"].as_array().into_iter().flatten() {
                        println!(
                            "{}  {:<8} {:<20} user={} team={} prefix={}",
                            k["id"].as_str().unwrap_or("-"),
                            k["status"].as_str().unwrap_or("-"),
                            k["name"].as_str().unwrap_or("-"),
                            k["user"].as_str().unwrap_or("-"),
                            k["team"].as_str().unwrap_or("-"),
                            k["prefix"].as_str().unwrap_or("-"),
                        );
                    }
                }
                _ => {
                    if let Some(secret) = v["key"].as_str() {
                        eprintln!("the key's secret is shown this once; keep it now:");
                        println!("{secret}");
                    }
                    let mut shown = v.clone();
                    if let Some(o) = shown.as_object_mut() {
                        o.remove("key");
                    }
                    eprintln!(
                        "{}",
                        serde_json::to_string_pretty(&shown).unwrap_or_default()
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Ok((status, text)) => {
            eprintln!("weir keys: the admin API answered {status}: {text}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("weir keys: {e}");
            ExitCode::FAILURE
        }
    }
}

/// An id as one path segment (an id with a `/` cannot reach another path).
pub(super) fn segment(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `weir usage`: the report of `/admin/usage`, as a table or CSV.
pub(crate) fn usage(
    by: &str,
    since: &str,
    csv: bool,
    (addr, token): (SocketAddr, Secret),
) -> ExitCode {
    let since = match humantime::parse_duration(since) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("weir usage: --since `{since}`: {e} (write it like 30d or 12h)");
            return ExitCode::FAILURE;
        }
    };
    let from = std::time::SystemTime::now() - since;
    let path = format!(
        "/admin/usage?group_by={}&from={}",
        segment(by),
        humantime::format_rfc3339_seconds(from)
    );
    let text = match call(addr, &token, "GET", &path, None) {
        Ok((200, text)) => text,
        Ok((status, text)) => {
            eprintln!("weir usage: the admin API answered {status}: {text}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("weir usage: {e}");
            return ExitCode::FAILURE;
        }
    };
    let v: Value = serde_json::from_str(&text).unwrap_or_default();
    let groups: Vec<&str> = by
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .collect();
    let groups: Vec<&str> = groups
        .iter()
        .map(|g| if *g == "person" { "user" } else { g })
        .collect();
    let sums = [
        "requests",
        "errors",
        "input_tokens",
        "output_tokens",
        "spend",
    ];
    let sep = if csv { "," } else { "\t" };
    println!(
        "{}",
        groups
            .iter()
            .chain(sums.iter())
            .copied()
            .collect::<Vec<_>>()
            .join(sep)
    );
    for line in v["usage"].as_array().into_iter().flatten() {
        let cells: Vec<String> = groups
            .iter()
            .map(|g| line[*g].as_str().unwrap_or("-").to_string())
            .chain(sums.iter().map(|s| line[*s].to_string()))
            .collect();
        println!("{}", cells.join(sep));
    }
    ExitCode::SUCCESS
}
