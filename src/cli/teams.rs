//! `weir teams`: teams' policies kept in the database, through the running
//! weir's admin API (`/admin/teams`), as `weir keys` does for keys.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::keys::{list, segment};
use super::reload::call;
use crate::config::Secret;

/// A team's settings, as flags.
#[derive(Args, Debug, Default)]
pub(crate) struct TeamFlags {
    /// A budget the whole team shares, repeatable: `500USD/month`,
    /// `40/day` (the price table's currency), `2000000tokens/week`,
    /// `50000tokens/minute`; `off/month` removes the month's spend bound
    /// (`offtokens/month` its tokens bound).
    #[arg(long, value_name = "AMOUNT/PERIOD")]
    budget: Vec<String>,
    /// The soft limit of the team's budget: past this percent of a bound,
    /// answers carry a warning header and a line is logged.
    #[arg(long, value_name = "PERCENT")]
    warn_at: Option<u64>,
    /// Each member's own budget when their key sets none (and each IdP
    /// person's), as `--budget`; repeatable.
    #[arg(long, value_name = "AMOUNT/PERIOD")]
    per_person: Vec<String>,
    /// Model patterns members may use, comma-separated (`claude-*,gpt-5*`),
    /// when their key names none.
    #[arg(long)]
    models: Option<String>,
    /// Routes members' keys may be used on, comma-separated, when their
    /// key names none.
    #[arg(long)]
    routes: Option<String>,
    /// Each member's requests in flight, when their key sets none.
    #[arg(long, value_name = "N")]
    max_concurrent: Option<u64>,
    /// Each member key's requests a second, when the key sets none.
    #[arg(long, value_name = "N")]
    rps: Option<u64>,
    /// Each member key's burst, with `--rps` (default: the rate).
    #[arg(long, value_name = "N")]
    burst: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TeamsAction {
    /// Create a team: its policy applies to its keys and IdP group at once,
    /// on every instance.
    Create {
        name: String,
        #[command(flatten)]
        flags: Box<TeamFlags>,
    },
    /// List the teams the database keeps.
    List,
    /// Show a team, with its budget's use this day, week and month.
    Show { name: String },
    /// Change a team's policy (only the flags given).
    Update {
        name: String,
        #[command(flatten)]
        flags: Box<TeamFlags>,
    },
    /// Delete a team: its keys keep working, under no team policy.
    Delete { name: String },
}

/// One `--budget`: the bound's name and its value (null: removed).
fn bound(text: &str) -> Result<(String, Value), String> {
    let bad = || {
        format!(
            "--budget `{text}`: write an amount and a period, such as 500USD/month, 40/day or 2000000tokens/week"
        )
    };
    let (amount, period) = text.split_once('/').ok_or_else(bad)?;
    let period = period.trim();
    if !["minute", "day", "week", "month"].contains(&period) {
        return Err(bad());
    }
    let amount = amount.trim();
    let digits = amount
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(amount.len());
    let (number, unit) = amount.split_at(digits);
    let (number, unit) = match number {
        "" if unit.starts_with("off") => ("off", &unit[3..]),
        _ => (number, unit),
    };
    let tokens = unit.trim().eq_ignore_ascii_case("tokens");
    if !tokens && !unit.chars().all(|c| c.is_ascii_alphabetic()) || unit.len() > 6 {
        return Err(bad());
    }
    if !tokens && period == "minute" {
        return Err(format!(
            "--budget `{text}`: a minute's bound is in tokens (50000tokens/minute)"
        ));
    }
    let name = format!("{}_per_{period}", if tokens { "tokens" } else { "spend" });
    let value = match (number, tokens) {
        ("off", _) => Value::Null,
        (n, true) => json!(n.parse::<u64>().map_err(|_| bad())?),
        (n, false) => json!(n.parse::<f64>().map_err(|_| bad())?),
    };
    Ok((name, value))
}

fn budget(texts: &[String], into: &mut Map<String, Value>) -> Result<(), String> {
    for text in texts {
        let (name, value) = bound(text)?;
        into.insert(name, value);
    }
    Ok(())
}

impl TeamFlags {
    fn body(&self, name: Option<&str>) -> Result<String, String> {
        let mut m = Map::new();
        if let Some(name) = name {
            m.insert("name".into(), name.into());
        }
        budget(&self.budget, &mut m)?;
        if let Some(w) = self.warn_at {
            m.insert("warn_at".into(), w.into());
        }
        if !self.per_person.is_empty() {
            let mut p = Map::new();
            budget(&self.per_person, &mut p)?;
            m.insert("per_person".into(), Value::Object(p));
        }
        if let Some(models) = &self.models {
            m.insert("models".into(), list(models));
        }
        if let Some(routes) = &self.routes {
            m.insert("routes".into(), list(routes));
        }
        if let Some(n) = self.max_concurrent {
            m.insert("max_concurrent".into(), n.into());
        }
        if let Some(n) = self.rps {
            m.insert("rate_limit_per_second".into(), n.into());
        }
        if let Some(n) = self.burst {
            m.insert("rate_limit_burst".into(), n.into());
        }
        Ok(Value::Object(m).to_string())
    }
}

/// Run a `weir teams` action against `(addr, token)`.
pub(crate) fn teams(action: &TeamsAction, (addr, token): (SocketAddr, Secret)) -> ExitCode {
    let at = |name: &str| format!("/admin/teams/{}", segment(name));
    let request = match action {
        TeamsAction::Create { name, flags } => flags
            .body(Some(name))
            .map(|b| ("POST", "/admin/teams".to_string(), Some(b))),
        TeamsAction::List => Ok(("GET", "/admin/teams".to_string(), None)),
        TeamsAction::Show { name } => Ok(("GET", at(name), None)),
        TeamsAction::Update { name, flags } => {
            flags.body(None).map(|b| ("PATCH", at(name), Some(b)))
        }
        TeamsAction::Delete { name } => Ok(("DELETE", at(name), None)),
    };
    let (method, path, body) = match request {
        Ok(r) => r,
        Err(e) => {
            eprintln!("weir teams: {e}");
            return ExitCode::from(2);
        }
    };
    match call(addr, &token, method, &path, body.as_deref()) {
        Ok((status, text)) if (200..300).contains(&status) => {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            if let TeamsAction::List = action {
                for t in v["teams"].as_array().into_iter().flatten() {
                    let spend = ["day", "week", "month"]
                        .iter()
                        .filter_map(|p| {
                            t[format!("spend_per_{p}")]
                                .as_f64()
                                .map(|s| format!("{s}/{p}"))
                        })
                        .collect::<Vec<_>>();
                    println!(
                        "{:<20} budget={} models={} source={}",
                        t["name"].as_str().unwrap_or("-"),
                        if spend.is_empty() {
                            "-".to_string()
                        } else {
                            spend.join(",")
                        },
                        t["models"],
                        t["source"].as_str().unwrap_or("-"),
                    );
                }
            } else {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            }
            ExitCode::SUCCESS
        }
        Ok((status, text)) => {
            eprintln!("weir teams: the admin API answered {status}: {text}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("weir teams: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_read_as_amounts_per_period() {
        assert_eq!(
            bound("500USD/month").unwrap(),
            ("spend_per_month".into(), json!(500.0))
        );
        assert_eq!(
            bound("40/day").unwrap(),
            ("spend_per_day".into(), json!(40.0))
        );
        assert_eq!(
            bound("2000000tokens/week").unwrap(),
            ("tokens_per_week".into(), json!(2_000_000))
        );
        assert_eq!(
            bound("off/month").unwrap(),
            ("spend_per_month".into(), Value::Null)
        );
        assert_eq!(
            bound("offtokens/day").unwrap(),
            ("tokens_per_day".into(), Value::Null)
        );
        for bad in [
            "500",
            "500USD/year",
            "5/minute",
            "x/day",
            "1.5tokens/day",
            "500 US$/day",
        ] {
            assert!(bound(bad).is_err(), "{bad}");
        }
    }
}
