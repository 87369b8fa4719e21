//! PROXY protocol on a listener, through the real binary and real sockets:
//! a trusted source (127.0.0.1) names the client in a v1 or v2 header and
//! that client is what the upstream (X-Forwarded-For), the access log, the
//! per-IP cap and the rate limit see; an untrusted source (127.0.0.2,
//! which Linux loopback accepts as a source) is served as it is, and
//! refused if it sends a header. Headers are built here by hand from the
//! specification, not with the crate weir parses them with.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use common::process::*;
use common::*;

const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
const REQUEST: &[u8] = b"GET /echo HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n";

/// A v1 header naming `client`.
fn v1(client: SocketAddr) -> Vec<u8> {
    let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    let dst = if client.is_ipv4() {
        "10.0.0.9"
    } else {
        "2001:db8::9"
    };
    format!(
        "PROXY {family} {} {dst} {} 443\r\n",
        client.ip(),
        client.port()
    )
    .into_bytes()
}

/// A v2 `PROXY` header naming `client`, with `tlvs` after the addresses.
fn v2(client: SocketAddr, tlvs: &[u8]) -> Vec<u8> {
    let (family, mut addresses) = match client.ip() {
        IpAddr::V4(ip) => (0x11, [ip.octets().to_vec(), vec![10, 0, 0, 9]].concat()),
        IpAddr::V6(ip) => (
            0x21,
            [
                ip.octets().to_vec(),
                "2001:db8::9"
                    .parse::<std::net::Ipv6Addr>()
                    .expect("v6")
                    .octets()
                    .to_vec(),
            ]
            .concat(),
        ),
    };
    addresses.extend_from_slice(&client.port().to_be_bytes());
    addresses.extend_from_slice(&443u16.to_be_bytes());
    v2_raw(0x21, family, &[addresses.as_slice(), tlvs].concat())
}

/// A v2 header with the given version/command and family/protocol bytes.
fn v2_raw(version_command: u8, family: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(version_command);
    h.push(family);
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// The real binary with JSON logs, an admin listener, a listener `web`
/// taking PROXY headers from 127.0.0.1 only (`listener` adds keys to it),
/// and a route to the demo upstream (`route` adds keys to it).
struct Setup {
    weir: Proc,
    web: SocketAddr,
    admin: SocketAddr,
    _dir: tempfile::TempDir,
}

async fn start(top: &str, listener: &str, route: &str) -> Setup {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "[log]\nformat = \"json\"\n{top}\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         proxy_protocol_from = [\"127.0.0.1/32\"]\n{listener}\n\
         [[route]]\nname = \"site\"\nupstream = \"http://{up}\"\n{route}\n"
    )
    .replace("{dir}", &dir.path().display().to_string());
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = weir.listening("web");
    let admin = weir.admin();
    Setup {
        weir,
        web,
        admin,
        _dir: dir,
    }
}

/// A connection to `to` from the loopback address `from`.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("source"))
        .expect("bind");
    let s = sock.connect(to).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Write `bytes` (a header, a request, both) and read until weir closes;
/// panics if it has not closed within 5 s.
async fn exchange(s: &mut TcpStream, bytes: &[u8]) -> String {
    s.write_all(bytes).await.expect("write");
    let (out, closed) = read_until_close(s, Duration::from_secs(5)).await;
    assert!(closed, "weir closed the connection: {out}");
    out
}

