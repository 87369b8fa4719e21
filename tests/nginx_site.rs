//! The whole site of docs/migrating-from-nginx.md, run as written:
//! `examples/site/` (weir's files, split into includes with environment
//! values) with the real binary, and `examples/site/nginx-sites.conf` with
//! Debian's nginx, both in front of the same upstreams and the same
//! directory. Each request below is sent to both and their answers
//! compared: what an operator moving the site would check.

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use common::nginx::{Answer, Nginx, ask_host, nginx_found};
use common::process::Proc;
use common::{TestBody, body, can_run, upstream};
use http::{Request, Response};
use hyper::body::Incoming;

const SITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/site");

/// An upstream that says what it was asked, padded past the smallest body
/// worth compressing, with what weir and nginx must have changed on the
/// way in headers of its answer.
async fn app(name: &'static str, req: Request<Incoming>) -> Response<TestBody> {
    let h = req.headers();
    let id = h
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The id's form (32 hex digits from both), not its value.
    let id_form = if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        "hex32"
    } else if id.is_empty() {
        "none"
    } else {
        "other"
    };
    let text = format!(
        "<!doctype html><title>{name}</title><p>{name} {} {} host={}</p>{}",
        req.method(),
        req.uri(),
        h.get("host").and_then(|v| v.to_str().ok()).unwrap_or("-"),
        "<p>padding so that the page is worth compressing.</p>".repeat(8)
    );
    Response::builder()
        .header("content-type", "text/html")
        .header("x-saw-request-id", id_form)
        .header(
            "x-saw-authorization",
            if h.contains_key("authorization") {
                "yes"
            } else {
                "no"
            },
        )
        .body(body(text))
        .expect("response")
}

/// The static site's files, and the users file made by Debian's htpasswd.
fn files(dir: &Path) {
    let www = dir.join("www");
    std::fs::create_dir_all(www.join("css")).expect("www");
    std::fs::write(
        www.join("index.html"),
        format!("<!doctype html><h1>home</h1>{}", "<p>news</p>".repeat(40)),
    )
    .expect("index");
    std::fs::write(www.join("css/site.css"), "body { margin: 0 }\n".repeat(30)).expect("css");
    std::fs::write(www.join("404.html"), "<!doctype html><h1>not here</h1>\n").expect("404");
    let status = Command::new("htpasswd")
        .args(["-B", "-b", "-c"])
        .arg(dir.join("api.htpasswd"))
        .args(["alice", "s3cret"])
        .status()
        .expect("htpasswd");
    assert!(status.success(), "htpasswd -B");
}

