//! Bedrock's temporary credentials, which weir fetches itself and
//! refreshes off the request path: a web identity exchanged at STS (as on
//! EKS) and the instance role from the EC2 instance metadata service.

use super::*;
use common::provider::imds::{Imds, Role as ImdsRole};
use common::provider::sts::{Grant, Sts};

/// weir (the real binary) whose only AWS credentials are a web identity
/// in its environment, as EKS sets it, with STS at `sts`.
fn weir_with_web_identity(
    br: &Provider,
    sts: &Sts,
    token: &str,
) -> (Proc, String, tempfile::TempDir) {
    weir_with_web_identity_then(br, None, sts, token)
}

/// [`weir_with_web_identity`], then `next` (an Anthropic upstream, weir's
/// key `sk-ant-weir`) when given; `x-weir-upstream` names who served.
fn weir_with_web_identity_then(
    br: &Provider,
    next: Option<&Provider>,
    sts: &Sts,
    token: &str,
) -> (Proc, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).expect("token");
    let keys = "protocol = \"bedrock\"\nregion = \"us-west-2\"\n".to_string();
    let mut ups = vec![("br", br.base_url(), keys)];
    let mut order = format!("\"br:{MODEL}\"");
    if let Some(next) = next {
        std::fs::write(dir.path().join("ant"), "sk-ant-weir\n").expect("key");
        let keys = format!("api_key_file = \"{}/ant\"\n", dir.path().display());
        ups.push(("ant", next.base_url(), keys));
        order.push_str(", \"ant\"");
    }
    let models = format!(
        "served_by_header = true\n[[route.models]]\nname = \"claude\"\nupstreams = [{order}]\n"
    );
    let config = llm_config_with("anthropic", &ups, &models).replacen(
        "[log]\n",
        "[log]\nformat = \"json\"\n",
        1,
    );
    let path = common::process::write_config(&dir, &config);
    let mut cmd = std::process::Command::new(common::process::WEIR);
    cmd.args(["run", "--config", &path]);
    for unset in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ] {
        cmd.env_remove(unset);
    }
    cmd.env("HOME", dir.path())
        .env("AWS_ROLE_ARN", ROLE)
        .env("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file)
        .env("AWS_ENDPOINT_URL_STS", sts.url());
    let mut weir = Proc::spawn_command(cmd);
    let url = format!("http://{}/v1/messages", weir.listening("web"));
    (weir, url, dir)
}

const ROLE: &str = "arn:aws:iam::123456789012:role/weir-bedrock";

