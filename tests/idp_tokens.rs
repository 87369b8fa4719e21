//! Identity from an IdP (`[idp]`, `idp_tokens = true`): JWTs checked
//! against the issuer's keys, fetched through its OpenID discovery from a
//! stand-in IdP on a real socket; each person served under their team's
//! policy. Every refusal a real gateway must make: expired, another
//! audience, another issuer, `alg: none`, an HMAC token against a public
//! key, a bad signature — each 401 in the client's shape.

mod common;

use std::time::{Duration, Instant};

use common::Weir;
use common::idp::{Idp, Signer};
use common::llm::*;
use common::provider::{Options, Provider, ProviderApi};
use serde_json::{Value, json};

fn config(up: &Provider, idp: &Idp, teams: &str) -> String {
    let base = llm_config_with(
        "anthropic",
        &[(
            "up",
            up.base_url(),
            "api_key_file = \"{dir}/provider-key\"".to_string(),
        )],
        "idp_tokens = true\ndefault_upstreams = [\"up\"]\ndefault_max_tokens = 64\n",
    );
    format!(
        "[idp]\nissuer = \"{}\"\naudience = \"weir\"\n{teams}\n{base}",
        idp.issuer()
    )
}

async fn start(up: &Provider, idp: &Idp, teams: &str) -> Weir {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("provider-key"), "sk-ant-weirs-own").expect("key");
    Weir::start_in(dir, &config(up, idp, teams)).await
}

async fn ask(weir: &Weir, token: &str, model: &str) -> (u16, String) {
    let bearer = format!("Bearer {token}");
    let (status, _, body) = post(
        weir,
        "/v1/messages",
        messages_body(model, false),
        &[
            ("anthropic-version", "2023-06-01"),
            ("authorization", &bearer),
        ],
    )
    .await;
    (status.as_u16(), body)
}

