//! LLM routes' figures: requests, failovers, first-token time and tokens
//! per route and model, and usage, spend and budget refusals per client
//! token.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{HistogramFamily, Metrics, RouteName, latency_histogram};

/// LLM routes' own figures. `model` is the configured model entry (or
/// `default`), never a name a client made up, so label sets stay bounded.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmLabels {
    route: RouteName,
    model: RouteName,
    upstream: RouteName,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmFailoverLabels {
    route: RouteName,
    model: RouteName,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmModelLabels {
    route: RouteName,
    model: RouteName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmTokenLabels {
    route: RouteName,
    model: RouteName,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmUpstreamLabels {
    route: RouteName,
    upstream: RouteName,
}

/// Usage per client token: `client` is the token's configured name (or
/// `-` on a route without tokens), `upstream` the configured upstream that
/// served (or `-`), so every label is bounded by the config.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    route: RouteName,
    client: RouteName,
    model: RouteName,
    upstream: RouteName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientOutcomeLabels {
    route: RouteName,
    client: RouteName,
    model: RouteName,
    upstream: RouteName,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientTokenLabels {
    route: RouteName,
    client: RouteName,
    model: RouteName,
    upstream: RouteName,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    route: RouteName,
    client: RouteName,
    bound: &'static str,
}

/// A usage record's labels, for [`Metrics::llm_client_usage`].
pub struct ClientUsage<'a> {
    pub route: &'a Arc<str>,
    pub client: &'a Arc<str>,
    pub model: &'a Arc<str>,
    pub upstream: &'a Arc<str>,
    pub outcome: &'static str,
}

type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;

pub(super) struct LlmFamilies {
    client_requests: Family<ClientOutcomeLabels, Counter>,
    client_tokens: Family<ClientTokenLabels, Counter>,
    client_spend: Family<ClientLabels, FloatCounter>,
    budget_refusals: Family<BudgetLabels, Counter>,
    requests: Family<LlmLabels, Counter>,
    failovers: Family<LlmFailoverLabels, Counter>,
    first_token: HistogramFamily<LlmModelLabels>,
    tokens: Family<LlmTokenLabels, Counter>,
    cooldown_until: Family<LlmUpstreamLabels, Gauge>,
}

impl LlmFamilies {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = LlmFamilies {
            client_requests: Family::default(),
            client_tokens: Family::default(),
            client_spend: Family::default(),
            budget_refusals: Family::default(),
            requests: Family::default(),
            failovers: Family::default(),
            first_token: Family::new_with_constructor(latency_histogram),
            tokens: Family::default(),
            cooldown_until: Family::default(),
        };
        registry.register(
            "llm_requests",
            "LLM requests by route, model, serving upstream and outcome (completed, upstream_error, client_cancel, relayed_error, rejected)",
            m.requests.clone(),
        );
        registry.register(
            "llm_failovers",
            "Moves to the next upstream before any content, by reason (connect, timeout, broken, status_429, status_5xx, translated_refused, preamble_error, cooling, cannot_serve)",
            m.failovers.clone(),
        );
        registry.register(
            "llm_first_token_seconds",
            "Time from request head to the first content event (streams) or the response head",
            m.first_token.clone(),
        );
        registry.register(
            "llm_tokens",
            "Tokens reported by upstreams, by kind (input, output, cache_read, cache_write)",
            m.tokens.clone(),
        );
        registry.register(
            "llm_client_requests",
            "LLM requests per client token, model, serving upstream and outcome (completed, upstream_error, client_cancel, relayed_error, rejected, over_budget)",
            m.client_requests.clone(),
        );
        registry.register(
            "llm_client_tokens",
            "Tokens reported by upstreams per client token, model and serving upstream, by kind (input, output, cache_read, cache_write; input excludes cached input)",
            m.client_tokens.clone(),
        );
        registry.register(
            "llm_client_spend",
            "Spend per client token, model and serving upstream, from the route's price table, in its currency (requests whose model has no price add nothing)",
            m.client_spend.clone(),
        );
        registry.register(
            "llm_budget_refusals",
            "Requests refused before any upstream because a client token's budget was spent, by bound (tokens_per_minute, tokens_per_day, spend_per_day)",
            m.budget_refusals.clone(),
        );
        registry.register(
            "llm_upstream_cooldown_until_seconds",
            "Unix time until which an LLM upstream member (an upstream, or one endpoint or key of it) is held out (past: back)",
            m.cooldown_until.clone(),
        );
        m
    }
}

impl Metrics {
    pub fn llm_request(
        &self,
        route: &Arc<str>,
        model: &Arc<str>,
        upstream: &Arc<str>,
        outcome: &'static str,
    ) {
        self.llm
            .requests
            .get_or_create(&LlmLabels {
                route: RouteName(route.clone()),
                model: RouteName(model.clone()),
                upstream: RouteName(upstream.clone()),
                outcome,
            })
            .inc();
    }

    pub fn llm_failover(&self, route: &Arc<str>, model: &Arc<str>, reason: &'static str) {
        self.llm
            .failovers
            .get_or_create(&LlmFailoverLabels {
                route: RouteName(route.clone()),
                model: RouteName(model.clone()),
                reason,
            })
            .inc();
    }

    pub fn llm_first_token(&self, route: &Arc<str>, model: &Arc<str>, seconds: f64) {
        self.llm
            .first_token
            .get_or_create(&LlmModelLabels {
                route: RouteName(route.clone()),
                model: RouteName(model.clone()),
            })
            .observe(seconds);
    }

    pub fn llm_tokens(&self, route: &Arc<str>, model: &Arc<str>, kind: &'static str, n: u64) {
        if n > 0 {
            self.llm
                .tokens
                .get_or_create(&LlmTokenLabels {
                    route: RouteName(route.clone()),
                    model: RouteName(model.clone()),
                    kind,
                })
                .inc_by(n);
        }
    }

    /// One LLM request's usage, per client: its outcome, its tokens by
    /// kind, and its spend when its model is priced.
    pub fn llm_client_usage(
        &self,
        labels: ClientUsage<'_>,
        tokens: [(&'static str, u64); 4],
        spend: Option<f64>,
    ) {
        let (route, client, model, upstream) = (
            RouteName(labels.route.clone()),
            RouteName(labels.client.clone()),
            RouteName(labels.model.clone()),
            RouteName(labels.upstream.clone()),
        );
        self.llm
            .client_requests
            .get_or_create(&ClientOutcomeLabels {
                route: route.clone(),
                client: client.clone(),
                model: model.clone(),
                upstream: upstream.clone(),
                outcome: labels.outcome,
            })
            .inc();
        for (kind, n) in tokens.into_iter().filter(|(_, n)| *n > 0) {
            self.llm
                .client_tokens
                .get_or_create(&ClientTokenLabels {
                    route: route.clone(),
                    client: client.clone(),
                    model: model.clone(),
                    upstream: upstream.clone(),
                    kind,
                })
                .inc_by(n);
        }
        if let Some(spend) = spend.filter(|s| *s > 0.0) {
            self.llm
                .client_spend
                .get_or_create(&ClientLabels {
                    route,
                    client,
                    model,
                    upstream,
                })
                .inc_by(spend);
        }
    }

    pub fn llm_budget_refused(&self, route: &Arc<str>, client: &Arc<str>, bound: &'static str) {
        self.llm
            .budget_refusals
            .get_or_create(&BudgetLabels {
                route: RouteName(route.clone()),
                client: RouteName(client.clone()),
                bound,
            })
            .inc();
    }

    pub fn llm_cooldown(&self, route: &Arc<str>, upstream: &Arc<str>, until_unix: i64) {
        self.llm
            .cooldown_until
            .get_or_create(&LlmUpstreamLabels {
                route: RouteName(route.clone()),
                upstream: RouteName(upstream.clone()),
            })
            .set(until_unix);
    }
}
