//! Failover across the clouds within one request (issue 35): Anthropic's
//! API, then Amazon Bedrock, then Google Vertex AI, each the strict
//! stand-in (Bedrock recomputes weir's SigV4, Vertex takes only tokens its
//! own endpoint issued for a signed JWT grant). The first two fail with
//! retryable errors before any content; the third answers, and the client
//! gets one whole answer.

mod common;

use std::time::Duration;

use common::llm::{events, llm_config_with, post};
use common::provider::bedrock::{self as aws, Bedrock};
use common::provider::vertex::{GoogleAuth, Vertex};
use common::provider::*;
use common::*;
use serde_json::json;

const BEDROCK_MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const VERTEX_MODEL: &str = "claude-sonnet-4-5@20250929";

/// weir with a route of `kind` whose model `claude-sonnet-4-5` goes to
/// Anthropic, then Bedrock, then Vertex; the three stand-ins.
async fn three_clouds(kind: &str) -> (Weir, Provider, Provider, Provider, GoogleAuth) {
    let ant = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let br = Provider::spawn(
        ProviderApi::Anthropic,
        Options::default().bedrock(Bedrock::new(
            "us-west-2",
            "AKIDCLOUDS",
            "clouds",
            &[BEDROCK_MODEL],
        )),
    )
    .await;
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = Provider::spawn(
        ProviderApi::Anthropic,
        Options::default().vertex(Vertex::new(
            &auth,
            "test-project",
            "us-east5",
            &[VERTEX_MODEL],
        )),
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ant"), "sk-ant-weir\n").expect("key");
    std::fs::write(
        dir.path().join("aws"),
        "[default]\naws_access_key_id = AKIDCLOUDS\naws_secret_access_key = clouds\n",
    )
    .expect("credentials");
    std::fs::write(dir.path().join("sa.json"), auth.key_json()).expect("key");
    let ups = [
        ("ant", ant.base_url(), "api_key_file = \"{dir}/ant\"\n".to_string()),
        (
            "br",
            br.base_url(),
            "protocol = \"bedrock\"\nregion = \"us-west-2\"\naws_credentials_file = \"{dir}/aws\"\n".into(),
        ),
        (
            "vx",
            vx.base_url(),
            "protocol = \"vertex\"\nproject = \"test-project\"\nregion = \"us-east5\"\ncredentials = \"file:{dir}/sa.json\"\n".into(),
        ),
    ];
    let models = format!(
        "served_by_header = true\n[[route.models]]\nname = \"claude-sonnet-4-5\"\n\
         upstreams = [\"ant\", \"br:{BEDROCK_MODEL}\", \"vx:{VERTEX_MODEL}\"]\n\
         [[route.models]]\nname = \"{BEDROCK_MODEL}\"\n\
         upstreams = [\"ant:claude-sonnet-4-5\", \"br:{BEDROCK_MODEL}\", \"vx:{VERTEX_MODEL}\"]\n"
    );
    let weir = Weir::start_in(dir, &llm_config_with(kind, &ups, &models)).await;
    (weir, ant, br, vx, auth)
}

/// Anthropic overloaded (529), Bedrock throttled (ThrottlingException):
/// the next cloud is tried in the same request, in the route's order.
fn fail_the_first_two(ant: &Provider, br: &Provider) {
    ant.fail_next(1, Failure::new(529));
    br.fail_next(
        1,
        aws::failure(
            429,
            "ThrottlingException",
            "Too many requests, please wait.",
        ),
    );
}

fn assert_one_attempt_each(ant: &Provider, br: &Provider, vx: &Provider) {
    for (name, up) in [("anthropic", ant), ("bedrock", br), ("vertex", vx)] {
        assert_eq!(up.journal().len(), 1, "{name} saw one attempt");
        up.assert_all_accepted();
    }
    assert_eq!(ant.journal()[0].path, "/v1/messages");
    assert!(br.journal()[0].path.starts_with("/model/us.anthropic."));
    assert!(
        vx.journal()[0].path.ends_with(":streamRawPredict"),
        "{}",
        vx.journal()[0].path
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_fails_over_from_anthropic_to_bedrock_to_vertex_in_one_request() {
    let (weir, ant, br, vx, _auth) = three_clouds("anthropic").await;
    fail_the_first_two(&ant, &br);
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let headers = [
        ("x-api-key", "sk-client"),
        ("anthropic-version", "2023-06-01"),
    ];
    let (status, resp, text) = post(&weir, "/v1/messages", body, &headers).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(resp["x-weir-upstream"], "vx");
    let names: Vec<String> = events(&text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names.first().map(String::as_str),
        Some("message_start"),
        "{names:?}"
    );
    assert_eq!(
        names.last().map(String::as_str),
        Some("message_stop"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n == "error"), "{names:?}");
    assert_one_attempt_each(&ant, &br, &vx);
}

/// The same from Claude Code's Bedrock mode (`kind = "bedrock"`): its
/// InvokeModel request crosses the three clouds and comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoke_fails_over_across_the_clouds_too() {
    let (weir, ant, br, vx, _auth) = three_clouds("bedrock").await;
    fail_the_first_two(&ant, &br);
    let body = json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 256,
        "messages": [{"role": "user", "content": "hi"}]});
    let path = format!("/model/{BEDROCK_MODEL}/invoke");
    let (status, resp, text) = post(&weir, &path, body, &[]).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(resp["x-weir-upstream"], "vx");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["type"], "message", "{v}");
    assert_eq!(v["stop_reason"], "end_turn", "{v}");
    for (name, up) in [("anthropic", &ant), ("bedrock", &br), ("vertex", &vx)] {
        assert_eq!(up.journal().len(), 1, "{name} saw one attempt");
    }
    assert!(vx.journal()[0].path.ends_with(":rawPredict"));
}
