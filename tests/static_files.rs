//! Static routes (`kind = "static"`), the real binary over real sockets:
//! one tree served by weir and by Debian's nginx, their answers compared
//! byte for byte (status, body, the headers a cache or a download manager
//! reads) for plain GETs and HEADs, ranges, conditional requests, a
//! directory redirect, a missing file and a path climbing out of the root;
//! then what only weir does: symlinks out of the root refused, hidden
//! names, a single-page app's fallback, precompressed siblings (curl
//! decodes the gzip one), 405, and the process's file slots (a full set
//! sheds, a client that hangs up mid-download frees its slot).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::can_run;
use common::nginx::{Answer, Nginx, ask, nginx_found};
use common::process::{Proc, write_config};

/// The tree both servers serve, and a directory beside it.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    big: Vec<u8>,
}

const SECRET: &str = "outside the root\n";
const APP_JS: &str =
    "document.getElementById('app').textContent = 'rendered by ' + location.pathname;\n";

fn tree() -> Tree {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("www");
    let put = |rel: &str, data: &[u8]| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dirs");
        std::fs::write(p, data).expect("write");
    };
    put(
        "index.html",
        b"<!doctype html><html><body><div id=\"app\">static</div><script src=\"/app.js\"></script></body></html>\n",
    );
    put("style.css", b"body { color: #333 }\n");
    put("app.js", APP_JS.as_bytes());
    put("data.json", b"{\"a\":1}\n");
    put("notes.txt", b"plain text, one line\n");
    put(
        "logo.png",
        &[0x89, b'P', b'N', b'G', 13, 10, 26, 10, 0, 0, 0, 0],
    );
    put(
        "image.svg",
        b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
    );
    put("blob.weird", b"no type known");
    put("empty.txt", b"");
    put("sub/index.html", b"<p>sub</p>\n");
    put("sub/page.html", b"<p>page</p>\n");
    put("nodir/file.txt", b"in a directory without an index\n");
    put(".env", b"SECRET=1\n");
    put("app.js.br", b"pretend brotli");
    // A real gzip sibling, made by gzip(1), for curl to decode.
    let status = Command::new("gzip")
        .args(["-k", "-9"])
        .arg(root.join("app.js"))
        .status()
        .expect("gzip");
    assert!(status.success());
    let big: Vec<u8> = (0..4 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    put("big.bin", &big);
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), SECRET).expect("secret");
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("leak.txt")).expect("link");
    std::os::unix::fs::symlink("notes.txt", root.join("inlink.txt")).expect("link");
    std::os::unix::fs::symlink(".env", root.join("env.txt")).expect("link");
    Tree {
        _dir: dir,
        root,
        big,
    }
}

/// weir serving `root` with a static route; `keys` go in the route,
/// `server` in `[server]`.
struct WeirSite {
    _proc: Proc,
    _dir: tempfile::TempDir,
    addr: SocketAddr,
}

fn weir(root: &Path, server: &str, keys: &str) -> WeirSite {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        &dir,
        &format!(
            "[log]\nformat = \"json\"\naccess_log = false\n[server]\n{server}\n\
             [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"site\"\nkind = \"static\"\nroot = \"{}\"\n{keys}\n",
            root.display()
        ),
    );
    let mut proc = Proc::run(&config);
    let addr = proc.listening("web");
    WeirSite {
        _proc: proc,
        _dir: dir,
        addr,
    }
}

/// Debian's nginx serving `root`, set as an operator moving to weir would
/// compare it: mime.types, `if_modified_since before` (RFC 9110's rule,
/// which weir follows; nginx's default is `exact`), `max_ranges 1` (weir
/// serves one range), `absolute_redirect off` (weir's Location is a path).
fn nginx(root: &Path) -> Nginx {
    Nginx::start(&format!(
        "  if_modified_since before;\n  max_ranges 1;\n  absolute_redirect off;\n\
         server {{\n    listen 127.0.0.1:{{port}};\n    root {};\n    index index.html;\n  }}\n",
        root.display()
    ))
}

