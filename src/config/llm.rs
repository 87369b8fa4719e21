//! LLM routes: upstreams, their keys, the model choices, client tokens,
//! budgets and prices.

use std::time::Duration;

use super::secret::Secret;
use super::upstream::UpstreamHttp;
use super::{Ejection, Member, Policy};

/// Which LLM API family a route speaks to its clients, and which API an
/// upstream speaks: what they mean on the wire is [`weir_wire`]'s.
pub(crate) use weir_wire::openai::Accepts;
pub(crate) use weir_wire::{Protocol, UpstreamApi};

/// How an LLM upstream is authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credential {
    /// Forward the client's own credential headers.
    Passthrough,
    /// Send this key in the protocol's header; the client's is never sent.
    Key(Secret),
    /// Sign each request with these AWS credentials (SigV4: Bedrock);
    /// the client's credential is never sent.
    Aws(AwsKeys),
    /// Sign with temporary credentials for a role, from STS with a web
    /// identity token, refreshed before they expire.
    AwsWebIdentity(WebIdentity),
    /// An access token weir gets itself and keeps fresh (a Vertex AI
    /// upstream's, [`VertexConfig::credentials`]; an Azure OpenAI
    /// upstream's from Entra ID, [`EntraCredentials`]); the client's is
    /// never sent.
    Refreshed,
}

/// A role assumed with a web identity token (EKS's IRSA: the
/// `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE` it sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WebIdentity {
    pub(crate) role_arn: String,
    pub(crate) token_file: std::path::PathBuf,
    pub(crate) session_name: String,
    /// STS's endpoint (`AWS_ENDPOINT_URL_STS`); None: the region's.
    pub(crate) sts_url: Option<String>,
}

impl Credential {
    /// Whether this is weir's own credential, not the client's: the
    /// upstream refusing it is no fault of the client's.
    pub(crate) fn is_weirs(&self) -> bool {
        !matches!(self, Credential::Passthrough)
    }
}

/// AWS credentials: an access key, and the session token of temporary
/// ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AwsKeys {
    pub(crate) access_key_id: String,
    pub(crate) secret_access_key: Secret,
    pub(crate) session_token: Option<Secret>,
}

/// What only an Amazon Bedrock upstream has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BedrockSettings {
    /// The region its requests are signed for.
    pub(crate) region: String,
}

/// A Vertex AI upstream's project, region and Google credentials.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VertexConfig {
    pub(crate) place: weir_wire::vertex::Place,
    pub(crate) credentials: GoogleCredentials,
}

/// Where a Vertex AI upstream's access tokens come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GoogleCredentials {
    /// A service account key file, read at load: its grants are signed
    /// with the key and exchanged at its `token_uri`.
    Key(std::sync::Arc<weir_wire::google::ServiceAccount>),
    /// The metadata server at this base URL (the machine's own account).
    Metadata(String),
}

/// Where an Azure OpenAI upstream's Entra ID access tokens come from
/// (docs/decisions/090).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntraCredentials {
    /// An app registration's client secret, exchanged at `token_url`.
    Secret {
        token_url: String,
        client_id: String,
        secret: Secret,
        scope: String,
    },
    /// A federated token in a file as the client's assertion (AKS
    /// workload identity: re-read at each fetch, as the kubelet rotates
    /// it), exchanged at `token_url`.
    Federated {
        token_url: String,
        client_id: String,
        token_file: std::path::PathBuf,
        scope: String,
    },
    /// The instance metadata service at `url`: the machine's
    /// system-assigned identity, or the user-assigned one `client_id`.
    Managed {
        url: String,
        client_id: Option<String>,
        scope: String,
    },
}

/// One of an LLM upstream's keys, and where it was read from (for logs
/// and metrics; the key itself is never shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiKey {
    pub(crate) credential: Credential,
    /// `env:NAME`, `file:PATH`, or `passthrough`.
    pub(crate) source: String,
}

