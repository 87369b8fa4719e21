//! `/admin/keys` and `/admin/usage`: runtime keys issued, listed, changed,
//! rotated and revoked, and usage reported, with `[database]`
//! (docs/decisions/083). Without one, each answers 404 saying why.

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;

use std::sync::Arc;

use super::{Reload, json};
use crate::config::SPEND_UNIT;
use crate::keys::{Database, KeySpec, view};
use crate::respond::Payload;
use crate::store::{Group, Report};

/// The largest body a key's settings may have.
const MAX_BODY: usize = 64 * 1024;

pub(super) fn problem(status: StatusCode, message: impl Into<String>) -> Response<Payload> {
    json(status, json!({"error": message.into()}))
}

/// Answer a request under `/admin/keys` or `/admin/usage`.
pub(super) async fn handle(
    req: Request<Incoming>,
    database: Option<&Database>,
    running: &Arc<dyn Reload>,
) -> Response<Payload> {
    let Some(database) = database else {
        return problem(
            StatusCode::NOT_FOUND,
            "no database is configured: add a `[database]` table to keep runtime keys and usage",
        );
    };
    let path = req.uri().path().trim_end_matches('/').to_string();
    if path == "/admin/usage" {
        return match *req.method() {
            Method::GET => usage(req.uri().query().unwrap_or(""), database).await,
            _ => problem(StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        };
    }
    let rest = path.strip_prefix("/admin/keys").unwrap_or("");
    // Each segment decoded (`weir keys` encodes an id's `_`).
    let parts = super::segments::decoded(rest);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let method = req.method().clone();
    match (method, parts.as_slice()) {
        (Method::GET, []) => list(database).await,
        (Method::POST, []) => match body(req).await {
            Ok(b) => create(&b, database).await,
            Err(r) => r,
        },
        (Method::GET, [id]) => show(id, database, running).await,
        (Method::PATCH, [id]) => {
            let id = id.to_string();
            match body(req).await {
                Ok(b) => change(&id, &b, database).await,
                Err(r) => r,
            }
        }
        (Method::DELETE, [id]) => revoke(id, database).await,
        (Method::POST, [id, "rotate"]) => rotate(id, database).await,
        _ => problem(
            StatusCode::NOT_FOUND,
            "use GET/POST /admin/keys, GET/PATCH/DELETE /admin/keys/<id>, POST /admin/keys/<id>/rotate",
        ),
    }
}

pub(super) async fn body(req: Request<Incoming>) -> Result<bytes::Bytes, Response<Payload>> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY);
    match limited.collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(_) => Err(problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("settings are at most {MAX_BODY} bytes"),
        )),
    }
}

pub(super) fn failed(e: String) -> Response<Payload> {
    tracing::error!(error = %e, "admin API: the database failed");
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the database failed: {e}"),
    )
}

async fn list(database: &Database) -> Response<Payload> {
    match database.keys.rows().await {
        Ok(rows) => json(
            StatusCode::OK,
            json!({"keys": rows.iter().map(view).collect::<Vec<_>>()}),
        ),
        Err(e) => failed(e),
    }
}

async fn create(body: &[u8], database: &Database) -> Response<Payload> {
    let spec = match KeySpec::parse(body) {
        Ok(s) => s,
        Err(e) => {
            return json(
                StatusCode::BAD_REQUEST,
                json!({"error": "invalid key settings", "problems": e.0}),
            );
        }
    };
    match database.keys.create(spec).await {
        Ok((row, secret)) => {
            tracing::info!(key = %row.id, name = %row.name, "admin API: key created");
            let mut v = view(&row);
            v["key"] = json!(secret);
            json(StatusCode::CREATED, v)
        }
        Err(e) => failed(e),
    }
}

/// A key's settings, its usage rows of the UTC day, and — while it is
/// live — its budget windows and its team's as the running weir enforces
/// them (`/v1/me`'s figures: the fleet's with `[cluster]`).
async fn show(id: &str, database: &Database, running: &Arc<dyn Reload>) -> Response<Payload> {
    match database.keys.row(id).await {
        Ok(Some(row)) => {
            let mut v = view(&row);
            let day_ms = crate::store::unix_now() / 86_400 * 86_400 * 1000;
            if let Ok((requests, tokens, spend)) = database.keys.used_since(id, day_ms).await {
                v["today"] = json!({"requests": requests, "tokens": tokens, "spend": spend as f64 / SPEND_UNIT});
            }
            if let Some(budgets) = running.clone().key_budget(id.to_string()).await {
                v["budget"] = budgets["budget"].clone();
                v["team_budget"] = budgets["team_budget"].clone();
            }
            json(StatusCode::OK, v)
        }
        Ok(None) => problem(StatusCode::NOT_FOUND, format!("no key `{id}`")),
        Err(e) => failed(e),
    }
}

