//! Client authentication on LLM routes, against the real binary and a
//! strict provider stand-in: failed client-token authentications limited
//! per address (429 + Retry-After, the admin API's mechanism), every
//! header carrying the gateway token kept from the provider, and a
//! provider refusing weir's own key answered as a 502 in the client's
//! shape, the provider's detail only in weir's log.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::llm::{error, llm_config, messages_body, mock, success};
use common::process::{Proc, write_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WORDS: &[&str] = &["hello", "world"];

/// The weir binary with `config` (JSON logs; `{dir}` its directory, which
/// holds the client token file `tokens` with `tok-alice`), once it listens.
struct Binary {
    proc: Proc,
    web: SocketAddr,
    _dir: tempfile::TempDir,
}

fn binary(config: &str) -> Binary {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tokens"), "tok-alice\n").expect("tokens");
    let text = config
        .replace("[log]\n", "[log]\nformat = \"json\"\n")
        .replace("{dir}", &dir.path().display().to_string());
    let mut proc = Proc::run(&write_config(&dir, &text));
    let web = proc.listening("web");
    Binary {
        proc,
        web,
        _dir: dir,
    }
}

const TOKENS: &str = "client_tokens_file = \"{dir}/tokens\"\n";

/// A POST of `body` to `path` on the binary's `web` listener.
async fn post(
    b: &Binary,
    path: &str,
    body: String,
    headers: &[(&str, &str)],
) -> (http::StatusCode, http::HeaderMap, String) {
    common::post_json(&format!("http://{}{path}", b.web), body, headers).await
}

/// A Messages request from `from` with `x-api-key: token`, on a fresh
/// connection: the status line and headers, and the body.
async fn from_address(from: IpAddr, to: SocketAddr, token: &str) -> String {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from, 0)).expect("bind");
    let mut s = socket.connect(to).await.expect("connect");
    let body = messages_body("m", false);
    let req = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: a\r\nconnection: close\r\nx-api-key: {token}\r\n\
         anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {answer}"))
}

/// Wrong tokens from one address: ten are 401s, and the eleventh (past
/// the allowance, also a 401) locks the address out: its next guess, and
/// even the right token from it, is a 429 with Retry-After, before the
/// token is looked at; another address is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_client_token_authentication_is_limited_per_address() {
    let up = mock(|seen| success(seen, WORDS, Duration::ZERO)).await;
    let weir = binary(&llm_config("anthropic", &[("up", up.url())], TOKENS));
    let web = weir.web;
    let guesser: IpAddr = [127, 0, 0, 2].into();
    for i in 0..11 {
        let answer = from_address(guesser, web, &format!("tok-guess-{i}")).await;
        assert_eq!(status(&answer), 401, "guess {i}: {answer}");
    }
    let answer = from_address(guesser, web, "tok-guess-11").await;
    assert_eq!(status(&answer), 429, "{answer}");
    let lower = answer.to_ascii_lowercase();
    let retry_after: u64 = lower
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After: {answer}"));
    assert!((1..=10).contains(&retry_after), "{retry_after}");
    assert!(
        lower.contains("rate_limit_error"),
        "the client's shape: {answer}"
    );
    let answer = from_address(guesser, web, "tok-alice").await;
    assert_eq!(
        status(&answer),
        429,
        "the right token is not even looked at: {answer}"
    );

    let other: IpAddr = [127, 0, 0, 3].into();
    let answer = from_address(other, web, "tok-alice").await;
    assert_eq!(status(&answer), 200, "another address is served: {answer}");
    assert_eq!(up.seen().len(), 1, "no guess reached the provider");
}

/// A gateway token sent in both `x-api-key` and `Authorization` reaches
/// the passthrough provider in neither.
#[tokio::test]
async fn a_gateway_token_in_both_headers_reaches_the_provider_in_neither() {
    let up = mock(|seen| success(seen, WORDS, Duration::ZERO)).await;
    let weir = binary(&llm_config("anthropic", &[("up", up.url())], TOKENS));
    let (s, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("m", false),
        &[
            ("x-api-key", "tok-alice"),
            ("authorization", "Bearer tok-alice"),
        ],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    for name in ["x-api-key", "authorization"] {
        assert!(
            seen[0].headers.get(name).is_none(),
            "{name} carried the gateway token to the provider: {:?}",
            seen[0].headers.get(name)
        );
    }
}

/// A provider that refuses weir's own key (401, then 403) with a body and
/// headers naming the key and the organisation: the client gets a 502 in
/// its API's error shape with none of it; weir's log has the detail.
#[tokio::test]
async fn an_upstream_refusing_weirs_key_is_a_502_with_the_detail_only_in_the_log() {
    let up = mock(|seen| {
        // Strict: only the key weir was given, in the header Anthropic reads.
        let key = seen.headers.get("x-api-key").and_then(|v| v.to_str().ok());
        let status = if seen.json()["model"] == "forbidden" {
            403
        } else {
            401
        };
        match key {
            Some("sk-ant-revoked-7f3a") => error(
                seen,
                status,
                "authentication_error",
                "invalid x-api-key sk-ant-revoked-7f3a for organization org-4242",
            )
            .with_header("anthropic-organization-id", "org-4242"),
            _ => error(
                seen,
                400,
                "invalid_request_error",
                "not the key weir was given",
            ),
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-ant-revoked-7f3a\n").expect("write");
    let mut weir = binary(&format!(
        "{}api_key_file = \"{}\"\n",
        llm_config("anthropic", &[("up", up.url())], ""),
        key.display()
    ));
    for model in ["m", "forbidden"] {
        let (s, h, body) = post(
            &weir,
            "/v1/messages",
            messages_body(model, false),
            &[("x-api-key", "sk-client-own")],
        )
        .await;
        assert_eq!(s, 502, "{model}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["type"], "error", "the Anthropic shape: {body}");
        assert!(v["error"]["type"].is_string(), "{body}");
        for secret in ["revoked", "org-4242", "sk-ant"] {
            assert!(
                !body.contains(secret),
                "{secret} leaked in the body: {body}"
            );
        }
        assert!(
            h.get("anthropic-organization-id").is_none(),
            "the provider's headers are not forwarded"
        );
    }
    assert_eq!(up.seen().len(), 2);
    let line = weir
        .proc
        .wait_for(|l| l.contains("the upstream refused weir's key"));
    assert!(
        line.contains("org-4242"),
        "the detail is in the log: {line}"
    );
}

/// With a second upstream, a refused key is passed over: the client is
/// served by the other, and sees nothing of the refusal.
#[tokio::test]
async fn an_upstream_refusing_weirs_key_is_passed_over_for_the_next() {
    let revoked = mock(|seen| {
        error(
            seen,
            401,
            "authentication_error",
            "invalid x-api-key sk-ant-revoked-7f3a",
        )
    })
    .await;
    let good = mock(|seen| success(seen, WORDS, Duration::ZERO)).await;
    let dir = tempfile::tempdir().expect("dir");
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-ant-revoked-7f3a\n").expect("write");
    let weir = binary(&common::llm::llm_config_with(
        "anthropic",
        &[
            (
                "revoked",
                revoked.url(),
                format!("api_key_file = \"{}\"\n", key.display()),
            ),
            ("good", good.url(), String::new()),
        ],
        "",
    ));
    let (s, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("m", false),
        &[("x-api-key", "sk-client-own")],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert!(!body.contains("revoked"), "{body}");
    assert_eq!((revoked.seen().len(), good.seen().len()), (1, 1));
}