/// An LLM upstream: one or more endpoints of one provider (or of one
/// self-hosted model), each used with one or more keys. Every
/// endpoint×key pair is a member of one balanced group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LlmUpstreamConfig {
    pub(crate) name: String,
    /// Base URLs (one for `url = ...`); the API path (`/v1/messages`) is
    /// appended to each one's path.
    pub(crate) servers: Vec<Member<http::Uri>>,
    /// At least one; a single passthrough when no key is configured.
    pub(crate) keys: Vec<ApiKey>,
    pub(crate) policy: Policy,
    /// With [`Policy::Hash`]: a conversation stays on one member.
    pub(crate) hash_conversation: bool,
    pub(crate) ejection: Ejection,
    pub(crate) connect_timeout: Duration,
    /// The API the upstream speaks; when it is not the client's, weir
    /// translates.
    pub(crate) api: UpstreamApi,
    /// What an OpenAI-API upstream accepts, for the requests weir
    /// translates to it.
    pub(crate) accepts: Accepts,
    /// The HTTP versions weir speaks to it.
    pub(crate) http: UpstreamHttp,
    /// An Azure OpenAI upstream's API surface (v1, or a dated
    /// `api-version`'s deployment paths); None for every other API.
    pub(crate) azure: Option<weir_wire::azure::Surface>,
    /// An Azure OpenAI upstream's Entra ID credentials, when it sends
    /// their token instead of an `api-key`.
    pub(crate) entra: Option<EntraCredentials>,
    /// An Amazon Bedrock upstream's region; None for every other API.
    pub(crate) bedrock: Option<BedrockSettings>,
    /// A Vertex AI upstream's project, region and credentials; None for
    /// every other API.
    pub(crate) vertex: Option<VertexConfig>,
}

/// One step of a model's failover order: an upstream (index into
/// [`LlmSettings::upstreams`]) and the model id to send it, when that
/// upstream names the model differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) upstream: usize,
    pub(crate) model: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LlmSettings {
    pub(crate) protocol: Protocol,
    pub(crate) upstreams: Vec<LlmUpstreamConfig>,
    /// Model name → ordered upstreams.
    pub(crate) models: Vec<(String, Vec<Choice>)>,
    /// For models not listed; empty = 404 for unknown models.
    pub(crate) default_upstreams: Vec<Choice>,
    /// Tokens clients must present, each with its name and budget; empty =
    /// no client authentication.
    pub(crate) client_tokens: Vec<ClientToken>,
    /// Prices per model id, for spend (usage records, metrics, budgets).
    pub(crate) prices: std::collections::HashMap<String, Price>,
    /// Output tokens a budget reservation counts for a request that sets
    /// no output limit of its own.
    pub(crate) default_max_tokens: u64,
    /// Requests in flight per client token; 0 = no per-token bound.
    pub(crate) max_concurrent_per_token: usize,
    /// How long to wait for an upstream's response head.
    pub(crate) first_byte_timeout: Duration,
    /// How long a stream's preamble is held waiting for the first content
    /// event (the failover window); past it the stream is released as is.
    pub(crate) first_token_timeout: Duration,
    /// Upstream silence that ends a stream with an in-band error.
    pub(crate) stream_idle_timeout: Duration,
    /// Upstream silence after which a keep-alive event is sent.
    pub(crate) sse_keepalive: Duration,
    /// Upstream statuses that move on to the next upstream.
    pub(crate) failover_on: Vec<u16>,
    /// Name the serving upstream in `x-weir-upstream`.
    pub(crate) served_by_header: bool,
    /// Accept the runtime keys of `[database]` (issued through
    /// `/admin/keys`) beside the route's client tokens; a request then
    /// needs one or the other.
    pub(crate) runtime_keys: bool,
    /// Accept JWTs from `[idp]`'s issuer: each person served as a key of
    /// their team's policy.
    pub(crate) idp_tokens: bool,
}

/// A client token: its name (metrics, usage records, the admin view: never
/// the secret) and its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientToken {
    pub(crate) name: String,
    pub(crate) token: Secret,
    pub(crate) budget: Budget,
    /// The models it may ask for.
    pub(crate) models: AllowedModels,
}

