//! Proxy-route upstreams on a unix domain socket (`unix:/run/app.sock`,
//! Caddy's `unix//run/app.sock`): a real hyper HTTP/1.1 server listening
//! on a socket in a temporary directory, weir in-process in front of it.
//! Requests and bodies go over the socket, connections are pooled, the
//! `Host` follows `preserve_host` (`localhost` when weir sends the
//! upstream's), health checks dial the socket, a socket that is not there
//! is a refused connect, and `weir check` names the spellings it refuses.

mod common;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;

use common::process::WEIR;
use common::*;

/// A real HTTP/1.1 server on a unix socket, answering with its name, the
/// request's method, path and `Host`, and the body it read; counts the
/// connections it accepted.
struct UnixUpstream {
    path: PathBuf,
    connections: Arc<AtomicUsize>,
    accepting: tokio::task::JoinHandle<()>,
}

impl UnixUpstream {
    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stop accepting and remove the socket, as an app that stopped does.
    fn stop(self) {
        self.accepting.abort();
        std::fs::remove_file(&self.path).expect("remove the socket");
    }
}

async fn unix_upstream(path: &Path, name: &'static str) -> UnixUpstream {
    let listener = UnixListener::bind(path).expect("bind the socket");
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    let accepting = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| async move {
                    let head = format!(
                        "{name} {} {} host={}",
                        req.method(),
                        req.uri(),
                        req.headers()
                            .get(http::header::HOST)
                            .and_then(|h| h.to_str().ok())
                            .unwrap_or("-"),
                    );
                    let body = req.into_body().collect().await.expect("body").to_bytes();
                    let text = format!("{head} body={}:{}", body.len(), body.len() % 251);
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    UnixUpstream {
        path: path.to_path_buf(),
        connections,
        accepting,
    }
}

fn config(servers: &str, extra: &str) -> String {
    format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\n{servers}\n{extra}\n"
    )
}

async fn request(
    client: &PlainClient,
    method: http::Method,
    url: &str,
    body: Bytes,
) -> (http::StatusCode, String) {
    let req = Request::builder()
        .method(method)
        .uri(url)
        .body(Full::new(body))
        .expect("request");
    let resp = client.request(req).await.expect("response");
    let (status, _, text) = split(resp).await;
    (status, text)
}

#[tokio::test]
async fn get_and_post_go_over_the_socket_on_one_pooled_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Relative: the socket is found beside the config file.
    let app = unix_upstream(&dir.path().join("app.sock"), "app").await;
    let weir = Weir::start_in(dir, &config("upstream = \"unix:app.sock\"", "")).await;
    let client = h1_client();
    let host = weir.addr("web").to_string();
    for i in 0..3 {
        let (status, text) = request(
            &client,
            http::Method::GET,
            &weir.url("web", &format!("/items/{i}?q=1")),
            Bytes::new(),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            text,
            format!("app GET /items/{i}?q=1 host={host} body=0:0"),
            "the client's Host by default (preserve_host)"
        );
    }
    let payload = Bytes::from(vec![b'x'; 300_000]);
    let (status, text) = request(
        &client,
        http::Method::POST,
        &weir.url("web", "/upload"),
        payload,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        text,
        format!("app POST /upload host={host} body=300000:{}", 300_000 % 251),
        "the whole body over the socket"
    );
    assert_eq!(
        app.connections(),
        1,
        "keep-alive: one connection for all four"
    );
}

#[tokio::test]
async fn without_preserve_host_the_upstream_is_sent_localhost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("app.sock");
    let _app = unix_upstream(&sock, "app").await;
    // Caddy's spelling, absolute.
    let servers = format!("servers = [\"unix/{}\"]", sock.display());
    let weir = Weir::start(&config(&servers, "preserve_host = false")).await;
    let (status, _, text) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(text, "app GET / host=localhost body=0:0");
}

#[tokio::test]
async fn a_missing_socket_is_a_refused_connect_until_the_app_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("later.sock");
    // Not there at config load: not a problem.
    let weir = Weir::start(&config(
        &format!("upstream = \"unix:{}\"", sock.display()),
        "",
    ))
    .await;
    let (status, _, _) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 502, "as a refused TCP connect");
    assert!(
        metric(
            &weir,
            "weir_upstream_errors_total{route=\"main\",kind=\"Connect\"}"
        )
        .await
        .is_some_and(|n| n >= 1),
        "counted as a connect failure"
    );
    let _app = unix_upstream(&sock, "app").await;
    let url = weir.url("web", "/");
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            get_with(&url, &[]).await.0 == 200
        })
        .await,
        "served once the socket is there (and the server back from its ejection)"
    );
}

