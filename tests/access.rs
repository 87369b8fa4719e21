//! Who may use a route, and what weir's own errors look like on it, over
//! real sockets: basic auth against a file made by Apache's `htpasswd -B`
//! (and an argon2id entry made by the reference `argon2` CLI), address
//! rules by client address (127.0.0.1 vs 127.0.0.2, and a client named in
//! a PROXY header), and error pages for weir's answers and, when asked,
//! the upstream's. The fail2ban line is read from the real binary's log
//! and matched with the shipped filter by `fail2ban-regex`.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;

use common::process::*;
use common::*;

const WAIT: Duration = Duration::from_secs(10);

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn tools_present() -> bool {
    can_run(
        have("htpasswd") && have("argon2"),
        "htpasswd (apache2-utils) or argon2 is not installed",
        "apt-get install apache2-utils argon2",
        "WEIR_REQUIRE_HTPASSWD",
    )
}

/// `htpasswd -B -b` adding `user` with `password` to `file` (created
/// when `create`).
fn htpasswd(file: &Path, create: bool, user: &str, password: &str) {
    let mut args = vec!["-B", "-b"];
    if create {
        args.push("-c");
    }
    let out = Command::new("htpasswd")
        .args(&args)
        .arg(file)
        .args([user, password])
        .output()
        .expect("run htpasswd");
    assert!(out.status.success(), "{out:?}");
}

/// An argon2id PHC string for `password`, from the reference CLI.
fn argon2id(password: &str) -> String {
    let mut child = Command::new("argon2")
        .args(["somesaltsalt", "-id", "-e", "-m", "12"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run argon2");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(password.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("argon2");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

fn basic(user_pass: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_pass)
    )
}

fn auth_config(up: SocketAddr, extra: &str) -> String {
    simple_config(
        up,
        &format!(
            "[route.basic_auth]\nusers_file = \"{{dir}}/users\"\nrealm = \"staff only\"\n{extra}"
        ),
    )
}

#[tokio::test]
async fn basic_auth_lets_right_passwords_in_and_keeps_the_credential_from_the_upstream() {
    if !tools_present() {
        return;
    }
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let users = dir.path().join("users");
    htpasswd(&users, true, "alice", "wonderland");
    let mut file = std::fs::read_to_string(&users).expect("read");
    file.push_str(&format!("carol:{}\n", argon2id("looking-glass")));
    std::fs::write(&users, file).expect("write");
    let weir = Weir::start_in(dir, &auth_config(up, "")).await;
    let url = weir.url("web", "/echo");

    let (status, headers, body) =
        get_with(&url, &[("authorization", &basic("alice:wonderland"))]).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("www-authenticate").is_none());
    let echoed = echo_json(&body);
    assert!(
        echoed["headers"].get("authorization").is_none(),
        "the credential is weir's, not the upstream's: {echoed}"
    );
    let (status, _, body) =
        get_with(&url, &[("authorization", &basic("carol:looking-glass"))]).await;
    assert_eq!(status, 200, "the argon2id entry: {body}");

    for (what, header) in [
        ("wrong password", Some(basic("alice:queen"))),
        ("unknown user", Some(basic("mallory:wonderland"))),
        ("no colon", Some(basic("alice"))),
        ("bearer", Some("Bearer wonderland".to_string())),
        ("missing", None),
    ] {
        let h: Vec<(&str, &str)> = header
            .iter()
            .map(|v| ("authorization", v.as_str()))
            .collect();
        let (status, headers, _) = get_with(&url, &h).await;
        assert_eq!(status, 401, "{what}");
        assert_eq!(
            headers["www-authenticate"], "Basic realm=\"staff only\", charset=\"UTF-8\"",
            "{what}"
        );
    }
}

