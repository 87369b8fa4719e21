//! Automatic HTTPS against a real ACME server: Pebble (the Let's Encrypt
//! team's test CA, from Debian's `pebble` package) with
//! `pebble-challtestsrv` as its DNS, answering 127.0.0.1 for every name.
//! Weir runs in-process with its real listeners; the CA validates over
//! real sockets (tls-alpn-01 on weir's TLS listener, http-01 on its plain
//! one), and a TLS client that trusts only Pebble's root checks the result.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::process::{Child, Command};

use common::*;

const NAME: &str = "a.weir.test";

/// A port for weir or Pebble to bind later. Below Linux's ephemeral
/// range (32768–60999): a port-0 pick from it could be taken, between this
/// check and weir's bind, by another test's outgoing connection or port-0
/// listener (a CI failure: `cannot bind 127.0.0.1:38703: Address already
/// in use`). Picks follow one sequence begun at a random point, so this
/// file's tests never pick one port twice.
fn free_port() -> u16 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let start = (std::collections::hash_map::RandomState::new().hash_one(std::process::id())
        % u64::from(SPAN)) as u32;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port from {FIRST} to {}", FIRST + SPAN);
}

/// Pebble and its DNS server, stopped on drop.
struct Pebble {
    _pebble: Child,
    _dns: Child,
    directory: String,
    /// Pebble's own TLS certificate (weir's `ca_file` for the directory).
    api_cert: PathBuf,
    api_cert_pem: String,
    management: SocketAddr,
    dns_management: SocketAddr,
}

/// Whether Pebble is installed; without it the test is skipped with a
/// `SKIPPED` line, unless CI (which installs it) says it is required.
fn have_pebble() -> bool {
    // `WEIR_TEST_LOG=weir=debug` shows weir's side of an order.
    if let Ok(filter) = std::env::var("WEIR_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let found = std::process::Command::new("pebble")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    can_run(
        found,
        "pebble is not installed",
        "apt-get install pebble (it brings pebble-challtestsrv)",
        "WEIR_REQUIRE_PEBBLE",
    )
}

impl Pebble {
    /// Start Pebble validating on weir's `http_port` and `tls_port`;
    /// `validity` shortens the certificates it issues.
    async fn start(
        dir: &Path,
        http_port: u16,
        tls_port: u16,
        validity: Option<u64>,
        eab: Option<(&str, &str)>,
    ) -> Pebble {
        let (api_cert, api_key, api_cert_pem) =
            write_cert(dir, "pebble-api", &["localhost", "127.0.0.1"]);
        // Pebble's four ports are picked free and then bound by another
        // process, so a concurrent test can take one in between: a start
        // whose children exit or never listen is tried again on fresh ports.
        for attempt in 1..=3 {
            if let Some(pebble) = Self::try_start(
                dir,
                (http_port, tls_port),
                validity,
                eab,
                (&api_cert, &api_key, &api_cert_pem),
            )
            .await
            {
                return pebble;
            }
            eprintln!("pebble did not start (attempt {attempt}); trying fresh ports");
        }
        panic!("pebble did not start on three sets of fresh ports");
    }