#[tokio::test]
async fn in_a_group_a_missing_socket_is_passed_over_and_taken_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (gone, live) = (dir.path().join("gone.sock"), dir.path().join("live.sock"));
    let app = unix_upstream(&live, "live").await;
    let weir = Weir::start(&config(
        &format!(
            "servers = [\"unix:{}\", \"unix:{}\"]\nbalance = \"round_robin\"\neject_after = 2",
            gone.display(),
            live.display()
        ),
        "",
    ))
    .await;
    let payload = Bytes::from(vec![b'y'; 50_000]);
    for _ in 0..6 {
        let resp = send(
            http::Method::POST,
            &weir.url("web", "/upload"),
            &[],
            payload.clone(),
        )
        .await;
        let (status, _, text) = split(resp).await;
        assert_eq!(status, 200, "a POST whose socket was missing goes on");
        assert!(text.starts_with("live POST /upload"), "{text}");
        assert!(
            text.ends_with(&format!("body=50000:{}", 50_000 % 251)),
            "{text}"
        );
    }
    assert_eq!(
        metric(
            &weir,
            "weir_upstream_errors_total{route=\"main\",kind=\"Connect\"}"
        )
        .await,
        Some(2),
        "refused twice, then out of the rotation, as a refused TCP server"
    );
    assert!(app.connections() >= 1);
}

#[tokio::test]
async fn the_health_check_dials_the_socket_and_follows_it_going_and_coming_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let app_a = unix_upstream(&a, "a").await;
    let _app_b = unix_upstream(&b, "b").await;
    let weir = Weir::start(&config(
        &format!(
            "servers = [\"unix:{}\", \"unix:{}\"]\nbalance = \"round_robin\"",
            a.display(),
            b.display()
        ),
        "[route.health_check]\npath = \"/healthz\"\ninterval = \"50ms\"\ntimeout = \"50ms\"\nfall = 2\nrise = 1\n",
    ))
    .await;
    let up = format!(
        "weir_upstream_server_up{{route=\"main\",server=\"unix:{}\"}}",
        a.display()
    );
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            app_a.connections() >= 2
        })
        .await,
        "the checks reach the socket"
    );
    assert_eq!(metric(&weir, &up).await, Some(1));
    app_a.stop();
    assert!(
        eventually_metric(&weir, &up, 0).await,
        "the socket gone: two failed checks take it out"
    );
    for _ in 0..4 {
        let (status, _, text) = get_with(&weir.url("web", "/"), &[]).await;
        assert_eq!(status, 200);
        assert!(text.starts_with("b "), "nothing to the one out: {text}");
    }
    let app_a = unix_upstream(&a, "a").await;
    assert!(
        eventually_metric(&weir, &up, 1).await,
        "the socket back: one pass brings it in"
    );
    let mut seen_a = false;
    for _ in 0..4 {
        let (_, _, text) = get_with(&weir.url("web", "/"), &[]).await;
        seen_a |= text.starts_with("a ");
    }
    assert!(seen_a, "its share again");
    assert!(app_a.connections() >= 1);
}

#[test]
fn weir_check_refuses_tls_over_a_socket_and_a_bad_spelling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("weir.toml");
    std::fs::write(
        &path,
        "[[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[route]]\npath = \"/a\"\nupstream = \"https://unix:/run/app.sock:\"\n\
         [[route]]\npath = \"/b\"\nservers = [\"unix://run/app.sock\"]\n",
    )
    .expect("write");
    let out = std::process::Command::new(WEIR)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let path = path.display();
    assert!(err.starts_with("2 problems in the configuration:"), "{err}");
    assert!(
        err.contains(&format!(
            "{path}:5:12: route[0].upstream: `https://unix:/run/app.sock:`: TLS over a unix socket is not supported"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{path}:8:12: route[1].servers[0]: `unix://run/app.sock` does not name a socket path (fix: write it like \"unix:/run/app.sock\")"
        )),
        "{err}"
    );
}