/// The headers whose values must be the same from both servers (when
/// either sends one).
const COMPARED: &[&str] = &[
    "content-type",
    "content-length",
    "content-range",
    "etag",
    "last-modified",
    "accept-ranges",
    "location",
    "content-encoding",
];

/// How much of an answer is compared.
#[derive(Clone, Copy, PartialEq)]
enum Compare {
    /// Status, body and every header of [`COMPARED`].
    Whole,
    /// Status and `Content-Range`: error bodies are each server's own
    /// (nginx's HTML page, weir's error shape).
    Status,
}

fn compare(
    weir: SocketAddr,
    nginx: SocketAddr,
    method: &str,
    path: &str,
    extra: &str,
    how: Compare,
) -> Answer {
    let w = ask(weir, method, path, extra);
    let n = ask(nginx, method, path, extra);
    let what = format!("{method} {path} {extra:?}");
    assert_eq!(w.status, n.status, "{what}: status");
    if how == Compare::Status {
        assert_eq!(
            w.header("content-range"),
            n.header("content-range"),
            "{what}: content-range"
        );
        return w;
    }
    for name in COMPARED {
        assert_eq!(
            w.header(name),
            n.header(name),
            "{what}: {name}\nweir: {w:?}\nnginx: {n:?}"
        );
    }
    assert!(
        w.body == n.body,
        "{what}: bodies differ ({} and {} bytes)",
        w.body.len(),
        n.body.len()
    );
    w
}