    async fn try_start(
        dir: &Path,
        (http_port, tls_port): (u16, u16),
        validity: Option<u64>,
        eab: Option<(&str, &str)>,
        (api_cert, api_key, api_cert_pem): (&Path, &Path, &str),
    ) -> Option<Pebble> {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let management = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let dns = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let dns_management = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut pebble = serde_json::json!({
            "listenAddress": listen.to_string(),
            "managementListenAddress": management.to_string(),
            "certificate": api_cert,
            "privateKey": api_key,
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
        });
        if let Some(v) = validity {
            pebble["certificateValidityPeriod"] = v.into();
        }
        if let Some((kid, key)) = eab {
            pebble["externalAccountBindingRequired"] = true.into();
            pebble["externalAccountMACKeys"] = serde_json::json!({ kid: key });
        }
        let config = dir.join("pebble.json");
        std::fs::write(
            &config,
            serde_json::to_vec(&serde_json::json!({ "pebble": pebble })).expect("json"),
        )
        .expect("write pebble config");
        let dns_child = Command::new("pebble-challtestsrv")
            .args(["-dns01", &dns.to_string()])
            .args(["-management", &dns_management.to_string()])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start pebble-challtestsrv");
        let pebble_child = Command::new("pebble")
            .arg("-config")
            .arg(&config)
            .args(["-dnsserver", &dns.to_string()])
            // Validate at once, never reject a nonce at random, and make
            // every order validate afresh (renewals included).
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start pebble");
        let mut children = (pebble_child, dns_child);
        for addr in [listen, management, dns_management] {
            let up = eventually_async(Duration::from_secs(20), || {
                let exited = matches!(children.0.try_wait(), Ok(Some(_)))
                    || matches!(children.1.try_wait(), Ok(Some(_)));
                async move {
                    // A child that exited (its port was taken) gives up at once.
                    exited || tokio::net::TcpStream::connect(addr).await.is_ok()
                }
            })
            .await;
            let exited = matches!(children.0.try_wait(), Ok(Some(_)))
                || matches!(children.1.try_wait(), Ok(Some(_)));
            if !up || exited {
                return None;
            }
        }
        Some(Pebble {
            _pebble: children.0,
            _dns: children.1,
            directory: format!("https://{listen}/dir"),
            api_cert: api_cert.to_path_buf(),
            api_cert_pem: api_cert_pem.to_string(),
            management,
            dns_management,
        })
    }

    /// The root Pebble signs with (generated at each start).
    async fn root(&self) -> String {
        let client = tls_client(&self.api_cert_pem, false);
        let resp = client
            .get(
                format!("https://{}/roots/0", self.management)
                    .parse()
                    .expect("url"),
            )
            .await
            .expect("pebble root");
        split(resp).await.2
    }