async fn change(id: &str, body: &[u8], database: &Database) -> Response<Payload> {
    let spec = match KeySpec::parse(body) {
        Ok(s) => s,
        Err(e) => {
            return json(
                StatusCode::BAD_REQUEST,
                json!({"error": "invalid key settings", "problems": e.0}),
            );
        }
    };
    match database.keys.change(id, spec).await {
        Ok(Some(row)) => {
            tracing::info!(key = %row.id, "admin API: key changed");
            json(StatusCode::OK, view(&row))
        }
        Ok(None) => problem(StatusCode::NOT_FOUND, format!("no live key `{id}`")),
        Err(e) => failed(e),
    }
}

async fn revoke(id: &str, database: &Database) -> Response<Payload> {
    match database.keys.revoke(id).await {
        Ok(true) => {
            tracing::info!(key = %id, "admin API: key revoked");
            json(StatusCode::OK, json!({"id": id, "status": "revoked"}))
        }
        Ok(false) => problem(StatusCode::NOT_FOUND, format!("no live key `{id}`")),
        Err(e) => failed(e),
    }
}

async fn rotate(id: &str, database: &Database) -> Response<Payload> {
    match database.keys.rotate(id).await {
        Ok(Some((row, secret))) => {
            tracing::info!(key = %row.id, "admin API: key rotated");
            let mut v = view(&row);
            v["key"] = json!(secret);
            json(StatusCode::OK, v)
        }
        Ok(None) => problem(StatusCode::NOT_FOUND, format!("no live key `{id}`")),
        Err(e) => failed(e),
    }
}

/// `GET /admin/usage?group_by=team,model&from=…&to=…`: `from` and `to`
/// RFC 3339 times or dates (`to` exclusive; by default the last 30
/// days).
pub(super) async fn usage(query: &str, database: &Database) -> Response<Payload> {
    let report = match report_of(query) {
        Ok(r) => r,
        Err(e) => return problem(StatusCode::BAD_REQUEST, e),
    };
    match database.keys.report(report).await {
        Ok(lines) => {
            let lines: Vec<_> = lines
                .into_iter()
                .map(|l| {
                    let mut v = serde_json::Map::new();
                    for (name, value) in l.group {
                        v.insert(name, json!(value));
                    }
                    v.insert("requests".into(), json!(l.requests));
                    v.insert("errors".into(), json!(l.errors));
                    v.insert("input_tokens".into(), json!(l.input_tokens));
                    v.insert("output_tokens".into(), json!(l.output_tokens));
                    v.insert("cache_read_tokens".into(), json!(l.cache_read_tokens));
                    v.insert("cache_write_tokens".into(), json!(l.cache_write_tokens));
                    v.insert("spend".into(), json!(l.spend as f64 / SPEND_UNIT));
                    serde_json::Value::Object(v)
                })
                .collect();
            json(StatusCode::OK, json!({"usage": lines}))
        }
        Err(e) => failed(e),
    }
}

/// A report's question from a query string.
pub(crate) fn report_of(query: &str) -> Result<Report, String> {
    let now_ms = crate::store::unix_now().saturating_mul(1000);
    let mut report = Report {
        groups: Vec::new(),
        from_ms: now_ms.saturating_sub(30 * 86_400 * 1000),
        to_ms: now_ms.saturating_add(1000),
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(value)
            .decode_utf8_lossy()
            .to_string();
        match name {
            "group_by" => {
                for g in value.split(',').filter(|g| !g.is_empty()) {
                    let group = Group::named(g).ok_or_else(|| {
                        format!(
                            "`{g}` is not a group; use {}",
                            Group::ALL.map(Group::name).join(", ")
                        )
                    })?;
                    if !report.groups.contains(&group) {
                        report.groups.push(group);
                    }
                }
            }
            "from" => report.from_ms = time_ms(&value)?,
            "to" => report.to_ms = time_ms(&value)?,
            other => {
                return Err(format!(
                    "unknown parameter `{other}`; use group_by, from, to"
                ));
            }
        }
    }
    Ok(report)
}

/// A time (`2026-11-01T00:00:00Z`) or a date (`2026-11-01`, midnight UTC)
/// in Unix milliseconds.
fn time_ms(text: &str) -> Result<i64, String> {
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_string()
    };
    humantime::parse_rfc3339_weak(&full)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .ok_or_else(|| {
            format!("`{text}` is not a date (2026-11-01) or a time (2026-11-01T12:00:00Z)")
        })
}
