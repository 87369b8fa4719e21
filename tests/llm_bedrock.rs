//! Amazon Bedrock as an upstream API (docs/decisions/080): weir against
//! the strict Bedrock stand-in (tests/common/provider/bedrock.rs), which
//! recomputes every SigV4 signature itself, refuses a body with `model`
//! or `stream` or without `anthropic_version`, and answers streams in
//! real event-stream frames (both CRCs) with Bedrock's exceptions.

mod common;

use std::sync::atomic::Ordering;

use common::llm::{assert_whole_messages_stream, events, llm_config_with, open_stream, post};
use common::process::Proc;
use common::provider::bedrock::{self as aws, Bedrock};
use common::provider::*;
use common::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};

// The temporary credentials weir fetches itself: STS (web identity) and
// the instance metadata service.
#[path = "llm_bedrock/credentials.rs"]
mod credentials;

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const KEY_ID: &str = "AKIDWEIRTEST";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYWEIRKEY";

fn account() -> Bedrock {
    Bedrock::new("us-west-2", KEY_ID, SECRET, &[MODEL])
}

async fn stand_in(bedrock: Bedrock) -> Provider {
    Provider::spawn(
        ProviderApi::Anthropic,
        Options::default()
            .bedrock(bedrock)
            .script(Script::RoundTrip {
                command: "echo weir-bedrock".into(),
            }),
    )
    .await
}

/// The credentials file of the account (profile `team`), and the
/// upstream keys that use it.
fn credentials(dir: &tempfile::TempDir, secret: &str) -> String {
    std::fs::write(
        dir.path().join("aws-credentials"),
        format!("[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n[team]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {secret}\n"),
    )
    .expect("credentials");
    "protocol = \"bedrock\"\nregion = \"us-west-2\"\naws_credentials_file = \"{dir}/aws-credentials\"\naws_profile = \"team\"\n".into()
}

/// weir with one route of `kind` serving `claude` from `ups` in order
/// (`(name, url, keys)`), Bedrock upstreams asked for [`MODEL`].
async fn weir_over(dir: tempfile::TempDir, kind: &str, ups: &[(&str, String, String)]) -> Weir {
    let order: Vec<String> = ups
        .iter()
        .map(|(n, _, k)| {
            if k.contains("bedrock") {
                format!("\"{n}:{MODEL}\"")
            } else {
                format!("\"{n}\"")
            }
        })
        .collect();
    let models = format!(
        "[[route.models]]\nname = \"claude\"\nupstreams = [{}]\n",
        order.join(", ")
    );
    Weir::start_in(dir, &llm_config_with(kind, ups, &models)).await
}

async fn signed_weir(p: &Provider, secret: &str) -> Weir {
    let dir = tempfile::tempdir().expect("dir");
    let keys = credentials(&dir, secret);
    weir_over(dir, "anthropic", &[("br", p.base_url(), keys)]).await
}

/// weir over `br` first, then an Anthropic upstream (returned) with
/// weir's key.
async fn then_anthropic(br: &Provider) -> (Provider, Weir) {
    let ant = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("ant"), "sk-ant-weir\n").expect("key");
    let keys = credentials(&dir, SECRET);
    let ant_keys = "api_key_file = \"{dir}/ant\"\n".to_string();
    let ups = [
        ("br", br.base_url(), keys),
        ("ant", ant.base_url(), ant_keys),
    ];
    (ant, weir_over(dir, "anthropic", &ups).await)
}

fn claude_request(stream: bool) -> Value {
    json!({
        "model": "claude",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": "Run `echo weir-bedrock` and tell me what it printed."}],
        "tools": [{"name": "Bash", "description": "Runs a command.",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}}],
    })
}

const CLAUDE_HEADERS: &[(&str, &str)] = &[
    ("x-api-key", "sk-ant-client"),
    ("anthropic-version", "2023-06-01"),
    ("anthropic-beta", "interleaved-thinking-2025-05-14"),
];

