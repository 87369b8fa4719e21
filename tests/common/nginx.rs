//! Debian's nginx as a peer to compare weir with, and a raw HTTP/1.1
//! client that reads an answer exactly as it came off the socket (both
//! servers' bytes, unparsed by any library of weir's).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::can_run;

pub const NGINX: &str = "/usr/sbin/nginx";

/// Whether nginx can be run (a visible skip, or a failure under
/// `WEIR_REQUIRE_NGINX`).
pub fn nginx_found() -> bool {
    can_run(
        Path::new(NGINX).exists() && Path::new("/etc/nginx/mime.types").exists(),
        "nginx is not installed",
        "apt-get install nginx",
        "WEIR_REQUIRE_NGINX",
    )
}

/// An answer as it came off the socket.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Lower-case names, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request on its own connection (`Connection: close`), read to the
/// end; `extra` is more header lines, each ending in `\r\n`.
pub fn ask(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Answer {
    ask_host(addr, "localhost", method, path, extra)
}

/// [`ask`], for the given Host.
pub fn ask_host(addr: SocketAddr, host: &str, method: &str, path: &str, extra: &str) -> Answer {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    parse(&raw)
}

pub fn parse(raw: &[u8]) -> Answer {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole head");
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = head
        .to_ascii_lowercase()
        .contains("\r\ntransfer-encoding: chunked");
    if chunked {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
    }
}

/// A chunked body's data (nginx chunks what it proxies or compresses).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = std::str::from_utf8(&raw[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .expect("chunk size");
        if size == 0 {
            return out;
        }
        let data = eol + 2;
        out.extend_from_slice(&raw[data..data + size]);
        raw = &raw[data + size + 2..];
    }
}

/// nginx running in the foreground on a port of its own, until dropped.
pub struct Nginx {
    child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Start nginx with `http` inside its `http {}` block, after the
    /// settings every comparison shares; `{port}` in it is the port nginx
    /// listens on, `{dir}` its own temporary directory.
    pub fn start(http: &str) -> Nginx {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let d = dir.path().display().to_string();
        let http = http
            .replace("{port}", &port.to_string())
            .replace("{dir}", &d);
        let conf = dir.path().join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
                 error_log {d}/error.log;\nevents {{ worker_connections 64; }}\n\
                 http {{\n  include /etc/nginx/mime.types;\n  default_type application/octet-stream;\n\
                 access_log off;\n  server_tokens off;\n  client_body_temp_path {d}/body;\n\
                 proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
                 uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n{http}\n}}\n"
            ),
        )
        .expect("nginx.conf");
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.path().join("startup.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen on {addr}: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, addr, dir }
    }
}
