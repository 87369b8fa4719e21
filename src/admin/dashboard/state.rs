//! `GET /admin/dashboard/state`: everything the page shows at once, from
//! what the server reports (its config, its groups' members) and the
//! sampler's last readings of the metrics.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::scrape::{Scrape, quantile};
use super::series::Memory;
use crate::config::{Config, RouteKind};

/// The members of one route's upstream groups, as the server reports them.
pub(crate) struct RouteMembers {
    pub(crate) route: String,
    /// The LLM upstream's name, or the proxy route's group.
    pub(crate) group: String,
    pub(crate) members: Vec<(String, crate::upstream::balance::MemberView)>,
}

/// What [`state`] is made from.
pub(crate) struct Inputs<'a> {
    pub(crate) status: &'a super::super::Status,
    pub(crate) memory: &'a Memory,
    pub(crate) members: &'a [RouteMembers],
    /// Client budgets as `/usage` reports them, then runtime keys' and
    /// teams' (`kind`: `key`, `team`).
    pub(crate) budgets: &'a [Value],
    pub(crate) draining: bool,
    pub(crate) database: bool,
}

/// Per-second rates between the last two readings.
struct Rates<'a> {
    now: &'a Scrape,
    before: Option<&'a Scrape>,
    seconds: f64,
}

impl Rates<'_> {
    /// How fast the series of `name` matching `with` grew (0 with a
    /// single reading).
    fn of(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        match self.before {
            Some(b) if self.seconds > 0.0 => {
                (self.now.sum(name, with) - b.sum(name, with)).max(0.0) / self.seconds
            }
            _ => 0.0,
        }
    }
}

/// The whole state, as JSON.
pub(crate) fn state(i: &Inputs<'_>) -> Value {
    let empty = Scrape::default();
    let now = i.memory.latest.as_deref().unwrap_or(&empty);
    let before = i.memory.previous.as_ref();
    let minute = i.memory.minute.front().map(|(_, s)| &**s);
    let seconds = before.map_or(0.0, |(at, _)| {
        i.memory.points.back().map_or(0.0, |p| p.at - at)
    });
    let rate = Rates {
        now,
        before: before.map(|(_, b)| &**b),
        seconds,
    };
    let s = i.status;
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": s.uptime.as_secs(),
        "generation": s.generation,
        "loaded_at_unix": s.loaded_at_unix,
        "draining": i.draining,
        "sampled_at_unix": i.memory.points.back().map(|p| p.at.floor()),
        "connections": connections(s, now),
        "requests": {
            "in_flight": now.sum("weir_requests_in_flight", &[]),
            "shed": now.sum_by("weir_requests_shed_total", "reason"),
            "per_second": rate.of("weir_requests_total", &[]),
        },
        "routes": routes(&s.config, now, minute, &rate),
        "groups": groups(&s.config, i.members, now),
        "fleet": fleet(&s.config, now),
        "certificates": certificates(&s.config, now),
        "llm": llm(now, i.budgets, i.database, &rate),
    })
}

fn connections(s: &super::super::Status, now: &Scrape) -> Value {
    let listeners: Vec<Value> = s
        .listeners
        .iter()
        .map(|(name, addr)| {
            let tls = s
                .config
                .listeners
                .iter()
                .any(|l| &l.name == name && l.tls.is_some());
            json!({
                "name": name,
                "address": addr.to_string(),
                "tls": tls,
                "open": now.sum("weir_connections_open", &[("listener", name)]),
                "accepted": now.sum("weir_connections_accepted_total", &[("listener", name)]),
            })
        })
        .collect();
    json!({
        "open": s.open_connections,
        "parked": now.sum("weir_connections_parked", &[]),
        "reclaimed": now.sum("weir_connections_closed_total", &[("reason", "reclaimed")]),
        "closed": now.sum_by("weir_connections_closed_total", "reason"),
        "refused": now.sum_by("weir_connections_refused_total", "reason"),
        "accept_errors": now.sum_by("weir_accept_errors_total", "kind"),
        "listeners": listeners,
    })
}

