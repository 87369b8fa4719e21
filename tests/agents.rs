//! The real agent CLIs through the real weir binary to the strict provider
//! emulator: Claude Code and Codex, pinned (tests/fixtures/agents/versions),
//! each run headless once through a whole tool round trip — the emulator
//! asks for a shell command, the CLI runs it on this machine, the emulator
//! reads its output from the next request — with thinking / reasoning on
//! (both CLIs' defaults: Claude Code's adaptive thinking, Codex's medium
//! effort). Skipped visibly without the CLIs (`.ci/run` installs them and
//! sets `WEIR_REQUIRE_AGENTS=1`).

mod common;

use common::agents::{self, Agent, Run};
use common::provider::azure::Azure;
use common::provider::entra::{CLIENT_ID, Entra, TENANT};
use common::provider::vertex::{GoogleAuth, Vertex};
use common::provider::{Failure, Options, Provider, ProviderApi, Script, Verdict};

/// The command the emulator asks for. Its output, `weir-<nonce>`, is
/// written nowhere in the command, so seeing it upstream proves the CLI ran
/// it and weir carried the result.
fn round_trip() -> (String, String) {
    let nonce = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos()
            ^ u128::from(std::process::id())
    );
    let command = format!("printf '%s-%s\\n' weir {nonce}");
    (command, format!("weir-{nonce}"))
}

const PROMPT: &str = "Run the shell command you are asked for and report its output.";

async fn emulator(api: ProviderApi, command: &str) -> Provider {
    Provider::spawn(
        api,
        Options::default().script(Script::RoundTrip {
            command: command.to_string(),
        }),
    )
    .await
}

/// Whether an accepted request to `up` carried `output` back (a tool
/// result: the first request cannot hold it, the command never spells it).
fn saw_output(up: &Provider, output: &str) -> bool {
    up.journal()
        .iter()
        .any(|e| e.verdict == Verdict::Accepted && e.body.to_string().contains(output))
}

/// `agent` on a `kind` route over one upstream speaking `api` (weir's
/// `protocol` name for it): the run succeeds, the answer quotes the
/// command's output, the upstream refused nothing and saw the output.
async fn one_upstream(agent: Agent, kind: &str, api: ProviderApi, protocol: &str) {
    let Some(bin) = agents::find(agent) else {
        return;
    };
    let (command, output) = round_trip();
    let up = emulator(api, &command).await;
    let (_weir, addr, _dir) = agents::weir(kind, &[("up", &up, protocol)]);
    let run = agents::run(agent, &bin, addr, PROMPT).await;
    agents::dump(&[&up]);
    up.assert_all_accepted();
    run.assert_success();
    assert!(
        saw_output(&up, &output),
        "the upstream never saw {output}: {:#?}",
        up.journal().iter().map(|e| &e.body).collect::<Vec<_>>()
    );
    let answer = run.answer(agent);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
}

#[tokio::test]
async fn claude_code_to_anthropic() {
    one_upstream(
        Agent::ClaudeCode,
        "anthropic",
        ProviderApi::Anthropic,
        "anthropic",
    )
    .await;
}

