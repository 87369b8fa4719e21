//! weir's configuration: the validated types the server runs from, and the
//! loader that turns a TOML file into them.
//!
//! Loading is all-or-nothing: [`Config::load`] either returns a config in
//! which every value has been checked (addresses parse, certificates load,
//! routes are unambiguous) or every problem found, each with file, line,
//! column, key and a fix. `weir run` and `weir check` share this path, so a
//! config that checks is a config that starts.

mod load;
mod problem;
pub mod reader;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

pub use problem::{Problem, Problems};

/// Defaults, in one place so the docs and the code cannot drift apart.
pub mod defaults {
    use std::time::Duration;

    pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DRAIN_GRACE: Duration = Duration::from_secs(1);
    /// The longest `server.drain_grace` accepted.
    pub const DRAIN_GRACE_MAX: Duration = Duration::from_secs(60);
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
    pub const POOL_MAX_IDLE_PER_HOST: usize = 64;
    pub const RESOLVE_INTERVAL: Duration = Duration::from_secs(30);
    pub const HTTPS_PORT: u16 = 443;
    pub const ACME_DIRECTORY: &str = "https://acme-v02.api.letsencrypt.org/directory";
    pub const ACME_STAGING_DIRECTORY: &str =
        "https://acme-staging-v02.api.letsencrypt.org/directory";
    pub const ACME_STATE_DIR: &str = "/var/lib/weir/acme";
    pub const ACME_RETRY_BASE: Duration = Duration::from_secs(60);
    pub const MAX_CONCURRENT_REQUESTS: usize = 1024;

    pub const MAX_CONNECTIONS: usize = 1024;
    pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
    pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
    pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const MAX_REQUESTS_PER_CONNECTION: u64 = 1000;
    pub const MIN_BODY_RATE: u64 = 1024;
    pub const BODY_RATE_PERIOD: Duration = Duration::from_secs(10);
    pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
    pub const PRESSURE_THRESHOLD_PERCENT: u8 = 80;
    pub const PRESSURE_TIMEOUT: Duration = Duration::from_secs(1);

    pub const H1_MAX_HEADERS: usize = 100;
    pub const H1_MAX_HEAD_SIZE: usize = 64 * 1024;
    pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
    pub const H2_MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;
    pub const H2_MAX_PENDING_RESETS: usize = 20;
    pub const H2_MAX_CONTROL_FRAMES_PER_SECOND: u32 = 1000;

    /// Anthropic's own request limit for Messages.
    pub const LLM_MAX_REQUEST_BODY: u64 = 32 * 1024 * 1024;
    pub const LLM_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const LLM_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(60);
    pub const LLM_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
    pub const LLM_SSE_KEEPALIVE: Duration = Duration::from_secs(15);
    /// Output tokens reserved for a request that sets no limit.
    pub const LLM_DEFAULT_MAX_TOKENS: u64 = 4096;
    pub const LLM_FAILOVER_ON: &[u16] = &[429, 500, 502, 503, 504, 529];
    pub const MAX_BUFFERED_BODY_BYTES: u64 = 256 * 1024 * 1024;

    pub const CLUSTER_KEY_PREFIX: &str = "weir:";
    pub const CLUSTER_TIMEOUT: Duration = Duration::from_millis(20);
    pub const CLUSTER_LEASE_TTL: Duration = Duration::from_secs(15);
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from (for messages and reloads).
    pub source: PathBuf,
    pub server: ServerSettings,
    pub connections: ConnectionSettings,
    pub http1: Http1Settings,
    pub http2: Http2Settings,
    pub log: LogSettings,
    pub admin: Option<AdminSettings>,
    pub listeners: Vec<ListenerConfig>,
    pub routes: Vec<RouteConfig>,
    pub upstream: UpstreamSettings,
    /// Limits shared by a fleet of weirs through Redis; `None`: every
    /// limit is this process's own.
    pub cluster: Option<ClusterSettings>,
}