/// Ask until the answer is not 503 (the keys are fetched at start, off
/// the request path), for at most 5 s.
async fn ask_ready(weir: &Weir, token: &str, model: &str) -> (u16, String) {
    let start = Instant::now();
    loop {
        let (status, body) = ask(weir, token, model).await;
        if status != 503 || start.elapsed() > Duration::from_secs(5) {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_token_from_the_issuer_is_served_and_every_forgery_is_refused() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let idp = Idp::start().await;
    let key = Signer::es256("k1");
    idp.publish(&key);
    let weir = start(&up, &idp, "").await;
    let claims = idp.claims("alice@example.com", &["platform"]);
    let token = key.sign(&claims);
    let (status, body) = ask_ready(&weir, &token, "claude-sonnet").await;
    assert_eq!(status, 200, "{body}");
    for r in up.journal() {
        assert!(
            !format!("{:?}", r.headers).contains(&token),
            "the token is weir's, never sent upstream"
        );
    }

    let with = |k: &str, v: Value| {
        let mut c = claims.clone();
        c[k] = v;
        c
    };
    let past = claims["iat"].as_u64().unwrap_or(0) - 7200;
    let cases = [
        ("expired", key.sign(&with("exp", json!(past))), "expired"),
        (
            "another audience",
            key.sign(&with("aud", json!("other-app"))),
            "audience",
        ),
        (
            "another issuer",
            key.sign(&with("iss", json!("https://evil.example"))),
            "issuer",
        ),
        ("alg none", key.unsigned(&claims), "JWT"),
        (
            "hmac with the public key",
            key.sign_hmac_with_public(&claims),
            "algorithm",
        ),
        (
            "signed by a stranger",
            Signer::es256("k1").sign(&claims),
            "signature",
        ),
        (
            "an unknown key",
            Signer::es256("k9").sign(&claims),
            "does not publish",
        ),
    ];
    for (what, token, says) in cases {
        let (status, body) = ask(&weir, &token, "claude-sonnet").await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(body.contains("authentication_error"), "{what}: {body}");
        assert!(body.contains(says), "{what}: {body}");
    }
    up.assert_all_accepted();
}

#[tokio::test]
async fn a_key_the_idp_rotated_in_is_fetched_when_a_token_names_it() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let idp = Idp::start().await;
    let old = Signer::es256("2026-11");
    idp.publish(&old);
    let weir = start(&up, &idp, "").await;
    let claims = idp.claims("bob@example.com", &["data"]);
    assert_eq!(
        ask_ready(&weir, &old.sign(&claims), "claude-sonnet")
            .await
            .0,
        200
    );
    let before = idp.fetches();
    let new = Signer::ed25519("2026-12");
    idp.publish(&new);
    let (status, body) = ask(&weir, &new.sign(&claims), "claude-sonnet").await;
    assert_eq!(status, 200, "an EdDSA key published since start: {body}");
    assert_eq!(idp.fetches(), before + 1, "fetched once for the new kid");
    // A remembered token costs no fetch.
    assert_eq!(ask(&weir, &new.sign(&claims), "claude-sonnet").await.0, 200);
    assert_eq!(idp.fetches(), before + 1);
    // Tokens naming keys nobody publishes cannot make weir hammer the IdP.
    for i in 0..5 {
        let stranger = Signer::es256(&format!("made-up-{i}"));
        assert_eq!(
            ask(&weir, &stranger.sign(&claims), "claude-sonnet").await.0,
            401
        );
    }
    assert_eq!(
        idp.fetches(),
        before + 1,
        "at most one fetch per 10 s for unknown keys"
    );
}

#[tokio::test]
async fn each_person_is_held_to_their_teams_policy_on_their_own() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let idp = Idp::start().await;
    let key = Signer::es256("k1");
    idp.publish(&key);
    let teams = "[[idp.teams]]\nname = \"platform\"\nmodels = [\"claude-*\"]\ntokens_per_day = 120\n\
                 [[idp.teams]]\nname = \"research\"\n";
    let weir = start(&up, &idp, teams).await;
    let alice = key.sign(&idp.claims("alice@example.com", &["everyone", "platform"]));
    let carol = key.sign(&idp.claims("carol@example.com", &["platform"]));
    let mallory = key.sign(&idp.claims("mallory@example.com", &["everyone"]));
    assert_eq!(ask_ready(&weir, &alice, "claude-sonnet").await.0, 200);
    let bearer = format!("Bearer {alice}");
    let (status, _, body) =
        common::get_with(&weir.url("web", "/v1/me"), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{body}");
    let me: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        (me["kind"].as_str(), me["team"].as_str()),
        (Some("idp"), Some("platform")),
        "{me}"
    );
    assert_eq!(me["models"], json!(["claude-*"]), "{me}");
    let (status, body) = ask(&weir, &alice, "gpt-5").await;
    assert_eq!(status, 403, "outside the team's models: {body}");
    let (status, body) = ask(&weir, &mallory, "claude-sonnet").await;
    assert_eq!(status, 403, "in no team: {body}");
    assert!(body.contains("no team"), "{body}");
    // Alice's day ends; Carol, of the same team, has her own.
    let mut refused = None;
    for _ in 0..20 {
        let (status, body) = ask(&weir, &alice, "claude-sonnet").await;
        if status != 200 {
            refused = Some((status, body));
            break;
        }
    }
    let (status, body) = refused.expect("alice's budget ends");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("alice@example.com"), "{body}");
    assert_eq!(ask(&weir, &carol, "claude-sonnet").await.0, 200);
}

/// An IdP that sends group ids (Entra ID) or several groups for one
/// team: `groups` maps them; the team's own name is then no group of it.
#[tokio::test]
async fn groups_the_idp_names_otherwise_are_mapped_to_their_team() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let idp = Idp::start().await;
    let key = Signer::es256("k1");
    idp.publish(&key);
    let teams = "[[idp.teams]]\nname = \"platform\"\nmodels = [\"claude-*\"]\n\
                 groups = [\"9c1f0b2e-5d1a-4c43-8f0e-2b7d1e6a0c11\", \"platform-contractors\"]\n";
    let weir = start(&up, &idp, teams).await;
    let by_id = key.sign(&idp.claims(
        "alice@example.com",
        &[
            "0f0f0f0f-0000-0000-0000-000000000000",
            "9c1f0b2e-5d1a-4c43-8f0e-2b7d1e6a0c11",
        ],
    ));
    let contractor = key.sign(&idp.claims("bob@example.com", &["platform-contractors"]));
    let by_name = key.sign(&idp.claims("mallory@example.com", &["platform"]));
    for token in [&by_id, &contractor] {
        assert_eq!(ask_ready(&weir, token, "claude-sonnet").await.0, 200);
        let bearer = format!("Bearer {token}");
        let (status, _, body) =
            common::get_with(&weir.url("web", "/v1/me"), &[("authorization", &bearer)]).await;
        assert_eq!(status, 200, "{body}");
        let me: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(me["team"].as_str(), Some("platform"), "{me}");
        assert_eq!(ask(&weir, token, "gpt-5").await.0, 403, "the team's models");
    }
    let (status, body) = ask(&weir, &by_name, "claude-sonnet").await;
    assert_eq!(
        status, 403,
        "the team's name is not one of its groups: {body}"
    );
}