/// The model names a client token may ask for (the names the client
/// sends, before any `name:model-id` mapping): each pattern a name, or
/// with `*` standing for any run of characters (`claude-*`). None = every
/// model the route serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AllowedModels(pub(crate) Vec<String>);

impl AllowedModels {
    pub(crate) fn allows(&self, model: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|p| matches_pattern(p, model))
    }
}

/// Whether `name` matches `pattern`, where `*` is any run of characters
/// and nothing else is special. Each piece between stars is taken at its
/// leftmost place after the one before, which finds a match if there is
/// one: linear in the two lengths.
fn matches_pattern(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let Some(last) = pieces.next_back() else {
        // No star: the whole name.
        return rest.is_empty();
    };
    for piece in pieces {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// What one client token may use; `None` = no bound. Spend is in the price
/// table's currency, in units of 10⁻¹² ([`Price`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) tokens_per_minute: Option<u64>,
    pub(crate) tokens_per_day: Option<u64>,
    pub(crate) spend_per_day: Option<u64>,
    /// Weeks start on Monday 00:00 UTC, months on their first day.
    pub(crate) tokens_per_week: Option<u64>,
    pub(crate) spend_per_week: Option<u64>,
    pub(crate) tokens_per_month: Option<u64>,
    pub(crate) spend_per_month: Option<u64>,
    /// The soft limit: past this percent of any bound, answers carry
    /// `x-weir-budget-warning` and a line is logged (once per window).
    pub(crate) warn_at: Option<u8>,
}

impl Budget {
    pub(crate) fn is_unbounded(&self) -> bool {
        Budget {
            warn_at: None,
            ..*self
        } == Budget::default()
    }
}

/// One model's prices, each per token in units of 10⁻¹² of the currency
/// (configured per million tokens: `3.0` → 3,000,000): exact for prices
/// with up to six decimals per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Price {
    pub(crate) input: u64,
    pub(crate) output: u64,
    pub(crate) cache_read: u64,
    pub(crate) cache_write: u64,
}

/// Units of spend per unit of currency (prices and spend are counted in
/// 10⁻¹² of the currency, in integers).
pub(crate) const SPEND_UNIT: f64 = 1e12;

impl LlmSettings {
    /// The price of `model` (an id as sent upstream): its own entry, else
    /// the `"*"` entry, else none.
    pub(crate) fn price(&self, model: &str) -> Option<Price> {
        let find = |m: &str| self.prices.get(m).copied();
        find(model).or_else(|| find("*"))
    }

    /// The failover order for `model`, if the route serves it.
    pub(crate) fn choices(&self, model: &str) -> Option<&[Choice]> {
        self.models
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, c)| c.as_slice())
            .or_else(|| (!self.default_upstreams.is_empty()).then_some(&self.default_upstreams[..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_patterns_match_as_globs_with_only_stars() {
        let allowed = |patterns: &[&str], name: &str| {
            AllowedModels(patterns.iter().map(|p| p.to_string()).collect()).allows(name)
        };
        assert!(allowed(&[], "anything"));
        assert!(allowed(&["claude-*"], "claude-sonnet-4-5"));
        assert!(allowed(&["claude-*"], "claude-"));
        assert!(!allowed(&["claude-*"], "gpt-5"));
        assert!(allowed(&["gpt-5*", "claude-*"], "gpt-5.5"));
        assert!(allowed(&["gpt-5"], "gpt-5"));
        assert!(!allowed(&["gpt-5"], "gpt-5.5"));
        assert!(!allowed(&["gpt-5"], "xgpt-5"));
        assert!(allowed(&["*"], ""));
        assert!(allowed(&["*-mini"], "gpt-5-mini"));
        assert!(!allowed(&["*-mini"], "gpt-5-mini-2"));
        assert!(allowed(&["c*o*e"], "claude-opus-thinking-e"));
        assert!(allowed(&["a**b"], "ab"));
        // The suffix is not the prefix read again.
        assert!(!allowed(&["ab*ba"], "aba"));
        assert!(allowed(&["ab*ba"], "abba"));
        assert!(allowed(&["*é*"], "modèle-é"));
    }
}
