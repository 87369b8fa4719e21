//! The real agent CLIs (Claude Code, Codex) as weir's clients: find the
//! pinned versions `.ci/run` installs, run one headless in a fresh HOME
//! against weir on 127.0.0.1 with every phone-home turned off, and kill it
//! (with what it printed) when it hangs.
//!
//! The pinned versions live in tests/fixtures/agents/versions, which
//! `.ci/run` installs from; the fixtures beside it are what these versions
//! send (see its README).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::sync::Semaphore;

use super::process::{Proc, write_config};
use super::provider::Provider;

/// Long enough for a cold node start and two model turns on a loaded
/// machine; short enough that a hang fails clearly.
pub const AGENT_TIMEOUT: Duration = Duration::from_secs(120);

/// CLIs running at once: each is a node or Rust process tree of its own
/// and the machines running the tests are small.
static SLOTS: Semaphore = Semaphore::const_new(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    Codex,
}

impl Agent {
    /// The npm package, as written in the versions file.
    fn package(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "@anthropic-ai/claude-code",
            Agent::Codex => "@openai/codex",
        }
    }

    fn bin(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude",
            Agent::Codex => "codex",
        }
    }

    /// The pinned version, from tests/fixtures/agents/versions.
    pub fn version(self) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents/versions");
        let text = std::fs::read_to_string(&path).expect("tests/fixtures/agents/versions");
        let prefix = format!("{}@", self.package());
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{} is not pinned in {}", self.package(), path.display()))
            .to_string()
    }
}

/// Where `.ci/run` installs the CLIs.
pub fn install_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("agents")
}

/// The CLI's executable, if the pinned version is installed. Without it
/// the test is skipped visibly, or fails under `WEIR_REQUIRE_AGENTS=1`.
/// Another version installed there fails: the fixtures and the docs name
/// the pinned one.
pub fn find(agent: Agent) -> Option<PathBuf> {
    let dir = install_dir().join("node_modules");
    let bin = dir.join(".bin").join(agent.bin());
    let manifest = dir.join(agent.package()).join("package.json");
    let installed = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string));
    let found = bin.exists() && installed.is_some();
    if let Some(installed) = &installed {
        assert_eq!(
            *installed,
            agent.version(),
            "{} {installed} is installed in {}, but tests/fixtures/agents/versions pins another",
            agent.package(),
            install_dir().display()
        );
    }
    let enable = format!(
        "npm install --prefix {} --no-audit --no-fund $(cat tests/fixtures/agents/versions)",
        install_dir().display()
    );
    super::can_run(
        found,
        &format!("{} is not installed", agent.package()),
        &enable,
        "WEIR_REQUIRE_AGENTS",
    )
    .then_some(bin)
}

/// What a CLI run left.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics showing the output unless the CLI exited 0.
    pub fn assert_success(&self) {
        assert_eq!(
            self.code,
            Some(0),
            "the CLI failed\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
    }

    /// The final answer: Claude Code's `result` (`--output-format json`),
    /// Codex's last message (`--output-last-message`, read into stdout's
    /// place by [`run`]).
    pub fn answer(&self, agent: Agent) -> String {
        match agent {
            Agent::ClaudeCode => serde_json::from_str::<serde_json::Value>(&self.stdout)
                .ok()
                .and_then(|v| v["result"].as_str().map(str::to_string))
                .unwrap_or_else(|| panic!("no JSON result on stdout:\n{}", self.stdout)),
            Agent::Codex => self.stdout.clone(),
        }
    }
}

/// Run `agent` headless once, in a fresh directory with a fresh HOME, on
/// `prompt`, with weir's LLM listener at `weir` (`127.0.0.1:port`) as its
/// provider. The environment is cleared: no proxy, no real key, nothing of
/// the developer's configuration reaches the CLI.
pub async fn run(agent: Agent, bin: &Path, weir: SocketAddr, prompt: &str) -> Run {
    run_with(agent, bin, weir, prompt, codex_config(weir)).await
}

/// [`run`] with Codex's `config.toml` given (unused for Claude Code).
pub async fn run_with(
    agent: Agent,
    bin: &Path,
    weir: SocketAddr,
    prompt: &str,
    codex_toml: String,
) -> Run {
    run_as(agent, bin, weir, prompt, codex_toml, None).await
}