fn names(body: &str) -> Vec<String> {
    events(body).into_iter().map(|(n, _)| n).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_stream_and_a_whole_answer_are_served_signed() {
    let br = stand_in(account()).await;
    let weir = signed_weir(&br, SECRET).await;
    let (status, headers, body) =
        post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        headers["content-type"]
            .to_str()
            .expect("ct")
            .starts_with("text/event-stream"),
        "{headers:?}"
    );
    assert_whole_messages_stream(&body);

    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let whole: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(whole["type"], "message", "{whole}");

    br.assert_all_accepted();
    let journal = br.journal();
    assert_eq!(journal.len(), 2);
    let encoded = "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0";
    assert_eq!(
        journal[0].path,
        format!("/model/{encoded}/invoke-with-response-stream")
    );
    assert_eq!(journal[1].path, format!("/model/{encoded}/invoke"));
    for e in &journal {
        assert!(e.headers.get("x-api-key").is_none(), "{e:?}");
        assert!(e.headers.get("anthropic-version").is_none(), "{e:?}");
        let auth = e.headers["authorization"].to_str().expect("auth");
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDWEIRTEST/"),
            "{auth}"
        );
        // The stand-in put the path's model and stream back for its checks.
        assert_eq!(e.body["model"], MODEL);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_moves_model_and_stream_to_the_path_and_carries_the_betas() {
    let br = stand_in(account()).await;
    let weir = signed_weir(&br, SECRET).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    br.assert_all_accepted();
    // The stand-in refuses `model`, `stream`, a missing
    // `anthropic_version` (tests below); what it took is the body weir sent
    // with the path's model and stream put back, and the betas taken out.
    let e = &br.journal()[0];
    assert_eq!(e.body["stream"], true);
    assert!(e.body.get("anthropic_version").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_by_the_signature_check_and_answered_502() {
    let br = stand_in(account()).await;
    let weir = signed_weir(&br, "not-the-secret").await;
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(
        status, 502,
        "weir's credential refused is not the client's fault: {body}"
    );
    assert!(
        !body.contains("signature we calculated"),
        "Bedrock's detail stays in the log: {body}"
    );
    let refused = br.rejections();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        matches!(&refused[0].verdict, Verdict::Rejected { status: 403, message } if message.contains("signature"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_refuses_unsigned_stale_and_malformed_requests() {
    let br = stand_in(account()).await;
    let url = format!(
        "{}/model/{}/invoke",
        br.base_url(),
        "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0"
    );
    let body = json!({"anthropic_version": aws::ANTHROPIC_VERSION, "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}]});
    // No signature at all.
    let (status, headers, text) = post_json(&url, body.to_string(), &[]).await;
    assert_eq!(status, 403, "{text}");
    assert!(
        headers["x-amzn-errortype"]
            .to_str()
            .expect("t")
            .starts_with("MissingAuthenticationTokenException")
    );
    // A signature from 10 minutes ago, otherwise right.
    let stale = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    let (status, _, text) = signed_post(&url, &body, stale).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("Signature expired"), "{text}");
    // Signed now: taken.
    let (status, _, text) = signed_post(&url, &body, std::time::SystemTime::now()).await;
    assert_eq!(status, 200, "{text}");
    // `model`, `stream`, no `anthropic_version`: Bedrock's 400s.
    for (field, value) in [("model", json!(MODEL)), ("stream", json!(false))] {
        let mut bad = body.clone();
        bad[field] = value;
        let (status, headers, text) = signed_post(&url, &bad, std::time::SystemTime::now()).await;
        assert_eq!(status, 400, "{text}");
        assert!(
            text.contains(&format!("extraneous key [{field}]")),
            "{text}"
        );
        assert!(
            headers["x-amzn-errortype"]
                .to_str()
                .expect("t")
                .starts_with("ValidationException")
        );
    }
    let mut bad = body.clone();
    bad.as_object_mut().expect("o").remove("anthropic_version");
    let (status, _, text) = signed_post(&url, &bad, std::time::SystemTime::now()).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("anthropic_version"), "{text}");
}

/// A request signed by the test's own signing (the stand-in's reference
/// computation run the other way) at `when`.
async fn signed_post(
    url: &str,
    body: &Value,
    when: std::time::SystemTime,
) -> (http::StatusCode, http::HeaderMap, String) {
    let uri: http::Uri = url.parse().expect("uri");
    let date = amz_date(when);
    let host = uri.authority().expect("authority").to_string();
    let raw = body.to_string();
    let scope_date = &date[..8];
    let draft = format!(
        "AWS4-HMAC-SHA256 Credential={KEY_ID}/{scope_date}/us-west-2/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=x"
    );
    let req = http::Request::post(uri.clone())
        .header("host", &host)
        .header("content-type", "application/json")
        .header("x-amz-date", &date)
        .header("authorization", &draft)
        .body(())
        .expect("req");
    let (parts, ()) = req.into_parts();
    let signer = aws::Signer {
        access_key_id: KEY_ID,
        secret: SECRET,
        region: "us-west-2",
        service: "bedrock",
    };
    // The reference refuses a stale date before signing: sign as of then.
    let auth = aws::sigv4_signature(&parts, raw.as_bytes(), &signer, when).expect("signable");
    post_json(
        url,
        raw,
        &[
            ("x-amz-date", &date),
            ("authorization", &auth),
            ("host", &host),
        ],
    )
    .await
}

fn amz_date(t: std::time::SystemTime) -> String {
    let (y, m, d, h, mi, s) = common::provider::sts::civil(t);
    format!("{y:04}{m:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_chat_client_is_translated_to_bedrock() {
    let br = stand_in(account()).await;
    let dir = tempfile::tempdir().expect("dir");
    let keys = credentials(&dir, SECRET);
    let weir = weir_over(dir, "openai", &[("br", br.base_url(), keys)]).await;
    let chat = json!({"model": "claude", "stream": true,
        "messages": [{"role": "user", "content": "Run `echo weir-bedrock` and tell me what it printed."}]});
    let (status, _, body) = post(
        &weir,
        "/v1/chat/completions",
        chat,
        &[("authorization", "Bearer sk-client")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("chat.completion.chunk"), "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    br.assert_all_accepted();
    assert!(
        br.journal()[0]
            .path
            .ends_with("/invoke-with-response-stream")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_fails_over_to_an_anthropic_upstream_within_one_request() {
    let br = stand_in(account()).await;
    br.fail_next(
        1,
        aws::failure(
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
    );
    let (ant, weir) = then_anthropic(&br).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        names(&body).last().map(String::as_str),
        Some("message_stop")
    );
    assert_eq!(br.journal().len(), 1);
    assert_eq!(
        ant.journal().len(),
        1,
        "served by the next upstream in the same request"
    );
    ant.assert_all_accepted();
    // The throttled member is held for the hint: the next request goes
    // straight to the Anthropic upstream.
    let (status, _, _) = post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200);
    assert_eq!(br.journal().len(), 1, "held for its retry hint");
}

/// A whole request to weir over one Bedrock upstream that answers
/// `failure`.
async fn answered_with(failure: Failure) -> (http::StatusCode, http::HeaderMap, String) {
    let br = stand_in(account()).await;
    br.fail_next(1, failure);
    let weir = signed_weir(&br, SECRET).await;
    post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_alone_is_a_429_with_a_retry_hint_in_the_clients_shape() {
    let throttled = aws::failure(
        429,
        "ThrottlingException",
        "Too many requests, please wait before trying again.",
    );
    let (status, headers, body) = answered_with(throttled).await;
    assert_eq!(status, 429, "{body}");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("m")
            .contains("Too many requests")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_exception_is_relayed_as_the_clients_400() {
    let invalid = aws::failure(
        400,
        "ValidationException",
        "messages: text content blocks must be non-empty",
    );
    let (status, _, body) = answered_with(invalid).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(body.contains("must be non-empty"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_frame_before_content_fails_over() {
    let mut acct = account();
    acct.exception_after = Some((0, "serviceUnavailableException".into()));
    let br = stand_in(acct).await;
    let (ant, weir) = then_anthropic(&br).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("scripted exception"), "{body}");
    br.assert_all_accepted();
    assert_eq!(br.journal().len(), 1, "Bedrock took it, then threw");
    assert_eq!(ant.journal().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_frame_ends_the_stream_with_an_in_band_error() {
    let mut acct = account();
    acct.corrupt_frame = Some(3);
    let br = stand_in(acct).await;
    let weir = signed_weir(&br, SECRET).await;
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS),
    )
    .await
    .expect("no hang");
    let (status, _, body) = answer;
    assert_eq!(status, 200, "content came before the broken frame: {body}");
    let types = names(&body);
    assert_eq!(types.last().map(String::as_str), Some("error"), "{types:?}");
    assert!(!types.iter().any(|t| t == "message_stop"), "{types:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_stream_closes_the_bedrock_stream() {
    let mut acct = account();
    acct.stall_after = Some(4);
    let cancelled = acct.cancelled.clone();
    let br = stand_in(acct).await;
    let weir = signed_weir(&br, SECRET).await;
    let resp = open_stream(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    body.frame().await.expect("a first piece").expect("ok");
    drop(body);
    assert!(
        common::eventually(std::time::Duration::from_secs(10), || {
            cancelled.load(Ordering::SeqCst) != 0
        })
        .await,
        "the upstream stream was never closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_api_key_is_sent_as_a_bearer() {
    let mut acct = account();
    acct.api_key = Some("ABSK-weir-test".into());
    let br = stand_in(acct).await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("bk"), "ABSK-weir-test\n").expect("key");
    let keys =
        "protocol = \"bedrock\"\nregion = \"us-west-2\"\napi_key_file = \"{dir}/bk\"\n".to_string();
    let weir = weir_over(dir, "anthropic", &[("br", br.base_url(), keys)]).await;
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    br.assert_all_accepted();
    assert_eq!(
        br.journal()[0].headers["authorization"],
        "Bearer ABSK-weir-test"
    );
}

#[test]
fn bedrock_config_problems_are_named_with_their_fix() {
    let dir = tempfile::tempdir().expect("dir");
    let text = "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nkind = \"anthropic\"\n\
        [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\nprotocol = \"bedrock\"\napi_key_file = \"k\"\n\
        [[route.upstreams]]\nname = \"b\"\nprotocol = \"bedrock\"\nregion = \"US East\"\napi_key_file = \"k\"\n\
        [[route.upstreams]]\nname = \"c\"\nurl = \"http://127.0.0.1:1\"\nregion = \"us-east-1\"\n\
        [[route.upstreams]]\nname = \"d\"\nprotocol = \"bedrock\"\nregion = \"us-east-1\"\naws_credentials_file = \"missing\"\n\
        [[route.upstreams]]\nname = \"e\"\nprotocol = \"bedrock\"\nregion = \"us-east-1\"\naws_credentials_file = \"creds\"\naws_profile = \"prod\"\n\
        [[route.upstreams]]\nname = \"f\"\nprotocol = \"bedrock\"\nregion = \"us-east-1\"\naws_credentials = \"imds\"\n\
        [[route.upstreams]]\nname = \"g\"\nprotocol = \"bedrock\"\nregion = \"us-east-1\"\naws_credentials = \"metadata\"\naws_profile = \"dev\"\n";
    std::fs::write(dir.path().join("k"), "key\n").expect("k");
    std::fs::write(
        dir.path().join("creds"),
        "[dev]\naws_access_key_id = A\naws_secret_access_key = B\n",
    )
    .expect("creds");
    let path = dir.path().join("w.toml");
    let problems = match weir::testing::config::Config::parse(&path, text) {
        Ok(_) => panic!("refused"),
        Err(p) => p.to_string(),
    };
    for needle in [
        "route[0].upstreams[0].region: missing",
        "add `region = \"us-east-1\"`",
        "route[0].upstreams[1].region: `US East` is not an AWS region",
        "route[0].upstreams[2].region: `region` is read only on an Amazon Bedrock or Vertex AI upstream",
        "route[0].upstreams[3].aws_credentials_file: the AWS credentials file",
        "route[0].upstreams[4].aws_profile: profile `prod` of the AWS credentials file: no such profile",
        "route[0].upstreams[5].aws_credentials: `imds` names no AWS credentials source",
        "route[0].upstreams[6].aws_profile: `aws_credentials` and a credentials file's profile are two sources",
    ] {
        assert!(
            problems.contains(needle),
            "missing {needle:?} in:\n{problems}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_frame_after_content_is_the_clients_in_band_error() {
    let mut acct = account();
    acct.exception_after = Some((3, "modelStreamErrorException".into()));
    let br = stand_in(acct).await;
    let weir = signed_weir(&br, SECRET).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let (name, last) = events(&body).pop().expect("events");
    assert_eq!(name, "error", "{body}");
    assert_eq!(last["error"]["type"], "api_error", "{last}");
    assert_eq!(last["error"]["message"], "scripted exception", "{last}");
}

/// The headers botocore's SigV4 signer adds to a POST of `body` to `url`.
fn botocore_signed(url: &str, body: &str, secret: &str) -> Vec<(String, String)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/sigv4.py");
    let out = std::process::Command::new(common::sdk::botocore_python())
        .args([script, url, body, KEY_ID, secret, "us-west-2"])
        .output()
        .expect("run the reference signer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let headers: serde_json::Map<String, Value> =
        serde_json::from_slice(&out.stdout).expect("headers");
    headers
        .into_iter()
        .map(|(k, v)| (k, v.as_str().expect("string").to_string()))
        .collect()
}

/// The stand-in's own SigV4 check is held to botocore's: a request
/// botocore signed is taken, one it signed with another secret refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_ins_signature_check_agrees_with_botocore() {
    let br = stand_in(account()).await;
    let encoded = "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0";
    let url = format!("{}/model/{encoded}/invoke", br.base_url());
    let body = json!({"anthropic_version": aws::ANTHROPIC_VERSION, "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    for (secret, want) in [(SECRET, 200), ("another-secret", 403)] {
        let signed = botocore_signed(&url, &body, secret);
        // `post_json` sends the one `content-type` botocore signed.
        let headers: Vec<(&str, &str)> = signed
            .iter()
            .filter(|(k, _)| k != "content-type")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let (status, _, text) = post_json(&url, body.clone(), &headers).await;
        assert_eq!(status, want, "{text}");
    }
}