    /// Tell the DNS server to answer `ip` for `name` (or, with `None`, the
    /// default 127.0.0.1 again).
    async fn point(&self, name: &str, ip: Option<&str>) {
        let (path, body) = match ip {
            Some(ip) => (
                "/add-a",
                serde_json::json!({ "host": format!("{name}."), "addresses": [ip] }),
            ),
            None => (
                "/clear-a",
                serde_json::json!({ "host": format!("{name}.") }),
            ),
        };
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.dns_management,
            body.len()
        );
        let answer = raw(
            self.dns_management,
            request.as_bytes(),
            Duration::from_secs(5),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

/// A TLS connection to weir for `name`, trusting only `root_pem`, with an
/// HTTP/1.1 sender on it: returns the leaf weir served.
async fn connect(
    addr: SocketAddr,
    name: &str,
    root_pem: &str,
) -> Result<
    (
        CertificateDer<'static>,
        hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    ),
    String,
> {
    let mut config = tls_config(root_pem, &[&rustls::version::TLS13]);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(name.to_string()).expect("name"), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .cloned()
        .ok_or("no certificate")?
        .into_owned();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok((leaf, send))
}

/// GET `/` for `name` on an open connection: status and body.
async fn get_on(
    send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    name: &str,
) -> (u16, String) {
    let req = http::Request::get("/")
        .header("host", name)
        .body(Empty::new())
        .expect("request");
    let resp = send.send_request(req).await.expect("response");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Wait until a handshake for `name` succeeds against `root_pem`.
async fn certified(
    addr: SocketAddr,
    name: &str,
    root_pem: &str,
    within: Duration,
) -> CertificateDer<'static> {
    let trusted = eventually_async(within, || async {
        connect(addr, name, root_pem).await.is_ok()
    })
    .await;
    match connect(addr, name, root_pem).await {
        Ok((leaf, _)) if trusted => leaf,
        Ok(_) => panic!("no trusted certificate for {name} within {within:?}"),
        Err(e) => panic!("no trusted certificate for {name} within {within:?}: {e}"),
    }
}

struct Ports {
    http: u16,
    tls: u16,
}

fn config(ports: &Ports, pebble: &Pebble, upstream: SocketAddr, acme_extra: &str) -> String {
    format!(
        r#"
[admin]
address = "127.0.0.1:0"

[[listener]]
name = "http"
address = "127.0.0.1:{http}"

[[listener]]
name = "https"
address = "127.0.0.1:{tls}"
[listener.tls.acme]
directory = "{directory}"
ca_file = "{ca}"
email = "ops@weir.test"
state_dir = "{{dir}}/acme"
retry_base = "1s"
{acme_extra}

[[route]]
host = "{NAME}"
upstream = "http://{upstream}"
"#,
        http = ports.http,
        tls = ports.tls,
        directory = pebble.directory,
        ca = pebble.api_cert.display(),
    )
}

/// A running Pebble validating on two free ports weir will listen on,
/// its root, and an upstream for the route.
struct Setup {
    _dir: tempfile::TempDir,
    ports: Ports,
    pebble: Pebble,
    root: String,
    upstream: SocketAddr,
}

impl Setup {
    /// `None` when Pebble is not installed (and not required).
    async fn new(validity: Option<u64>) -> Option<Setup> {
        Self::with_eab(validity, None).await
    }

    /// With `eab`, Pebble only registers accounts bound to that key.
    async fn with_eab(validity: Option<u64>, eab: Option<(&str, &str)>) -> Option<Setup> {
        if !have_pebble() {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = Ports {
            http: free_port(),
            tls: free_port(),
        };
        let pebble = Pebble::start(dir.path(), ports.http, ports.tls, validity, eab).await;
        let root = pebble.root().await;
        Some(Setup {
            _dir: dir,
            ports,
            root,
            upstream: demo_upstream().await,
            pebble,
        })
    }

    fn config(&self, acme_extra: &str) -> String {
        config(&self.ports, &self.pebble, self.upstream, acme_extra)
    }
}

fn attempts(name: &str) -> String {
    format!("weir_certificate_issuance_attempts_total{{name=\"{name}\"}}")
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_alpn_01_certificate_is_issued_served_and_reused_after_restart() {
    let Some(setup) = Setup::new(None).await else {
        return;
    };
    let root = &setup.root;
    let text = setup.config("");
    let mut weir = Weir::start(&text).await;
    let https = weir.addr("https");
    let leaf = certified(https, NAME, root, Duration::from_secs(30)).await;
    let (_, mut send) = connect(https, NAME, root).await.expect("connect");
    let (status, body) = get_on(&mut send, NAME).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&weir, &attempts(NAME)).await, Some(1));
    let expiry = metric(
        &weir,
        &format!("weir_certificate_expiry_seconds{{name=\"{NAME}\"}}"),
    )
    .await
    .expect("expiry metric");
    assert!(
        expiry > 86_400,
        "Pebble's default lifetime is years: {expiry}"
    );

    // The state directory holds the account and the certificate, 0600.
    let stored = weir
        .dir
        .path()
        .join(format!("acme/certificates/{NAME}.pem"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&stored)
        .expect("stored")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let accounts = std::fs::read_dir(weir.dir.path().join("acme/accounts"))
        .expect("accounts")
        .count();
    assert_eq!(accounts, 1);

    // Restart on the same state with the CA gone: the stored certificate
    // serves the first handshake and nothing is ordered.
    drop(send);
    assert!(weir.shutdown().await);
    let root = root.clone();
    // (Its directory stays: the config names its API certificate.)
    drop(setup.pebble);
    let state = std::mem::replace(&mut weir.dir, tempfile::tempdir().expect("tempdir"));
    let weir = Weir::start_in(state, &text).await;
    let (again, mut send) = connect(weir.addr("https"), NAME, &root)
        .await
        .expect("the stored certificate serves at once");
    assert_eq!(again, leaf, "the same certificate");
    assert_eq!(get_on(&mut send, NAME).await.0, 200);
    assert_eq!(
        metric(&weir, &attempts(NAME)).await,
        None,
        "no order after a restart with a valid certificate"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_01_is_answered_before_the_https_redirect() {
    let Some(setup) = Setup::new(None).await else {
        return;
    };
    // The plain listener only redirects; the route's rate limit admits one
    // request a second. Neither may touch the CA's validation requests.
    let ports = &setup.ports;
    let text = setup
        .config("challenge = \"http-01\"")
        .replace(
            "name = \"http\"\n",
            &format!(
                "name = \"http\"\nredirect_https = true\nhttps_port = {}\n",
                ports.tls
            ),
        )
        .replace(
            "upstream = \"http://",
            "rate_limit_per_second = 1\nrate_limit_burst = 1\nupstream = \"http://",
        );
    let weir = Weir::start(&text).await;
    certified(
        weir.addr("https"),
        NAME,
        &setup.root,
        Duration::from_secs(30),
    )
    .await;
    // Once the order is over, the token is withdrawn: the path redirects
    // like any other.
    let answer = raw(
        weir.addr("http"),
        format!("GET /.well-known/acme-challenge/anything HTTP/1.1\r\nHost: {NAME}\r\nConnection: close\r\n\r\n").as_bytes(),
        Duration::from_secs(5),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 308"), "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewed_certificate_is_swapped_in_while_old_connections_keep_working() {
    // 24-second certificates: renewal is due after about 16 s.
    let Some(setup) = Setup::new(Some(24)).await else {
        return;
    };
    let root = &setup.root;
    let weir = Weir::start(&setup.config("")).await;
    let https = weir.addr("https");
    let first = certified(https, NAME, root, Duration::from_secs(30)).await;
    let (_, mut old) = connect(https, NAME, root).await.expect("connect");
    assert_eq!(get_on(&mut old, NAME).await.0, 200);

    let renewed = eventually_async(Duration::from_secs(40), || async {
        matches!(connect(https, NAME, root).await, Ok((leaf, _)) if leaf != first)
    })
    .await;
    assert!(renewed, "a fresh handshake sees the renewed certificate");
    assert_eq!(
        get_on(&mut old, NAME).await.0,
        200,
        "the connection opened before the renewal still serves"
    );
    let attempts = metric(&weir, &attempts(NAME)).await;
    assert!(attempts >= Some(2), "{attempts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_challenge_is_retried_with_backoff_while_weir_keeps_serving() {
    let Some(setup) = Setup::new(None).await else {
        return;
    };
    // The name points where weir does not listen: every validation fails.
    setup.pebble.point(NAME, Some("127.0.0.2")).await;
    let root = &setup.root;
    let weir = Weir::start(&setup.config("")).await;
    let failures = format!("weir_certificate_issuance_failures_total{{name=\"{NAME}\"}}");

    let started = Instant::now();
    assert!(
        eventually_async(Duration::from_secs(30), || async {
            metric(&weir, &failures).await >= Some(1)
        })
        .await
    );
    let first_failure = started.elapsed();
    assert!(
        eventually_async(Duration::from_secs(30), || async {
            metric(&weir, &failures).await >= Some(3)
        })
        .await
    );
    // Waits of 1 s then 2 s: doubling, not a fixed retry interval.
    assert!(
        started.elapsed() - first_failure >= Duration::from_secs(3),
        "three failures came too fast: {:?} after the first",
        started.elapsed() - first_failure
    );
    // Meanwhile weir serves: plain HTTP answers, and the uncertified name
    // is refused at the handshake.
    let (status, _, _) = get(
        &h1_client(),
        &format!("http://{NAME}/").replace(NAME, &weir.addr("http").to_string()),
    )
    .await;
    assert_eq!(
        status, 404,
        "no route matches the IP host; the listener serves"
    );
    // Before issuance the name has no certificate: the handshake is
    // refused, not served a placeholder.
    assert!(connect(weir.addr("https"), NAME, root).await.is_err());

    // The DNS is fixed: the next retry succeeds.
    setup.pebble.point(NAME, None).await;
    certified(weir.addr("https"), NAME, root, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_adds_a_name_orders_only_that_name() {
    let Some(setup) = Setup::new(None).await else {
        return;
    };
    let root = &setup.root;
    let weir = Weir::start(&setup.config("")).await;
    let https = weir.addr("https");
    let first = certified(https, NAME, root, Duration::from_secs(30)).await;

    let added = format!(
        "{}\n[[route]]\nhost = \"b.weir.test\"\nupstream = \"http://{}\"\n",
        setup.config(""),
        setup.upstream
    );
    weir.apply(&added).expect("reload");
    certified(https, "b.weir.test", root, Duration::from_secs(30)).await;
    let (leaf, _) = connect(https, NAME, root).await.expect("connect");
    assert_eq!(leaf, first, "the existing name keeps its certificate");
    assert_eq!(metric(&weir, &attempts(NAME)).await, Some(1));
    assert_eq!(metric(&weir, &attempts("b.weir.test")).await, Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn external_account_binding_registers_with_the_cas_key() {
    let key = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
    let Some(setup) = Setup::with_eab(None, Some(("kid-1", key))).await else {
        return;
    };
    let key_file = setup._dir.path().join("eab-hmac");
    std::fs::write(&key_file, key).expect("write");

    // Without the binding the CA refuses the account, and says why.
    let mut weir = Weir::start(&setup.config("")).await;
    let failures = format!("weir_certificate_issuance_failures_total{{name=\"{NAME}\"}}");
    assert!(
        eventually_async(Duration::from_secs(30), || async {
            metric(&weir, &failures).await >= Some(1)
        })
        .await
    );
    assert!(weir.shutdown().await);

    let bound = setup.config(&format!(
        "external_account = {{ key_id = \"kid-1\", hmac_key_file = \"{}\" }}",
        key_file.display()
    ));
    let weir = Weir::start(&bound).await;
    certified(
        weir.addr("https"),
        NAME,
        &setup.root,
        Duration::from_secs(30),
    )
    .await;
}

// ---------------------------------------------------------------------
// A fleet: two weir processes sharing one Redis (`[cluster]`), each on its
// own loopback address with the same ports, so Pebble's DNS decides which
// one the CA validates against.

use common::process::{Proc, write_config};
use common::redis::Redis;

/// The key of the issuance lock for [`NAME`] (the default key prefix).
const LOCK: &str = "weir:acme:lock:a.weir.test";

/// One weir process of the fleet, on `ip`.
struct Member {
    proc: Proc,
    https: SocketAddr,
    admin: SocketAddr,
    dir: tempfile::TempDir,
}

impl Member {
    /// `weir run` with `config` (`{dir}` is `dir`, its state directory).
    fn start(config: &str, dir: tempfile::TempDir) -> Member {
        let text = config.replace("{dir}", &dir.path().display().to_string());
        let path = write_config(&dir, &text);
        let mut proc = Proc::run(&path);
        let https = proc.listening("https");
        let admin = proc.admin();
        Member {
            proc,
            https,
            admin,
            dir,
        }
    }

    async fn attempts(&self) -> Option<u64> {
        metric_at(self.admin, &attempts(NAME)).await
    }

    /// Whether the Redis lock's token names this process.
    fn holds(&self, redis: &Redis) -> bool {
        redis
            .get(LOCK)
            .is_some_and(|reply| reply.contains(&format!("-{}-", self.proc.pid())))
    }
}

/// The setup's config on `ip` (same ports), with `[cluster]` on `redis`.
/// What Pebble's certificates live in the fleet tests: weir serves a
/// shared certificate only if its lifetime is within what a CA issues
/// (398 days), and Pebble's default is 5 years.
const FLEET_VALIDITY: Option<u64> = Some(90 * 86_400);

/// A fleet member's config: `ca_file` holds Pebble's API certificate and
/// its issuing root, so a certificate shared in Redis verifies.
fn member_config(setup: &Setup, ip: &str, redis: &Redis, lease_ttl: &str, acme: &str) -> String {
    let trust = setup._dir.path().join("trust.pem");
    std::fs::write(
        &trust,
        format!("{}\n{}", setup.pebble.api_cert_pem, setup.root),
    )
    .expect("write the trust bundle");
    format!(
        "[log]\nformat = \"json\"\naccess_log = false\n{}\n[cluster]\nurl = \"{}\"\nlease_ttl = \"{lease_ttl}\"\n",
        setup.config(acme),
        redis.url()
    )
    .replace(
        &format!("ca_file = \"{}\"", setup.pebble.api_cert.display()),
        &format!("ca_file = \"{}\"", trust.display()),
    )
    .replace(
        &format!("address = \"127.0.0.1:{}\"", setup.ports.http),
        &format!("address = \"{ip}:{}\"", setup.ports.http),
    )
    .replace(
        &format!("address = \"127.0.0.1:{}\"", setup.ports.tls),
        &format!("address = \"{ip}:{}\"", setup.ports.tls),
    )
}

/// Pebble, a Redis holding [`NAME`]'s issuance lock itself (so neither
/// weir orders before the test says), the name pointed at B's address,
/// and two members A (127.0.0.2) and B (127.0.0.3) that count each other.
/// `acme` is added to the `acme` table.
async fn fleet(lease_ttl: &str, acme: &str) -> Option<(Setup, Redis, Member, Member)> {
    let redis = Redis::start_if_available()?;
    let setup = Setup::new(FLEET_VALIDITY).await?;
    assert_eq!(
        redis
            .command(&format!("SET {LOCK} held-by-the-test PX 60000"))
            .as_deref(),
        Some("+OK")
    );
    setup.pebble.point(NAME, Some("127.0.0.3")).await;
    let dir = || tempfile::tempdir().expect("tempdir");
    let config = |ip| member_config(&setup, ip, &redis, lease_ttl, acme);
    let a = Member::start(&config("127.0.0.2"), dir());
    let b = Member::start(&config("127.0.0.3"), dir());
    assert!(count(&a, &b, 2).await, "the members do not see each other");
    Some((setup, redis, a, b))
}

/// Whether A and B both count `n` live instances, within 10 s.
async fn count(a: &Member, b: &Member, n: u64) -> bool {
    let name = "weir_cluster_instances";
    let within = Duration::from_secs(10);
    eventually_metric_at(a.admin, name, n, within).await
        && eventually_metric_at(b.admin, name, n, within).await
}

/// The test's hold on the lock let go. A DEL interrupted after Redis
/// ran it is sent again by the helper and then finds nothing: what counts
/// is that the test's hold is gone (a member may already hold it).
fn free_the_lock(redis: &Redis) {
    redis.int(&format!("DEL {LOCK}"));
    assert_ne!(
        redis.get(LOCK).as_deref(),
        Some("held-by-the-test"),
        "the test's hold is gone"
    );
}

/// Let A, and only A, take the lock: B is stopped (SIGSTOP) while the
/// test's lock goes, and resumed once A holds it — so the order is A's and
/// the CA, sent to B's address by the DNS, validates against B.
async fn a_takes_the_lock(redis: &Redis, a: &mut Member, b: &Member) {
    b.proc.signal("-STOP");
    free_the_lock(redis);
    let taken = eventually(Duration::from_secs(10), || a.holds(redis)).await;
    b.proc.signal("-CONT");
    assert!(
        taken,
        "A did not take the free lock ({:?}); A's log:\n{}",
        redis.get(LOCK),
        a.proc.all_lines(|_| true).join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_orders_once_answers_the_challenge_anywhere_and_shares_the_certificate() {
    let Some((setup, redis, mut a, b)) = fleet("15s", "").await else {
        return;
    };
    let root = setup.root.clone();
    a_takes_the_lock(&redis, &mut a, &b).await;

    // A ordered; the CA validated against B, which answered from the
    // answer A put in Redis; both serve the one certificate.
    let from_a = certified(a.https, NAME, &root, Duration::from_secs(30)).await;
    let from_b = certified(b.https, NAME, &root, Duration::from_secs(30)).await;
    assert_eq!(from_a, from_b, "one certificate for the fleet");
    assert_eq!(a.attempts().await, Some(1));
    assert_eq!(b.attempts().await, None, "B never ordered");
    assert_eq!(redis.int("EXISTS weir:acme:cert:a.weir.test"), 1);
    assert_eq!(
        redis.int("EXISTS weir:acme:lock:a.weir.test"),
        0,
        "released"
    );
    assert_eq!(
        redis.int("EXISTS weir:acme:challenge:a.weir.test"),
        0,
        "the answer is withdrawn when the order ends"
    );
    let accounts = redis
        .command("KEYS weir:acme:account:*")
        .expect("redis answers");
    assert_eq!(accounts, "*1", "one account for the fleet");
    // B keeps its copy in its own state directory.
    assert!(
        b.dir
            .path()
            .join(format!("acme/certificates/{NAME}.pem"))
            .is_file()
    );

    // A restarted with an empty state directory, and the CA gone: the
    // certificate comes from Redis, and nothing is ordered.
    let config = member_config(&setup, "127.0.0.2", &redis, "15s", "");
    drop(a);
    drop(setup.pebble);
    let a = Member::start(&config, tempfile::tempdir().expect("tempdir"));
    let again = certified(a.https, NAME, &root, Duration::from_secs(10)).await;
    assert_eq!(again, from_a, "the fleet's certificate");
    assert_eq!(a.attempts().await, None, "no order");
    assert!(
        a.dir
            .path()
            .join(format!("acme/certificates/{NAME}.pem"))
            .is_file(),
        "written to the local cache"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lock_holder_killed_mid_order_is_taken_over_within_the_lease() {
    let lease = Duration::from_secs(3);
    let Some((setup, redis, a, mut b)) = fleet("3s", "").await else {
        return;
    };
    // A holds the lock and waits for B (stopped) to acknowledge its
    // challenge answer: mid-order. Then A dies.
    b.proc.signal("-STOP");
    free_the_lock(&redis);
    assert!(eventually(Duration::from_secs(10), || a.holds(&redis)).await);
    let mut a = a;
    a.proc.signal("-KILL");
    a.proc.wait_exit(Duration::from_secs(5));
    let killed = Instant::now();
    b.proc.signal("-CONT");

    // B takes the lock once A's lease runs out (its last renewal at most
    // a lease ago), plus one poll of B's back-off.
    assert!(
        eventually(Duration::from_secs(20), || b.holds(&redis)).await,
        "B never took over"
    );
    let took = killed.elapsed();
    assert!(
        took <= lease + Duration::from_secs(3),
        "B took over {took:?} after A died (lease {lease:?})"
    );
    certified(b.https, NAME, &setup.root, Duration::from_secs(30)).await;
    assert_eq!(b.attempts().await, Some(1));
    b.proc
        .wait_for(|l| l.contains("certificate issued and in service"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_answers_http_01_on_the_instance_that_did_not_order() {
    let Some((setup, redis, mut a, b)) = fleet("15s", "challenge = \"http-01\"").await else {
        return;
    };
    a_takes_the_lock(&redis, &mut a, &b).await;
    // The CA fetched A's token from B's plain listener.
    let from_b = certified(b.https, NAME, &setup.root, Duration::from_secs(30)).await;
    let from_a = certified(a.https, NAME, &setup.root, Duration::from_secs(30)).await;
    assert_eq!(from_a, from_b);
    assert_eq!(a.attempts().await, Some(1));
    assert_eq!(b.attempts().await, None, "B never ordered");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_longer_than_the_lease_keeps_its_lock_and_a_silent_instance_delays_it_only_boundedly()
 {
    let Some((setup, redis, mut a, b)) = fleet("1s", "").await else {
        return;
    };
    // A third instance that never acknowledges a challenge answer: A's
    // order waits for it (at most 10 s, ten leases of 1 s), renewing its
    // lock all the while, so B, polling the lock, never orders.
    assert_eq!(redis.int("ZADD weir:instances 99999999999999 ghost"), 1);
    assert!(count(&a, &b, 3).await, "the ghost is not counted");
    let started = Instant::now();
    a_takes_the_lock(&redis, &mut a, &b).await;
    certified(b.https, NAME, &setup.root, Duration::from_secs(30)).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9),
        "the order did not wait for the ghost's acknowledgement: {waited:?}"
    );
    a.proc
        .wait_for(|l| l.contains("not every instance acknowledged the challenge answer in time"));
    assert_eq!(a.attempts().await, Some(1));
    assert_eq!(b.attempts().await, None, "B never ordered");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_redis_gone_a_renewal_waits_until_the_last_tenth_then_orders_alone() {
    // 30-second certificates: renewal is due after about 20 s; the last
    // tenth of the lifetime begins 27 s in.
    let lifetime = Duration::from_secs(30);
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let Some(setup) = Setup::new(Some(lifetime.as_secs())).await else {
        return;
    };
    let config = member_config(&setup, "127.0.0.1", &redis, "15s", "");
    let mut weir = Member::start(&config, tempfile::tempdir().expect("tempdir"));
    let first = certified(weir.https, NAME, &setup.root, Duration::from_secs(30)).await;
    let issued = Instant::now();
    assert_eq!(redis.int("EXISTS weir:acme:cert:a.weir.test"), 1);
    redis.kill();

    // Due, Redis gone: the renewal waits (the certificate has time left)...
    weir.proc
        .wait_for(|l| l.contains("renewal waits for Redis, so that the fleet orders once"));
    let waited_at = issued.elapsed();
    assert_eq!(weir.attempts().await, Some(1), "no order while waiting");
    assert!(
        waited_at < lifetime * 9 / 10,
        "the wait began too late to mean anything: {waited_at:?}"
    );
    // ...until the last tenth: then this instance orders alone, and the
    // new certificate is served before the old one expires.
    let renewed = eventually_async(Duration::from_secs(30), || async {
        matches!(connect(weir.https, NAME, &setup.root).await, Ok((leaf, _)) if leaf != first)
    })
    .await;
    assert!(renewed, "no renewal before expiry");
    weir.proc.wait_for(|l| l.contains("ordering alone"));
    assert_eq!(weir.attempts().await, Some(2));
    assert!(
        issued.elapsed() >= lifetime * 9 / 10 - Duration::from_secs(2),
        "ordered alone {:?} after issuance, before the last tenth",
        issued.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unusable_certificate_in_redis_is_removed_and_replaced() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let Some(setup) = Setup::new(FLEET_VALIDITY).await else {
        return;
    };
    // Garbage that claims to expire in the year 5138: kept, it would stop
    // every real certificate from being stored.
    assert_eq!(
        redis.int("HSET weir:acme:cert:a.weir.test pem garbage not_after 99999999999"),
        2
    );
    let config = member_config(&setup, "127.0.0.1", &redis, "15s", "");
    let weir = Member::start(&config, tempfile::tempdir().expect("tempdir"));
    let leaf = certified(weir.https, NAME, &setup.root, Duration::from_secs(30)).await;
    assert_eq!(weir.attempts().await, Some(1));
    // Redis now holds the certificate weir serves.
    let shared = eventually(Duration::from_secs(5), || {
        redis
            .command("HSTRLEN weir:acme:cert:a.weir.test pem")
            .is_some_and(|r| r.trim_start_matches(':').parse::<usize>().unwrap_or(0) > 100)
    })
    .await;
    assert!(shared, "the real certificate is in Redis");
    drop(weir);
    // A new member with an empty state directory serves it from Redis.
    let second = Member::start(&config, tempfile::tempdir().expect("tempdir"));
    let again = certified(second.https, NAME, &setup.root, Duration::from_secs(10)).await;
    assert_eq!(again, leaf);
    assert_eq!(second.attempts().await, None);
}

/// A certificate planted in Redis for the right name — self-signed, valid
/// for 100 years, paired with its key — is not one the CA issued: weir
/// neither serves nor saves it, removes it, and orders one that chains to
/// the CA's root, which then replaces it in Redis.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_long_lived_self_signed_certificate_in_redis_is_replaced() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let Some(setup) = Setup::new(FLEET_VALIDITY).await else {
        return;
    };
    let mut params = rcgen::CertificateParams::new(vec![NAME.to_string()]).expect("params");
    params.not_before = rcgen::date_time_ymd(2026, 1, 1);
    params.not_after = rcgen::date_time_ymd(2126, 1, 1);
    let key = rcgen::KeyPair::generate().expect("key");
    let planted = params.self_signed(&key).expect("self-signed");
    let pem = format!("{}{}", planted.pem(), key.serialize_pem());
    let not_after: i64 = 4_922_899_200; // 2126-01-01
    let client = ::redis::Client::open(redis.url()).expect("redis url");
    let mut c = client.get_connection().expect("redis connection");
    let _: () = ::redis::cmd("HSET")
        .arg("weir:acme:cert:a.weir.test")
        .arg("pem")
        .arg(&pem)
        .arg("not_after")
        .arg(not_after)
        .query(&mut c)
        .expect("plant");

    let config = member_config(&setup, "127.0.0.1", &redis, "15s", "");
    let mut weir = Member::start(&config, tempfile::tempdir().expect("tempdir"));
    weir.proc.wait_for(|l| {
        l.contains("the certificate in Redis is unusable") && l.contains("lifetime of 36524 days")
    });
    // Served only once ordered: `certified` accepts only a chain to Pebble's root.
    let _leaf = certified(weir.https, NAME, &setup.root, Duration::from_secs(30)).await;
    assert_eq!(weir.attempts().await, Some(1), "ordered");
    let replaced = eventually(Duration::from_secs(5), || {
        let now: Option<String> = ::redis::cmd("HGET")
            .arg("weir:acme:cert:a.weir.test")
            .arg("pem")
            .query(&mut c)
            .expect("redis");
        now.is_some_and(|p| p != pem)
    })
    .await;
    assert!(
        replaced,
        "the CA's certificate replaced the planted one in Redis"
    );
    let saved = std::fs::read_to_string(
        weir.dir
            .path()
            .join(format!("acme/certificates/{NAME}.pem")),
    )
    .expect("saved");
    assert!(
        !saved.contains(&planted.pem()),
        "the planted one is not saved"
    );
}