fn routes(config: &Config, now: &Scrape, minute: Option<&Scrape>, rate: &Rates<'_>) -> Vec<Value> {
    let empty = Scrape::default();
    config
        .routes
        .iter()
        .map(|r| {
            let kind = super::super::kind_name(&r.kind);
            let name = r.name.as_str();
            let with = [("route", name)];
            let mut errors = 0.0;
            let mut statuses: BTreeMap<String, f64> = BTreeMap::new();
            for x in now.all("weir_requests_total") {
                if x.label("route") == name {
                    let class = format!("{}xx", x.label("status").get(..1).unwrap_or("?"));
                    *statuses.entry(class).or_default() += x.value;
                    if x.label("status").starts_with('5') {
                        errors += x.value;
                    }
                }
            }
            let error_rate = errors_rate(now, name, rate);
            let buckets = now.buckets("weir_request_duration_seconds", &with);
            let old = minute.unwrap_or(&empty);
            let before = old.buckets("weir_request_duration_seconds", &with);
            let ms = |q| quantile(&buckets, &before, q).map(|s| (s * 1000.0 * 10.0).round() / 10.0);
            let shed: BTreeMap<String, f64> = now
                .all("weir_requests_shed_total")
                .iter()
                .filter(|x| x.label("route") == name)
                .map(|x| (x.label("reason").to_string(), x.value))
                .collect();
            json!({
                "name": name,
                "kind": kind,
                "hosts": r.hosts.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "path": r.path,
                "requests": now.sum("weir_requests_total", &with),
                "statuses": statuses,
                "errors": errors,
                "per_second": rate.of("weir_requests_total", &with),
                "errors_per_second": error_rate,
                "latency_ms": {"p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99)},
                "shed": shed,
                "upstream_errors": now
                    .all("weir_upstream_errors_total")
                    .iter()
                    .filter(|x| x.label("route") == name)
                    .map(|x| (x.label("kind").to_string(), x.value))
                    .collect::<BTreeMap<_, _>>(),
            })
        })
        .collect()
}

/// 5xx answers per second on route `name` (the statuses present now).
fn errors_rate(now: &Scrape, name: &str, rate: &Rates<'_>) -> f64 {
    let mut statuses: Vec<&str> = now
        .all("weir_requests_total")
        .iter()
        .filter(|x| x.label("route") == name && x.label("status").starts_with('5'))
        .map(|x| x.label("status"))
        .collect();
    statuses.dedup();
    statuses
        .into_iter()
        .map(|st| rate.of("weir_requests_total", &[("route", name), ("status", st)]))
        .sum::<f64>()
        + 0.0
}

fn groups(config: &Config, members: &[RouteMembers], now: &Scrape) -> Vec<Value> {
    members
        .iter()
        .map(|g| {
            let check = config.routes.iter().find(|r| r.name == g.route).and_then(|r| match &r.kind {
                RouteKind::Proxy { upstream } => upstream.health_check.as_ref().map(|c| {
                    json!({
                        "path": c.path,
                        "interval_seconds": c.interval.as_secs_f64(),
                        "rise": c.rise,
                        "fall": c.fall,
                    })
                }),
                _ => None,
            });
            let members: Vec<Value> = g
                .members
                .iter()
                .map(|(label, v)| {
                    let with = [("route", g.route.as_str()), ("server", label.as_str())];
                    json!({
                        "server": label,
                        "state": if v.out.is_some() { "out" } else { "in" },
                        "why": v.out.map(|(why, _)| why),
                        "back_in_seconds": v.out.and_then(|(_, left)| left).map(|d: Duration| d.as_secs_f64()),
                        "failures": v.failures,
                        "in_flight": v.in_flight,
                        "latency_ms": (v.latency.as_secs_f64() * 10_000.0).round() / 10.0,
                        "weight": v.weight,
                        "backup": v.backup,
                        "picks": now.sum("weir_upstream_server_picks_total", &with),
                        "ejections": now
                            .all("weir_upstream_server_ejections_total")
                            .iter()
                            .filter(|x| x.label("route") == g.route && x.label("server") == label)
                            .map(|x| (x.label("reason").to_string(), x.value))
                            .collect::<BTreeMap<_, _>>(),
                    })
                })
                .collect();
            json!({"route": g.route, "group": g.group, "health_check": check, "members": members})
        })
        .collect()
}

fn fleet(config: &Config, now: &Scrape) -> Value {
    match &config.cluster {
        None => json!({"configured": false}),
        Some(c) => json!({
            "configured": true,
            "redis_up": now.sum("weir_cluster_redis_up", &[]) >= 1.0,
            "instances": now.sum("weir_cluster_instances", &[]),
            "on_failure": c.on_failure.name(),
            "decisions": now.sum_by("weir_cluster_decisions_total", "mode"),
            "budget_settles_pending": now.sum("weir_cluster_budget_settles_pending", &[]),
        }),
    }
}

fn certificates(config: &Config, now: &Scrape) -> Vec<Value> {
    let unix = super::series::unix_now();
    let mut out = Vec::new();
    for l in &config.listeners {
        let Some(tls) = &l.tls else { continue };
        for c in &tls.certificates {
            let not_after = c
                .key
                .cert
                .first()
                .and_then(|der| crate::pki::not_after_unix(der.as_ref()));
            out.push(json!({
                "listener": l.name,
                "names": c.names,
                "source": "file",
                "file": c.cert_path.display().to_string(),
                "not_after_unix": not_after,
                "expires_in_days": not_after.map(|t| ((t as f64 - unix) / 86_400.0).floor()),
                "renewal": "by hand (reload after replacing the file)",
            }));
        }
    }
    for x in now.all("weir_certificate_expiry_seconds") {
        let name = x.label("name");
        let with = [("name", name)];
        let attempts = now.sum("weir_certificate_issuance_attempts_total", &with);
        let failures = now.sum("weir_certificate_issuance_failures_total", &with);
        out.push(json!({
            "names": [name],
            "source": "acme",
            "not_after_unix": (unix + x.value).floor(),
            "expires_in_days": (x.value / 86_400.0).floor(),
            "renewal": if failures > 0.0 { "failing" } else { "automatic" },
            "orders": attempts,
            "failed_orders": failures,
        }));
    }
    out
}

fn llm(now: &Scrape, budgets: &[Value], database: bool, rate: &Rates<'_>) -> Value {
    let mut by: BTreeMap<&str, Value> = BTreeMap::new();
    for label in ["client", "model", "upstream", "route"] {
        by.insert(label, json!(usage_lines(now, label)));
    }
    json!({
        "source": if database { "database" } else { "process" },
        "requests": now.sum("weir_llm_requests_total", &[]),
        "per_second": rate.of("weir_llm_requests_total", &[]),
        "tokens": now.sum_by("weir_llm_tokens_total", "kind"),
        "spend": now.sum("weir_llm_client_spend_total", &[]),
        "failovers": now.sum_by("weir_llm_failovers_total", "reason"),
        "budget_refusals": now.sum_by("weir_llm_budget_refusals_total", "bound"),
        "since_start": by,
        "budgets": nearest(budgets, 10),
    })
}

/// LLM usage since start by `label` (`client`, `model`, `upstream`,
/// `route`) from the per-client counters, dearest first: one line per
/// value, named by the label as the database's report names its groups.
pub(crate) fn usage_lines(now: &Scrape, label: &str) -> Vec<Value> {
    let spend = now.sum_by("weir_llm_client_spend_total", label);
    let mut lines: Vec<(f64, Value)> = now
        .sum_by("weir_llm_client_requests_total", label)
        .into_iter()
        .map(|(name, requests)| {
            let tokens = |kind| {
                now.sum(
                    "weir_llm_client_tokens_total",
                    &[(label, name.as_str()), ("kind", kind)],
                )
            };
            let spent = spend.get(&name).copied().unwrap_or(0.0);
            let line = json!({
                label: name,
                "requests": requests,
                "input_tokens": tokens("input"),
                "output_tokens": tokens("output"),
                "cache_read_tokens": tokens("cache_read"),
                "cache_write_tokens": tokens("cache_write"),
                "spend": spent,
            });
            (spent, line)
        })
        .collect();
    lines.sort_by(|a, b| b.0.total_cmp(&a.0));
    lines.into_iter().map(|(_, l)| l).collect()
}

/// The `n` budget windows nearest their limits, fullest first.
fn nearest(clients: &[Value], n: usize) -> Vec<Value> {
    let mut windows: Vec<(f64, Value)> = Vec::new();
    for c in clients {
        let Some(budget) = c["budget"].as_object() else {
            continue;
        };
        for (bound, w) in budget {
            let (Some(limit), Some(used)) = (w["limit"].as_f64(), w["used"].as_f64()) else {
                continue;
            };
            if limit <= 0.0 {
                continue;
            }
            let share = (used + w["reserved"].as_f64().unwrap_or(0.0)) / limit;
            windows.push((
                share,
                json!({
                    "route": c["route"], "client": c["client"], "bound": bound,
                    "kind": c.get("kind").unwrap_or(&json!("client_token")),
                    "key": c["key"], "user": c["user"], "team": c["team"],
                    "used": used, "limit": limit, "share": share,
                    "resets_in_seconds": w["resets_in_seconds"],
                }),
            ));
        }
    }
    windows.sort_by(|a, b| b.0.total_cmp(&a.0));
    windows.into_iter().take(n).map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fullest_budget_windows_come_first() {
        let clients = vec![json!({
            "route": "llm", "client": "alice",
            "budget": {
                "tokens_per_minute": {"limit": 100, "used": 10, "reserved": 0, "resets_in_seconds": 5},
                "spend_per_day": {"limit": 2.0, "used": 1.5, "reserved": 0.1, "resets_in_seconds": 50},
                "tokens_per_day": {"limit": null, "used": 999, "reserved": 0},
            }
        })];
        let n = nearest(&clients, 10);
        assert_eq!(n.len(), 2, "unbounded windows are left out");
        assert_eq!(n[0]["bound"], "spend_per_day");
        assert!((n[0]["share"].as_f64().unwrap_or(0.0) - 0.8).abs() < 1e-9);
        assert_eq!(nearest(&clients, 1).len(), 1);
    }
}