/// Claude Code through weir to Amazon Bedrock: every model it asks for
/// (the main one, the small fast one) goes to one inference profile,
/// SigV4-signed with a credentials file's profile, which the Bedrock
/// stand-in checks on each request.
#[tokio::test]
async fn claude_code_to_bedrock() {
    use common::provider::bedrock::Bedrock;
    const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let Some(bin) = agents::find(Agent::ClaudeCode) else {
        return;
    };
    let (command, output) = round_trip();
    let account = Bedrock::new("us-east-1", "AKIDAGENTS", "agents-secret", &[MODEL]);
    let options = Options::default()
        .bedrock(account)
        .script(Script::RoundTrip { command });
    let up = Provider::spawn(ProviderApi::Anthropic, options).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = dir.path().join("aws-credentials");
    std::fs::write(
        &credentials,
        "[agents]\naws_access_key_id = AKIDAGENTS\naws_secret_access_key = agents-secret\n",
    )
    .expect("credentials");
    let keys = format!(
        "protocol = \"bedrock\"\nregion = \"us-east-1\"\naws_credentials_file = \"{}\"\naws_profile = \"agents\"\n",
        credentials.display()
    );
    let every_model = format!("default_upstreams = [\"br:{MODEL}\"]\n");
    let config =
        common::llm::llm_config_with("anthropic", &[("br", up.base_url(), keys)], &every_model)
            .replacen("[log]\n", "[log]\nformat = \"json\"\n", 1);
    let mut weir = common::process::Proc::run(&common::process::write_config(&dir, &config));
    let addr = weir.listening("web");
    let run = agents::run(Agent::ClaudeCode, &bin, addr, PROMPT).await;
    agents::dump(&[&up]);
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "Bedrock never saw {output}");
    assert!(
        up.journal()
            .iter()
            .all(|e| e.path.starts_with("/model/us.anthropic.")),
        "{:?}",
        up.journal().iter().map(|e| &e.path).collect::<Vec<_>>()
    );
    let answer = run.answer(Agent::ClaudeCode);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
}

/// Claude Code in Bedrock mode (`CLAUDE_CODE_USE_BEDROCK=1`, weir as
/// `ANTHROPIC_BEDROCK_BASE_URL`, no SigV4, weir's client token as
/// `AWS_BEARER_TOKEN_BEDROCK`) on a `kind = "bedrock"` route, over `up`
/// serving the inference profile it asks for as `as_model`.
async fn claude_code_in_bedrock_mode(up: &Provider, keys: String, as_model: &str) -> Option<Run> {
    const PROFILE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let bin = agents::find(Agent::ClaudeCode)?;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tokens"), "tok-bedrock-mode\n").expect("tokens");
    std::fs::write(dir.path().join("up-key"), "sk-ant-upstream\n").expect("key");
    let extra = format!(
        "client_tokens_file = \"{}/tokens\"\n[[route.models]]\nname = \"{PROFILE}\"\nupstreams = [\"up:{as_model}\"]\n",
        dir.path().display()
    );
    let keys = keys.replace("{dir}", &dir.path().display().to_string());
    let config = common::llm::llm_config_with("bedrock", &[("up", up.base_url(), keys)], &extra)
        .replacen("[log]\n", "[log]\nformat = \"json\"\n", 1);
    let mut weir = common::process::Proc::run(&common::process::write_config(&dir, &config));
    let addr = weir.listening("web");
    let run = agents::run_claude_on_bedrock(&bin, addr, PROMPT, "tok-bedrock-mode", PROFILE).await;
    agents::dump(&[up]);
    Some(run)
}

/// Claude Code in Bedrock mode through weir to an Anthropic upstream: the
/// InvokeModel calls made Messages requests, the stream back in
/// event-stream frames, a whole tool round trip.
#[tokio::test]
async fn claude_code_in_bedrock_mode_to_anthropic() {
    let (command, output) = round_trip();
    let up = emulator(ProviderApi::Anthropic, &command).await;
    let keys = "api_key_file = \"{dir}/up-key\"\n".to_string();
    let Some(run) = claude_code_in_bedrock_mode(&up, keys, "claude-sonnet-4-5").await else {
        return;
    };
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "the upstream never saw {output}");
    assert!(up.journal().iter().all(|e| e.path == "/v1/messages"));
    let answer = run.answer(Agent::ClaudeCode);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
}

/// Claude Code in Bedrock mode through weir to Bedrock (the stand-in
/// checking weir's SigV4 on each request): the event stream relayed.
#[tokio::test]
async fn claude_code_in_bedrock_mode_to_bedrock() {
    use common::provider::bedrock::Bedrock;
    const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let (command, output) = round_trip();
    let account = Bedrock::new("us-east-1", "AKIDAGENTS", "agents-secret", &[MODEL]);
    let options = Options::default()
        .bedrock(account)
        .script(Script::RoundTrip { command });
    let up = Provider::spawn(ProviderApi::Anthropic, options).await;
    let creds = tempfile::NamedTempFile::new().expect("credentials");
    std::fs::write(
        creds.path(),
        "[default]\naws_access_key_id = AKIDAGENTS\naws_secret_access_key = agents-secret\n",
    )
    .expect("credentials");
    let keys = format!(
        "protocol = \"bedrock\"\nregion = \"us-east-1\"\naws_credentials_file = \"{}\"\n",
        creds.path().display()
    );
    let Some(run) = claude_code_in_bedrock_mode(&up, keys, MODEL).await else {
        return;
    };
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "Bedrock never saw {output}");
    let answer = run.answer(Agent::ClaudeCode);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
}