/// `[cluster]`: where a fleet's shared limits live, and what to do when
/// that store does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `redis://host:port/db` or `rediss://…` (TLS), without a password.
    pub url: String,
    /// Redis AUTH password, from a file or the environment.
    pub password: Option<Secret>,
    /// Put before every key weir writes (several fleets can share a Redis).
    pub key_prefix: String,
    /// The longest a request waits for Redis before the failure mode decides.
    pub timeout: Duration,
    pub on_failure: FailureMode,
    /// How long a concurrency slot outlives the instance holding it.
    pub lease_ttl: Duration,
    /// CA certificates a `rediss://` Redis's certificate may chain to,
    /// besides the web PKI roots (a private CA's).
    pub ca_file: Option<PathBuf>,
}

/// What a shared limit does while Redis is slow or gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Each instance enforces its share of the limit (1/N) itself.
    Open,
    /// Refuse with 503 and `Retry-After`.
    Closed,
}

impl FailureMode {
    pub fn name(self) -> &'static str {
        match self {
            FailureMode::Open => "fail_open",
            FailureMode::Closed => "fail_closed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub shutdown_timeout: Duration,
    /// In a drain, how long an HTTP/1.1 connection with nothing arriving
    /// is kept open before it is closed (a request on its way is answered,
    /// with `Connection: close`).
    pub drain_grace: Duration,
    /// Peers whose X-Forwarded-* headers are believed and appended to.
    pub trusted_proxies: Vec<IpNet>,
    /// Runtime worker threads; 0 means one per core.
    pub workers: usize,
    /// Process-wide bound on requests in flight; 0 disables the gate.
    pub max_concurrent_requests: usize,
    /// Process-wide bound on request bytes held in memory by LLM routes
    /// (they read a body whole to route by model); 0 = no bound.
    pub max_buffered_body_bytes: u64,
    /// Reload when the config file changes (besides SIGHUP and the admin API).
    pub watch_config: bool,
}

/// The connection layer: the shared cap, reclaiming under load, deadlines.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Process-wide cap on client connections, shared by every listener; 0 = none.
    pub max: usize,
    /// Cap per client IP (IPv6 per /64); 0 = none.
    pub max_per_ip: usize,
    pub tls_handshake_timeout: Duration,
    /// Total time to receive a request head, from its first byte (or from
    /// the connection becoming ready, for the first request).
    pub request_head_timeout: Duration,
    /// Idle time between requests (HTTP/1.1) or with no open stream (HTTP/2).
    pub keepalive_timeout: Duration,
    /// Requests per connection before it is closed gracefully; 0 = none.
    pub max_requests: u64,
    /// Minimum request body rate in bytes/s, checked per `body_rate_period`; 0 = off.
    pub min_body_rate: u64,
    pub body_rate_period: Duration,
    /// How long a client may leave a response unread before it is cut.
    pub send_timeout: Duration,
    /// Percent of `max` above which deadlines shrink to `pressure_timeout`.
    pub pressure_threshold_percent: u8,
    pub pressure_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            max: defaults::MAX_CONNECTIONS,
            max_per_ip: 0,
            tls_handshake_timeout: defaults::TLS_HANDSHAKE_TIMEOUT,
            request_head_timeout: defaults::REQUEST_HEAD_TIMEOUT,
            keepalive_timeout: defaults::KEEPALIVE_TIMEOUT,
            max_requests: defaults::MAX_REQUESTS_PER_CONNECTION,
            min_body_rate: defaults::MIN_BODY_RATE,
            body_rate_period: defaults::BODY_RATE_PERIOD,
            send_timeout: defaults::SEND_TIMEOUT,
            pressure_threshold_percent: defaults::PRESSURE_THRESHOLD_PERCENT,
            pressure_timeout: defaults::PRESSURE_TIMEOUT,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Http1Settings {
    pub max_headers: usize,
    /// Largest request head (request line + headers) in bytes.
    pub max_head_size: usize,
}

impl Default for Http1Settings {
    fn default() -> Self {
        Http1Settings {
            max_headers: defaults::H1_MAX_HEADERS,
            max_head_size: defaults::H1_MAX_HEAD_SIZE,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Http2Settings {
    pub max_concurrent_streams: u32,
    pub max_header_list_size: u32,
    /// Streams a client may reset before they are accepted (rapid reset).
    pub max_pending_resets: usize,
    /// PING, SETTINGS, PRIORITY and RST_STREAM frames a client may send per
    /// second before the connection is closed (runs of empty DATA, HEADERS
    /// and CONTINUATION frames are limited separately).
    pub max_control_frames_per_second: u32,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Http2Settings {
            max_concurrent_streams: defaults::H2_MAX_CONCURRENT_STREAMS,
            max_header_list_size: defaults::H2_MAX_HEADER_LIST_SIZE,
            max_pending_resets: defaults::H2_MAX_PENDING_RESETS,
            max_control_frames_per_second: defaults::H2_MAX_CONTROL_FRAMES_PER_SECOND,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct LogSettings {
    pub format: LogFormat,
    /// A tracing filter directive such as `info` or `weir=debug`.
    pub level: String,
    pub access_log: bool,
    /// Write logs here instead of stderr.
    pub file: Option<PathBuf>,
    /// Write the access log here instead of with the other logs.
    pub access_file: Option<PathBuf>,
    /// One JSON usage record per LLM request.
    pub usage_log: bool,
    /// Write the usage records here instead of to stdout.
    pub usage_file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct AdminSettings {
    pub address: SocketAddr,
    /// Bearer token for `/admin/*`; without one those endpoints answer 404.
    pub token: Option<Secret>,
}

#[derive(Debug, Clone)]
pub struct ListenerConfig {
    pub name: String,
    pub address: SocketAddr,
    pub tls: Option<TlsSettings>,
    /// When set, this listener only redirects to HTTPS.
    pub redirect_https: Option<RedirectSettings>,
    /// Sources that must open every connection with a PROXY protocol
    /// header (v1 or v2); empty: the feature is off on this listener.
    pub proxy_protocol_from: Vec<IpNet>,
}

#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The first certificate is the default for clients without a matching
    /// SNI. May be empty when `acme` is set.
    pub certificates: Vec<Certificate>,
    /// Certificates obtained and renewed over ACME.
    pub acme: Option<AcmeSettings>,
}

/// A TLS listener's ACME settings, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AcmeSettings {
    /// The CA's directory URL.
    pub directory: String,
    /// Extra root CA for reaching the directory (a private CA's).
    pub ca_file: Option<PathBuf>,
    /// Contact address for the account (without `mailto:`).
    pub email: Option<String>,
    /// Exact DNS names to certify, lower-case, one certificate each.
    pub names: Vec<String>,
    pub challenge: AcmeChallenge,
    /// Account key and certificates live here (mode 0700, files 0600).
    pub state_dir: PathBuf,
    pub external_account: Option<ExternalAccount>,
    /// The wait after a first failed attempt; it doubles per failure.
    pub retry_base: Duration,
}

/// How the CA checks that weir answers for a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// A TLS handshake with ALPN `acme-tls/1` on the TLS listener (port 443).
    TlsAlpn01,
    /// `GET /.well-known/acme-challenge/<token>` on a plain listener (port 80).
    Http01,
}

impl AcmeChallenge {
    pub fn name(self) -> &'static str {
        match self {
            AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            AcmeChallenge::Http01 => "http-01",
        }
    }
}

/// External Account Binding (RFC 8555 §7.3.4): a key id and HMAC key the
/// CA issued out of band.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalAccount {
    pub key_id: String,
    /// The HMAC key as the CA gave it (base64url), checked to decode.
    pub hmac_key: Secret,
}

#[derive(Clone)]
pub struct Certificate {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    /// DNS names from the certificate's subjectAltName, used to pick it by SNI.
    pub names: Vec<String>,
    pub key: Arc<rustls::sign::CertifiedKey>,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("cert_path", &self.cert_path)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RedirectSettings {
    pub https_port: u16,
}

/// A host pattern: an exact name, or `*.suffix` for any subdomain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    Exact(String),
    /// Stored with the leading dot: `*.example.com` is `.example.com`.
    Wildcard(String),
}

/// Normalise a requested host (a Host header or an authority) into the
/// form host patterns are stored in: lower-case, without port, without
/// a trailing dot. Returns `None` for an empty or malformed host. Borrows
/// when the host is already in normal form (the common case).
pub fn normalise_host(raw: &str) -> Option<Cow<'_, str>> {
    let host = if let Some(rest) = raw.strip_prefix('[') {
        // IPv6 literal: keep the brackets, drop the port.
        let end = rest.find(']')?;
        &raw[..end + 2]
    } else {
        raw.rsplit_once(':').map_or(raw, |(h, _)| h)
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Some(Cow::Owned(host.to_ascii_lowercase()))
    } else {
        Some(Cow::Borrowed(host))
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Wildcard(s) => write!(f, "*{s}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RouteConfig {
    pub name: String,
    /// Empty means any host.
    pub hosts: Vec<HostPattern>,
    /// Path prefix, matched on segment boundaries.
    pub path: String,
    /// What the route does with what it matches.
    pub kind: RouteKind,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub max_request_body: Option<u64>,
    /// Send the client's Host upstream (true) or the upstream's authority.
    pub preserve_host: bool,
    /// Remove the matched path prefix before forwarding.
    pub strip_prefix: bool,
    /// Requests in flight on this route; 0 = only the global bound.
    pub max_concurrent_requests: usize,
    /// Per-client rate limit: (requests per second, burst).
    pub rate_limit: Option<(u32, u32)>,
    /// The rate limit and the per-token concurrency are the fleet's
    /// (through `[cluster]`), not this process's.
    pub shared_limits: bool,
    pub headers: ResponseHeaders,
}

/// Headers a route sets on its responses.
#[derive(Debug, Clone, Default)]
pub struct ResponseHeaders {
    /// `Strict-Transport-Security`, sent on HTTPS responses only.
    pub hsts: Option<http::HeaderValue>,
    pub server: ServerHeader,
}

/// What happens to the upstream's `Server` header.
#[derive(Debug, Clone, Default)]
pub enum ServerHeader {
    #[default]
    Pass,
    Remove,
    Set(http::HeaderValue),
}

/// A route's kind and what only that kind needs.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteKind {
    /// Forward everything to a group of upstream servers (one, for
    /// `upstream = URL`).
    Proxy { upstream: Box<UpstreamGroup> },
    /// An LLM API gateway route.
    Llm(Arc<LlmSettings>),
}

/// A proxy route's servers and how one is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamGroup {
    pub servers: Vec<Member<http::Uri>>,
    pub policy: Policy,
    /// What a request is hashed by, for [`Policy::Hash`].
    pub hash_key: Option<HashKey>,
    pub ejection: Ejection,
    pub health_check: Option<HealthCheck>,
    pub retry: Retry,
    /// The HTTP versions weir speaks to the group's servers.
    pub http: UpstreamHttp,
}

/// Which requests that got no answer go to another server, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Methods retried once on another server after being sent and getting
    /// no response head (a request that never left goes elsewhere whatever
    /// its method).
    pub methods: Vec<http::Method>,
    pub budget: RetryBudget,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            methods: vec![http::Method::GET, http::Method::HEAD, http::Method::OPTIONS],
            budget: RetryBudget::default(),
        }
    }
}

