//! Bedrock's InvokeModel as a client API (docs/decisions/089): a
//! `kind = "bedrock"` route takes what Claude Code sends in Bedrock mode
//! (`POST /model/{id}/invoke` and `/invoke-with-response-stream`, the
//! Anthropic body with `anthropic_version`, weir's client token as a
//! bearer) and answers as Bedrock does: streams in event-stream frames
//! (checked here by weir's decoder and by botocore's parser, CRCs
//! included), errors as Bedrock's exceptions — over an Anthropic upstream
//! and over the strict Bedrock stand-in.

mod common;

use base64::Engine as _;
use common::llm::{client_tokens, llm_config_with, open_stream, post};
use common::provider::bedrock::Bedrock;
use common::provider::*;
use common::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use weir_wire::bedrock::eventstream::{Decoder, Frame};

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const ENCODED: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0";
const TOKEN: &str = "tok-bedrock-client";
const AUTH: &[(&str, &str)] = &[
    ("authorization", "Bearer tok-bedrock-client"),
    ("anthropic-version", "2023-06-01"),
];

/// A `kind = "bedrock"` route with one client token, serving [`MODEL`]
/// from `up` (weir holds its key) as the model `as_model`.
async fn weir_over(up: &Provider, keys: &str, as_model: &str) -> Weir {
    let (dir, tokens) = client_tokens(&format!("{TOKEN}\n"));
    std::fs::write(dir.path().join("up-key"), "sk-ant-weir\n").expect("key");
    let extra =
        format!("{tokens}[[route.models]]\nname = \"{MODEL}\"\nupstreams = [\"up:{as_model}\"]\n");
    let config = llm_config_with("bedrock", &[("up", up.base_url(), keys.into())], &extra);
    Weir::start_in(dir, &config).await
}

async fn over_anthropic() -> (Provider, Weir) {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let keys = "api_key_file = \"{dir}/up-key\"\n";
    let weir = weir_over(&up, keys, "claude-sonnet-4-5").await;
    (up, weir)
}

/// A `kind = "bedrock"` route serving [`MODEL`] from the Bedrock
/// stand-in of `account` (access key `AKIDWEIR`), signed from a
/// credentials file.
async fn over_bedrock(account: Bedrock) -> (Provider, Weir) {
    let br = Provider::spawn(ProviderApi::Anthropic, Options::default().bedrock(account)).await;
    let (dir, tokens) = client_tokens(&format!("{TOKEN}\n"));
    std::fs::write(
        dir.path().join("creds"),
        "[default]\naws_access_key_id = AKIDWEIR\naws_secret_access_key = s3cret\n",
    )
    .expect("credentials");
    let keys =
        "protocol = \"bedrock\"\nregion = \"us-west-2\"\naws_credentials_file = \"{dir}/creds\"\n";
    let extra =
        format!("{tokens}[[route.models]]\nname = \"{MODEL}\"\nupstreams = [\"br:{MODEL}\"]\n");
    let config = llm_config_with("bedrock", &[("br", br.base_url(), keys.into())], &extra);
    let weir = Weir::start_in(dir, &config).await;
    (br, weir)
}

/// The body Claude Code sends in Bedrock mode.
fn invoke_body() -> Value {
    json!({
        "anthropic_version": "bedrock-2023-05-31",
        "anthropic_beta": ["interleaved-thinking-2025-05-14"],
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": "Say hi."}],
    })
}

fn path(call: &str) -> String {
    format!("/model/{ENCODED}/{call}")
}

/// The frames of a stream, both CRCs checked by weir's decoder; a broken
/// or unfinished frame fails the test.
fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut d = Decoder::default();
    d.push(bytes);
    let mut out = Vec::new();
    while let Some(f) = d.next_frame().expect("a well-formed frame") {
        out.push(f);
    }
    assert_eq!(d.pending(), 0, "the stream ended inside a frame");
    out
}

/// The Messages event a chunk frame carries.
fn chunk_event(f: &Frame) -> Value {
    assert_eq!(f.header(":message-type"), Some("event"), "{f:?}");
    assert_eq!(f.header(":event-type"), Some("chunk"), "{f:?}");
    let payload: Value = serde_json::from_slice(&f.payload).expect("chunk JSON");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload["bytes"].as_str().expect("bytes"))
        .expect("base64");
    serde_json::from_slice(&bytes).expect("a Messages event")
}

async fn stream_bytes(weir: &Weir) -> (http::StatusCode, http::HeaderMap, Vec<u8>) {
    let resp = open_stream(
        weir,
        &path("invoke-with-response-stream"),
        invoke_body(),
        AUTH,
    )
    .await;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes().to_vec();
    (parts.status, parts.headers, bytes)
}

/// Every chunk's event type, in order, for a whole Messages stream.
fn assert_whole(frames: &[Frame]) -> Vec<String> {
    let types: Vec<String> = frames
        .iter()
        .map(|f| chunk_event(f)["type"].as_str().expect("type").to_string())
        .filter(|t| t != "ping")
        .collect();
    assert_eq!(
        types.first().map(String::as_str),
        Some("message_start"),
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("message_stop"),
        "{types:?}"
    );
    assert!(
        types.iter().any(|t| t == "content_block_delta"),
        "{types:?}"
    );
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_to_an_anthropic_upstream_comes_back_in_event_stream_frames() {
    let (up, weir) = over_anthropic().await;
    let (status, headers, bytes) = stream_bytes(&weir).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(
        headers["content-type"],
        "application/vnd.amazon.eventstream"
    );
    assert_whole(&frames(&bytes));
    up.assert_all_accepted();
    let sent = &up.journal()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.body["model"], "claude-sonnet-4-5");
    assert_eq!(sent.body["stream"], true);
    assert!(
        sent.body.get("anthropic_version").is_none(),
        "{}",
        sent.body
    );
    assert!(sent.body.get("anthropic_beta").is_none(), "{}", sent.body);
    let beta = sent.headers["anthropic-beta"].to_str().expect("ascii");
    assert!(beta.contains("interleaved-thinking-2025-05-14"), "{beta}");
    assert!(
        !format!("{:?}", sent.headers).contains(TOKEN),
        "weir's client token never leaves it"
    );
}