#[tokio::test]
async fn claude_code_to_responses() {
    one_upstream(
        Agent::ClaudeCode,
        "anthropic",
        ProviderApi::Responses,
        "openai_responses",
    )
    .await;
}

#[tokio::test]
async fn claude_code_to_chat() {
    one_upstream(
        Agent::ClaudeCode,
        "anthropic",
        ProviderApi::Chat,
        "openai_chat",
    )
    .await;
}

#[tokio::test]
async fn codex_to_responses() {
    one_upstream(Agent::Codex, "openai", ProviderApi::Responses, "openai").await;
}

#[tokio::test]
async fn codex_to_anthropic() {
    one_upstream(Agent::Codex, "openai", ProviderApi::Anthropic, "anthropic").await;
}

/// Codex on a Chat Completions server (vLLM, llama.cpp, Ollama speak only
/// that): its Responses requests go through Messages to Chat.
#[tokio::test]
async fn codex_to_chat() {
    one_upstream(Agent::Codex, "openai", ProviderApi::Chat, "openai_chat").await;
}

/// Mid-conversation failover between APIs: Claude Code's first turn is
/// served by an Anthropic upstream, which then fails turn 2 (the tool
/// continuation) with 529, so the continuation — history, signed thinking
/// and tool result made on Anthropic — goes to a Responses upstream.
#[tokio::test]
async fn claude_code_fails_over_from_anthropic_to_responses_mid_conversation() {
    fails_over_mid_conversation(
        Agent::ClaudeCode,
        (ProviderApi::Anthropic, "anthropic"),
        (ProviderApi::Responses, "openai_responses"),
    )
    .await;
}

/// The same between two translated APIs: turn 1's reasoning state and
/// tool call come from Responses, the continuation goes to Chat.
#[tokio::test]
async fn claude_code_fails_over_from_responses_to_chat_mid_conversation() {
    fails_over_mid_conversation(
        Agent::ClaudeCode,
        (ProviderApi::Responses, "openai_responses"),
        (ProviderApi::Chat, "openai_chat"),
    )
    .await;
}

/// Codex the other way: turn 1 (its reasoning item sealed by Responses,
/// the function call) on Responses, the continuation on Anthropic, where
/// no signed thinking block can stand for that reasoning.
#[tokio::test]
async fn codex_fails_over_from_responses_to_anthropic_mid_conversation() {
    fails_over_mid_conversation(
        Agent::Codex,
        (ProviderApi::Responses, "openai"),
        (ProviderApi::Anthropic, "anthropic"),
    )
    .await;
}