/// Which HTTP versions weir speaks to an upstream (`http_version`).
/// Upgrades (WebSocket) always go over HTTP/1.1, whatever this says.
/// HTTP/1.1 is the default because hyper-util's pool holds one HTTP/2
/// connection per server and worker: past the server's stream limit,
/// requests queue on it instead of opening another connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamHttp {
    /// `https://`: offer `h2` and `http/1.1` by ALPN, and speak what the
    /// server picks; `http://`: HTTP/1.1 (a cleartext server cannot say
    /// it speaks HTTP/2 before it is spoken to).
    Auto,
    /// HTTP/1.1 only, as nginx speaks to upstreams.
    #[default]
    Http1,
    /// HTTP/2 only: ALPN `h2` on `https://`, h2c with prior knowledge on
    /// `http://` (what gRPC servers speak in cleartext).
    Http2,
}

impl UpstreamHttp {
    pub const ALL: [UpstreamHttp; 3] =
        [UpstreamHttp::Auto, UpstreamHttp::Http1, UpstreamHttp::Http2];

    pub fn name(self) -> &'static str {
        match self {
            UpstreamHttp::Auto => "auto",
            UpstreamHttp::Http1 => "1.1",
            UpstreamHttp::Http2 => "2",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// An active HTTP health check, run for each server of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// Path (and query) asked with GET.
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    /// Passes in a row that bring a server back.
    pub rise: u32,
    /// Failures in a row that take it out.
    pub fall: u32,
    /// Statuses that pass; empty: any 2xx or 3xx.
    pub expect_status: Vec<u16>,
}

impl HealthCheck {
    pub fn passes(&self, status: u16) -> bool {
        if self.expect_status.is_empty() {
            (200..400).contains(&status)
        } else {
            self.expect_status.contains(&status)
        }
    }
}

impl UpstreamGroup {
    /// A group of one server, with the defaults.
    pub fn one(uri: http::Uri) -> Self {
        UpstreamGroup {
            servers: vec![Member {
                target: uri,
                weight: 1,
                backup: false,
            }],
            policy: Policy::P2cEwma,
            hash_key: None,
            ejection: Ejection::default(),
            health_check: None,
            retry: Retry::default(),
            http: UpstreamHttp::Http1,
        }
    }
}

/// What a request is hashed by to choose its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    Header(http::HeaderName),
    Cookie(String),
    ClientIp,
}