/// weir from `examples/site/` as written: copied whole, run with the
/// environment values that point it at the test's upstreams and files.
fn weir(dir: &Path, gitea: SocketAddr, api: SocketAddr) -> (Proc, SocketAddr) {
    let conf = dir.join("weir");
    std::fs::create_dir_all(conf.join("sites")).expect("conf dir");
    for file in [
        "weir.toml",
        "sites/10-git.toml",
        "sites/20-www.toml",
        "sites/30-api.toml",
    ] {
        std::fs::copy(Path::new(SITE).join(file), conf.join(file)).expect("copy site");
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(["run", "--config"])
        .arg(conf.join("weir.toml"))
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .env("GITEA_ADDR", gitea.to_string())
        .env("API_ADDR", api.to_string())
        .env("WWW_ROOT", dir.join("www"))
        .env("API_USERS", dir.join("api.htpasswd"));
    let mut proc = Proc::spawn_command(cmd);
    let addr = proc.listening("web");
    (proc, addr)
}

/// nginx with `examples/site/nginx-sites.conf`, its addresses and paths
/// replaced by the test's.
fn nginx(dir: &Path, gitea: SocketAddr, api: SocketAddr) -> Nginx {
    let conf = std::fs::read_to_string(Path::new(SITE).join("nginx-sites.conf")).expect("conf");
    let conf = conf
        .replace("listen 80;", "listen 127.0.0.1:{port};")
        .replace("127.0.0.1:3000", &gitea.to_string())
        .replace("127.0.0.1:8080", &api.to_string())
        .replace("/srv/www", &dir.join("www").display().to_string())
        .replace(
            "/etc/weir/api.htpasswd",
            &dir.join("api.htpasswd").display().to_string(),
        );
    Nginx::start(&conf)
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("gzip");
    out
}

/// Ask both; the status and the named headers must be the same.
fn both(
    servers: (SocketAddr, SocketAddr),
    host: &str,
    path: &str,
    extra: &str,
    same: &[&str],
) -> (Answer, Answer) {
    let w = ask_host(servers.0, host, "GET", path, extra);
    let n = ask_host(servers.1, host, "GET", path, extra);
    let what = format!("{host}{path} {extra:?}");
    assert_eq!(
        w.status, n.status,
        "{what}: status\nweir {w:?}\nnginx {n:?}"
    );
    for name in same {
        assert_eq!(
            w.header(name),
            n.header(name),
            "{what}: {name}\nweir {w:?}\nnginx {n:?}"
        );
    }
    (w, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migrated_site_answers_as_nginx_did() {
    let htpasswd = Command::new("htpasswd").arg("-h").output().is_ok();
    if !nginx_found()
        || !can_run(
            htpasswd,
            "htpasswd is not installed",
            "apt-get install apache2-utils",
            "WEIR_REQUIRE_HTPASSWD",
        )
    {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    files(dir.path());
    let gitea = upstream(|req| app("gitea", req)).await;
    let api = upstream(|req| app("api", req)).await;
    let (_weir, weir_addr) = weir(dir.path(), gitea.addr, api.addr);
    let nginx = nginx(dir.path(), gitea.addr, api.addr);
    let servers = (weir_addr, nginx.addr);
    let blocking =
        move |f: fn((SocketAddr, SocketAddr))| tokio::task::spawn_blocking(move || f(servers));

    blocking(|s| {
        // The forge: proxied with the client's Host, an id sent upstream,
        // the frame header added; the page compressed for who asks.
        let (w, n) = both(
            s,
            "git.example.com",
            "/alice/repo?tab=1",
            "",
            &[
                "content-type",
                "x-frame-options",
                "x-saw-request-id",
                "x-saw-authorization",
            ],
        );
        assert_eq!(w.body, n.body, "the page as the forge sent it");
        assert_eq!(w.header("x-saw-request-id"), Some("hex32"));
        let gz = "Accept-Encoding: gzip\r\n";
        let (w, n) = both(
            s,
            "git.example.com",
            "/alice/repo",
            gz,
            &["content-encoding", "x-frame-options"],
        );
        assert_eq!(w.header("content-encoding"), Some("gzip"));
        assert_eq!(gunzip(&w.body), gunzip(&n.body), "the same page, decoded");
        assert!(
            w.header("vary")
                .is_some_and(|v| v.contains("Accept-Encoding"))
        );
        assert!(
            n.header("vary")
                .is_some_and(|v| v.contains("Accept-Encoding"))
        );
    })
    .await
    .expect("forge");

    blocking(|s| {
        // The static site: files with nginx's validators and the cache
        // header, its own 404 page, the apex sent to www with the query.
        let same = [
            "content-type",
            "content-length",
            "etag",
            "last-modified",
            "cache-control",
        ];
        let (w, n) = both(s, "www.example.com", "/", "", &same);
        assert_eq!(w.status, 200);
        assert_eq!(w.body, n.body);
        let (w, n) = both(s, "www.example.com", "/css/site.css", "", &same);
        assert_eq!(w.body, n.body);
        let etag = w.header("etag").expect("etag").to_string();
        let (w, _) = both(
            s,
            "www.example.com",
            "/css/site.css",
            &format!("If-None-Match: {etag}\r\n"),
            &["etag"],
        );
        assert_eq!(w.status, 304);
        let (w, n) = both(
            s,
            "www.example.com",
            "/css/site.css",
            "Accept-Encoding: gzip\r\n",
            &["content-encoding", "etag"],
        );
        assert_eq!(gunzip(&w.body), gunzip(&n.body));
        let (w, n) = both(s, "www.example.com", "/no/such/page", "", &[]);
        assert_eq!(w.status, 404);
        for a in [&w, &n] {
            // weir names the page's charset; nginx sends the bare type.
            assert!(
                a.header("content-type")
                    .is_some_and(|t| t.starts_with("text/html"))
            );
        }
        assert_eq!(w.body, n.body, "the site's own 404 page");
        let (w, _) = both(s, "example.com", "/blog/post?ref=x", "", &["location"]);
        assert_eq!(w.status, 301);
        assert_eq!(
            w.header("location"),
            Some("https://www.example.com/blog/post?ref=x")
        );
    })
    .await
    .expect("static site");

    blocking(|s| {
        // The API: no password, a wrong one, the right one (and the
        // credential kept from the upstream); the admin part only for
        // the office's addresses, whoever asks.
        let (w, n) = both(s, "api.example.com", "/v1/items", "", &[]);
        assert_eq!(w.status, 401);
        for a in [&w, &n] {
            let challenge = a.header("www-authenticate").unwrap_or("");
            assert!(challenge.starts_with("Basic realm=\"api\""), "{challenge}");
        }
        let wrong = "Authorization: Basic YWxpY2U6bm9wZQ==\r\n"; // alice:nope
        let (w, _) = both(s, "api.example.com", "/v1/items", wrong, &[]);
        assert_eq!(w.status, 401);
        let right = "Authorization: Basic YWxpY2U6czNjcmV0\r\n"; // alice:s3cret
        let (w, n) = both(
            s,
            "api.example.com",
            "/v1/items",
            right,
            &["x-saw-authorization"],
        );
        assert_eq!(w.status, 200);
        assert_eq!(w.header("x-saw-authorization"), Some("no"));
        assert_eq!(w.body, n.body);
        let (w, _) = both(s, "api.example.com", "/admin/users", right, &[]);
        assert_eq!(w.status, 403, "127.0.0.1 is not the office");
    })
    .await
    .expect("api");
}
