//! LLM routes' figures: requests, failovers, first-token time and tokens
//! per route and model, and usage, spend and budget refusals per client
//! token.

use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{
    HistogramFamily, Lazy, Metrics, RouteName, cached, combinations, latency_histogram, place,
    token_histogram,
};

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

/// The WebSocket transport's upgrades and responses, by outcome (a fixed
/// set of names).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteOutcomeLabels {
    route: RouteName,
    outcome: &'static str,
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
    #[prometheus(flatten)]
    of: ClientLabels,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientTokenLabels {
    #[prometheus(flatten)]
    of: ClientLabels,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    route: RouteName,
    client: RouteName,
    bound: &'static str,
}

type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;

#[derive(Clone)]
pub(super) struct LlmFamilies {
    client_requests: Family<ClientOutcomeLabels, Counter>,
    client_tokens: Family<ClientTokenLabels, Counter>,
    client_spend: Family<ClientLabels, FloatCounter>,
    budget_refusals: Family<BudgetLabels, Counter>,
    requests: Family<LlmLabels, Counter>,
    failovers: Family<LlmFailoverLabels, Counter>,
    first_token: HistogramFamily<LlmModelLabels>,
    tokens: Family<LlmTokenLabels, Counter>,
    /// Each request's input and output tokens (OpenTelemetry's
    /// `gen_ai.client.token.usage`).
    request_tokens: HistogramFamily<LlmTokenLabels>,
    cooldown_until: Family<LlmUpstreamLabels, Gauge>,
    websocket_upgrades: Family<RouteOutcomeLabels, Counter>,
    websocket_responses: Family<RouteOutcomeLabels, Counter>,
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
            request_tokens: Family::new_with_constructor(token_histogram),
            cooldown_until: Family::default(),
            websocket_upgrades: Family::default(),
            websocket_responses: Family::default(),
        };
        registry.register(
            "llm_websocket_upgrades",
            "WebSocket upgrades asked of an OpenAI route's /v1/responses (Codex's transport), by outcome (accepted, refused)",
            m.websocket_upgrades.clone(),
        );
        registry.register(
            "llm_websocket_responses",
            "Responses answered over the WebSocket transport, by outcome (completed, failed, incomplete, error, warmup, previous_response_not_found)",
            m.websocket_responses.clone(),
        );
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
            "llm_request_tokens",
            "Each request's tokens as its upstream reported them, by kind (input: all of it, cached included; output), OpenTelemetry's gen_ai.client.token.usage",
            m.request_tokens.clone(),
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

/// The `outcome` label's values: how an LLM request ended.
const OUTCOMES: [&str; 6] = [
    "completed",
    "upstream_error",
    "client_cancel",
    "relayed_error",
    "rejected",
    "over_budget",
];

/// The `kind` label's values, in the order of [`TokenCounts`].
const TOKEN_KINDS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];

/// A request's tokens by kind: input, output, cache_read, cache_write.
pub(crate) type TokenCounts = [u64; 4];

/// Whose usage a request's is, each by its index in the route's lists
/// (see [`Metrics::llm_route`]); `None`: none (`-`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UsageOf {
    pub(crate) client: Option<usize>,
    pub(crate) model: Option<usize>,
    pub(crate) upstream: Option<usize>,
}

/// The series of one client token, model and upstream of a route.
#[derive(Clone, Default)]
struct ClientSeries {
    requests: [OnceLock<Counter>; OUTCOMES.len()],
    tokens: [OnceLock<Counter>; TOKEN_KINDS.len()],
    spend: OnceLock<FloatCounter>,
}

/// One LLM route's series, held by the route: every label it can give is
/// known when it is built (its models, upstreams and client tokens), so
/// each series' handle is kept by index the first time it is used and a
/// request counts with atomic adds. Built again with the route whenever its
/// settings change, so no handle outlives the labels it was made for.
pub(crate) struct LlmRouteMetrics {
    families: LlmFamilies,
    route: RouteName,
    /// The configured models, then `default`, then `-` (not known).
    models: Box<[RouteName]>,
    /// The configured upstreams, then `-` (none served).
    upstreams: Box<[RouteName]>,
    /// The client tokens' names, then `-` (no token).
    clients: Box<[RouteName]>,
    dash: RouteName,
    /// By model.
    first_token: Lazy<Histogram>,
    /// By model and kind.
    tokens: Lazy<Counter>,
    /// By model and kind (input, output).
    request_tokens: Lazy<Histogram>,
    /// By model, upstream and outcome.
    requests: Lazy<Counter>,
    /// By client, model and upstream.
    by_client: Lazy<Box<ClientSeries>>,
}

