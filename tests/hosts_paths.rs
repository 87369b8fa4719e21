//! Hosts and paths as the upstream will read them (issue 32, items 2, 3
//! and 9): a Host that is not a name or an IP literal with a port is 400
//! and never reaches an upstream; what is routed — the path with its dot
//! segments removed, `%2e` read as a dot — is what is forwarded; encoded
//! separators are refused unless the route takes raw paths; HTTP/2 cookie
//! crumbs reach an HTTP/1.1 upstream as one `Cookie`. The upstreams echo
//! what they received.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::h2raw::*;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// An upstream that answers what it received, as JSON, named `tag`.
async fn echo(tag: &'static str) -> Upstream {
    upstream(move |req: http::Request<Incoming>| async move {
        let all = |name: &str| -> Vec<String> {
            req.headers()
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect()
        };
        let seen = json!({
            "upstream": tag,
            "target": req.uri().path_and_query().map(|pq| pq.as_str()),
            "host": all("host"),
            "x-forwarded-host": all("x-forwarded-host"),
            "cookie": all("cookie"),
        });
        let mut resp = http::Response::new(body(seen.to_string()));
        resp.headers_mut().insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        resp
    })
    .await
}

/// `public` serves `/`, `private` serves `/private`, `raw` serves `/raw`
/// with `raw_path = true`; each on its own echoing upstream.
struct Site {
    weir: Weir,
    public: Upstream,
    private: Upstream,
}

async fn site() -> Site {
    let (public, private, raw) = (
        echo("public").await,
        echo("private").await,
        echo("raw").await,
    );
    let weir = Weir::start(&format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"public\"\nupstream = \"http://{}\"\n\
         [[route]]\nname = \"private\"\npath = \"/private\"\nupstream = \"http://{}\"\n\
         [[route]]\nname = \"raw\"\npath = \"/raw\"\nraw_path = true\nupstream = \"http://{}\"\n",
        public.addr, private.addr, raw.addr
    ))
    .await;
    Site {
        weir,
        public,
        private,
    }
}

/// A raw HTTP/1.1 request for `target` with these header lines: the status
/// and, when answered by an upstream, what it received.
async fn request(weir: &Weir, target: &str, headers: &str) -> (u16, Option<Value>) {
    let text = raw(
        weir.addr("web"),
        format!("GET {target} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n").as_bytes(),
        Duration::from_secs(5),
    )
    .await;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let seen = text
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok());
    (status, seen)
}

#[tokio::test]
async fn a_host_that_is_not_a_name_and_port_is_400_and_never_forwarded() {
    let site = site().await;
    for bad in [
        "app.example:443@evil.example",
        "evil.example/../x",
        "evil.example/",
        "evil\\example",
        "a..example",
        "app.example:",
        "app.example:x",
        "app.example:99999",
        "a,evil.example",
        "[::1",
    ] {
        let (status, seen) = request(&site.weir, "/", &format!("Host: {bad}\r\n")).await;
        assert_eq!(status, 400, "Host: {bad} → {seen:?}");
    }
    // An absolute-form target's authority is the host (RFC 9112 §3.2.2).
    let (status, _) = request(
        &site.weir,
        "http://app.example:443@evil.example/",
        "Host: app.example\r\n",
    )
    .await;
    assert_eq!(status, 400, "userinfo in the request target");
    assert_eq!(site.public.connections(), 0, "no upstream was asked");
}

#[tokio::test]
async fn the_normalised_host_is_what_goes_upstream() {
    let site = site().await;
    let (status, seen) = request(&site.weir, "/", "Host: App.EXAMPLE.:8080\r\n").await;
    assert_eq!(status, 200);
    let seen = seen.expect("echo");
    assert_eq!(seen["host"], json!(["app.example:8080"]));
    assert_eq!(seen["x-forwarded-host"], json!(["app.example:8080"]));
    let (_, seen) = request(&site.weir, "/", "Host: [::1]:8080\r\n").await;
    assert_eq!(seen.expect("echo")["host"], json!(["[::1]:8080"]));
}