#[test]
fn answers_match_nginx_byte_for_byte() {
    if !nginx_found() {
        return;
    }
    let t = tree();
    let w = weir(&t.root, "", "");
    let n = nginx(&t.root);
    let (w, n) = (w.addr, n.addr);
    use Compare::*;

    // Plain GETs and HEADs: types, lengths, validators, Accept-Ranges.
    for path in [
        "/notes.txt",
        "/style.css",
        "/data.json",
        "/logo.png",
        "/image.svg",
        "/blob.weird",
        "/empty.txt",
        "/",
        "/sub/",
        "/sub/page.html",
        "/big.bin",
        "/index.html",
    ] {
        let got = compare(w, n, "GET", path, "", Whole);
        assert_eq!(got.status, 200, "{path}");
        compare(w, n, "HEAD", path, "", Whole);
    }
    let big = compare(w, n, "GET", "/big.bin", "", Whole);
    assert!(big.body == t.big, "the large file whole");
    let etag = big.header("etag").expect("etag").to_string();
    let modified = big
        .header("last-modified")
        .expect("last-modified")
        .to_string();

    // Ranges: one, suffix, open, past the end, several, malformed, HEAD.
    for (range, status, how) in [
        ("bytes=10-99", 206, Whole),
        ("bytes=-500", 206, Whole),
        ("bytes=4000000-", 206, Whole),
        ("bytes=0-0", 206, Whole),
        ("bytes=4194300-9999999", 206, Whole),
        ("bytes=99999999-", 416, Status),
        ("bytes=-0", 416, Status),
        ("bytes=0-1,5-6", 200, Whole),
        ("bytes=abc", 416, Status),
        ("items=0-1", 200, Whole),
    ] {
        let got = compare(w, n, "GET", "/big.bin", &format!("Range: {range}\r\n"), how);
        assert_eq!(got.status, status, "{range}");
    }
    let part = compare(w, n, "GET", "/big.bin", "Range: bytes=10-99\r\n", Whole);
    assert!(part.body == t.big[10..100]);
    assert_eq!(part.header("content-range"), Some("bytes 10-99/4194304"));
    let none = compare(
        w,
        n,
        "GET",
        "/big.bin",
        "Range: bytes=99999999-\r\n",
        Status,
    );
    assert_eq!(none.header("content-range"), Some("bytes */4194304"));
    compare(w, n, "HEAD", "/big.bin", "Range: bytes=-500\r\n", Whole);
    compare(w, n, "GET", "/empty.txt", "Range: bytes=0-\r\n", Whole);

    // Conditional requests.
    for (extra, status) in [
        (format!("If-None-Match: {etag}\r\n"), 304),
        (format!("If-None-Match: \"x\", W/{etag}\r\n"), 304),
        ("If-None-Match: \"nope\"\r\n".to_string(), 200),
        (format!("If-Modified-Since: {modified}\r\n"), 304),
        (
            "If-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n".to_string(),
            200,
        ),
        (format!("Range: bytes=0-9\r\nIf-Range: {etag}\r\n"), 206),
        ("Range: bytes=0-9\r\nIf-Range: \"old\"\r\n".to_string(), 200),
        (format!("Range: bytes=0-9\r\nIf-Range: {modified}\r\n"), 206),
    ] {
        let got = compare(w, n, "GET", "/big.bin", &extra, Whole);
        assert_eq!(got.status, status, "{extra}");
    }
    let got = compare(w, n, "GET", "/big.bin", "If-Match: \"nope\"\r\n", Status);
    assert_eq!(got.status, 412);

    // A directory without its slash, a directory without an index, a
    // missing file.
    let moved = compare(w, n, "GET", "/sub", "", Status);
    assert_eq!(moved.status, 301);
    for path in ["/sub", "/sub?a=1&b=2"] {
        let (wa, na) = (ask(w, "GET", path, ""), ask(n, "GET", path, ""));
        assert_eq!(wa.header("location"), na.header("location"), "{path}");
    }
    assert_eq!(
        ask(w, "GET", "/sub?a=1", "").header("location"),
        Some("/sub/?a=1")
    );
    assert_eq!(compare(w, n, "GET", "/nodir/", "", Status).status, 403);
    assert_eq!(compare(w, n, "GET", "/nope.html", "", Status).status, 404);
    assert_eq!(compare(w, n, "GET", "/notes.txt/", "", Status).status, 404);

    // Climbing out of the root: neither serves what is beside it (nginx
    // refuses the path with 400; weir resolves the dot segments as RFC
    // 3986 says, inside the root, where there is no such file).
    for path in [
        "/../outside/secret.txt",
        "/sub/../../outside/secret.txt",
        "/%2e%2e/outside/secret.txt",
    ] {
        let (wa, na) = (ask(w, "GET", path, ""), ask(n, "GET", path, ""));
        assert_eq!(wa.status, 404, "{path}");
        assert!(
            matches!(na.status, 400 | 404),
            "{path}: nginx {}",
            na.status
        );
        assert!(
            !String::from_utf8_lossy(&wa.body).contains(SECRET.trim()),
            "{path}"
        );
    }
}

#[test]
fn javascript_is_text_javascript_as_rfc_9239_says() {
    let t = tree();
    let w = weir(&t.root, "", "");
    let got = ask(w.addr, "GET", "/app.js", "");
    assert_eq!(got.status, 200);
    // nginx 1.22's mime.types still says application/javascript.
    assert_eq!(got.header("content-type"), Some("text/javascript"));
    assert_eq!(got.body, APP_JS.as_bytes());
}

#[test]
fn a_symlink_out_of_the_root_is_refused_unless_followed() {
    let t = tree();
    let strict = weir(&t.root, "", "");
    let leak = ask(strict.addr, "GET", "/leak.txt", "");
    assert_eq!(leak.status, 404);
    assert!(!String::from_utf8_lossy(&leak.body).contains(SECRET.trim()));
    let inside = ask(strict.addr, "GET", "/inlink.txt", "");
    assert_eq!(
        (inside.status, inside.body.as_slice()),
        (200, &b"plain text, one line\n"[..])
    );
    // Content-Type from the name asked for, as nginx.
    assert_eq!(inside.header("content-type"), Some("text/plain"));

    let open = weir(&t.root, "", "follow_symlinks = true");
    let leak = ask(open.addr, "GET", "/leak.txt", "");
    assert_eq!(
        (leak.status, leak.body.as_slice()),
        (200, SECRET.as_bytes())
    );
}

