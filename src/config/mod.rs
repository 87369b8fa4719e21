//! weir's configuration: the validated types the server runs from, and the
//! loader that turns a TOML file into them.
//!
//! Loading is all-or-nothing: [`Config::load`] either returns a config in
//! which every value has been checked (addresses parse, certificates load,
//! routes are unambiguous) or every problem found, each with file, line,
//! column, key and a fix. `weir run` and `weir check` share this path, so a
//! config that checks is a config that starts.

mod access;
mod compress;
mod env;
mod hints;
mod idp;
mod keys;
mod listen;
mod llm;
mod load;
mod problem;
pub(crate) mod reader;
mod route;
mod rules;
mod secret;
mod server;
mod sources;
mod statics;
mod traces;
mod upstream;

use std::path::{Path, PathBuf};

pub(crate) use access::*;
pub(crate) use compress::{Coding, Compression, Levels, TypePattern, default as compress_default};
pub(crate) use idp::{IdpSettings, TeamBudget, TeamPolicy};
pub use listen::*;
pub(crate) use llm::*;
pub(crate) use problem::Problem;
pub use problem::Problems;
pub(crate) use route::*;
pub(crate) use rules::*;
pub use secret::Secret;
pub use server::*;
pub(crate) use sources::Sources;
pub(crate) use statics::{Precompressed, StaticSettings};
pub(crate) use traces::{MetricsExportSettings, OtlpProtocol, TraceSettings};
pub(crate) use upstream::UpstreamHttp;

pub(crate) use upstream::{Ejection, Member, Policy, RetryBudget, ServerUrl};

/// The defaults of the keys not declared in [`keys`] yet (a declared
/// key's default is in its declaration).
pub(crate) mod defaults {
    use std::time::Duration;

    /// `server.drain_grace`'s, for the connection tests.
    #[cfg(test)]
    pub(crate) const DRAIN_GRACE: Duration = super::keys::server::DRAIN_GRACE.duration();
    pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
    /// Let's Encrypt's, what `listener.tls.acme.directory` is by default
    /// and as `"letsencrypt"`; and its staging CA's.
    pub(crate) const ACME_DIRECTORY: &str = "https://acme-v02.api.letsencrypt.org/directory";
    pub(crate) const ACME_STAGING_DIRECTORY: &str =
        "https://acme-staging-v02.api.letsencrypt.org/directory";

    /// Anthropic's own request limit for Messages.
    pub(crate) const LLM_MAX_REQUEST_BODY: u64 = 32 * 1024 * 1024;
    pub(crate) const LLM_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);
    pub(crate) const LLM_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(60);
    pub(crate) const LLM_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
    pub(crate) const LLM_SSE_KEEPALIVE: Duration = Duration::from_secs(15);
    /// Output tokens reserved for a request that sets no limit.
    pub(crate) const LLM_DEFAULT_MAX_TOKENS: u64 = 4096;
    pub(crate) const LLM_FAILOVER_ON: &[u16] = &[429, 500, 502, 503, 504, 529];
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from (for messages and reloads).
    pub(crate) source: PathBuf,
    /// The directories holding its files and its `include` globs' files:
    /// what the file watcher watches.
    pub(crate) watched: Vec<PathBuf>,
    pub(crate) server: ServerSettings,
    pub(crate) connections: ConnectionSettings,
    pub(crate) http1: Http1Settings,
    pub(crate) http2: Http2Settings,
    pub(crate) log: LogSettings,
    pub(crate) admin: Option<AdminSettings>,
    pub(crate) listeners: Vec<ListenerConfig>,
    pub(crate) routes: Vec<RouteConfig>,
    pub(crate) upstream: UpstreamSettings,
    /// Limits shared by a fleet of weirs through Redis; `None`: every
    /// limit is this process's own.
    pub(crate) cluster: Option<ClusterSettings>,
    /// Runtime keys and usage rows (`[database]`); `None`: no database.
    pub(crate) database: Option<DatabaseSettings>,
    /// Identity from an IdP (`[idp]`); `None`: no JWTs are accepted.
    pub(crate) idp: Option<IdpSettings>,
    /// `[[teams]]`: budgets each team shares across its keys and people.
    pub(crate) teams: Vec<TeamBudget>,
    /// `[telemetry.traces]`: OpenTelemetry traces; `None`: none made.
    pub(crate) traces: Option<TraceSettings>,
    /// `[telemetry.metrics]`: the metrics pushed over OTLP too; `None`:
    /// only `/metrics` serves them.
    pub(crate) metrics_export: Option<MetricsExportSettings>,
    /// What loads but should be fixed (a secret file others can read).
    pub(crate) warnings: Vec<String>,
}

impl Config {
    /// Read and validate a config file.
    /// Read and validate a config file and the files it includes.
    pub(crate) fn load(path: &Path) -> Result<Config, Problems> {
        let sources = Sources::read(path).map_err(|e| {
            Problems(vec![Problem {
                file: path.to_path_buf(),
                position: None,
                key: String::new(),
                message: format!("cannot read the file: {e}"),
                fix: Some("pass an existing, readable file to --config".into()),
            }])
        })?;
        Config::from_sources(&sources)
    }

    /// Validate config text; `path` is used for messages, relative paths
    /// and the files it includes.
    pub fn parse(path: &Path, text: &str) -> Result<Config, Problems> {
        Config::from_sources(&Sources::from_text(path, text.to_string()))
    }

    /// Validate a config already read (see [`Sources::read`]).
    pub(crate) fn from_sources(sources: &Sources) -> Result<Config, Problems> {
        load::from_sources(sources)
    }
}