/// [`run_with`] presenting `credential` to weir instead of the fixed
/// client keys: a runtime key (Claude Code's `ANTHROPIC_API_KEY`), or an
/// IdP's token (a JWT: Claude Code's `ANTHROPIC_AUTH_TOKEN`, a bearer);
/// Codex sends either as its `OPENAI_API_KEY` bearer.
pub async fn run_as(
    agent: Agent,
    bin: &Path,
    weir: SocketAddr,
    prompt: &str,
    codex_toml: String,
    credential: Option<&str>,
) -> Run {
    run_in_mode(agent, bin, weir, prompt, codex_toml, credential, None).await
}

/// Claude Code in Bedrock mode with weir as its Bedrock endpoint:
/// `CLAUDE_CODE_USE_BEDROCK=1`, `ANTHROPIC_BEDROCK_BASE_URL` weir,
/// `CLAUDE_CODE_SKIP_BEDROCK_AUTH=1` (no SigV4), asking for `model`, and
/// `token` as `AWS_BEARER_TOKEN_BEDROCK`, which it sends as
/// `Authorization: Bearer` (without it, no credential at all).
pub async fn run_claude_on_bedrock(
    bin: &Path,
    weir: SocketAddr,
    prompt: &str,
    token: &str,
    model: &str,
) -> Run {
    let bedrock = Some((token, model));
    run_in_mode(
        Agent::ClaudeCode,
        bin,
        weir,
        prompt,
        String::new(),
        None,
        bedrock,
    )
    .await
}

async fn run_in_mode(
    agent: Agent,
    bin: &Path,
    weir: SocketAddr,
    prompt: &str,
    codex_toml: String,
    credential: Option<&str>,
    bedrock: Option<(&str, &str)>,
) -> Run {
    let _slot = SLOTS.acquire().await.expect("semaphore");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    let last = dir.path().join("last-message.txt");
    let mut cmd = tokio::process::Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .current_dir(&work);
    match agent {
        Agent::ClaudeCode if bedrock.is_some() => {
            let (token, model) = bedrock.unwrap_or_default();
            cmd.env("CLAUDE_CONFIG_DIR", home.join(".claude"))
                .env("CLAUDE_CODE_USE_BEDROCK", "1")
                .env("CLAUDE_CODE_SKIP_BEDROCK_AUTH", "1")
                .env("ANTHROPIC_BEDROCK_BASE_URL", format!("http://{weir}"))
                .env("AWS_REGION", "us-east-1")
                .env("AWS_BEARER_TOKEN_BEDROCK", token)
                .env("ANTHROPIC_MODEL", model)
                .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", model)
                .envs(CLAUDE_QUIET.iter().copied())
                .args(["-p", prompt, "--allowedTools", "Bash"])
                .args(["--output-format", "json"]);
        }
        Agent::ClaudeCode => {
            match credential {
                Some(jwt) if jwt.starts_with("eyJ") => cmd.env("ANTHROPIC_AUTH_TOKEN", jwt),
                Some(key) => cmd.env("ANTHROPIC_API_KEY", key),
                None => cmd.env("ANTHROPIC_API_KEY", "sk-ant-weir-client"),
            };
            cmd.env("CLAUDE_CONFIG_DIR", home.join(".claude"))
                .env("ANTHROPIC_BASE_URL", format!("http://{weir}"))
                .envs(CLAUDE_QUIET.iter().copied())
                .args(["-p", prompt, "--allowedTools", "Bash"])
                .args(["--output-format", "json"]);
        }
        Agent::Codex => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home).expect("codex home");
            std::fs::write(codex_home.join("config.toml"), codex_toml).expect("config");
            let key = credential.unwrap_or("sk-weir-client");
            cmd.env("CODEX_HOME", &codex_home)
                .env("WEIR_CLIENT_KEY", key)
                // The built-in provider's key (`codex_builtin_config`).
                .env("OPENAI_API_KEY", key)
                .env("CODEX_API_KEY", key)
                .args(["exec", "--skip-git-repo-check"])
                .args(["--sandbox", "danger-full-access", "--output-last-message"])
                .arg(&last)
                .arg(prompt);
        }
    }
    let out = dir.path().join("stdout");
    let err = dir.path().join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout"))
        .stderr(std::fs::File::create(&err).expect("stderr"))
        // Its own process group, so a hang takes the commands it started
        // down with it.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn the agent CLI");
    let code = match tokio::time::timeout(AGENT_TIMEOUT, child.wait()).await {
        Ok(status) => status.expect("wait").code(),
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .status();
            }
            let _ = child.wait().await;
            panic!(
                "{agent:?} did not finish in {AGENT_TIMEOUT:?}\n--- stdout\n{}\n--- stderr\n{}",
                read(&out),
                read(&err)
            );
        }
    };
    let stdout = match agent {
        Agent::ClaudeCode => read(&out),
        Agent::Codex => read(&last),
    };
    let mut stderr = read(&err);
    if agent == Agent::Codex {
        stderr = format!("{}\n{stderr}", read(&out));
    }
    Run {
        code,
        stdout,
        stderr,
    }
}

