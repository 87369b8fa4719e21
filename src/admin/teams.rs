//! `/admin/teams`: teams' policies kept in the database, created, listed,
//! shown with their budget's use, changed and deleted at runtime
//! (docs/decisions/102). A team the config defines is refused with 409:
//! the config is where it is changed.

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::json;
use super::keys::{body, failed, problem};
use crate::config::SPEND_UNIT;
use crate::keys::{Database, TeamSpec, Written, team_view};
use crate::respond::Payload;

/// Answer a request under `/admin/teams`.
pub(super) async fn handle(req: Request<Incoming>, database: &Database) -> Response<Payload> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let rest = path.strip_prefix("/admin/teams").unwrap_or("");
    let parts = super::segments::decoded(rest);
    let method = req.method().clone();
    match (method, parts.as_slice()) {
        (Method::GET, []) => list(database).await,
        (Method::POST, []) => match body(req).await {
            Ok(b) => match TeamSpec::parse(&b, true) {
                Ok(spec) => {
                    let name = spec_name(&b);
                    written(database.keys.create_team(spec).await, &name, "created")
                }
                Err(e) => invalid(e.0),
            },
            Err(r) => r,
        },
        (Method::GET, [name]) => show(name, database).await,
        (Method::PATCH, [name]) => match body(req).await {
            Ok(b) => match TeamSpec::parse(&b, false) {
                Ok(spec) => written(database.keys.change_team(name, spec).await, name, "changed"),
                Err(e) => invalid(e.0),
            },
            Err(r) => r,
        },
        (Method::DELETE, [name]) => written(database.keys.delete_team(name).await, name, "deleted"),
        _ => problem(
            StatusCode::NOT_FOUND,
            "use GET/POST /admin/teams, GET/PATCH/DELETE /admin/teams/<name>",
        ),
    }
}

/// The name a create's body gives (already checked by the parse).
fn spec_name(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["name"].as_str().map(String::from))
        .unwrap_or_default()
}

fn invalid(problems: Vec<String>) -> Response<Payload> {
    json(
        StatusCode::BAD_REQUEST,
        json!({"error": "invalid team settings", "problems": problems}),
    )
}

/// The answer to a write.
fn written(result: Result<Written, String>, name: &str, did: &str) -> Response<Payload> {
    match result {
        Ok(Written::Done(row)) => {
            tracing::info!(team = %row.name, "admin API: team {did}");
            let status = match did {
                "created" => StatusCode::CREATED,
                _ => StatusCode::OK,
            };
            json(status, team_view(&row))
        }
        Ok(Written::Deleted) => {
            tracing::info!(team = %name, "admin API: team deleted");
            json(StatusCode::OK, json!({"name": name, "status": "deleted"}))
        }
        Ok(Written::Missing) => problem(StatusCode::NOT_FOUND, format!("no team `{name}`")),
        Ok(Written::Exists) => problem(
            StatusCode::CONFLICT,
            format!("team `{name}` exists: change it with PATCH /admin/teams/{name}"),
        ),
        Ok(Written::Config) => problem(
            StatusCode::CONFLICT,
            format!(
                "team `{name}` is defined in the config file (`[[teams]]` or `[[idp.teams]]`), which wins: change it there and reload, or remove it there to manage it here"
            ),
        ),
        Err(e) => failed(e),
    }
}

async fn list(database: &Database) -> Response<Payload> {
    match database.keys.team_rows().await {
        Ok(rows) => {
            let teams: Vec<Value> = rows
                .iter()
                .map(|r| {
                    let mut v = team_view(r);
                    v["source"] = json!(match database.keys.is_config_team(&r.name) {
                        true => "database (shadowed by the config's team of this name)",
                        false => "database",
                    });
                    v
                })
                .collect();
            json(StatusCode::OK, json!({"teams": teams}))
        }
        Err(e) => failed(e),
    }
}

/// A team, with what its usage rows (every instance's) say it used in
/// the current day, week and month (UTC), and what remains of each bound.
async fn show(name: &str, database: &Database) -> Response<Payload> {
    let rows = match database.keys.team_rows().await {
        Ok(rows) => rows,
        Err(e) => return failed(e),
    };
    let Some(row) = rows.into_iter().find(|r| r.name == name) else {
        return problem(StatusCode::NOT_FOUND, format!("no team `{name}`"));
    };
    let mut v = team_view(&row);
    let now = crate::store::unix_now().max(0) as u64;
    let b = &row.budget;
    let [day, week, month] = crate::llm::ledger::window_starts(now);
    let windows = [
        ("day", day, b.tokens_per_day, b.spend_per_day),
        ("week", week, b.tokens_per_week, b.spend_per_week),
        ("month", month, b.tokens_per_month, b.spend_per_month),
    ];
    let mut used = serde_json::Map::new();
    for (period, start, tokens_bound, spend_bound) in windows {
        let from_ms = i64::try_from(start).unwrap_or(0).saturating_mul(1000);
        let (requests, tokens, spend) = match database.keys.team_used_since(name, from_ms).await {
            Ok(u) => u,
            Err(e) => return failed(e),
        };
        let left = |bound: Option<u64>, used: u64| bound.map(|b| b.saturating_sub(used));
        used.insert(
            period.into(),
            json!({
                "requests": requests,
                "tokens": tokens,
                "spend": spend as f64 / SPEND_UNIT,
                "tokens_remaining": left(tokens_bound, tokens),
                "spend_remaining": left(spend_bound, spend).map(|s| s as f64 / SPEND_UNIT),
            }),
        );
    }
    v["used"] = Value::Object(used);
    v["source"] = json!(match database.keys.is_config_team(name) {
        true => "database (shadowed by the config's team of this name)",
        false => "database",
    });
    json(StatusCode::OK, v)
}