impl LlmRouteMetrics {
    /// The index of a request's model label: the configured model at
    /// `configured`, else `default`.
    pub(crate) fn model(&self, configured: Option<usize>) -> usize {
        let default = self.models.len().saturating_sub(2);
        configured.filter(|i| *i < default).unwrap_or(default)
    }

    /// The name of configured upstream `upstream`.
    pub(crate) fn upstream_label(&self, upstream: usize) -> &Arc<str> {
        &self.upstreams.get(upstream).unwrap_or(&self.dash).0
    }

    /// `index` in `names`, or their last (`-`) for none.
    fn at(names: &[RouteName], index: Option<usize>) -> usize {
        index.unwrap_or(names.len().saturating_sub(1))
    }

    fn name(&self, names: &[RouteName], index: usize) -> RouteName {
        names.get(index).unwrap_or(&self.dash).clone()
    }

    /// The time to a request's first content.
    /// A WebSocket upgrade on this route was accepted or refused.
    pub(crate) fn websocket_upgrade(&self, outcome: &'static str) {
        let route = self.route.clone();
        let labels = RouteOutcomeLabels { route, outcome };
        self.families
            .websocket_upgrades
            .get_or_create(&labels)
            .inc();
    }

    /// A response.create frame was answered, with `outcome`.
    pub(crate) fn websocket_response(&self, outcome: &'static str) {
        let route = self.route.clone();
        let labels = RouteOutcomeLabels { route, outcome };
        self.families
            .websocket_responses
            .get_or_create(&labels)
            .inc();
    }

    pub(crate) fn first_token(&self, model: usize, seconds: f64) {
        let resolve = || {
            let labels = LlmModelLabels {
                route: self.route.clone(),
                model: self.name(&self.models, model),
            };
            self.families.first_token.get_or_create(&labels).clone()
        };
        self.first_token
            .get(place(&[(model, self.models.len())]), resolve)
            .observe(seconds);
    }

    /// A request ended with `outcome`, served by `upstream` (`None`: none).
    pub(crate) fn request(&self, model: usize, upstream: Option<usize>, outcome: &'static str) {
        let upstream = Self::at(&self.upstreams, upstream);
        let at = OUTCOMES.iter().position(|o| *o == outcome).and_then(|o| {
            place(&[
                (model, self.models.len()),
                (upstream, self.upstreams.len()),
                (o, OUTCOMES.len()),
            ])
        });
        let resolve = || {
            let labels = LlmLabels {
                route: self.route.clone(),
                model: self.name(&self.models, model),
                upstream: self.name(&self.upstreams, upstream),
                outcome,
            };
            self.families.requests.get_or_create(&labels).clone()
        };
        self.requests.get(at, resolve).inc();
    }

    /// The tokens upstreams reported for a request.
    pub(crate) fn tokens(&self, model: usize, tokens: TokenCounts) {
        for (k, (kind, n)) in TOKEN_KINDS.into_iter().zip(tokens).enumerate() {
            if n == 0 {
                continue;
            }
            let resolve = || {
                let labels = LlmTokenLabels {
                    route: self.route.clone(),
                    model: self.name(&self.models, model),
                    kind,
                };
                self.families.tokens.get_or_create(&labels).clone()
            };
            let at = place(&[(model, self.models.len()), (k, TOKEN_KINDS.len())]);
            self.tokens.get(at, resolve).inc_by(n);
        }
    }

    /// One request's input (cached included) and output tokens, when its
    /// upstream reported usage.
    pub(crate) fn request_tokens(&self, model: usize, input: u64, output: u64) {
        for (k, (kind, n)) in [("input", input), ("output", output)]
            .into_iter()
            .enumerate()
        {
            let resolve = || {
                let labels = LlmTokenLabels {
                    route: self.route.clone(),
                    model: self.name(&self.models, model),
                    kind,
                };
                self.families.request_tokens.get_or_create(&labels).clone()
            };
            let at = place(&[(model, self.models.len()), (k, 2)]);
            self.request_tokens.get(at, resolve).observe(n as f64);
        }
    }