/// `agent` on its own route kind over `first` then `second` (each the
/// emulated API and weir's protocol name), `first` failing turn 2 with
/// 529: turn 1 is served by `first`, turn 2 by `second`.
async fn fails_over_mid_conversation(
    agent: Agent,
    (first_api, first_protocol): (ProviderApi, &str),
    (second_api, second_protocol): (ProviderApi, &str),
) {
    let Some(bin) = agents::find(agent) else {
        return;
    };
    let (command, output) = round_trip();
    let first = emulator(first_api, &command).await;
    first.fail_turn(2, Failure::new(529));
    let second = emulator(second_api, &command).await;
    let kind = match agent {
        Agent::ClaudeCode => "anthropic",
        Agent::Codex => "openai",
    };
    let (_weir, addr, _dir) = agents::weir(
        kind,
        &[
            ("first", &first, first_protocol),
            ("second", &second, second_protocol),
        ],
    );
    let run = agents::run(agent, &bin, addr, PROMPT).await;
    agents::dump(&[&first, &second]);
    first.assert_all_accepted();
    second.assert_all_accepted();
    run.assert_success();
    let turns = |up: &Provider| {
        up.journal()
            .iter()
            .map(|e| (e.turn, e.verdict.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        turns(&first),
        [(1, Verdict::Accepted), (2, Verdict::Failed { status: 529 })]
    );
    assert_eq!(turns(&second), [(2, Verdict::Accepted)]);
    assert!(saw_output(&second, &output), "{:#?}", second.journal());
    let answer = run.answer(agent);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
}

/// Codex's simplest setup: its built-in provider pointed at weir by
/// `openai_base_url`, which opens the Responses-over-WebSocket transport
/// first. A tool round trip completes over it: weir accepted every
/// upgrade, and every upstream request came from a WebSocket response
/// (none from an HTTP fallback).
#[tokio::test]
async fn codex_over_websocket_with_the_built_in_provider() {
    codex_over_websocket(ProviderApi::Responses, "openai").await;
}

/// The same, each response translated to an Anthropic upstream.
#[tokio::test]
async fn codex_over_websocket_to_anthropic() {
    codex_over_websocket(ProviderApi::Anthropic, "anthropic").await;
}

/// The same, each response translated to a Chat Completions upstream.
#[tokio::test]
async fn codex_over_websocket_to_chat() {
    codex_over_websocket(ProviderApi::Chat, "openai_chat").await;
}

async fn codex_over_websocket(api: ProviderApi, protocol: &str) {
    let Some(bin) = agents::find(Agent::Codex) else {
        return;
    };
    let (command, output) = round_trip();
    let up = emulator(api, &command).await;
    let (mut weir, addr, _dir) = agents::weir("openai", &[("up", &up, protocol)]);
    let admin = weir.admin();
    let config = agents::codex_builtin_config(addr);
    let run = agents::run_with(Agent::Codex, &bin, addr, PROMPT, config).await;
    agents::dump(&[&up]);
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "{:#?}", up.journal());
    let answer = run.answer(Agent::Codex);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
    let series = |family: &str, outcome: &str| {
        format!("weir_llm_websocket_{family}_total{{route=\"llm\",outcome=\"{outcome}\"}}")
    };
    let refused = common::metric_at(admin, &series("upgrades", "refused")).await;
    assert_eq!(refused, None, "no upgrade refused");
    // Codex warms the connection up and continues with
    // previous_response_id: weir expanded every continuation.
    let lost = series("responses", "previous_response_not_found");
    let lost = common::metric_at(admin, &lost).await;
    assert_eq!(lost, None, "a continuation was not found");
    let completed = common::metric_at(admin, &series("responses", "completed")).await;
    let completed = completed.unwrap_or(0);
    assert!(
        completed >= 2,
        "a tool round trip is two responses: {completed}"
    );
    assert_eq!(
        up.journal().len() as u64,
        completed,
        "every upstream request came through the WebSocket, none from an HTTP fallback"
    );
}

/// Codex on Azure OpenAI: its built-in provider pointed at weir by
/// `openai_base_url` (Responses over WebSocket), each response sent to the
/// Azure stand-in's v1 Responses API (`/openai/v1/responses`, the
/// deployment as the model) with an Entra ID token weir got by the client
/// credentials grant — the stand-in takes no other bearer. A tool round
/// trip with reasoning completes.
#[tokio::test]
async fn codex_to_azure_with_an_entra_token() {
    let Some(bin) = agents::find(Agent::Codex) else {
        return;
    };
    let (command, output) = round_trip();
    let entra = Entra::spawn(std::time::Duration::from_secs(3600)).await;
    let azure = Azure::v1("azure-key", &["my-gpt5"]).with_entra(&entra);
    let up = Provider::spawn(
        ProviderApi::Responses,
        Options::default()
            .azure(azure)
            .script(Script::RoundTrip { command }),
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("entra-secret");
    std::fs::write(&secret, entra.secret()).expect("secret");
    let keys = format!(
        "protocol = \"azure\"\ncredentials = \"client_secret\"\ntenant_id = \"{TENANT}\"\n\
         client_id = \"{CLIENT_ID}\"\nclient_secret_file = \"{}\"\nauthority = \"{}\"\n",
        secret.display(),
        entra.url()
    );
    // Whatever model Codex asks for is the one deployment here.
    let extra = "default_upstreams = [\"az:my-gpt5\"]\n";
    let (_weir, addr, _dir) =
        agents::weir_with("openai", &[("az", up.base_url(), keys)], extra, dir);
    let config = agents::codex_builtin_config(addr);
    let run = agents::run_with(Agent::Codex, &bin, addr, PROMPT, config).await;
    agents::dump(&[&up]);
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "{:#?}", up.journal());
    let answer = run.answer(Agent::Codex);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
    assert!(entra.refused().is_empty(), "{:?}", entra.refused());
    assert_eq!(entra.bad_tokens(), 0);
    let journal = up.journal();
    assert!(journal.len() >= 2, "a tool round trip: {journal:#?}");
    for e in journal {
        assert_eq!(e.path, "/openai/v1/responses", "the v1 API, no api-version");
        assert_eq!(e.body["model"], "my-gpt5", "the deployment");
        assert!(
            e.body["reasoning"].is_object(),
            "with reasoning: {}",
            e.body
        );
        let bearer = e.headers.get("authorization").and_then(|v| v.to_str().ok());
        assert!(
            bearer.is_some_and(|b| b.starts_with("Bearer eyJ0eXAiOiJKV1QifQ.entra-")),
            "{e:?}"
        );
        assert!(e.headers.get("api-key").is_none(), "{e:?}");
    }
}

/// Claude Code in its own (Anthropic) format to weir, weir to Claude on
/// Vertex AI: the stand-in takes only tokens its token endpoint issued
/// for the service account's signed grant, Vertex's paths and body.
#[tokio::test]
async fn claude_code_to_vertex() {
    let Some(bin) = agents::find(Agent::ClaudeCode) else {
        return;
    };
    let (command, output) = round_trip();
    let model = "claude-sonnet-4-5@20250929";
    let auth = GoogleAuth::spawn(std::time::Duration::from_secs(3600)).await;
    let vertex = Vertex::new(&auth, "test-project", "us-east5", &[model]);
    let up = Provider::spawn(
        ProviderApi::Anthropic,
        Options::default()
            .vertex(vertex)
            .script(Script::RoundTrip { command }),
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("sa.json");
    std::fs::write(&key, auth.key_json()).expect("key");
    let keys = format!(
        "protocol = \"vertex\"\nproject = \"test-project\"\nregion = \"us-east5\"\ncredentials = \"file:{}\"\n",
        key.display()
    );
    // Whatever model Claude Code asks for (its main and its small one)
    // is Vertex's one model here.
    let extra = format!("default_upstreams = [\"vx:{model}\"]\n");
    let (_weir, addr, _dir) =
        agents::weir_with("anthropic", &[("vx", up.base_url(), keys)], &extra, dir);
    let run = agents::run(Agent::ClaudeCode, &bin, addr, PROMPT).await;
    agents::dump(&[&up]);
    up.assert_all_accepted();
    run.assert_success();
    assert!(
        saw_output(&up, &output),
        "Vertex never saw {output}: {:#?}",
        up.journal().iter().map(|e| &e.body).collect::<Vec<_>>()
    );
    let answer = run.answer(Agent::ClaudeCode);
    assert!(answer.contains(&output), "answer {answer:?} lacks {output}");
    assert!(auth.refused().is_empty(), "{:?}", auth.refused());
    for e in up.journal() {
        assert!(
            e.path.starts_with(
                "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/"
            ),
            "{}",
            e.path
        );
        assert!(e.headers.get("x-api-key").is_none(), "{e:?}");
    }
}

/// The real weir binary over `up` (`protocol`) on a `kind` route that
/// takes runtime keys and the IdP's tokens (`idp_issuer`), with a
/// database and an admin token; with its LLM and admin addresses.
fn weir_for_a_team(
    kind: &str,
    up: &Provider,
    protocol: &str,
    idp_issuer: &str,
) -> (
    common::process::Proc,
    std::net::SocketAddr,
    std::net::SocketAddr,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().display().to_string();
    std::fs::write(dir.path().join("admin-token"), "admin-s3cret").expect("token");
    std::fs::write(dir.path().join("key-up"), "sk-upstream-up").expect("key");
    let keys = format!("protocol = \"{protocol}\"\napi_key_file = \"{path}/key-up\"\n");
    let config = common::llm::llm_config_with(
        kind,
        &[("up", up.base_url(), keys)],
        "runtime_keys = true\nidp_tokens = true\n",
    )
    .replacen("[log]\n", "[log]\nformat = \"json\"\n", 1)
    .replacen(
        "[admin]\naddress = \"127.0.0.1:0\"\n",
        &format!(
            "[admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{path}/admin-token\"\n\
             [database]\nurl = \"sqlite:{path}/weir.db\"\n\
             [idp]\nissuer = \"{idp_issuer}\"\naudience = \"weir\"\n"
        ),
        1,
    );
    let mut weir = common::process::Proc::run(&common::process::write_config(&dir, &config));
    let addr = weir.listening("web");
    let admin = weir.admin();
    (weir, addr, admin, dir)
}

/// A key issued through the admin API, for `user`.
async fn issue_key(admin: std::net::SocketAddr, user: &str) -> String {
    let resp = common::send(
        http::Method::POST,
        &format!("http://{admin}/admin/keys"),
        &[("authorization", "Bearer admin-s3cret")],
        format!("{{\"user\": \"{user}\", \"models\": [\"*\"]}}"),
    )
    .await;
    assert_eq!(resp.status(), 201);
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
    v["key"].as_str().expect("the secret").to_string()
}

/// Claude Code with a key issued at runtime, then Codex with a token from
/// the company's IdP (through its WebSocket transport): each a whole tool
/// round trip, each counted as its own person in the usage report.
#[tokio::test]
async fn claude_code_with_a_runtime_key_and_codex_with_an_idp_token() {
    let (Some(claude), Some(codex)) = (agents::find(Agent::ClaudeCode), agents::find(Agent::Codex))
    else {
        return;
    };
    let idp = common::idp::Idp::start().await;
    let signer = common::idp::Signer::es256("k1");
    idp.publish(&signer);

    let (command, output) = round_trip();
    let up = emulator(ProviderApi::Anthropic, &command).await;
    let (_weir, addr, admin, _dir) = weir_for_a_team("anthropic", &up, "anthropic", &idp.issuer());
    let key = issue_key(admin, "alice@example.com").await;
    let run = agents::run_as(
        Agent::ClaudeCode,
        &claude,
        addr,
        PROMPT,
        String::new(),
        Some(&key),
    )
    .await;
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "the upstream never saw {output}");

    let (command, output) = round_trip();
    let up = emulator(ProviderApi::Responses, &command).await;
    let (_weir, addr, admin, _dir) = weir_for_a_team("openai", &up, "openai", &idp.issuer());
    let token = signer.sign(&idp.claims("bob@example.com", &["platform"]));
    let run = agents::run_as(
        Agent::Codex,
        &codex,
        addr,
        PROMPT,
        agents::codex_builtin_config(addr),
        Some(&token),
    )
    .await;
    up.assert_all_accepted();
    run.assert_success();
    assert!(saw_output(&up, &output), "the upstream never saw {output}");
    // The person is who the report names, once the rows are written.
    let mut users = String::new();
    for _ in 0..100 {
        let (_, _, body) = common::get_with(
            &format!("http://{admin}/admin/usage?group_by=person"),
            &[("authorization", "Bearer admin-s3cret")],
        )
        .await;
        users = body;
        if users.contains("bob@example.com") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(users.contains("bob@example.com"), "{users}");
}