#[tokio::test]
async fn an_authority_with_userinfo_over_h2c_is_400() {
    let site = site().await;
    let authority = b"app.example:443@evil.example";
    // GET, :path /, :scheme http, then :authority as a literal (static index 1).
    let mut block = vec![0x82, 0x84, 0x86, 0x01, authority.len() as u8];
    block.extend_from_slice(authority);
    let mut s = h2_connect(site.weir.addr("web")).await;
    let mut req = frame(SETTINGS, 0x1, 0, &[]);
    req.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &block));
    s.write_all(&req).await.expect("request");
    let (bytes, _) = read_bytes_until_close(&mut s, Duration::from_millis(700)).await;
    let frames = parse_frames(&bytes);
    let head = frames
        .iter()
        .find(|(kind, _, _)| *kind == HEADERS)
        .unwrap_or_else(|| panic!("no response head: {frames:?}"));
    // :status 400 is static table entry 12.
    assert_eq!(head.2.first(), Some(&0x8c), "status 400: {head:?}");
    assert_eq!(site.public.connections(), 0, "no upstream was asked");
}

#[tokio::test]
async fn dot_segments_route_and_forward_as_the_upstream_resolves_them() {
    let site = site().await;
    for target in [
        "/x/../private/1k.txt?a=1",
        "/x/%2e%2e/private/1k.txt?a=1",
        "/x/%2E%2E/private/1k.txt?a=1",
        "/x/.%2e/private/1k.txt?a=1",
        "/x//..//private/./1k.txt?a=1",
        "/%70rivate/1k.txt?a=1",
    ] {
        let (status, seen) = request(&site.weir, target, "Host: app.example\r\n").await;
        assert_eq!(status, 200, "{target}");
        let seen = seen.expect("echo");
        assert_eq!(seen["upstream"], "private", "{target} → {seen}");
        assert_eq!(seen["target"], "/private/1k.txt?a=1", "{target} → {seen}");
    }
    // Out of a route: the route it resolves to serves it.
    let (_, seen) = request(&site.weir, "/private/../1k.txt", "Host: app.example\r\n").await;
    let seen = seen.expect("echo");
    assert_eq!(
        (&seen["upstream"], &seen["target"]),
        (&json!("public"), &json!("/1k.txt"))
    );
}

#[tokio::test]
async fn encoded_separators_are_refused_unless_the_route_takes_raw_paths() {
    let site = site().await;
    for target in [
        "/private%2f1k.txt",
        "/x/..%2Fprivate/1k.txt",
        "/a%5cb",
        "/a%5Cb",
        "/a%00b",
        "/a%zz",
    ] {
        let (status, seen) = request(&site.weir, target, "Host: app.example\r\n").await;
        assert_eq!(status, 400, "{target} → {seen:?}");
    }
    assert_eq!(site.public.connections() + site.private.connections(), 0);
    // A raw route is chosen by the normalised path, and gets the path as sent.
    let (status, seen) = request(&site.weir, "/raw/a%2Fb/../c", "Host: app.example\r\n").await;
    assert_eq!(status, 200);
    let seen = seen.expect("echo");
    assert_eq!(
        (&seen["upstream"], &seen["target"]),
        (&json!("raw"), &json!("/raw/a%2Fb/../c"))
    );
}

#[tokio::test]
async fn http2_cookie_crumbs_reach_an_http1_upstream_as_one_cookie() {
    let site = site().await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let req = http::Request::get(site.weir.url("web", "/c"))
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .header("cookie", "c=3")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = client.request(req).await.expect("response");
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let seen: Value = serde_json::from_slice(&bytes).expect("echo");
    assert_eq!(seen["cookie"], json!(["a=1; b=2; c=3"]), "{seen}");
}