pub use crate::balance::{Ejection, Member, Policy, RetryBudget};

/// Which LLM API family a route speaks to its clients, and which API an
/// upstream speaks: what they mean on the wire is [`crate::wire`]'s.
pub use crate::wire::openai::Accepts;
pub use crate::wire::{Protocol, UpstreamApi};

/// A secret read from a file or the environment; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The first `bytes` bytes of the secret's SHA-256, in hex: a stable
    /// name for it that reveals nothing (the same on every instance).
    pub fn digest_hex(&self, bytes: usize) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, self.0.as_bytes());
        let head = digest.as_ref().get(..bytes).unwrap_or(digest.as_ref());
        head.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// How an LLM upstream is authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Forward the client's own credential headers.
    Passthrough,
    /// Send this key in the protocol's header; the client's is never sent.
    Key(Secret),
}

/// One of an LLM upstream's keys, and where it was read from (for logs
/// and metrics; the key itself is never shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub credential: Credential,
    /// `env:NAME`, `file:PATH`, or `passthrough`.
    pub source: String,
}

/// An LLM upstream: one or more endpoints of one provider (or of one
/// self-hosted model), each used with one or more keys. Every
/// endpoint×key pair is a member of one balanced group.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmUpstreamConfig {
    pub name: String,
    /// Base URLs (one for `url = ...`); the API path (`/v1/messages`) is
    /// appended to each one's path.
    pub servers: Vec<Member<http::Uri>>,
    /// At least one; a single passthrough when no key is configured.
    pub keys: Vec<ApiKey>,
    pub policy: Policy,
    /// With [`Policy::Hash`]: a conversation stays on one member.
    pub hash_conversation: bool,
    pub ejection: Ejection,
    pub connect_timeout: Duration,
    /// The API the upstream speaks; when it is not the client's, weir
    /// translates.
    pub api: UpstreamApi,
    /// What an OpenAI-API upstream accepts, for the requests weir
    /// translates to it.
    pub accepts: Accepts,
    /// The HTTP versions weir speaks to it.
    pub http: UpstreamHttp,
}