/// The X-Forwarded-For the demo upstream's /echo saw.
fn forwarded_for(answer: &str) -> String {
    assert!(answer.starts_with("HTTP/1.1 200"), "answered: {answer}");
    let json = &answer[answer.find('{').expect("a JSON body")..];
    let echo = echo_json(json.trim_end());
    echo["headers"]["x-forwarded-for"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no X-Forwarded-For: {echo}"))
        .to_string()
}

async fn refused(s: &Setup) -> Option<u64> {
    metric_at(
        s.admin,
        "weir_connections_refused_total{reason=\"proxy_protocol\"}",
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn v1_and_v2_from_a_trusted_source_name_the_client() {
    let mut s = start("", "", "").await;
    let cases: [(&str, Vec<u8>); 4] = [
        ("192.0.2.1", v1("192.0.2.1:5001".parse().expect("addr"))),
        (
            "2001:db8::1",
            v1("[2001:db8::1]:5002".parse().expect("addr")),
        ),
        (
            "198.51.100.7",
            v2("198.51.100.7:5003".parse().expect("addr"), &[]),
        ),
        // With TLVs, as AWS NLB sends them (type 0xEA, the VPC endpoint).
        (
            "2001:db8::2",
            v2(
                "[2001:db8::2]:5004".parse().expect("addr"),
                &[&[0xEA, 0, 23, 1][..], b"vpce-08d2bf15fac5001c9"].concat(),
            ),
        ),
    ];
    for (client, header) in cases {
        let mut c = connect_from("127.0.0.1", s.web).await;
        let answer = exchange(&mut c, &[header.as_slice(), REQUEST].concat()).await;
        assert_eq!(
            forwarded_for(&answer),
            client,
            "header and request in one write"
        );
        // The access log's client is the one the header named.
        s.weir.wait_for(|l| {
            l.contains("weir::access") && l.contains(&format!("\"client\":\"{client}\""))
        });
    }
    assert_eq!(refused(&s).await.unwrap_or(0), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn v2_local_and_v1_unknown_are_the_balancers_own_connections() {
    let s = start("", "", "").await;
    for header in [v2_raw(0x20, 0x00, &[]), b"PROXY UNKNOWN\r\n".to_vec()] {
        let mut c = connect_from("127.0.0.1", s.web).await;
        let answer = exchange(&mut c, &[header.as_slice(), REQUEST].concat()).await;
        assert_eq!(forwarded_for(&answer), "127.0.0.1", "the socket's own peer");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_header_split_byte_by_byte_is_read_and_nothing_after_it_is_lost() {
    let s = start("", "", "").await;
    for header in [
        v1("192.0.2.5:1".parse().expect("addr")),
        v2("192.0.2.6:1".parse().expect("addr"), &[0xEA, 0, 1, 7]),
    ] {
        let mut c = connect_from("127.0.0.1", s.web).await;
        for b in &header {
            c.write_all(&[*b]).await.expect("write");
            // Its own segment: the next byte only after weir had a chance
            // to read this one.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The request begins in the same segment as nothing else.
        let answer = exchange(&mut c, REQUEST).await;
        let want = if header[0] == b'P' {
            "192.0.2.5"
        } else {
            "192.0.2.6"
        };
        assert_eq!(forwarded_for(&answer), want);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trusted_source_without_a_header_is_refused() {
    let mut s = start("", "", "").await;
    let mut c = connect_from("127.0.0.1", s.web).await;
    let answer = exchange(&mut c, REQUEST).await;
    assert_eq!(answer, "", "closed without an answer");
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            refused(&s).await == Some(1)
        })
        .await,
        "counted as refused{{reason=\"proxy_protocol\"}}"
    );
    s.weir
        .wait_for(|l| l.contains("connection refused") && l.contains("\"kind\":\"missing\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_untrusted_source_is_served_as_itself_and_refused_with_a_header() {
    let mut s = start("", "", "").await;
    // Without a header: served, as the socket's peer.
    let mut c = connect_from("127.0.0.2", s.web).await;
    let answer = exchange(&mut c, REQUEST).await;
    assert_eq!(forwarded_for(&answer), "127.0.0.2");
    // With one (v1, v2): refused, whatever follows.
    for header in [
        v1("192.0.2.1:1".parse().expect("addr")),
        v2("192.0.2.1:1".parse().expect("addr"), &[]),
    ] {
        let mut c = connect_from("127.0.0.2", s.web).await;
        let answer = exchange(&mut c, &[header.as_slice(), REQUEST].concat()).await;
        assert_eq!(answer, "", "no client can claim an address");
    }
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            refused(&s).await == Some(2)
        })
        .await
    );
    s.weir
        .wait_for(|l| l.contains("connection refused") && l.contains("\"kind\":\"untrusted\""));
    assert!(
        !s.weir
            .seen
            .iter()
            .any(|l| l.contains("\"client\":\"192.0.2.1\"")),
        "the claimed address reached no log"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_per_ip_cap_counts_the_carried_client_not_the_balancer() {
    let s = start("[connections]\nmax_per_ip = 1\n", "", "").await;
    let a: SocketAddr = "192.0.2.10:1".parse().expect("addr");
    let b: SocketAddr = "192.0.2.11:1".parse().expect("addr");
    // Client A holds a connection (its header sent, no request yet).
    let mut held = connect_from("127.0.0.1", s.web).await;
    held.write_all(&v2(a, &[])).await.expect("write");
    // A second connection for A is refused once its header names A...
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = connect_from("127.0.0.1", s.web).await;
        let answer = exchange(&mut again, &[v2(a, &[]).as_slice(), REQUEST].concat()).await;
        if answer.is_empty() {
            break;
        }
        // The held connection's header may not have been read yet.
        assert!(
            Instant::now() < deadline,
            "A's second connection was served: {answer}"
        );
    }
    let per_ip = metric_at(s.admin, "weir_connections_refused_total{reason=\"per_ip\"}").await;
    assert!(per_ip >= Some(1), "{per_ip:?}");
    // ...while client B, through the same balancer address, is served.
    let mut other = connect_from("127.0.0.1", s.web).await;
    let answer = exchange(&mut other, &[v2(b, &[]).as_slice(), REQUEST].concat()).await;
    assert_eq!(forwarded_for(&answer), "192.0.2.11");
    // And A is served again once its first connection is gone.
    drop(held);
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            let mut c = connect_from("127.0.0.1", s.web).await;
            let answer = exchange(&mut c, &[v2(a, &[]).as_slice(), REQUEST].concat()).await;
            answer.starts_with("HTTP/1.1 200")
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits_apply_to_the_carried_client() {
    let s = start("", "", "rate_limit_per_second = 1\nrate_limit_burst = 1\n").await;
    let status = |client: &'static str| async move {
        let mut c = connect_from("127.0.0.1", s.web).await;
        let header = v1(format!("{client}:1").parse().expect("addr"));
        let answer = exchange(&mut c, &[header.as_slice(), REQUEST].concat()).await;
        answer.lines().next().unwrap_or("").to_string()
    };
    assert!(status("192.0.2.20").await.contains("200"));
    assert!(
        status("192.0.2.20").await.contains("429"),
        "the same client, over its rate"
    );
    assert!(
        status("192.0.2.21").await.contains("200"),
        "another client through the same balancer has its own budget"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_listener_reads_the_header_before_the_client_hello() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key, ca) = write_cert(dir.path(), "site", &["example.test"]);
    let listener = format!(
        "tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}",
        cert.display(),
        key.display()
    );
    let s = start("", &listener, "").await;
    let connector =
        tokio_rustls::TlsConnector::from(Arc::new(tls_config(&ca, &[&rustls::version::TLS13])));
    for (header, client) in [
        (
            v2("203.0.113.5:443".parse().expect("addr"), &[]),
            "203.0.113.5",
        ),
        (v1("203.0.113.6:443".parse().expect("addr")), "203.0.113.6"),
    ] {
        let mut tcp = connect_from("127.0.0.1", s.web).await;
        // The header in a write of its own; the ClientHello follows.
        tcp.write_all(&header).await.expect("header");
        let name = rustls_pki_types::ServerName::try_from("example.test").expect("name");
        let mut tls = connector
            .connect(name, tcp)
            .await
            .expect("TLS after the header");
        tls.write_all(REQUEST).await.expect("request");
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out).await;
        let answer = String::from_utf8_lossy(&out).into_owned();
        assert_eq!(forwarded_for(&answer), client);
    }
    // Without the header, the trusted source's ClientHello is refused.
    let tcp = connect_from("127.0.0.1", s.web).await;
    let name = rustls_pki_types::ServerName::try_from("example.test").expect("name");
    assert!(connector.connect(name, tcp).await.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_and_overlong_headers_are_refused_at_once() {
    // A long head deadline: the refusals below must not wait for it.
    let s = start("[connections]\nrequest_head_timeout = \"30s\"\n", "", "").await;
    let overlong_v1 = [b"PROXY TCP4 ".as_slice(), &[b'9'; 200]].concat();
    let mut overlong_v2 = V2_SIGNATURE.to_vec();
    overlong_v2.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
    let cases: [&[u8]; 5] = [
        &overlong_v1,
        &overlong_v2,
        b"PROXY TCP4 192.0.2.1 10.0.0.9 99999 443\r\n",
        b"PROXY TCP4 192.0.2.1\r\nGET / HTTP/1.1\r\n\r\n",
        // Version 1 in a v2 header.
        &v2_raw(0x11, 0x11, &[0; 12]),
    ];
    let started = Instant::now();
    for bytes in cases {
        let mut c = connect_from("127.0.0.1", s.web).await;
        let answer = exchange(&mut c, bytes).await;
        assert_eq!(answer, "", "refused: {:?}", String::from_utf8_lossy(bytes));
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            refused(&s).await == Some(5)
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_half_header_is_closed_by_the_head_deadline() {
    let s = start("[connections]\nrequest_head_timeout = \"1s\"\n", "", "").await;
    let mut c = connect_from("127.0.0.1", s.web).await;
    let header = v1("192.0.2.1:1".parse().expect("addr"));
    c.write_all(&header[..10]).await.expect("write");
    let started = Instant::now();
    let (out, closed) = read_until_close(&mut c, Duration::from_secs(10)).await;
    assert!(closed && out.is_empty(), "closed without an answer: {out}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        metric_at(
            s.admin,
            "weir_connections_closed_total{reason=\"head_timeout\"}"
        )
        .await,
        Some(1)
    );
}

/// HAProxy, if installed, kept running for a test; killed on drop.
struct Haproxy(std::process::Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn haproxy_binary() -> Option<std::path::PathBuf> {
    [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists())
}

/// A free loopback port (closed again at once; HAProxy binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_the_real_haproxy_with_send_proxy_and_send_proxy_v2() {
    let found = haproxy_binary();
    if !can_run(
        found.is_some(),
        "haproxy is not installed",
        "apt-get install haproxy",
        "WEIR_REQUIRE_HAPROXY",
    ) {
        return;
    }
    let s = start("", "", "").await;
    let (v1_port, v2_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n  maxconn 100\n\
             defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
             frontend v1\n  bind 127.0.0.1:{v1_port}\n  default_backend weir_v1\n\
             frontend v2\n  bind 127.0.0.1:{v2_port}\n  default_backend weir_v2\n\
             backend weir_v1\n  server weir {web} send-proxy\n\
             backend weir_v2\n  server weir {web} send-proxy-v2\n",
            web = s.web
        ),
    )
    .expect("haproxy config");
    let child = std::process::Command::new(found.expect("found"))
        .args(["-db", "-f"])
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start haproxy");
    let _haproxy = Haproxy(child);
    for port in [v1_port, v2_port] {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        assert!(
            eventually_async(Duration::from_secs(10), || async {
                TcpStream::connect(addr).await.is_ok()
            })
            .await,
            "haproxy listens on {addr}"
        );
        // The client comes from 127.0.0.3; HAProxy connects to weir from
        // 127.0.0.1, the trusted source, and names 127.0.0.3.
        let mut c = connect_from("127.0.0.3", addr).await;
        let answer = exchange(&mut c, REQUEST).await;
        assert_eq!(forwarded_for(&answer), "127.0.0.3", "through port {port}");
    }
    assert_eq!(refused(&s).await.unwrap_or(0), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn cleartext_http2_follows_the_header() {
    let s = start("", "", "").await;
    let mut tcp = connect_from("127.0.0.1", s.web).await;
    tcp.write_all(&v2("192.0.2.30:1".parse().expect("addr"), &[]))
        .await
        .expect("header");
    // The HTTP/2 preface comes next: weir's sniff must see it whole.
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    let req = http::Request::builder()
        .uri(format!("http://{}/echo", s.web))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let (status, _, body) = split(resp).await;
    assert_eq!(status, 200);
    assert_eq!(
        echo_json(&body)["headers"]["x-forwarded-for"][0],
        "192.0.2.30"
    );
}