#[test]
fn hidden_names_bad_paths_and_other_methods() {
    let t = tree();
    let w = weir(&t.root, "", "");
    assert_eq!(ask(w.addr, "GET", "/.env", "").status, 404);
    assert_eq!(
        ask(w.addr, "GET", "/%2eenv", "").status,
        404,
        "an escaped dot is a dot"
    );
    assert_eq!(ask(w.addr, "GET", "/.git/config", "").status, 404);
    assert_eq!(
        ask(w.addr, "GET", "/env.txt", "").status,
        404,
        "a plain name for a hidden file"
    );
    // A FIFO is never opened (opening one blocks until a writer comes).
    let fifo = Command::new("mkfifo")
        .arg(t.root.join("pipe.txt"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    assert_eq!(ask(w.addr, "GET", "/pipe.txt", "").status, 404);
    for bad in ["/a%00b", "/a%2fb"] {
        assert_eq!(ask(w.addr, "GET", bad, "").status, 400, "{bad}");
    }
    let post = ask(w.addr, "POST", "/notes.txt", "Content-Length: 3\r\n\r\nabc");
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    let shown = weir(&t.root, "", "serve_hidden = true");
    assert_eq!(ask(shown.addr, "GET", "/.env", "").body, b"SECRET=1\n");
}

#[test]
fn a_single_page_app_gets_its_index_for_every_unknown_path() {
    let t = tree();
    let w = weir(
        &t.root,
        "",
        "fallback = \"/index.html\"\ncache_control = \"no-cache\"",
    );
    let index = std::fs::read(t.root.join("index.html")).expect("index");
    for path in ["/some/deep/link", "/missing.js", "/.env", "/leak.txt"] {
        let got = ask(w.addr, "GET", path, "");
        assert_eq!((got.status, &got.body), (200, &index), "{path}");
        assert_eq!(got.header("content-type"), Some("text/html"), "{path}");
        assert_eq!(got.header("cache-control"), Some("no-cache"), "{path}");
    }
    // Real files still win; a directory without an index stays 403.
    assert_eq!(
        ask(w.addr, "GET", "/sub/page.html", "").body,
        b"<p>page</p>\n"
    );
    assert_eq!(ask(w.addr, "GET", "/nodir/", "").status, 403);
    assert_eq!(ask(w.addr, "GET", "/sub", "").status, 301);
}

#[test]
fn a_prefix_maps_as_nginx_root_or_with_strip_prefix_as_alias() {
    let t = tree();
    let alias = weir(&t.root, "", "path = \"/assets\"\nstrip_prefix = true");
    let css = ask(alias.addr, "GET", "/assets/style.css", "");
    assert_eq!(
        (css.status, css.body.as_slice()),
        (200, &b"body { color: #333 }\n"[..])
    );
    assert_eq!(
        ask(alias.addr, "GET", "/assets/", "").body,
        std::fs::read(t.root.join("index.html")).expect("index")
    );
    assert_eq!(
        ask(alias.addr, "GET", "/assets/sub", "").header("location"),
        Some("/assets/sub/")
    );
    let root = weir(&t.root, "", "path = \"/sub\"");
    assert_eq!(
        ask(root.addr, "GET", "/sub/page.html", "").body,
        b"<p>page</p>\n"
    );
    assert_eq!(
        ask(root.addr, "GET", "/style.css", "").status,
        404,
        "no route"
    );
}

#[test]
fn a_precompressed_sibling_is_served_when_the_client_accepts_it() {
    let t = tree();
    let w = weir(&t.root, "", "precompressed = [\"br\", \"gzip\"]");
    let gz = std::fs::read(t.root.join("app.js.gz")).expect("gz");
    let cases: [(&str, Option<&str>, &[u8]); 5] = [
        (
            "Accept-Encoding: gzip, br\r\n",
            Some("br"),
            b"pretend brotli",
        ),
        ("Accept-Encoding: gzip\r\n", Some("gzip"), &gz),
        ("Accept-Encoding: br;q=0, gzip;q=0.5\r\n", Some("gzip"), &gz),
        ("Accept-Encoding: identity\r\n", None, APP_JS.as_bytes()),
        ("", None, APP_JS.as_bytes()),
    ];
    for (extra, encoding, body) in cases {
        let got = ask(w.addr, "GET", "/app.js", extra);
        assert_eq!(got.status, 200, "{extra}");
        assert_eq!(got.header("content-encoding"), encoding, "{extra}");
        assert_eq!(got.body, body, "{extra}");
        assert_eq!(
            got.header("content-type"),
            Some("text/javascript"),
            "{extra}"
        );
        assert_eq!(got.header("vary"), Some("Accept-Encoding"), "{extra}");
        assert_eq!(
            got.header("content-length"),
            Some(body.len().to_string().as_str())
        );
    }
    // curl decodes the gzip sibling back to the file.
    let out = Command::new("curl")
        .args(["-sS", "--compressed", "-H", "Accept-Encoding: gzip"])
        .arg(format!("http://{}/app.js", w.addr))
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, APP_JS.as_bytes());
    // A file without a sibling is itself.
    let css = ask(w.addr, "GET", "/style.css", "Accept-Encoding: gzip, br\r\n");
    assert_eq!(
        (css.header("content-encoding"), css.body.as_slice()),
        (None, &b"body { color: #333 }\n"[..])
    );
}

/// A download that nobody reads: the head and what fits in the socket
/// buffers have gone, the rest waits on the client.
fn stalled_download(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    let mut head = [0u8; 12];
    s.read_exact(&mut head).expect("head");
    assert_eq!(&head, b"HTTP/1.1 200");
    s
}

/// Poll `f` until it is true, for at most 10 s.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn the_file_slots_bound_static_work_and_a_client_that_hangs_up_frees_its_slot() {
    let t = tree();
    // Larger than loopback's socket buffers, so the download stays open.
    let huge = vec![7u8; 48 * 1024 * 1024];
    std::fs::write(t.root.join("huge.bin"), &huge).expect("huge");
    let w = weir(&t.root, "max_open_static_files = 1", "");

    let held = stalled_download(w.addr);
    let shed = ask(w.addr, "GET", "/notes.txt", "");
    assert_eq!(shed.status, 503, "the one slot is the download's");
    assert_eq!(shed.header("retry-after"), Some("1"));

    // The client hangs up mid-download: its slot comes back.
    drop(held);
    assert!(
        eventually(|| ask(w.addr, "GET", "/notes.txt", "").status == 200),
        "the slot was not freed"
    );
    // A finished response frees it too, again and again.
    for _ in 0..3 {
        assert_eq!(ask(w.addr, "GET", "/big.bin", "").body.len(), t.big.len());
    }
    assert_eq!(ask(w.addr, "GET", "/notes.txt", "").status, 200);
}

#[test]
fn a_browser_runs_the_single_page_app_at_a_deep_link() {
    let found = common::browser::chromium();
    if !can_run(
        found.is_some(),
        "chromium is not installed",
        "apt-get install chromium",
        "WEIR_REQUIRE_CHROMIUM",
    ) {
        return;
    }
    let t = tree();
    let w = weir(&t.root, "", "fallback = \"/index.html\"");
    let profile = tempfile::tempdir().expect("profile");
    let out = Command::new(found.expect("found"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("http://{}/some/deep/link?tab=2", w.addr))
        .stdin(Stdio::null())
        .output()
        .expect("chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    // The fallback gave the app's page; the page's script (a real file
    // beside it) ran and wrote what the browser's location says.
    assert!(
        dom.contains("<div id=\"app\">rendered by /some/deep/link</div>"),
        "the DOM chromium built:\n{dom}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