/// One step of a model's failover order: an upstream (index into
/// [`LlmSettings::upstreams`]) and the model id to send it, when that
/// upstream names the model differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub upstream: usize,
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    pub protocol: Protocol,
    pub upstreams: Vec<LlmUpstreamConfig>,
    /// Model name → ordered upstreams.
    pub models: Vec<(String, Vec<Choice>)>,
    /// For models not listed; empty = 404 for unknown models.
    pub default_upstreams: Vec<Choice>,
    /// Tokens clients must present, each with its name and budget; empty =
    /// no client authentication.
    pub client_tokens: Vec<ClientToken>,
    /// Prices per model id, for spend (usage records, metrics, budgets).
    pub prices: Vec<(String, Price)>,
    /// Output tokens a budget reservation counts for a request that sets
    /// no output limit of its own.
    pub default_max_tokens: u64,
    /// Requests in flight per client token; 0 = no per-token bound.
    pub max_concurrent_per_token: usize,
    /// How long to wait for an upstream's response head.
    pub first_byte_timeout: Duration,
    /// How long a stream's preamble is held waiting for the first content
    /// event (the failover window); past it the stream is released as is.
    pub first_token_timeout: Duration,
    /// Upstream silence that ends a stream with an in-band error.
    pub stream_idle_timeout: Duration,
    /// Upstream silence after which a keep-alive event is sent.
    pub sse_keepalive: Duration,
    /// Upstream statuses that move on to the next upstream.
    pub failover_on: Vec<u16>,
    /// Name the serving upstream in `x-weir-upstream`.
    pub served_by_header: bool,
}

