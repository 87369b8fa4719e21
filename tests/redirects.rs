//! Redirects and rewrites (issue 33): the `redirect` route kind (each
//! status, placeholders, the query kept, dropped or written by the
//! target), the path rewrite by regex and by `replace_prefix`, their
//! order with normalisation, `strip_prefix` and `raw_path`, and the config
//! problems `weir check` reports with their lines. Upstreams echo the
//! target they got.

mod common;

use std::process::Command;
use std::time::Duration;

use common::process::*;
use common::*;
use hyper::body::Incoming;

/// An upstream that answers the request target it got, as text.
async fn target_echo() -> Upstream {
    upstream(|req: http::Request<Incoming>| async move {
        let target = req
            .uri()
            .path_and_query()
            .map_or("", |pq| pq.as_str())
            .to_string();
        http::Response::new(body(target))
    })
    .await
}

const LISTENER: &str = "[log]\naccess_log = false\n\
                        [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n";

/// The status and `Location` a raw HTTP/1.1 request for `target` gets.
async fn redirected(weir: &Weir, host: &str, target: &str) -> (u16, String) {
    let answer = raw(
        weir.addr("web"),
        format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        Duration::from_secs(5),
    )
    .await;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let location = answer
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .unwrap_or("")
        .to_string();
    (status, location)
}

#[tokio::test]
async fn redirect_routes_answer_each_status_with_the_target_filled_in() {
    let mut text = LISTENER.to_string();
    for status in [301, 302, 303, 307, 308] {
        text.push_str(&format!(
            "[[route]]\npath = \"/s{status}\"\nredirect = \"{{scheme}}://new.example{{path}}\"\nredirect_status = {status}\n"
        ));
    }
    text.push_str(
        "[[route]]\npath = \"/default\"\nredirect = \"https://{host}/moved{path}\"\n\
         [[route]]\npath = \"/drop\"\nredirect = \"https://b.example{path}\"\nredirect_keep_query = false\n\
         [[route]]\npath = \"/own\"\nredirect = \"https://b.example/search?from=old\"\n\
         [[route]]\npath = \"/q\"\nredirect = \"https://b.example/{query}/x\"\n\
         [route.response_headers]\nset = [\"Cache-Control: no-store\"]\n",
    );
    let weir = Weir::start(&text).await;
    for status in [301, 302, 303, 307, 308] {
        assert_eq!(
            redirected(&weir, "a.test", &format!("/s{status}/x?k=v")).await,
            (status, format!("http://new.example/s{status}/x?k=v")),
            "the query is kept by default"
        );
    }
    assert_eq!(
        redirected(&weir, "A.Test:8080", "/default/a/../b").await,
        (301, "https://a.test:8080/moved/default/b".into()),
        "301 by default; the host normalised, the path as routed"
    );
    assert_eq!(
        redirected(&weir, "a.test", "/drop/p?secret=1").await,
        (301, "https://b.example/drop/p".into())
    );
    assert_eq!(
        redirected(&weir, "a.test", "/own?x=1").await,
        (301, "https://b.example/search?from=old".into()),
        "a target with its own query is not given the client's"
    );
    let answer = raw(
        weir.addr("web"),
        b"GET /q?a=1 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(
        answer.contains("location: https://b.example/a=1/x\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains("cache-control: no-store\r\n"),
        "response rules apply: {answer}"
    );
}

#[tokio::test]
async fn rewrites_replace_the_routed_path_and_keep_the_query() {
    let up = target_echo().await;
    let u = up.addr;
    let weir = Weir::start(&format!(
        "{LISTENER}\
         [[route]]\npath = \"/old\"\nupstream = \"http://{u}\"\n\
         rewrite_regex = \"^/old/(?P<rest>.*)$\"\nrewrite_to = \"/new/$${{rest}}\"\n\
         [[route]]\npath = \"/api\"\nupstream = \"http://{u}/base\"\nreplace_prefix = \"/v2\"\n\
         [[route]]\npath = \"/both\"\nupstream = \"http://{u}\"\nstrip_prefix = true\n\
         rewrite_regex = \"^/both/v1/\"\nrewrite_to = \"/both/v2/\"\n\
         [[route]]\npath = \"/raw\"\nupstream = \"http://{u}\"\nraw_path = true\nreplace_prefix = \"/r\"\n\
         [[route]]\nupstream = \"http://{u}\"\nreplace_prefix = \"/root\"\n"
    ))
    .await;
    let got = |path: &'static str| {
        let url = weir.url("web", path);
        async move {
            let (status, _, body) = get(&h1_client(), &url).await;
            assert_eq!(status, 200, "{path}: {body}");
            body
        }
    };
    assert_eq!(
        got("/old/a/b?x=1").await,
        "/new/a/b?x=1",
        "captures, the query kept"
    );
    assert_eq!(
        got("/x/../old/%61?y").await,
        "/new/a?y",
        "rewritten after the path is normalised"
    );
    assert_eq!(got("/old").await, "/old", "no match: unchanged");
    assert_eq!(got("/api/users?page=2").await, "/base/v2/users?page=2");
    assert_eq!(got("/api").await, "/base/v2", "the prefix alone");
    assert_eq!(
        got("/both/v1/items?z").await,
        "/v2/items?z",
        "the rewrite, then strip_prefix"
    );
    assert_eq!(
        got("/raw/a%2Fb?q").await,
        "/r/a%2Fb?q",
        "replace_prefix with a raw path: the rest as sent"
    );
    assert_eq!(
        got("/x?q=1").await,
        "/root/x?q=1",
        "under `/`: put in front"
    );
}

#[test]
fn bad_redirects_and_rewrites_are_config_problems_with_their_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(
        &dir,
        "[[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[route]]\npath = \"/a\"\nredirect = \"https://x{nope}\"\nupstream = \"http://127.0.0.1:9\"\n\
         [[route]]\npath = \"/b\"\nredirect = \"https://x\"\nredirect_status = 300\n\
         [[route]]\npath = \"/c\"\nupstream = \"http://127.0.0.1:9\"\nredirect_status = 302\n\
         rewrite_regex = \"^/c/(.*\"\nrewrite_to = \"c/$1?x\"\nreplace_prefix = \"/v2\"\nstrip_prefix = true\n\
         [[route]]\npath = \"/d\"\nupstream = \"http://127.0.0.1:9\"\nraw_path = true\n\
         rewrite_regex = \"^/d\"\nrewrite_to = \"/e\"\n",
    );
    let out = Command::new(WEIR)
        .args(["check", "--config", &path])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "weir.toml:5:12: route[0].redirect: unknown placeholder `{nope}` (fix: a redirect may use {host}, {path}, {query}, {scheme})",
        "weir.toml:6:12: route[0].upstream: `upstream` does not apply to redirect routes",
        "weir.toml:10:19: route[1].redirect_status: 300 is not a redirect status (fix: use 301, 302, 303, 307 or 308)",
        "weir.toml:14:19: route[2].redirect_status: `redirect_status` does not apply to proxy routes (fix: add `redirect",
        "weir.toml:15:17: route[2].rewrite_regex: not a regex weir can use",
        "weir.toml:16:14: route[2].rewrite_to: the rewritten path must start with `/`",
        "weir.toml:17:18: route[2].replace_prefix: `replace_prefix` already removes the matched prefix (fix: remove `strip_prefix`)",
        "weir.toml:23:17: route[3].rewrite_regex: a rewrite changes the routed path, and `raw_path` forwards the client's untouched",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}