    /// A move to the next upstream before any content (not on the path
    /// of a request served first time: looked up each time).
    pub(crate) fn failover(&self, model: usize, reason: &'static str) {
        self.families
            .failovers
            .get_or_create(&LlmFailoverLabels {
                route: self.route.clone(),
                model: self.name(&self.models, model),
                reason,
            })
            .inc();
    }

    /// A request refused because client `client`'s budget was spent.
    pub(crate) fn budget_refused(&self, client: usize, bound: &'static str) {
        self.families
            .budget_refusals
            .get_or_create(&BudgetLabels {
                route: self.route.clone(),
                client: self.name(&self.clients, client),
                bound,
            })
            .inc();
    }

    /// One request's usage, per client: its outcome, its tokens by kind,
    /// and its spend when its model is priced.
    pub(crate) fn client_usage(
        &self,
        of: UsageOf,
        outcome: &'static str,
        tokens: TokenCounts,
        spend: Option<f64>,
    ) {
        let client = Self::at(&self.clients, of.client);
        let model = Self::at(&self.models, of.model);
        let upstream = Self::at(&self.upstreams, of.upstream);
        let at = place(&[
            (client, self.clients.len()),
            (model, self.models.len()),
            (upstream, self.upstreams.len()),
        ]);
        let series = self.by_client.get(at, Box::default);
        let labels = || ClientLabels {
            route: self.route.clone(),
            client: self.name(&self.clients, client),
            model: self.name(&self.models, model),
            upstream: self.name(&self.upstreams, upstream),
        };
        let slot = OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .and_then(|o| series.requests.get(o));
        cached(slot, || {
            let labels = ClientOutcomeLabels {
                of: labels(),
                outcome,
            };
            self.families.client_requests.get_or_create(&labels).clone()
        })
        .inc();
        for ((kind, n), slot) in TOKEN_KINDS.into_iter().zip(tokens).zip(&series.tokens) {
            if n == 0 {
                continue;
            }
            cached(Some(slot), || {
                let labels = ClientTokenLabels { of: labels(), kind };
                self.families.client_tokens.get_or_create(&labels).clone()
            })
            .inc_by(n);
        }
        if let Some(spend) = spend.filter(|s| *s > 0.0) {
            cached(Some(&series.spend), || {
                self.families.client_spend.get_or_create(&labels()).clone()
            })
            .inc_by(spend);
        }
    }
}

impl Metrics {
    /// An LLM route's series, over its configured models, upstreams and
    /// client tokens (names, in the config's order: a label's index is
    /// its place there).
    pub(crate) fn llm_route<'a>(
        &self,
        route: &Arc<str>,
        models: impl IntoIterator<Item = &'a str>,
        upstreams: impl IntoIterator<Item = &'a str>,
        clients: impl IntoIterator<Item = &'a str>,
    ) -> LlmRouteMetrics {
        let dash = RouteName("-".into());
        let names = |configured: Vec<&str>, after: &[&str]| -> Box<[RouteName]> {
            configured
                .into_iter()
                .chain(after.iter().copied())
                .map(|n| RouteName(n.into()))
                .collect()
        };
        let models = names(models.into_iter().collect(), &["default", "-"]);
        let upstreams = names(upstreams.into_iter().collect(), &["-"]);
        let clients = names(clients.into_iter().collect(), &["-"]);
        let (m, u, c) = (models.len(), upstreams.len(), clients.len());
        LlmRouteMetrics {
            families: self.llm.clone(),
            route: RouteName(route.clone()),
            first_token: Lazy::new(Some(m)),
            tokens: Lazy::new(combinations(&[m, TOKEN_KINDS.len()])),
            request_tokens: Lazy::new(combinations(&[m, 2])),
            requests: Lazy::new(combinations(&[m, u, OUTCOMES.len()])),
            by_client: Lazy::new(combinations(&[c, m, u])),
            models,
            upstreams,
            clients,
            dash,
        }
    }

    pub(crate) fn llm_cooldown(&self, route: &Arc<str>, upstream: &Arc<str>, until_unix: i64) {
        self.llm
            .cooldown_until
            .get_or_create(&LlmUpstreamLabels {
                route: RouteName(route.clone()),
                upstream: RouteName(upstream.clone()),
            })
            .set(until_unix);
    }
}