#[test]
fn a_group_in_two_teams_and_empty_groups_are_config_problems() {
    let text = "[idp]\nissuer = \"https://idp.example.com\"\naudience = \"weir\"\n\
                [[idp.teams]]\nname = \"platform\"\ngroups = [\"eng\"]\n\
                [[idp.teams]]\nname = \"research\"\ngroups = [\"eng\", \"\"]\n\
                [[idp.teams]]\nname = \"ops\"\ngroups = []\n";
    let err = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), text)
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("group `eng` is also team `platform`'s"),
        "{err}"
    );
    assert!(err.contains("1 to 256 bytes"), "{err}");
    assert!(err.contains("groups: is empty"), "{err}");
}

#[tokio::test]
async fn an_idp_down_at_start_gets_503_then_serves_once_it_answers() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let addr = common::closed_port().await;
    let placeholder = Idp::start().await;
    // The config names `addr`, where nothing listens yet.
    let text =
        config(&up, &placeholder, "").replace(&placeholder.issuer(), &format!("http://{addr}"));
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("provider-key"), "sk-ant-weirs-own").expect("key");
    let weir = Weir::start_in(dir, &text).await;
    let key = Signer::es256("k1");
    let mut claims = placeholder.claims("dave@example.com", &["ops"]);
    claims["iss"] = json!(format!("http://{addr}"));
    let token = key.sign(&claims);
    let (status, body) = ask(&weir, &token, "claude-sonnet").await;
    assert_eq!(status, 503, "{body}");
    let idp = Idp::start_at(addr).await;
    idp.publish(&key);
    let (status, body) = ask_ready(&weir, &token, "claude-sonnet").await;
    assert_eq!(status, 200, "{body}");
}

#[test]
fn idp_tokens_without_an_idp_is_a_config_problem() {
    let text = "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
                [[route]]\nname = \"llm\"\nkind = \"anthropic\"\nidp_tokens = true\n\
                default_upstreams = [\"up\"]\n\
                [[route.upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:9\"\n";
    let err = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), text)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("[idp]"), "{err}");
    let text = format!("[idp]\nissuer = \"okta\"\n{text}");
    let err = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), &text)
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("issuer URL") && err.contains("audience"),
        "{err}"
    );
}

#[tokio::test]
async fn a_group_named_by_a_team_made_at_runtime_gets_its_policy_without_a_reload() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let idp = Idp::start().await;
    let key = Signer::es256("k1");
    idp.publish(&key);
    let dir = common::keys::dir();
    std::fs::write(dir.path().join("provider-key"), "sk-ant-weirs-own").expect("key");
    let text = config(&up, &idp, "").replace(
        "[admin]\naddress = \"127.0.0.1:0\"\n",
        "[admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{dir}/admin-token\"\n\
         [database]\nurl = \"sqlite:{dir}/weir.db\"\n",
    );
    let weir = Weir::start_in(dir, &text).await;
    let alice = key.sign(&idp.claims("alice@example.com", &["everyone", "platform"]));
    let mallory = key.sign(&idp.claims("mallory@example.com", &["everyone"]));
    // No team anywhere yet: every valid token is served, any model.
    assert_eq!(ask_ready(&weir, &alice, "gpt-5").await.0, 200);
    assert_eq!(ask(&weir, &mallory, "claude-sonnet").await.0, 200);

    let (status, v) = common::keys::admin(
        &weir,
        http::Method::POST,
        "/admin/teams",
        json!({"name": "platform", "models": ["claude-*"],
               "per_person": {"tokens_per_day": 120}}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    // Alice's token, verified before, is held to the new policy at once.
    let (status, body) = ask(&weir, &alice, "gpt-5").await;
    assert_eq!(status, 403, "outside the team's models: {body}");
    let bearer = format!("Bearer {alice}");
    let (status, _, body) =
        common::get_with(&weir.url("web", "/v1/me"), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{body}");
    let me: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(me["team"], "platform", "{me}");
    assert_eq!(me["budget"]["tokens_per_day"]["limit"], 120, "{me}");
    // With teams listed, a person in none of them is refused.
    let (status, body) = ask(&weir, &mallory, "claude-sonnet").await;
    assert_eq!(status, 403, "in no team: {body}");
    assert!(body.contains("no team"), "{body}");
}
