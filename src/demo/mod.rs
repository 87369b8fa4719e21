//! `weir demo`: a complete, file-free setup for a first look — plain HTTP,
//! TLS with HTTP/2 (a self-signed `localhost` certificate made at start), the
//! admin listener, and a built-in upstream. Every limit is weir's default,
//! so what the demo shows is what a real config gets.

pub mod llm;
pub mod upstream;

use std::net::SocketAddr;
use std::path::Path;

use crate::config::{Certificate, Config, Problems, TlsSettings};
use crate::pki::{self, PkiError};

/// Why the demo could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    #[error("demo config: {0}")]
    Config(#[from] Problems),
    #[error("demo certificate: {0}")]
    Certificate(#[from] PkiError),
}

/// Ports the demo listens on (all on 127.0.0.1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DemoPorts {
    pub(crate) http: u16,
    pub(crate) https: u16,
    pub(crate) admin: u16,
}

/// The demo's built-in upstreams: the web one, and two mock LLM
/// providers — one that serves, one that is always overloaded.
pub(crate) struct DemoUpstreams {
    pub(crate) web: SocketAddr,
    pub(crate) llm: llm::MockLlm,
    pub(crate) overloaded: llm::MockLlm,
}

/// Start the demo's upstreams on loopback ports of their own.
pub(crate) async fn upstreams() -> std::io::Result<DemoUpstreams> {
    let local: SocketAddr = ([127, 0, 0, 1], 0).into();
    let words = ["Hello", " from", " weir's", " demo", " model", "."];
    Ok(DemoUpstreams {
        web: upstream::spawn(local).await?,
        llm: llm::spawn(local, move |seen| {
            llm::success(seen, &words, std::time::Duration::from_millis(40))
        })
        .await?,
        overloaded: llm::spawn(local, |seen| {
            if llm::Api::of(seen) == Some(llm::Api::Messages) {
                llm::error(seen, 529, "overloaded_error", "Overloaded")
            } else {
                llm::error(seen, 503, "server_error", "The server is overloaded")
            }
        })
        .await?,
    })
}

/// The demo's config: everything to the web upstream, plus an Anthropic
/// route at `/v1/messages` and an OpenAI route at `/v1` backed by the mock
/// providers. Model `demo` is served directly; `demo-failover` goes to the
/// overloaded provider first, so failover can be watched; `demo-gpt` (on
/// the Anthropic route) is served by the mock's Responses API and
/// `demo-claude` (on the OpenAI route) by its Anthropic API, through
/// translation.
pub(crate) fn config(ports: DemoPorts, up: &DemoUpstreams) -> Result<Config, DemoError> {
    let llm_route = |name: &str, kind: &str, path: &str, other: (&str, &str)| {
        let (model, protocol) = other;
        format!(
            "[[route]]\nname = \"{name}\"\nkind = \"{kind}\"\npath = \"{path}\"\n\
             [[route.upstreams]]\nname = \"mock\"\nurl = \"{ok}\"\n\
             [[route.upstreams]]\nname = \"overloaded\"\nurl = \"{bad}\"\n\
             [[route.upstreams]]\nname = \"translated\"\nurl = \"{ok}\"\nprotocol = \"{protocol}\"\n\
             [[route.models]]\nname = \"demo\"\nupstreams = [\"mock\"]\n\
             [[route.models]]\nname = \"demo-failover\"\nupstreams = [\"overloaded\", \"mock:demo\"]\n\
             [[route.models]]\nname = \"{model}\"\nupstreams = [\"translated\"]\n",
            ok = up.llm.url(),
            bad = up.overloaded.url(),
        )
    };
    let text = format!(
        "[admin]\naddress = \"127.0.0.1:{admin}\"\n\
         [[listener]]\nname = \"http\"\naddress = \"127.0.0.1:{http}\"\n\
         [[listener]]\nname = \"https\"\naddress = \"127.0.0.1:{https}\"\n\
         [[route]]\nname = \"demo\"\nupstream = \"http://{web}\"\n\
         {anthropic}{openai}",
        admin = ports.admin,
        http = ports.http,
        https = ports.https,
        web = up.web,
        anthropic = llm_route(
            "anthropic",
            "anthropic",
            "/v1/messages",
            ("demo-gpt", "openai_responses")
        ),
        openai = llm_route("openai", "openai", "/v1", ("demo-claude", "anthropic")),
    );
    let mut config = Config::parse(Path::new("<demo>"), &text)?;
    let (key, names, _) = pki::self_signed(&["localhost", "127.0.0.1"])?;
    let tls = TlsSettings {
        certificates: vec![Certificate {
            cert_path: "<generated>".into(),
            key_path: "<generated>".into(),
            names,
            key,
        }],
        acme: None,
    };
    for l in config.listeners.iter_mut().filter(|l| l.name == "https") {
        l.tls = Some(tls.clone());
    }
    Ok(config)
}

/// The curl commands printed when the demo starts, for the ports it got.
pub(crate) fn try_these(running: &crate::server::Running) -> String {
    let port = |name: &str| running.listener_addr(name).map_or(0, |a| a.port());
    let (http, https) = (port("http"), port("https"));
    let admin = running.admin_addr().map_or(0, |a| a.port());
    format!(
        "weir demo is running. Try:\n\
         \x20 curl -s http://127.0.0.1:{http}/echo?hello=world\n\
         \x20 curl -sk --http2 https://localhost:{https}/echo -d 'some body'\n\
         \x20 curl -s http://127.0.0.1:{http}/bytes/104857600 -o /dev/null -w '%{{size_download}} bytes\\n'\n\
         \x20 curl -sN 'http://127.0.0.1:{http}/sse?n=5&interval_ms=300'\n\
         \x20 curl -s 'http://127.0.0.1:{http}/slow?ms=1500'\n\
         \x20 curl -s -i -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' http://127.0.0.1:{http}/ws --max-time 1\n\
         \x20 curl -s http://127.0.0.1:{admin}/health\n\
         \x20 curl -s http://127.0.0.1:{admin}/metrics\n\
         \n\
         The LLM gateway (mock providers; model `demo`, `demo-failover` to watch failover,\n\
         `demo-gpt` on /v1/messages and `demo-claude` on /v1/responses to watch translation):\n\
         \x20 curl -sN http://127.0.0.1:{http}/v1/messages -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \\\n\
         \x20   -d '{{\"model\":\"demo-failover\",\"max_tokens\":64,\"stream\":true,\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}'\n\
         \x20 curl -s http://127.0.0.1:{http}/v1/responses -H 'content-type: application/json' -d '{{\"model\":\"demo\",\"input\":\"hi\"}}'\n\
         \x20 curl -sN http://127.0.0.1:{http}/v1/responses -H 'content-type: application/json' -d '{{\"model\":\"demo-claude\",\"input\":\"hi\",\"stream\":true}}'\n\
         \x20 curl -s http://127.0.0.1:{admin}/metrics | grep llm_failovers\n\
         Claude Code:  ANTHROPIC_BASE_URL=http://127.0.0.1:{http} ANTHROPIC_AUTH_TOKEN=demo ANTHROPIC_MODEL=demo claude\n\
         Codex (~/.codex/config.toml):\n\
         \x20 [model_providers.weir]\n\
         \x20 name = \"weir\"\n\
         \x20 base_url = \"http://127.0.0.1:{http}/v1\"\n\
         \x20 wire_api = \"responses\"\n\
         \x20 then: codex -c model_provider=weir -m demo\n\
         Press Ctrl-C to stop.\n"
    )
}