/// botocore's parser — what the AWS SDK for Python reads Bedrock with —
/// takes weir's frames: both CRCs, the headers, one Messages event each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn botocore_reads_the_frames_weir_writes() {
    let (_up, weir) = over_anthropic().await;
    let (status, _, bytes) = stream_bytes(&weir).await;
    assert_eq!(status, 200);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/eventstream.py");
    let mut child = std::process::Command::new(common::sdk::botocore_python())
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&bytes)
        .expect("write");
    let out = child.wait_with_output().expect("botocore");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let messages: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("line"))
        .collect();
    let ours = frames(&bytes);
    assert_eq!(messages.len(), ours.len());
    for (m, f) in messages.iter().zip(&ours) {
        assert_eq!(m["headers"][":event-type"], "chunk");
        let payload = base64::engine::general_purpose::STANDARD
            .decode(m["payload"].as_str().expect("payload"))
            .expect("base64");
        assert_eq!(payload, f.payload);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_invoke_is_answered_with_the_messages_json() {
    let (up, weir) = over_anthropic().await;
    let (status, headers, body) = post(&weir, &path("invoke"), invoke_body(), AUTH).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("application/json")
    );
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["type"], "message", "{v}");
    assert!(v["usage"]["output_tokens"].as_u64().is_some(), "{v}");
    assert_eq!(up.journal()[0].body["stream"], false);
}

/// To a Bedrock upstream (the strict stand-in: SigV4 recomputed, no
/// `model`/`stream` in the body) the same events come back in frames;
/// the client's bearer is never sent on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_to_a_bedrock_upstream_is_relayed_event_for_event() {
    let account = Bedrock::new("us-west-2", "AKIDWEIR", "s3cret", &[MODEL]);
    let (br, weir) = over_bedrock(account).await;
    let (status, headers, bytes) = stream_bytes(&weir).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(
        headers["content-type"],
        "application/vnd.amazon.eventstream"
    );
    assert_whole(&frames(&bytes));
    br.assert_all_accepted();
    let sent = &br.journal()[0];
    assert_eq!(
        sent.path,
        format!("/model/{ENCODED}/invoke-with-response-stream")
    );
    // The stand-in journals the body as Messages (the path's model and
    // stream in it) after refusing one without `anthropic_version`.
    assert_eq!(sent.body["model"], MODEL);
    assert_eq!(sent.body["stream"], true);
    assert!(!format!("{:?}", sent.headers).contains(TOKEN));
}

fn exception(headers: &http::HeaderMap) -> &str {
    headers
        .get("x-amzn-errortype")
        .map_or("", |v| v.to_str().unwrap_or(""))
}

/// Every refusal in Bedrock's shape: `x-amzn-ErrorType` names the
/// exception, the body is `{"message": …}`, the status is Bedrock's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_bedrocks_exceptions() {
    let (up, weir) = over_anthropic().await;
    let no_token = &[("anthropic-version", "2023-06-01")];
    let (status, headers, body) = post(&weir, &path("invoke"), invoke_body(), no_token).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(exception(&headers), "UnrecognizedClientException");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");

    let mut named = invoke_body();
    named["model"] = json!(MODEL);
    let (status, headers, body) = post(&weir, &path("invoke"), named, AUTH).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(exception(&headers), "ValidationException");
    assert!(body.contains("the path's"), "{body}");

    let (status, headers, _) = post(&weir, "/v1/messages", invoke_body(), AUTH).await;
    assert_eq!(status, 404);
    assert_eq!(exception(&headers), "ResourceNotFoundException");

    up.fail_next(1, Failure::new(429).with_header("retry-after", "7"));
    let (status, headers, body) = post(&weir, &path("invoke"), invoke_body(), AUTH).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(exception(&headers), "ThrottlingException");
    assert_eq!(headers["retry-after"], "7");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert!(v["message"].is_string() && v.get("error").is_none(), "{v}");
}

/// A stream that breaks after content ends with an exception frame, never
/// a clean end: the SDK raises it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_broken_after_content_ends_with_an_exception_frame() {
    let mut acct = Bedrock::new("us-west-2", "AKIDWEIR", "s3cret", &[MODEL]);
    acct.exception_after = Some((3, "modelStreamErrorException".into()));
    let (_br, weir) = over_bedrock(acct).await;
    let (status, _, bytes) = stream_bytes(&weir).await;
    assert_eq!(status, 200);
    let all = frames(&bytes);
    let last = all.last().expect("frames");
    assert_eq!(last.header(":message-type"), Some("exception"), "{last:?}");
    assert_eq!(
        last.header(":exception-type"),
        Some("internalServerException")
    );
    let v: Value = serde_json::from_slice(&last.payload).expect("json");
    assert_eq!(v["message"], "scripted exception");
    assert_eq!(chunk_event(&all[0])["type"], "message_start");
}
