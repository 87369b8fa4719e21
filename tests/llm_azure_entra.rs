//! Azure OpenAI upstreams authenticated with Entra ID tokens weir gets
//! itself (docs/decisions/090), against the strict stand-ins: Entra's
//! token endpoint and Azure's instance metadata service
//! (tests/common/provider/entra.rs), which check every field of a grant
//! as Entra does, and the Azure resource (tests/common/provider/azure.rs),
//! which takes only a bearer the token endpoint issued and not expired.
//!
//! A client secret's token, a managed identity's and a workload
//! identity's sent as `Authorization: Bearer` (never an `api-key`, never
//! the client's credential); tokens refreshed across their expiry under
//! concurrent load with no failure; a token endpoint that refuses the
//! secret: failover to the next upstream, or a 503 saying why, logged.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::llm::{llm_config_with, post};
use common::provider::azure::Azure;
use common::provider::entra::{CLIENT_ID, Entra, IDENTITY_ID, SCOPE, TENANT};
use common::provider::*;
use common::*;
use serde_json::{Value, json};

/// An Azure resource on the v1 API over the Responses emulator, taking
/// `entra`'s tokens (and the key `azure-key`), one deployment `my-gpt5`.
async fn resource(entra: &Entra) -> Provider {
    let azure = Azure::v1("azure-key", &["my-gpt5"]).with_entra(entra);
    Provider::spawn(
        ProviderApi::Responses,
        Options::default().azure(azure).script(Script::RoundTrip {
            command: "echo weir-entra".into(),
        }),
    )
    .await
}

/// An upstream's keys: Azure, with `credentials` and what they take.
fn entra_keys(entra: &Entra, credentials: &str) -> String {
    let more = match credentials {
        "client_secret" => format!(
            "tenant_id = \"{TENANT}\"\nclient_id = \"{CLIENT_ID}\"\n\
             client_secret_file = \"{{dir}}/secret\"\nauthority = \"{}\"\n",
            entra.url()
        ),
        "workload_identity" => format!(
            "tenant_id = \"{TENANT}\"\nclient_id = \"{CLIENT_ID}\"\n\
             federated_token_file = \"{{dir}}/federated\"\nauthority = \"{}\"\n",
            entra.url()
        ),
        _ => format!("client_id = \"{IDENTITY_ID}\"\n"),
    };
    format!("protocol = \"azure\"\ncredentials = \"{credentials}\"\n{more}")
}

/// weir with an `openai` route serving `gpt-5` from the upstreams in
/// order (each sent the deployment `my-gpt5`); the app's secret and the
/// federated token written to `{dir}/secret` and `{dir}/federated`.
async fn weir_over(entra: &Entra, ups: &[(&str, String, String)]) -> Weir {
    weir_with_secret(entra, &entra.secret(), ups).await
}

/// The same, with `secret` in `{dir}/secret` (and the key `azure-key` in
/// `{dir}/azure-key`).
async fn weir_with_secret(entra: &Entra, secret: &str, ups: &[(&str, String, String)]) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("secret"), secret).expect("secret");
    std::fs::write(dir.path().join("federated"), &entra.state.federated).expect("federated");
    std::fs::write(dir.path().join("azure-key"), "azure-key\n").expect("key");
    let order: Vec<String> = ups
        .iter()
        .map(|(n, _, _)| format!("\"{n}:my-gpt5\""))
        .collect();
    let models = format!(
        "served_by_header = true\n[[route.models]]\nname = \"gpt-5\"\nupstreams = [{}]\n",
        order.join(", ")
    );
    Weir::start_in(dir, &llm_config_with("openai", ups, &models)).await
}

fn codex_request(stream: bool) -> Value {
    json!({
        "model": "gpt-5",
        "instructions": "You are Codex.",
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Run `echo weir-entra` and tell me what it printed."}]}],
        "tools": [{"type": "function", "name": "shell", "strict": false,
            "description": "Runs a shell command.",
            "parameters": {"type": "object", "properties": {
                "command": {"type": "array", "items": {"type": "string"}}},
                "required": ["command"], "additionalProperties": false}}],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
    })
}