/// A client token: its name (metrics, usage records, the admin view: never
/// the secret) and its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientToken {
    pub name: String,
    pub token: Secret,
    pub budget: Budget,
}

/// What one client token may use; `None` = no bound. Spend is in the price
/// table's currency, in units of 10⁻¹² ([`Price`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    pub tokens_per_minute: Option<u64>,
    pub tokens_per_day: Option<u64>,
    pub spend_per_day: Option<u64>,
}

impl Budget {
    pub fn is_unbounded(&self) -> bool {
        *self == Budget::default()
    }
}

/// One model's prices, each per token in units of 10⁻¹² of the currency
/// (configured per million tokens: `3.0` → 3,000,000): exact for prices
/// with up to six decimals per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Price {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// Units of spend per unit of currency (prices and spend are counted in
/// 10⁻¹² of the currency, in integers).
pub const SPEND_UNIT: f64 = 1e12;

impl LlmSettings {
    /// The price of `model` (an id as sent upstream): its own entry, else
    /// the `"*"` entry, else none.
    pub fn price(&self, model: &str) -> Option<Price> {
        let find = |m: &str| self.prices.iter().find(|(n, _)| n == m).map(|(_, p)| *p);
        find(model).or_else(|| find("*"))
    }

    /// The failover order for `model`, if the route serves it.
    pub fn choices(&self, model: &str) -> Option<&[Choice]> {
        self.models
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, c)| c.as_slice())
            .or_else(|| (!self.default_upstreams.is_empty()).then_some(&self.default_upstreams[..]))
    }
}

#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
    /// Extra CA certificates trusted for `https://` upstreams, besides web PKI roots.
    pub ca_file: Option<PathBuf>,
    /// DNS servers asked for group members' names; empty: the system's.
    pub nameservers: Vec<SocketAddr>,
    /// How often group members' names are looked up again (sooner when the
    /// record's TTL is shorter).
    pub resolve_interval: Duration,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        UpstreamSettings {
            pool_idle_timeout: defaults::POOL_IDLE_TIMEOUT,
            pool_max_idle_per_host: defaults::POOL_MAX_IDLE_PER_HOST,
            ca_file: None,
            nameservers: Vec::new(),
            resolve_interval: defaults::RESOLVE_INTERVAL,
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            shutdown_timeout: defaults::SHUTDOWN_TIMEOUT,
            drain_grace: defaults::DRAIN_GRACE,
            trusted_proxies: Vec::new(),
            workers: 0,
            max_concurrent_requests: defaults::MAX_CONCURRENT_REQUESTS,
            max_buffered_body_bytes: defaults::MAX_BUFFERED_BODY_BYTES,
            watch_config: true,
        }
    }
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: "info".into(),
            access_log: true,
            file: None,
            access_file: None,
            usage_log: false,
            usage_file: None,
        }
    }
}

impl Config {
    /// Read and validate a config file.
    pub fn load(path: &Path) -> Result<Config, Problems> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Problems(vec![Problem {
                file: path.to_path_buf(),
                position: None,
                key: String::new(),
                message: format!("cannot read the file: {e}"),
                fix: Some("pass an existing, readable file to --config".into()),
            }])
        })?;
        Config::parse(path, &text)
    }

    /// Validate config text; `path` is used for messages and relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Config, Problems> {
        load::parse(path, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_normalised() {
        assert_eq!(
            normalise_host("Example.COM:8443").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            normalise_host("example.com.").as_deref(),
            Some("example.com")
        );
        assert_eq!(normalise_host("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(normalise_host(""), None);
    }
}
