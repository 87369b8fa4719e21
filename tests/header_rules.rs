//! Header rules and request ids (issue 33, "Header rules"): set, add and
//! remove on the request an upstream gets and on the response a client
//! gets — weir's own errors included —, every placeholder, the request id
//! made or taken from a trusted proxy only, in the access log of the real
//! binary, and the config problems `weir check` reports with their lines.
//! The upstream echoes what it received.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::process::*;
use common::*;
use hyper::body::Incoming;
use serde_json::{Value, json};

/// An upstream that answers, as JSON, the target and every header it got
/// (name → values, in order), with an `X-Powered-By` of its own.
async fn echo() -> Upstream {
    upstream(|req: http::Request<Incoming>| async move {
        let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in req.headers() {
            headers
                .entry(name.as_str().to_string())
                .or_default()
                .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
        let seen = json!({
            "target": req.uri().path_and_query().map(|pq| pq.as_str()),
            "headers": headers,
        });
        let mut resp = http::Response::new(body(seen.to_string()));
        let h = resp.headers_mut();
        h.insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        h.insert("x-powered-by", http::HeaderValue::from_static("app/1.0"));
        h.insert("x-app", http::HeaderValue::from_static("from-app"));
        resp
    })
    .await
}

fn config(up: &Upstream, server: &str, route: &str) -> String {
    format!(
        "[log]\naccess_log = false\n{server}\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{}\"\n{route}\n",
        up.addr
    )
}

/// What the upstream received, from its echo.
fn seen(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not the echo ({e}): {body}"))
}

fn header<'a>(seen: &'a Value, name: &str) -> Vec<&'a str> {
    seen["headers"][name]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn request_rules_remove_set_and_add_with_every_placeholder() {
    let up = echo().await;
    let weir = Weir::start(&config(
        &up,
        "",
        "[route.request_headers]\n\
         remove = [\"X-Secret\"]\n\
         set = [\"X-Facts: {host}|{client_ip}|{scheme}|{method}|{path}|{query}|{{lit}}\", \
                \"X-Port: {remote_port}\", \"X-Forwarded-For: rewritten\", \"Host: internal.example\"]\n\
         add = [\"X-Multi: from-weir\"]\n",
    ))
    .await;
    let url = weir.url("web", "/a/./b/../c?x=1&y=2");
    let (status, _, body) = get_with(
        &url,
        &[
            ("x-secret", "s3cret"),
            ("x-multi", "from-client"),
            ("x-facts", "client's"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let s = seen(&body);
    let addr = weir.addr("web");
    assert_eq!(
        header(&s, "x-facts"),
        [format!(
            "127.0.0.1:{}|127.0.0.1|http|GET|/a/c|x=1&y=2|{{lit}}",
            addr.port()
        )],
        "set replaces the client's field; the path is the one routed"
    );
    let port: u16 = header(&s, "x-port")[0].parse().expect("a port");
    assert_ne!(port, addr.port(), "the client's port, not weir's");
    assert!(header(&s, "x-secret").is_empty(), "removed");
    assert_eq!(
        header(&s, "x-multi"),
        ["from-client", "from-weir"],
        "added after"
    );
    assert_eq!(
        header(&s, "x-forwarded-for"),
        ["rewritten"],
        "a rule has the last word"
    );
    assert_eq!(
        header(&s, "host"),
        ["internal.example"],
        "Host set wins over preserve_host"
    );
    assert!(
        header(&s, "x-request-id").is_empty(),
        "no id unless asked for"
    );
}

#[tokio::test]
async fn a_fact_from_the_client_cannot_split_a_header() {
    let up = echo().await;
    let weir = Weir::start(&config(
        &up,
        "",
        "[route.request_headers]\nset = [\"X-Path: {path}\", \"X-Query: {query}\"]\n",
    ))
    .await;
    let answer = raw(
        weir.addr("web"),
        b"GET /x%0d%0aX-Injected:%201?q=%0d%0aX-Also:%202 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    let body = answer.split("\r\n\r\n").nth(1).expect("a body");
    let s = seen(body);
    assert_eq!(header(&s, "x-path"), ["/x%0D%0AX-Injected:%201"]);
    assert_eq!(header(&s, "x-query"), ["q=%0d%0aX-Also:%202"]);
    assert!(header(&s, "x-injected").is_empty() && header(&s, "x-also").is_empty());
}

#[tokio::test]
async fn response_rules_hold_for_upstream_answers_and_weirs_own_errors() {
    let up = echo().await;
    let dead = closed_port().await;
    let rules = "[route.response_headers]\nremove = [\"X-Powered-By\"]\n\
                 set = [\"X-Frame-Options: DENY\", \"X-App: replaced\"]\nadd = [\"X-Served: {scheme} {method}\"]\n";
    let weir = Weir::start(&format!(
        "{}[[route]]\nname = \"down\"\npath = \"/down\"\nupstream = \"http://{dead}\"\n{rules}",
        config(&up, "", rules)
    ))
    .await;
    let (status, h, _) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h.get_all("x-app").iter().collect::<Vec<_>>(), ["replaced"]);
    assert!(!h.contains_key("x-powered-by"), "removed");
    assert_eq!(h["x-served"], "http GET");

    let (status, h, _) = get_with(&weir.url("web", "/down"), &[]).await;
    assert_eq!(status, 502, "weir's own answer");
    assert_eq!(
        h["x-frame-options"], "DENY",
        "as nginx's `add_header … always`"
    );
    assert_eq!(h["x-served"], "http GET");
}

#[tokio::test]
async fn a_request_id_is_made_per_request_and_replaces_an_untrusted_one() {
    let up = echo().await;
    let weir = Weir::start(&config(
        &up,
        "",
        "request_id_header = \"X-Request-Id\"\n\
         [route.response_headers]\nset = [\"X-Request-Id: {request_id}\"]\n",
    ))
    .await;
    let url = weir.url("web", "/");
    let (_, h1, b1) = get_with(&url, &[("x-request-id", "client-chosen")]).await;
    let (_, h2, b2) = get_with(&url, &[]).await;
    let (s1, s2) = (seen(&b1), seen(&b2));
    let (id1, id2) = (header(&s1, "x-request-id"), header(&s2, "x-request-id"));
    assert_eq!(id1.len(), 1, "one id upstream: {b1}");
    assert_ne!(
        id1[0], "client-chosen",
        "127.0.0.1 is not a trusted proxy here"
    );
    for id in [id1[0], id2[0]] {
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
    }
    assert_ne!(id1, id2);
    assert_eq!(
        h1["x-request-id"], id1[0],
        "the client is told the id the upstream got"
    );
    assert_eq!(h2["x-request-id"], id2[0]);
}

#[tokio::test]
async fn a_trusted_proxy_names_the_request_id_within_bounds() {
    let up = echo().await;
    let weir = Weir::start(&config(
        &up,
        "[server]\ntrusted_proxies = [\"127.0.0.1/32\"]\n",
        "[route.request_headers]\nset = [\"X-Trace: {request_id}\"]\n",
    ))
    .await;
    let url = weir.url("web", "/");
    let id = |body: &str| header(&seen(body), "x-trace").concat();
    let (_, _, b) = get_with(&url, &[("x-request-id", "edge-7f3a:1")]).await;
    assert_eq!(
        id(&b),
        "edge-7f3a:1",
        "from a trusted proxy, in X-Request-Id by default"
    );
    let long = "a".repeat(129);
    for bad in [long.as_str(), "quote\"d", "with space"] {
        let (_, _, b) = get_with(&url, &[("x-request-id", bad)]).await;
        assert_eq!(id(&b).len(), 32, "{bad:?} is replaced by weir's own");
    }
    let (_, _, b) = get_with(&url, &[]).await;
    assert_eq!(id(&b).len(), 32, "none sent: made");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_request_id_is_in_the_access_line_of_the_binary() {
    let up = echo().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, access) = (dir.path().join("weir.log"), dir.path().join("access.log"));
    let text = format!(
        "[log]\nformat = \"json\"\nfile = \"{}\"\naccess_file = \"{}\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"ids\"\npath = \"/ids\"\nupstream = \"http://{}\"\nrequest_id_header = \"X-Correlation-Id\"\n\
         [[route]]\nname = \"plain\"\nupstream = \"http://{}\"\n",
        log.display(),
        access.display(),
        up.addr,
        up.addr
    );
    let path = write_config(&dir, &text);
    let _weir = Proc::run(&path);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(10), || read(&log)
            .contains("\"listener\":\"web\""))
        .await,
        "weir starts"
    );
    let line = read(&log);
    let web = log_addr(
        line.lines()
            .find(|l| l.contains("\"listener\":\"web\""))
            .expect("line"),
    );
    let (_, _, b) = get(&h1_client(), &format!("http://{web}/ids?tagged")).await;
    let sent = header(&seen(&b), "x-correlation-id").concat();
    assert_eq!(sent.len(), 32, "{b}");
    get(&h1_client(), &format!("http://{web}/plain?untagged")).await;
    assert!(
        eventually(Duration::from_secs(5), || read(&access)
            .contains("untagged"))
        .await
    );
    let lines = read(&access);
    let field = |tag: &str| -> Value {
        let line = lines
            .lines()
            .find(|l| l.contains(tag))
            .expect("an access line");
        let v: Value = serde_json::from_str(line).expect("json");
        v["request_id"].clone()
    };
    assert_eq!(
        field("tagged\""),
        Value::String(sent),
        "the id the upstream got"
    );
    assert_eq!(
        field("untagged"),
        Value::Null,
        "a route without ids writes none"
    );
}

/// `weir check` on `text`: its stderr, which must be a failure.
fn check_problems(text: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, text);
    let out = Command::new(WEIR)
        .args(["check", "--config", &path])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_rules_are_config_problems_with_their_lines() {
    let err = check_problems(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nupstream = \"http://127.0.0.1:9\"\nrequest_id_header = \"Content-Length\"\n\
         [route.request_headers]\nset = [\"Transfer-Encoding: chunked\", \"X-A: {nope}\"]\nadd = [\"Host: two\"]\n\
         [route.response_headers]\nset = [\"X-B\"]\nremove = [\"Connection\"]\n\
         [[route]]\npath = \"/llm\"\nkind = \"anthropic\"\n\
         [route.request_headers]\nset = [\"X-C: 1\"]\n\
         [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:9\"\n",
    );
    for expected in [
        "weir.toml:5:21: route[0].request_id_header: `Content-Length` cannot carry the request id",
        "weir.toml:7:8: route[0].request_headers.set[0]: `Transfer-Encoding` frames the message",
        "weir.toml:7:38: route[0].request_headers.set[1]: unknown placeholder `{nope}` (fix: placeholders are {host}, {client_ip}",
        "weir.toml:8:8: route[0].request_headers.add[0]: `Host` can only be set",
        "weir.toml:10:8: route[0].response_headers.set[0]: `X-B` has no `:`",
        "weir.toml:11:11: route[0].response_headers.remove[0]: `Connection` frames the message",
        "weir.toml:15:1: route[1].request_headers: `request_headers` does not apply to anthropic routes",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[tokio::test]
async fn response_rules_hold_on_llm_routes_and_keep_the_protocols_error_shape() {
    let down = common::llm::refusing().await;
    let weir = Weir::start(&common::llm::llm_config(
        "anthropic",
        &[("down", down)],
        "[route.response_headers]\nset = [\"X-Frame-Options: DENY\"]\n",
    ))
    .await;
    let (status, h, body) = common::llm::post(
        &weir,
        "/v1/messages",
        common::llm::messages_body("m", false),
        &[],
    )
    .await;
    assert!(status.is_server_error(), "{status} {body}");
    assert_eq!(h["x-frame-options"], "DENY");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["type"], "error", "the Anthropic envelope: {body}");
}