const CODEX_HEADERS: &[(&str, &str)] = &[
    ("authorization", "Bearer sk-codex-client"),
    ("api-key", "the-clients-own-key"),
    ("x-api-key", "the-clients-own-key"),
];

/// Every request Azure got carried a bearer Entra issued, and neither an
/// `api-key` nor the client's credential; Entra refused no grant.
fn only_entras_tokens(az: &Provider, entra: &Entra) {
    az.assert_all_accepted();
    let journal = az.journal();
    assert!(!journal.is_empty(), "Azure was asked");
    for e in &journal {
        let bearer = e.headers.get("authorization").and_then(|v| v.to_str().ok());
        assert!(
            bearer.is_some_and(|b| b.starts_with("Bearer eyJ0eXAiOiJKV1QifQ.entra-")),
            "{e:?}"
        );
        assert!(e.headers.get("api-key").is_none(), "{e:?}");
        assert!(e.headers.get("x-api-key").is_none(), "{e:?}");
    }
    assert!(entra.refused().is_empty(), "{:?}", entra.refused());
    assert_eq!(entra.bad_tokens(), 0);
}

async fn served(weir: &Weir, stream: bool) -> (http::HeaderMap, String) {
    let (status, headers, body) =
        post(weir, "/v1/responses", codex_request(stream), CODEX_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    (headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_secrets_token_is_sent_as_the_bearer() {
    let entra = Entra::spawn(Duration::from_secs(3600)).await;
    let az = resource(&entra).await;
    let keys = entra_keys(&entra, "client_secret");
    let weir = weir_over(&entra, &[("az", az.base_url(), keys)]).await;
    served(&weir, true).await;
    let (_, body) = served(&weir, false).await;
    let whole: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(whole["status"], "completed", "{whole}");
    only_entras_tokens(&az, &entra);
    assert_eq!(entra.issued(), 1, "one token, cached, for both requests");
    assert_eq!(az.journal()[0].path, "/openai/v1/responses");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_identitys_and_a_workload_identitys_tokens_are_sent() {
    let entra = Entra::spawn(Duration::from_secs(3600)).await;
    let az = resource(&entra).await;
    let managed = format!("managed_identity:{}", entra.url());
    let ups = [("mi", az.base_url(), entra_keys(&entra, &managed))];
    let weir = weir_over(&entra, &ups).await;
    served(&weir, true).await;
    only_entras_tokens(&az, &entra);
    drop(weir);
    let ups = [("wi", az.base_url(), entra_keys(&entra, "workload_identity"))];
    let weir = weir_over(&entra, &ups).await;
    served(&weir, true).await;
    only_entras_tokens(&az, &entra);
    assert_eq!(entra.issued(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_are_refreshed_across_their_expiry_under_load_with_no_failure() {
    let entra = Arc::new(Entra::spawn(Duration::from_secs(2)).await);
    let az = resource(&entra).await;
    let keys = entra_keys(&entra, "client_secret");
    let weir = Arc::new(weir_over(&entra, &[("az", az.base_url(), keys)]).await);
    let mut clients = Vec::new();
    for i in 0..4 {
        let (weir, entra) = (weir.clone(), entra.clone());
        clients.push(tokio::spawn(async move {
            let mut n = 0;
            // Until three tokens after the first: the load crosses at
            // least two expiries.
            while entra.issued() < 4 {
                served(&weir, i % 2 == 0).await;
                n += 1;
            }
            n
        }));
    }
    let mut n = 0;
    for c in clients {
        n += tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .expect("four tokens within 30 s")
            .expect("client");
    }
    assert!(n > 8, "{n}");
    only_entras_tokens(&az, &entra);
    let tokens: std::collections::HashSet<String> = az
        .journal()
        .iter()
        .filter_map(|e| Some(e.headers.get("authorization")?.to_str().ok()?.to_string()))
        .collect();
    assert!(
        tokens.len() >= 3,
        "the requests crossed expiries: {tokens:?}"
    );
}

/// The app's secret rotated away: Entra refuses the grant with
/// `invalid_client`. A request fails over to the next upstream (a key's);
/// with none, it is a 503 saying why, and nothing reaches Azure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_grant_fails_over_or_is_a_503_saying_why() {
    let entra = Entra::spawn(Duration::from_secs(3600)).await;
    let az = resource(&entra).await;
    let backup = resource(&entra).await;
    let keys = entra_keys(&entra, "client_secret");
    let key = "protocol = \"azure\"\napi_key_file = \"{dir}/azure-key\"".to_string();
    let ups = [
        ("az", az.base_url(), keys.clone()),
        ("backup", backup.base_url(), key),
    ];
    // The secret weir reads is one the app no longer has.
    let weir = weir_with_secret(&entra, "the-old-secret", &ups).await;
    let (headers, _) = served(&weir, true).await;
    assert_eq!(
        headers.get("x-weir-upstream").map(|v| v.as_bytes()),
        Some(&b"backup"[..])
    );
    assert!(az.journal().is_empty(), "nothing is sent without a token");
    backup.assert_all_accepted();
    let refused = entra.refused();
    assert!(
        refused
            .iter()
            .all(|r| r.starts_with("invalid_client: AADSTS7000215")),
        "{refused:?}"
    );
    drop(weir);
    // Alone, the upstream's answer is a 503 naming Entra's refusal.
    let weir = weir_with_secret(&entra, "the-old-secret", &[("az", az.base_url(), keys)]).await;
    let (status, headers, body) =
        post(&weir, "/v1/responses", codex_request(false), CODEX_HEADERS).await;
    assert_eq!(status, 503, "{body}");
    assert!(headers.contains_key("retry-after"));
    let v: Value = serde_json::from_str(&body).expect("json");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no access token for upstream `az`")
            && message.contains("invalid_client: AADSTS7000215: Invalid client secret provided."),
        "{v}"
    );
    assert!(!message.contains("the-old-secret"), "{v}");
    assert!(az.journal().is_empty());
}

/// The real binary's log: a refused fetch is a warn line naming the
/// upstream, the app and Entra's refusal (never the secret); the first
/// success after it an info line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_fetch_is_logged_and_so_is_the_recovery() {
    let entra = Entra::spawn(Duration::from_secs(3600)).await;
    entra.set_down(true);
    let az = resource(&entra).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("secret"), entra.secret()).expect("secret");
    let keys =
        entra_keys(&entra, "client_secret").replace("{dir}", &dir.path().display().to_string());
    let config = llm_config_with("openai", &[("az", az.base_url(), keys)], "").replacen(
        "[log]\n",
        "[log]\nformat = \"json\"\n",
        1,
    );
    let mut weir = common::process::Proc::run(&common::process::write_config(&dir, &config));
    let failed = tokio::task::block_in_place(|| {
        weir.wait_for(|l| l.contains("cannot fetch the upstream's credential"))
    });
    for part in [
        "\"level\":\"WARN\"",
        &format!(
            "llm/az entra app {CLIENT_ID} at {}/{TENANT}/oauth2/v2.0/token",
            entra.url()
        ),
        "answered 503 Service Unavailable: temporarily_unavailable: AADSTS90033",
    ] {
        assert!(failed.contains(part), "{part:?} not in {failed}");
    }
    assert!(!failed.contains(&entra.secret()), "{failed}");
    entra.set_down(false);
    let back = tokio::task::block_in_place(|| {
        weir.wait_for(|l| l.contains("credential fetched again after failures"))
    });
    assert!(back.contains("\"level\":\"INFO\""), "{back}");
    assert_eq!(entra.issued(), 1);
}

/// The stand-ins are as strict as Entra, IMDS and Azure: asked directly,
/// they refuse each broken grant with Entra's error, and Azure refuses a
/// bearer they did not issue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_ins_refuse_what_entra_and_azure_refuse() {
    let entra = Entra::spawn(Duration::from_secs(3600)).await;
    let az = resource(&entra).await;
    let token_url = format!("{}/{TENANT}/oauth2/v2.0/token", entra.url());
    let secret =
        percent_encoding::utf8_percent_encode(&entra.secret(), percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let scope = "https%3A%2F%2Fcognitiveservices.azure.com%2F.default";
    let form = "application/x-www-form-urlencoded";
    let good = format!(
        "client_id={CLIENT_ID}&scope={scope}&client_secret={secret}&grant_type=client_credentials"
    );
    let cases = [
        (token_url.clone(), good.clone(), form, 200, ""),
        (
            token_url.clone(),
            good.replace(&secret, "wrong"),
            form,
            401,
            "invalid_client",
        ),
        (
            token_url.clone(),
            good.replace(CLIENT_ID, "0a1b2c3d-0000-0000-0000-000000000000"),
            form,
            400,
            "unauthorized_client",
        ),
        (
            token_url.clone(),
            good.replace("client_credentials", "password"),
            form,
            400,
            "unsupported_grant_type",
        ),
        (
            token_url.clone(),
            good.replace("%2F.default", ""),
            form,
            400,
            "invalid_scope",
        ),
        (
            token_url.clone(),
            good.replace("cognitiveservices", "management"),
            form,
            400,
            "invalid_resource",
        ),
        (
            token_url.clone(),
            good.clone(),
            "application/json",
            400,
            "invalid_request",
        ),
        (
            token_url.replace(TENANT, "other.onmicrosoft.com"),
            good.clone(),
            form,
            400,
            "invalid_request",
        ),
    ];
    let mut token = String::new();
    for (url, body, content_type, want, error) in cases {
        let headers = [("content-type", content_type)];
        let (status, _, answer) = split(send(http::Method::POST, &url, &headers, body).await).await;
        assert_eq!(status.as_u16(), want, "{url}: {answer}");
        let v: Value = serde_json::from_str(&answer).expect("json");
        if want == 200 {
            token = v["access_token"].as_str().expect("token").to_string();
            assert!(v["expires_in"].is_u64(), "{v}");
        } else {
            assert_eq!(v["error"], error, "{v}");
            assert!(v["error_codes"].is_array(), "Entra's shape: {v}");
        }
    }
    let imds = format!(
        "{}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fcognitiveservices.azure.com",
        entra.url()
    );
    let (status, _, _) = get_with(&imds, &[]).await;
    assert_eq!(status, 400, "IMDS wants Metadata: true");
    let (status, _, _) = get_with(
        &format!("{imds}&client_id=unknown"),
        &[("metadata", "true")],
    )
    .await;
    assert_eq!(status, 400, "an identity the machine does not have");
    let (status, _, body) = get_with(&imds, &[("metadata", "true")]).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert!(v["expires_in"].is_string(), "IMDS's shape: {v}");
    // Azure: the issued bearer passes; another, none, or a key's 401.
    let request = json!({"model": "my-gpt5", "input": "hi"}).to_string();
    let url = format!("{}/openai/v1/responses", az.base_url());
    let bearer = format!("Bearer {token}");
    let (status, _, answer) = post_json(&url, request.clone(), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{answer}");
    let (status, _, answer) = post_json(
        &url,
        request.clone(),
        &[("authorization", "Bearer eyJ0eXAiOiJKV1QifQ.forged.sig")],
    )
    .await;
    assert_eq!(status, 401, "{answer}");
    let v: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(v["error"]["code"], "401", "Azure's shape: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Access token is missing, invalid"),
        "{v}"
    );
    assert_eq!(SCOPE, "https://cognitiveservices.azure.com/.default");
}