#[tokio::test]
async fn failed_logins_reach_the_limit_and_then_even_the_right_password_gets_429() {
    if !tools_present() {
        return;
    }
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    htpasswd(&dir.path().join("users"), true, "alice", "wonderland");
    let weir = Weir::start_in(dir, &auth_config(up, "")).await;
    let url = weir.url("web", "/echo");
    // A missing credential is no guess: it does not count.
    for _ in 0..20 {
        assert_eq!(get_with(&url, &[]).await.0, 401);
    }
    let right = basic("alice:wonderland");
    assert_eq!(get_with(&url, &[("authorization", &right)]).await.0, 200);
    // Ten failures are the allowance; the eleventh is still answered, and
    // counted past it.
    for i in 0..11 {
        let (status, _, _) = get_with(
            &url,
            &[("authorization", &basic(&format!("alice:guess{i}")))],
        )
        .await;
        assert_eq!(status, 401, "guess {i}");
    }
    let (status, headers, _) = get_with(&url, &[("authorization", &right)]).await;
    assert_eq!(
        status, 429,
        "past the burst, refused before the credential is read"
    );
    let retry: u64 = headers["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("secs");
    assert!((1..=60).contains(&retry), "{retry}");
}

#[tokio::test]
async fn a_reload_reads_the_changed_users_file_and_a_broken_one_keeps_the_old() {
    if !tools_present() {
        return;
    }
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let users = dir.path().join("users");
    htpasswd(&users, true, "alice", "wonderland");
    let weir = Weir::start_in(dir, &auth_config(up, "")).await;
    let url = weir.url("web", "/echo");
    let status = |v: String| {
        let url = url.clone();
        async move { get_with(&url, &[("authorization", &v)]).await.0 }
    };
    assert_eq!(status(basic("alice:wonderland")).await, 200);

    htpasswd(&users, true, "alice", "through-the-mirror");
    htpasswd(&users, false, "bob", "builder");
    weir.apply(&auth_config(up, "")).expect("reload");
    assert_eq!(
        status(basic("alice:wonderland")).await,
        401,
        "the old password, cached or not, is gone"
    );
    assert_eq!(status(basic("alice:through-the-mirror")).await, 200);
    assert_eq!(status(basic("bob:builder")).await, 200);

    // An MD5 entry is a config problem naming the file's line; the running
    // config stays.
    let mut text = std::fs::read_to_string(&users).expect("read");
    text.push_str("eve:$apr1$abcdefgh$0123456789abcdefghijkl\n");
    std::fs::write(&users, text).expect("write");
    let path = weir.dir.path().join("weir.toml");
    let config = auth_config(up, "").replace("{dir}", &weir.dir.path().display().to_string());
    let problems = weir::testing::config::Config::parse(&path, &config).expect_err("md5 refused");
    let text = problems.to_string();
    assert!(
        text.contains(&format!("{}:3: user `eve`: an MD5", users.display()))
            && text.contains("htpasswd -B"),
        "{text}"
    );
    assert_eq!(status(basic("bob:builder")).await, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_login_logs_the_line_the_shipped_fail2ban_filter_matches() {
    if !tools_present() {
        return;
    }
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    htpasswd(&dir.path().join("users"), true, "alice", "wonderland");
    let text = auth_config(up, "").replace("{dir}", &dir.path().display().to_string());
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let line = weir.wait_for(|l| l.contains("listening") && l.contains("listener=web"));
    let addr: SocketAddr = line
        .split("addr=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("addr")
        .parse()
        .expect("socket addr");
    let request = format!(
        "GET /echo HTTP/1.1\r\nHost: site.example\r\nAuthorization: {}\r\nConnection: close\r\n\r\n",
        basic("alice:queen")
    );
    let answer = raw(addr, request.as_bytes(), WAIT).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let line = weir.wait_for(|l| l.contains("auth_failed"));
    assert!(
        line.contains("weir: auth_failed client=127.0.0.1 route=main host=site.example"),
        "{line}"
    );
    if !can_run(
        have("fail2ban-regex"),
        "fail2ban-regex is not installed",
        "apt-get install fail2ban",
        "WEIR_REQUIRE_HTPASSWD",
    ) {
        return;
    }
    let log = dir.path().join("weir.log");
    std::fs::write(&log, format!("{line}\n")).expect("write log");
    let filter = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/fail2ban/filter.d/weir.conf");
    let out = Command::new("fail2ban-regex")
        .arg(&log)
        .arg(&filter)
        .output()
        .expect("run fail2ban-regex");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("Lines: 1 lines, 0 ignored, 1 matched"),
        "{report}"
    );
}

/// A GET from `source` (a loopback address), the answer until close.
async fn get_from(source: &str, addr: SocketAddr, prefix: &[u8]) -> String {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{source}:0").parse().expect("source"))
        .expect("bind");
    let mut s = sock.connect(addr).await.expect("connect");
    let mut request = prefix.to_vec();
    request.extend_from_slice(
        b"GET /echo HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n",
    );
    s.write_all(&request).await.expect("write");
    read_until_close(&mut s, WAIT).await.0
}

#[tokio::test]
async fn route_rules_allow_and_deny_by_client_address_first_match_wins() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(
        up,
        "access = [\"deny 127.0.0.3\", \"allow 127.0.0.0/30\", \"deny all\"]\n",
    ))
    .await;
    let addr = weir.addr("web");
    assert!(
        get_from("127.0.0.1", addr, b"")
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert!(
        get_from("127.0.0.2", addr, b"")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let denied = get_from("127.0.0.3", addr, b"").await;
    assert!(
        denied.starts_with("HTTP/1.1 403"),
        "the earlier deny wins: {denied}"
    );
    let denied = get_from("127.0.0.5", addr, b"").await;
    assert!(denied.starts_with("HTTP/1.1 403"), "deny all: {denied}");
}

#[tokio::test]
async fn route_rules_see_the_client_a_proxy_protocol_header_names() {
    let up = demo_upstream().await;
    let text = simple_config(up, "access = [\"allow 10.0.0.0/8\", \"deny all\"]\n").replace(
        "address = \"127.0.0.1:0\"\n[[route]]",
        "address = \"127.0.0.1:0\"\nproxy_protocol_from = [\"127.0.0.1\"]\n[[route]]",
    );
    let weir = Weir::start(&text).await;
    let addr = weir.addr("web");
    let allowed = get_from(
        "127.0.0.1",
        addr,
        b"PROXY TCP4 10.1.2.3 10.0.0.9 5000 80\r\n",
    )
    .await;
    assert!(allowed.starts_with("HTTP/1.1 200"), "{allowed}");
    let denied = get_from(
        "127.0.0.1",
        addr,
        b"PROXY TCP4 192.0.2.1 10.0.0.9 5000 80\r\n",
    )
    .await;
    assert!(
        denied.starts_with("HTTP/1.1 403"),
        "the balancer is allowed, its client is not: {denied}"
    );
}

#[tokio::test]
async fn an_llm_route_refuses_an_address_in_its_protocols_shape() {
    let up = demo_upstream().await;
    let text = format!(
        "[log]\naccess_log = false\n[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\naccess = [\"deny all\"]\n\
         [[route.upstreams]]\nname = \"a\"\nurl = \"http://{up}\"\n"
    );
    let weir = Weir::start(&text).await;
    let (status, _, body) = get_with(&weir.url("web", "/v1/messages"), &[]).await;
    assert_eq!(status, 403);
    let json: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(json["type"], "error", "{body}");
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write page");
}

#[tokio::test]
async fn error_pages_replace_weirs_bodies_and_upstream_errors_only_when_asked() {
    let failing = upstream(|req: http::Request<hyper::body::Incoming>| async move {
        match req.uri().path() {
            "/boom" => text(500, "upstream stack trace"),
            _ => text(404, "upstream not found"),
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "5xx.html", "<h1>we are on it</h1>");
    write(dir.path(), "403.json", "{\"denied\":true}");
    write(dir.path(), "502.html", "<h1>bad gateway page</h1>");
    let down = closed_port().await;
    let text = format!(
        "[log]\naccess_log = false\n[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"down\"\npath = \"/down\"\nupstream = \"http://{down}\"\n\
         error_pages = [\"502 502.html\", \"5xx 5xx.html\"]\n\
         [[route]]\nname = \"denied\"\npath = \"/denied\"\nupstream = \"http://{down}\"\n\
         access = [\"deny all\"]\nerror_pages = [\"403 403.json\"]\n\
         [[route]]\nname = \"passed\"\npath = \"/passed\"\nupstream = \"http://{}\"\nstrip_prefix = true\n\
         error_pages = [\"5xx 5xx.html\"]\n\
         [[route]]\nname = \"caught\"\npath = \"/caught\"\nupstream = \"http://{}\"\nstrip_prefix = true\n\
         error_pages = [\"5xx 5xx.html\"]\nintercept_upstream_errors = true\n",
        failing.addr, failing.addr
    );
    let weir = Weir::start_in(dir, &text).await;

    let (status, headers, body) = get_with(&weir.url("web", "/down/x"), &[]).await;
    assert_eq!(status, 502);
    assert_eq!(
        body, "<h1>bad gateway page</h1>",
        "the exact status wins over 5xx"
    );
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["content-length"], body.len().to_string());

    let (status, headers, body) = get_with(&weir.url("web", "/denied"), &[]).await;
    assert_eq!((status.as_u16(), body.as_str()), (403, "{\"denied\":true}"));
    assert_eq!(headers["content-type"], "application/json");

    let (status, _, body) = get_with(&weir.url("web", "/passed/boom"), &[]).await;
    assert_eq!(
        (status.as_u16(), body.as_str()),
        (500, "upstream stack trace"),
        "not intercepted by default"
    );

    let (status, headers, body) = get_with(&weir.url("web", "/caught/boom"), &[]).await;
    assert_eq!(
        (status.as_u16(), body.as_str()),
        (500, "<h1>we are on it</h1>")
    );
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let (status, _, body) = get_with(&weir.url("web", "/caught/other"), &[]).await;
    assert_eq!(
        (status.as_u16(), body.as_str()),
        (404, "upstream not found"),
        "no page for 404: the upstream's answer"
    );
}

#[test]
fn broken_access_settings_are_config_problems_with_their_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "big.html", &"x".repeat(1024 * 1024 + 1));
    let path = dir.path().join("weir.toml");
    let text = "[[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"a\"\nupstream = \"http://127.0.0.1:1\"\n\
         access = [\"allow 10.0.0.0/33\", \"permit all\"]\n\
         error_pages = [\"404 missing.html\", \"5xx big.html\", \"302 big.html\"]\n\
         [route.basic_auth]\nusers_file = \"nobody\"\n\
         [[route]]\nname = \"b\"\npath = \"/b\"\nkind = \"openai\"\nerror_pages = [\"5xx big.html\"]\n\
         [[route.upstreams]]\nname = \"u\"\nurl = \"http://127.0.0.1:1\"\n";
    let problems = weir::testing::config::Config::parse(&path, text)
        .expect_err("refused")
        .to_string();
    for expected in [
        "w:6:11: route[0].access[0]: `10.0.0.0/33` is not an IP address",
        "route[0].access[1]: `permit all` does not start with `allow` or `deny`",
        "route[0].error_pages[0]:",
        "missing.html: cannot be read",
        "big.html: is larger than 1MiB",
        "`302` is not a 4xx or 5xx status",
        "route[0].basic_auth.users_file:",
        "nobody: cannot be read",
        "route[1].error_pages: LLM routes answer errors in their protocol's shape",
    ] {
        let expected = expected.replace("w:", &format!("{}:", path.display()));
        assert!(
            problems.contains(&expected),
            "missing {expected:?} in:\n{problems}"
        );
    }
}

#[tokio::test]
async fn a_listener_closes_a_denied_clients_connection_at_accept() {
    let up = demo_upstream().await;
    let text = simple_config(up, "").replace(
        "address = \"127.0.0.1:0\"\n[[route]]",
        "address = \"127.0.0.1:0\"\naccess = [\"allow 127.0.0.1\", \"deny all\"]\n[[route]]",
    );
    let weir = Weir::start(&text).await;
    let addr = weir.addr("web");
    assert!(
        get_from("127.0.0.1", addr, b"")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let denied = get_from("127.0.0.2", addr, b"").await;
    assert_eq!(denied, "", "closed without a byte of answer");
    assert!(
        eventually_metric(
            &weir,
            "weir_connections_refused_total{reason=\"denied\"}",
            1
        )
        .await,
        "{}",
        metrics(&weir).await
    );
}

#[tokio::test]
async fn a_listener_behind_proxy_protocol_checks_the_client_the_header_names() {
    let up = demo_upstream().await;
    let text = simple_config(up, "").replace(
        "address = \"127.0.0.1:0\"\n[[route]]",
        "address = \"127.0.0.1:0\"\nproxy_protocol_from = [\"127.0.0.1\"]\n\
         access = [\"allow 10.0.0.0/8\", \"deny all\"]\n[[route]]",
    );
    let weir = Weir::start(&text).await;
    let addr = weir.addr("web");
    let allowed = get_from(
        "127.0.0.1",
        addr,
        b"PROXY TCP4 10.1.2.3 10.0.0.9 5000 80\r\n",
    )
    .await;
    assert!(
        allowed.starts_with("HTTP/1.1 200"),
        "the balancer itself is not checked: {allowed}"
    );
    let denied = get_from(
        "127.0.0.1",
        addr,
        b"PROXY TCP4 192.0.2.1 10.0.0.9 5000 80\r\n",
    )
    .await;
    assert_eq!(denied, "", "the client it names is denied: closed");
    let direct = get_from("127.0.0.2", addr, b"").await;
    assert_eq!(direct, "", "a direct client outside the rules: closed");
    assert!(
        eventually_metric(
            &weir,
            "weir_connections_refused_total{reason=\"denied\"}",
            2
        )
        .await
    );
}

#[tokio::test]
async fn server_pages_answer_before_routing_and_are_every_plain_routes_default() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "404.html", "<h1>no such site</h1>");
    write(dir.path(), "5xx.html", "<h1>busy</h1>");
    let text = format!(
        "[log]\naccess_log = false\n[server]\nerror_pages = [\"404 404.html\", \"5xx 5xx.html\"]\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"site\"\nhost = \"site.example\"\nupstream = \"http://{up}\"\n\
         max_concurrent_requests = 1\n"
    );
    let weir = Weir::start_in(dir, &text).await;
    let addr = weir.addr("web");
    let (status, headers, body) =
        get_with(&format!("http://{addr}/"), &[("host", "other.example")]).await;
    assert_eq!(
        (status.as_u16(), body.as_str()),
        (404, "<h1>no such site</h1>")
    );
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");

    // The route's gate is full: its 503 (Retry-After kept) takes the
    // inherited page.
    let _held = held_stream(
        &format!("http://{addr}/sse?n=1000&interval_ms=50"),
        &[("host", "site.example")],
    )
    .await;
    let (status, headers, body) =
        get_with(&format!("http://{addr}/echo"), &[("host", "site.example")]).await;
    assert_eq!((status.as_u16(), body.as_str()), (503, "<h1>busy</h1>"));
    assert_eq!(headers["retry-after"], "1");
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_rules_see_its_forwarded_client() {
    let up = demo_upstream().await;
    let text = format!(
        "[server]\ntrusted_proxies = [\"127.0.0.1\"]\n{}",
        simple_config(up, "access = [\"allow 10.0.0.0/8\", \"deny all\"]\n")
    );
    let weir = Weir::start(&text).await;
    let url = weir.url("web", "/echo");
    let status = |xff: &'static str| {
        let url = url.clone();
        async move { get_with(&url, &[("x-forwarded-for", xff)]).await.0 }
    };
    assert_eq!(status("10.1.2.3").await, 200);
    assert_eq!(
        status("10.1.2.3, 192.0.2.1").await,
        403,
        "the right-most untrusted hop"
    );
    let direct = get_from("127.0.0.2", weir.addr("web"), b"").await;
    assert!(
        direct.starts_with("HTTP/1.1 403"),
        "an untrusted peer is itself: {direct}"
    );
}

#[tokio::test]
async fn a_401_page_keeps_the_challenge() {
    if !tools_present() {
        return;
    }
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    htpasswd(&dir.path().join("users"), true, "alice", "wonderland");
    write(dir.path(), "401.html", "<h1>who are you?</h1>");
    let text = simple_config(
        up,
        "error_pages = [\"401 401.html\"]\n[route.basic_auth]\nusers_file = \"users\"\n",
    );
    let weir = Weir::start_in(dir, &text).await;
    let (status, headers, body) = get_with(&weir.url("web", "/echo"), &[]).await;
    assert_eq!(
        (status.as_u16(), body.as_str()),
        (401, "<h1>who are you?</h1>")
    );
    assert_eq!(
        headers["www-authenticate"],
        "Basic realm=\"restricted\", charset=\"UTF-8\""
    );
}