/// Credentials that live 8 s: the refresher asks STS again at half
/// their life (a short life has no room for the 5 minutes ahead).
fn short_grant() -> Grant {
    Grant {
        role_arn: ROLE.into(),
        token: "eks-issued-token".into(),
        access_key_id: KEY_ID.into(),
        secret_access_key: SECRET.into(),
        session_token: "sts-session-token".into(),
        lifetime: std::time::Duration::from_secs(8),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_identity_credentials_are_fetched_once_then_refreshed_off_the_request_path() {
    let mut acct = account();
    acct.session_token = Some("sts-session-token".into());
    let br = stand_in(acct).await;
    let sts = Sts::spawn(short_grant()).await;
    let (_weir, url, _dir) = weir_with_web_identity(&br, &sts, "eks-issued-token");
    // The first request waits for the first exchange.
    let (status, _, body) =
        post_json(&url, claude_request(false).to_string(), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let first = sts.calls();
    assert!(first >= 1);
    // A slow STS holds no request: the refresh runs in the background,
    // the request signed with the credentials still valid.
    sts.set_delay(std::time::Duration::from_secs(3));
    let started = std::time::Instant::now();
    let (status, _, body) =
        post_json(&url, claude_request(false).to_string(), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "waited for the refresh: {:?}",
        started.elapsed()
    );
    assert!(
        common::eventually(std::time::Duration::from_secs(10), || sts.calls() != first).await,
        "no refresh before expiry"
    );
    br.assert_all_accepted();
    for e in br.journal() {
        assert_eq!(e.headers["x-amz-security-token"], "sts-session-token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_web_identity_is_a_502_not_a_hang() {
    let br = stand_in(account()).await;
    let sts = Sts::spawn(short_grant()).await;
    let (_weir, url, _dir) = weir_with_web_identity(&br, &sts, "a-token-sts-never-issued");
    let started = std::time::Instant::now();
    let (status, _, body) =
        post_json(&url, claude_request(false).to_string(), CLAUDE_HEADERS).await;
    assert_eq!(status, 502, "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(sts.calls() >= 1);
    assert!(br.journal().is_empty(), "nothing unsigned reached Bedrock");
}

/// Under steady load, the web identity's refreshes fail from before the
/// credentials expire until past it (the token file holds a token STS
/// never issued), then recover: no request hangs or errs — before the
/// expiry Bedrock serves with the credentials still good, in the gap the
/// requests go to the next upstream at once, and once STS answers again
/// Bedrock serves again, no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshes_failing_past_expiry_fail_over_then_recover_under_load() {
    let mut acct = account();
    acct.session_token = Some("sts-session-token".into());
    let br = stand_in(acct).await;
    let ant = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let sts = Sts::spawn(short_grant()).await;
    let (_weir, url, dir) = weir_with_web_identity_then(&br, Some(&ant), &sts, "eks-issued-token");
    let token_file = dir.path().join("token");
    let served_by = |url: String| async move {
        let started = std::time::Instant::now();
        let (status, headers, body) =
            post_json(&url, claude_request(false).to_string(), CLAUDE_HEADERS).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "a request hung"
        );
        let name = headers
            .get("x-weir-upstream")
            .map(|v| v.as_bytes().to_vec());
        String::from_utf8(name.unwrap_or_default()).expect("utf8")
    };
    assert_eq!(served_by(url.clone()).await, "br");
    // STS now refuses every refresh: the credentials (8 s, sent for 6 s)
    // run out while the load goes on.
    std::fs::write(&token_file, "a-token-sts-never-issued\n").expect("token");
    let mut seen = std::collections::BTreeSet::new();
    let gap = std::time::Instant::now() + std::time::Duration::from_secs(9);
    while std::time::Instant::now() < gap {
        let load: Vec<_> = (0..4)
            .map(|_| tokio::spawn(served_by(url.clone())))
            .collect();
        for h in load {
            seen.insert(h.await.expect("request"));
        }
    }
    assert!(seen.contains("br"), "served while still good: {seen:?}");
    assert!(seen.contains("ant"), "the gap failed over: {seen:?}");
    let refused = sts.calls();
    // STS answers again: the next retry (back-off at most 30 s) serves.
    std::fs::write(&token_file, "eks-issued-token\n").expect("token");
    let back = eventually_async(std::time::Duration::from_secs(40), || {
        let served = served_by(url.clone());
        async move { served.await == "br" }
    })
    .await;
    assert!(back, "Bedrock never served again after STS recovered");
    assert!(sts.calls() > refused);
    br.assert_all_accepted();
}

/// The instance role's credentials from the EC2 instance metadata service
/// (the stand-in allows IMDSv2 only, as an instance with
/// `HttpTokens = required`; its documents live 8 s): every request is
/// signed with them, no metadata `GET` goes without the session token,
/// and the document is fetched again before it expires, requests past the
/// first one's expiry still signed and accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_metadata_credentials_sign_requests_and_are_refreshed_across_expiry() {
    let mut acct = account();
    acct.session_token = Some("imds-session-token".into());
    let br = stand_in(acct).await;
    let imds = Imds::spawn(ImdsRole {
        name: "weir-bedrock".into(),
        access_key_id: KEY_ID.into(),
        secret_access_key: SECRET.into(),
        session_token: "imds-session-token".into(),
        lifetime: std::time::Duration::from_secs(8),
    })
    .await;
    let keys = format!(
        "protocol = \"bedrock\"\nregion = \"us-west-2\"\naws_credentials = \"metadata:{}\"\n",
        imds.url()
    );
    let dir = tempfile::tempdir().expect("dir");
    let weir = weir_over(dir, "anthropic", &[("br", br.base_url(), keys)]).await;
    let url = weir.url("web", "/v1/messages");
    let started = std::time::Instant::now();
    let mut served = 0;
    // Past the first document's expiry, a request every 250 ms.
    while started.elapsed() < std::time::Duration::from_secs(9) {
        let (status, _, body) =
            post_json(&url, claude_request(false).to_string(), CLAUDE_HEADERS).await;
        assert_eq!(status, 200, "{body}");
        served += 1;
        // Pacing, not waiting: requests spread across the expiry.
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(served > 10);
    assert!(imds.issued() >= 2, "refreshed before the expiry");
    assert_eq!(imds.refused(), 0, "every GET carried the IMDSv2 token");
    br.assert_all_accepted();
    let journal = br.journal();
    assert_eq!(journal.len(), served);
    for e in journal {
        assert_eq!(e.headers["x-amz-security-token"], "imds-session-token");
    }
}

/// An instance metadata service that cannot be reached gives no
/// credentials: a 502 at once, and nothing unsigned reaches Bedrock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_instance_metadata_service_is_a_502_not_a_hang() {
    let br = stand_in(account()).await;
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let keys = format!(
        "protocol = \"bedrock\"\nregion = \"us-west-2\"\naws_credentials = \"metadata:http://{addr}\"\n"
    );
    let weir = weir_over(
        tempfile::tempdir().expect("dir"),
        "anthropic",
        &[("br", br.base_url(), keys)],
    )
    .await;
    let started = std::time::Instant::now();
    let (status, _, body) = post_json(
        &weir.url("web", "/v1/messages"),
        claude_request(false).to_string(),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 502, "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(br.journal().is_empty());
}