/// The real weir binary with one LLM route of `kind` (`anthropic` or
/// `openai`) over `upstreams` in failover order, each `(name, emulator,
/// protocol)`, weir holding each upstream's key; with its LLM listener's
/// address.
pub fn weir(kind: &str, upstreams: &[(&str, &Provider, &str)]) -> (Proc, SocketAddr, TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut entries = Vec::new();
    for (name, up, protocol) in upstreams {
        let key = dir.path().join(format!("key-{name}"));
        std::fs::write(&key, format!("sk-upstream-{name}")).expect("key");
        let keys = format!(
            "protocol = \"{protocol}\"\napi_key_file = \"{}\"\n",
            key.display()
        );
        entries.push((*name, up.base_url(), keys));
    }
    weir_with(kind, &entries, "", dir)
}

/// The real weir binary with one LLM route of `kind` over `entries`
/// (`(name, url, keys)`), `extra` route keys after them, its files in
/// `dir`; with its LLM listener's address.
pub fn weir_with(
    kind: &str,
    entries: &[(&str, String, String)],
    extra: &str,
    dir: TempDir,
) -> (Proc, SocketAddr, TempDir) {
    let config = super::llm::llm_config_with(kind, entries, extra).replacen(
        "[log]\n",
        "[log]\nformat = \"json\"\n",
        1,
    );
    let mut weir = Proc::run(&write_config(&dir, &config));
    let addr = weir.listening("web");
    (weir, addr, dir)
}

/// With `WEIR_AGENTS_DUMP=<dir>`, what each upstream received is written
/// there (`<test>-<n>.json`: path, turn, verdict, body per request), for
/// whoever fixes a translation the emulator refused.
pub fn dump(upstreams: &[&Provider]) {
    let Some(dir) = std::env::var_os("WEIR_AGENTS_DUMP") else {
        return;
    };
    let test = std::thread::current().name().unwrap_or("test").to_string();
    for (n, up) in upstreams.iter().enumerate() {
        let seen: Vec<serde_json::Value> = up
            .journal()
            .into_iter()
            .map(|e| {
                serde_json::json!({
                    "path": e.path,
                    "turn": e.turn,
                    "verdict": format!("{:?}", e.verdict),
                    "body": e.body,
                })
            })
            .collect();
        let path = Path::new(&dir).join(format!("{test}-{}.json", n + 1));
        let text = serde_json::to_string_pretty(&seen).expect("json");
        std::fs::write(&path, text).expect("write the dump");
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Claude Code's switches for telemetry, error reports, auto-update and
/// the rest of its non-essential traffic (quota probe, title generation).
pub const CLAUDE_QUIET: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("DISABLE_BUG_COMMAND", "1"),
];

/// Codex's config.toml: weir as a Responses provider, and everything that
/// would reach a network service off (update check, analytics, feedback,
/// OpenTelemetry; the plugin features, which otherwise `git ls-remote`
/// github.com at startup). `gpt-5.5` is in Codex's built-in model list, so
/// it gets that model's tools rather than "fallback metadata".
/// Codex on its built-in `openai` provider pointed at weir by
/// `openai_base_url` (no custom provider): the setup whose provider speaks
/// the Responses-over-WebSocket transport first.
pub fn codex_builtin_config(weir: SocketAddr) -> String {
    let custom = codex_config(weir);
    let common = custom.split("[analytics]").nth(1).unwrap_or_default();
    format!(
        r#"model = "gpt-5.5"
model_reasoning_effort = "medium"
check_for_update_on_startup = false
openai_base_url = "http://{weir}/v1"

[analytics]{common}"#
    )
}

pub fn codex_config(weir: SocketAddr) -> String {
    format!(
        r#"model = "gpt-5.5"
model_provider = "weir"
model_reasoning_effort = "medium"
check_for_update_on_startup = false

[model_providers.weir]
name = "weir"
base_url = "http://{weir}/v1"
wire_api = "responses"
env_key = "WEIR_CLIENT_KEY"
# A refused request fails the run at once instead of after five backoffs.
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[otel]
exporter = "none"
"#
    )
}
