//! TOML text → validated [`Config`], collecting every problem on the way.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use ipnet::IpNet;

use super::reader::{self, At, Doc, Problems, Section};
use super::*;

const TOP: &[&str] = &[
    "server",
    "connections",
    "http1",
    "http2",
    "log",
    "admin",
    "listener",
    "route",
    "upstream",
];
const SERVER: &[&str] = &[
    "shutdown_timeout",
    "drain_grace",
    "trusted_proxies",
    "workers",
    "max_concurrent_requests",
    "max_buffered_body_bytes",
    "watch_config",
];
const CONNECTIONS: &[&str] = &[
    "max",
    "max_per_ip",
    "tls_handshake_timeout",
    "request_head_timeout",
    "keepalive_timeout",
    "max_requests",
    "min_body_rate",
    "body_rate_period",
    "send_timeout",
    "pressure_threshold",
    "pressure_timeout",
];
const HTTP1: &[&str] = &["max_headers", "max_head_size"];
const HTTP2: &[&str] = &[
    "max_concurrent_streams",
    "max_header_list_size",
    "max_pending_resets",
    "max_control_frames_per_second",
];
/// The request gate is a semaphore; tokio's holds at most this many permits.
const MAX_SEMAPHORE_PERMITS: u64 = (usize::MAX >> 3) as u64;
const LOG: &[&str] = &["format", "level", "access_log", "file", "access_file"];
const ADMIN: &[&str] = &["address", "token_file", "token_env"];
const LISTENER: &[&str] = &["name", "address", "tls", "redirect_https", "https_port"];
const TLS: &[&str] = &["certificates", "acme"];
const ACME: &[&str] = &[
    "directory",
    "ca_file",
    "email",
    "names",
    "challenge",
    "state_dir",
    "external_account",
    "retry_base",
];
const EXTERNAL_ACCOUNT: &[&str] = &["key_id", "hmac_key_env", "hmac_key_file"];
const CERTIFICATE: &[&str] = &["cert", "key"];
/// Keys every route kind reads; each kind adds its own (below).
const ROUTE_COMMON: &[&str] = &[
    "name",
    "host",
    "path",
    "connect_timeout",
    "max_request_body",
    "strip_prefix",
    "max_concurrent_requests",
    "kind",
    "rate_limit_per_second",
    "rate_limit_burst",
    "hsts_max_age",
    "hsts_include_subdomains",
    "hsts_preload",
    "server_header",
];
/// Keys only LLM routes read.
const LLM_ONLY: &[&str] = &[
    "upstreams",
    "models",
    "default_upstreams",
    "client_tokens_file",
    "client_tokens_env",
    "max_concurrent_per_token",
    "first_byte_timeout",
    "first_token_timeout",
    "stream_idle_timeout",
    "sse_keepalive",
    "failover_on",
    "served_by_header",
];
/// Keys only proxy routes read.
const PROXY_ONLY: &[&str] = &["upstream", "preserve_host", "response_timeout"];
const LLM_UPSTREAM: &[&str] = &[
    "protocol",
    "name",
    "url",
    "api_key_env",
    "api_key_file",
    "connect_timeout",
];
const MODEL: &[&str] = &["name", "upstreams"];
const UPSTREAM: &[&str] = &["pool_idle_timeout", "pool_max_idle_per_host", "ca_file"];

pub(super) fn parse(path: &Path, text: &str) -> Result<Config, Problems> {
    let doc = Doc::new(path, text);
    let Some(root) = reader::parse(&doc, text) else {
        return Err(Problems(doc.into_problems()));
    };
    let top = Section::new(&doc, root.get_ref(), "", root.span(), TOP);

    let server = server(&top);
    let connections = connections(&top);
    let http1 = http1(&top);
    let http2 = http2(&top);
    let log = log(&top);
    let admin = top.table("admin", ADMIN).and_then(|a| {
        let address = socket_addr(&a, "address");
        if address.is_none() && a.string("address").is_none() {
            a.problem(
                "address",
                "missing",
                Some("add `address = \"127.0.0.1:9900\"`".into()),
            );
        }
        let token = admin_token(&a);
        address.map(|address| AdminSettings { address, token })
    });
    let routes = routes(&top);
    let listeners = listeners(&top, admin.as_ref(), &routes);
    let upstream = upstream(&top);

    if doc.has_problems() {
        return Err(Problems(doc.into_problems()));
    }
    Ok(Config {
        source: path.to_path_buf(),
        server,
        connections,
        http1,
        http2,
        log,
        admin,
        listeners,
        routes,
        upstream,
    })
}

fn server(top: &Section<'_, '_>) -> ServerSettings {
    let mut s = ServerSettings::default();
    let Some(t) = top.table("server", SERVER) else {
        return s;
    };
    if let Some(d) = t.duration("shutdown_timeout") {
        s.shutdown_timeout = d;
    }
    if let Some(d) = t.duration("drain_grace") {
        if d > defaults::DRAIN_GRACE_MAX {
            t.problem(
                "drain_grace",
                "too long",
                Some(format!(
                    "use at most \"{}s\"; the default is \"1s\"",
                    defaults::DRAIN_GRACE_MAX.as_secs()
                )),
            );
        } else {
            s.drain_grace = d;
        }
    }
    if let Some(n) = t.uint("workers", 1024) {
        s.workers = n as usize;
    }
    if let Some(n) = t.uint("max_concurrent_requests", MAX_SEMAPHORE_PERMITS) {
        s.max_concurrent_requests = n as usize;
    }
    if let Some(n) = t.size("max_buffered_body_bytes") {
        if n > MAX_SEMAPHORE_PERMITS {
            t.problem(
                "max_buffered_body_bytes",
                "too large",
                Some("use at most 2^61 bytes, or 0 for no bound".into()),
            );
        } else {
            s.max_buffered_body_bytes = n;
        }
    }
    if let Some(b) = t.bool("watch_config") {
        s.watch_config = b;
    }
    for entry in t.string_list("trusted_proxies").unwrap_or_default() {
        let parsed = entry
            .value
            .parse::<IpNet>()
            .or_else(|_| entry.value.parse::<IpAddr>().map(IpNet::from));
        match parsed {
            Ok(net) => s.trusted_proxies.push(net),
            Err(_) => entry.problem(
                t.doc(),
                format!("`{}` is not an IP address or CIDR block", entry.value),
                Some("write it like \"10.0.0.0/8\" or \"192.0.2.7\"".into()),
            ),
        }
    }
    s
}

fn connections(top: &Section<'_, '_>) -> ConnectionSettings {
    let mut c = ConnectionSettings::default();
    let Some(t) = top.table("connections", CONNECTIONS) else {
        return c;
    };
    if let Some(n) = t.uint("max", MAX_SEMAPHORE_PERMITS) {
        c.max = n as usize;
    }
    if let Some(n) = t.uint("max_per_ip", MAX_SEMAPHORE_PERMITS) {
        c.max_per_ip = n as usize;
    }
    if let Some(d) = positive_duration(&t, "tls_handshake_timeout") {
        c.tls_handshake_timeout = d;
    }
    if let Some(d) = positive_duration(&t, "request_head_timeout") {
        c.request_head_timeout = d;
    }
    if let Some(d) = positive_duration(&t, "keepalive_timeout") {
        c.keepalive_timeout = d;
    }
    if let Some(n) = t.uint("max_requests", u64::MAX) {
        c.max_requests = n;
    }
    if let Some(n) = t.size("min_body_rate") {
        c.min_body_rate = n;
    }
    if let Some(d) = positive_duration(&t, "body_rate_period") {
        c.body_rate_period = d;
    }
    if let Some(d) = positive_duration(&t, "send_timeout") {
        c.send_timeout = d;
    }
    if let Some(n) = t.uint("pressure_threshold", 100) {
        if n == 0 {
            t.problem(
                "pressure_threshold",
                "0% would keep deadlines shrunk at all times",
                Some("use a percentage from 1 to 100 (100 = only at the cap)".into()),
            );
        } else {
            c.pressure_threshold_percent = n as u8;
        }
    }
    if let Some(d) = positive_duration(&t, "pressure_timeout") {
        c.pressure_timeout = d;
    }
    c
}

fn http1(top: &Section<'_, '_>) -> Http1Settings {
    let mut h = Http1Settings::default();
    let Some(t) = top.table("http1", HTTP1) else {
        return h;
    };
    if let Some(n) = t.uint("max_headers", 10_000) {
        h.max_headers = n as usize;
    }
    if let Some(n) = t.size("max_head_size") {
        // hyper's read buffer cannot be smaller than 8 KiB.
        if !(8192..=16 * 1024 * 1024).contains(&n) {
            t.problem(
                "max_head_size",
                format!("{n} bytes is outside 8KiB..16MiB"),
                Some("use a size like \"64KiB\"".into()),
            );
        } else {
            h.max_head_size = n as usize;
        }
    }
    h
}

fn http2(top: &Section<'_, '_>) -> Http2Settings {
    let mut h = Http2Settings::default();
    let Some(t) = top.table("http2", HTTP2) else {
        return h;
    };
    if let Some(n) = t.uint("max_concurrent_streams", u32::MAX as u64) {
        h.max_concurrent_streams = n as u32;
    }
    if let Some(n) = t.size("max_header_list_size") {
        match u32::try_from(n) {
            Ok(n) => h.max_header_list_size = n,
            Err(_) => t.problem(
                "max_header_list_size",
                "too large",
                Some("use at most \"4GiB\"".into()),
            ),
        }
    }
    if let Some(n) = t.uint("max_pending_resets", 1_000_000) {
        h.max_pending_resets = n as usize;
    }
    if let Some(n) = t.uint("max_control_frames_per_second", u32::MAX as u64) {
        h.max_control_frames_per_second = n as u32;
    }
    h
}

fn positive_duration(t: &Section<'_, '_>, key: &str) -> Option<std::time::Duration> {
    let d = t.duration(key)?;
    if d.is_zero() {
        t.problem(
            key,
            "must be greater than zero",
            Some("use a value like \"10s\"".into()),
        );
        return None;
    }
    Some(d)
}

fn log(top: &Section<'_, '_>) -> LogSettings {
    let mut l = LogSettings::default();
    let Some(t) = top.table("log", LOG) else {
        return l;
    };
    if let Some(f) = t.string("format") {
        match f.value.as_str() {
            "text" => l.format = LogFormat::Text,
            "json" => l.format = LogFormat::Json,
            other => f.problem(
                t.doc(),
                format!("unknown format `{other}`"),
                Some("use \"text\" or \"json\"".into()),
            ),
        }
    }
    if let Some(level) = t.string("level") {
        match tracing_subscriber::EnvFilter::try_new(&level.value) {
            Ok(_) => l.level = level.value,
            Err(e) => level.problem(
                t.doc(),
                format!("`{}` is not a log filter: {e}", level.value),
                Some("use a level like \"info\" or a filter like \"weir=debug\"".into()),
            ),
        }
    }
    if let Some(b) = t.bool("access_log") {
        l.access_log = b;
    }
    // Log files must be writable: found now, not at the first line.
    for key in ["file", "access_file"] {
        let Some(p) = required_path_opt(&t, key) else {
            continue;
        };
        let writable = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p.value);
        match writable {
            Ok(_) if key == "file" => l.file = Some(p.value),
            Ok(_) => l.access_file = Some(p.value),
            Err(e) => p.problem(
                t.doc(),
                format!("cannot write {}: {e}", p.value.display()),
                Some("point it at a file in a directory weir may write to".into()),
            ),
        }
    }
    l
}

fn socket_addr(t: &Section<'_, '_>, key: &str) -> Option<SocketAddr> {
    let s = t.string(key)?;
    match s.value.parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            s.problem(
                t.doc(),
                format!("`{}` is not an IP:port address", s.value),
                Some("write it like \"0.0.0.0:443\" or \"[::]:443\"".into()),
            );
            None
        }
    }
}

fn listeners(
    top: &Section<'_, '_>,
    admin: Option<&AdminSettings>,
    routes: &[RouteConfig],
) -> Vec<ListenerConfig> {
    let sections = top.tables("listener", LISTENER);
    // http-01 is answered on a plain listener, so one must exist.
    let has_plain = sections.iter().any(|t| !t.raw_present("tls"));
    if sections.is_empty() && top.string_list("listener").is_none() {
        top.problem(
            "listener",
            "no listener is configured",
            Some("add a `[[listener]]` table with `address = \"0.0.0.0:8080\"`".into()),
        );
    }
    let mut seen: HashMap<SocketAddr, String> = HashMap::new();
    if let Some(a) = admin {
        seen.insert(a.address, "admin.address".into());
    }
    let mut out = Vec::new();
    for t in sections {
        let address = socket_addr(&t, "address");
        if address.is_none() && t.string("address").is_none() {
            t.problem(
                "address",
                "missing",
                Some("add `address = \"0.0.0.0:8080\"`".into()),
            );
        }
        // Port 0 asks the kernel for a fresh port, so it never collides.
        if let Some(a) = address.filter(|a| a.port() != 0) {
            if let Some(first) = seen.get(&a) {
                t.problem(
                    "address",
                    format!("{a} is already used by {first}"),
                    Some("give every listener its own address".into()),
                );
            } else {
                seen.insert(a, t.key_path("address"));
            }
        }
        let tls = t
            .table("tls", TLS)
            .map(|tls| tls_settings(&tls, routes, has_plain));
        let redirect = t.bool("redirect_https").unwrap_or(false);
        let https_port = t.uint("https_port", 65535).map(|p| p as u16);
        if redirect && tls.is_some() {
            t.problem(
                "redirect_https",
                "a TLS listener cannot also redirect to HTTPS",
                Some("remove `redirect_https` or the `tls` table".into()),
            );
        }
        if https_port.is_some() && !redirect {
            t.problem(
                "https_port",
                "only used by redirecting listeners",
                Some("add `redirect_https = true` or remove `https_port`".into()),
            );
        }
        let name = t
            .string("name")
            .map(|n| n.value)
            .or_else(|| address.map(|a| a.to_string()))
            .unwrap_or_default();
        if let Some(address) = address {
            out.push(ListenerConfig {
                name,
                address,
                tls: tls.flatten(),
                redirect_https: redirect.then(|| RedirectSettings {
                    https_port: https_port.unwrap_or(defaults::HTTPS_PORT),
                }),
            });
        }
    }
    out
}

fn tls_settings(
    t: &Section<'_, '_>,
    routes: &[RouteConfig],
    has_plain: bool,
) -> Option<TlsSettings> {
    let sections = t.tables("certificates", CERTIFICATE);
    let acme_present = t.raw_present("acme");
    let acme = t
        .table("acme", ACME)
        .and_then(|a| acme_settings(&a, routes, has_plain));
    if sections.is_empty() && !acme_present {
        t.problem(
            "certificates",
            "a TLS listener needs at least one certificate",
            Some(
                "add `certificates = [{ cert = \"cert.pem\", key = \"key.pem\" }]`, or an `acme` table to obtain them"
                    .into(),
            ),
        );
        return None;
    }
    let base = t.doc().base_dir();
    let mut certificates = Vec::new();
    let wanted = sections.len();
    for c in sections {
        let cert = required_path(&c, "cert", &base);
        let key = required_path(&c, "key", &base);
        let (Some(cert), Some(key)) = (cert, key) else {
            continue;
        };
        match crate::pki::load_certificate(&cert.value, &key.value) {
            Ok((certified, names)) => certificates.push(Certificate {
                cert_path: cert.value,
                key_path: key.value,
                names,
                key: certified,
            }),
            Err(e) => cert.problem(
                t.doc(),
                e.to_string(),
                Some(
                    "point `cert` at a PEM certificate chain and `key` at its PEM private key"
                        .into(),
                ),
            ),
        }
    }
    let complete = certificates.len() == wanted && (!acme_present || acme.is_some());
    complete.then_some(TlsSettings { certificates, acme })
}

/// The `acme` table of a TLS listener. Names default to every exact host
/// the routes serve; a wildcard needs DNS-01, which weir does not do.
fn acme_settings(
    a: &Section<'_, '_>,
    routes: &[RouteConfig],
    has_plain: bool,
) -> Option<AcmeSettings> {
    let mut ok = true;
    let directory = match a.string("directory") {
        None => defaults::ACME_DIRECTORY.to_string(),
        Some(d) => match d.value.as_str() {
            "letsencrypt" => defaults::ACME_DIRECTORY.to_string(),
            "letsencrypt-staging" => defaults::ACME_STAGING_DIRECTORY.to_string(),
            url => match url.parse::<http::Uri>() {
                Ok(u) if u.scheme_str() == Some("https") && u.host().is_some() => url.to_string(),
                _ => {
                    d.problem(
                        a.doc(),
                        format!("`{url}` is not an https:// URL"),
                        Some(
                            "use the CA's ACME directory URL, or \"letsencrypt\" / \"letsencrypt-staging\""
                                .into(),
                        ),
                    );
                    ok = false;
                    String::new()
                }
            },
        },
    };
    let ca_file = required_path_opt(a, "ca_file");
    if let Some(f) = &ca_file
        && let Err(e) = crate::pki::load_ca_file(&f.value)
    {
        f.problem(
            a.doc(),
            e.to_string(),
            Some("point `ca_file` at a PEM file of CA certificates".into()),
        );
        ok = false;
    }
    let email = a.string("email").and_then(|e| {
        let valid = e.value.split_once('@').is_some_and(|(user, domain)| {
            !user.is_empty() && domain.contains('.') && !e.value.contains(char::is_whitespace)
        });
        if !valid {
            e.problem(
                a.doc(),
                format!("`{}` is not an email address", e.value),
                Some("use an address like \"ops@example.com\", or leave `email` out".into()),
            );
            ok = false;
        }
        valid.then_some(e.value)
    });
    let challenge = match a.string("challenge") {
        None => AcmeChallenge::TlsAlpn01,
        Some(c) => match c.value.as_str() {
            "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
            "http-01" => AcmeChallenge::Http01,
            other => {
                let why = if other == "dns-01" {
                    "weir does not answer dns-01 challenges".to_string()
                } else {
                    format!("unknown challenge `{other}`")
                };
                c.problem(
                    a.doc(),
                    why,
                    Some("use \"tls-alpn-01\" (the default) or \"http-01\"".into()),
                );
                ok = false;
                AcmeChallenge::TlsAlpn01
            }
        },
    };
    if challenge == AcmeChallenge::Http01 && !has_plain {
        a.problem(
            "challenge",
            "http-01 is answered on a plain HTTP listener, and there is none",
            Some(
                "add a `[[listener]]` without `tls` (port 80 for a public CA), or use \"tls-alpn-01\""
                    .into(),
            ),
        );
        ok = false;
    }
    let names = match a.string_list("names") {
        Some(list) => {
            let mut names = Vec::new();
            for n in list {
                match acme_name(&n.value) {
                    Ok(name) => names.push(name),
                    Err(why) => {
                        n.problem(a.doc(), why, Some("list exact DNS names, like \"www.example.com\"; serve a wildcard from a certificate file".into()));
                        ok = false;
                    }
                }
            }
            names
        }
        None => {
            // Every exact host of every route; wildcards and IPs are skipped.
            let mut names: Vec<String> = routes
                .iter()
                .flat_map(|r| &r.hosts)
                .filter_map(|h| match h {
                    HostPattern::Exact(n) => acme_name(n).ok(),
                    HostPattern::Wildcard(_) => None,
                })
                .collect();
            names.sort();
            names.dedup();
            names
        }
    };
    if ok && names.is_empty() {
        a.problem(
            "names",
            "no host names to certify: no route has an exact `host`",
            Some("add `names = [\"www.example.com\"]`, or give routes exact hosts".into()),
        );
        ok = false;
    }
    let state_dir = match a.string("state_dir") {
        Some(d) => a.doc().base_dir().join(&d.value),
        None => PathBuf::from(defaults::ACME_STATE_DIR),
    };
    if let Err(e) = writable_dir(&state_dir) {
        a.problem(
            "state_dir",
            format!("{} is not a writable directory: {e}", state_dir.display()),
            Some("create it for the user weir runs as, or point `state_dir` elsewhere".into()),
        );
        ok = false;
    }
    let external_account = a
        .table("external_account", EXTERNAL_ACCOUNT)
        .and_then(|e| external_account(&e));
    if a.raw_present("external_account") && external_account.is_none() {
        ok = false;
    }
    let retry_base = positive_duration(a, "retry_base").unwrap_or(defaults::ACME_RETRY_BASE);
    ok.then_some(AcmeSettings {
        directory,
        ca_file: ca_file.map(|f| f.value),
        email,
        names,
        challenge,
        state_dir,
        external_account,
        retry_base,
    })
}

/// A name a CA can certify over tls-alpn-01 or http-01, lower-case.
fn acme_name(raw: &str) -> Result<String, String> {
    let name = raw.trim_end_matches('.').to_ascii_lowercase();
    if name.starts_with("*.") {
        return Err(format!(
            "`{raw}` is a wildcard: wildcard certificates need the dns-01 challenge, which weir does not answer"
        ));
    }
    if name.parse::<IpAddr>().is_ok() {
        return Err(format!("`{raw}` is an IP address, not a DNS name"));
    }
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.len() > 253 || !name.split('.').all(valid_label) {
        return Err(format!("`{raw}` is not a valid DNS name"));
    }
    Ok(name)
}

/// Create the directory if needed (mode 0700) and prove a file can be
/// written in it, as weir will when a certificate arrives.
fn writable_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let probe = dir.join(format!(".weir-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

fn external_account(e: &Section<'_, '_>) -> Option<ExternalAccount> {
    let key_id = e.string("key_id");
    if key_id.is_none() {
        e.problem(
            "key_id",
            "missing",
            Some("add the key id (kid) the CA gave you".into()),
        );
    }
    let key = match (e.string("hmac_key_env"), e.string("hmac_key_file")) {
        (Some(_), Some(f)) => {
            f.problem(
                e.doc(),
                "set `hmac_key_env` or `hmac_key_file`, not both",
                None,
            );
            None
        }
        (Some(var), None) => match std::env::var(&var.value) {
            Ok(k) if !k.trim().is_empty() => Some((k.trim().to_string(), var)),
            _ => {
                var.problem(
                    e.doc(),
                    format!("environment variable `{}` is not set or empty", var.value),
                    Some("export it before starting weir, or use `hmac_key_file`".into()),
                );
                None
            }
        },
        (None, Some(f)) => {
            let path = e.doc().base_dir().join(&f.value);
            match std::fs::read_to_string(&path) {
                Ok(k) if !k.trim().is_empty() => Some((k.trim().to_string(), f)),
                Ok(_) => {
                    f.problem(e.doc(), format!("{} is empty", path.display()), None);
                    None
                }
                Err(err) => {
                    f.problem(
                        e.doc(),
                        format!("cannot read {}: {err}", path.display()),
                        Some("point `hmac_key_file` at a file holding the HMAC key".into()),
                    );
                    None
                }
            }
        }
        (None, None) => {
            e.problem(
                "hmac_key_env",
                "missing",
                Some(
                    "set `hmac_key_env` or `hmac_key_file` to the HMAC key the CA gave you".into(),
                ),
            );
            None
        }
    };
    let (key, at) = key?;
    use base64::Engine;
    if base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(key.trim_end_matches('='))
        .is_err()
    {
        at.problem(
            e.doc(),
            "the HMAC key is not base64url",
            Some("use the key exactly as the CA printed it".into()),
        );
        return None;
    }
    Some(ExternalAccount {
        key_id: key_id?.value,
        hmac_key: Secret(key),
    })
}

fn required_path(t: &Section<'_, '_>, key: &str, base: &Path) -> Option<At<PathBuf>> {
    let Some(s) = t.string(key) else {
        if t.bool(key).is_none() {
            t.problem(
                key,
                "missing",
                Some(format!("add `{key} = \"path/to/file.pem\"`")),
            );
        }
        return None;
    };
    Some(At {
        value: base.join(&s.value),
        span: s.span,
        key: s.key,
    })
}

fn routes(top: &Section<'_, '_>) -> Vec<RouteConfig> {
    let known: Vec<&str> = [ROUTE_COMMON, PROXY_ONLY, LLM_ONLY].concat();
    let sections = top.tables("route", &known);
    if sections.is_empty() && top.string_list("route").is_none() {
        top.problem(
            "route",
            "no route is configured: every request would get 404",
            Some("add a `[[route]]` table with `upstream = \"http://127.0.0.1:3000\"`".into()),
        );
    }
    let mut out: Vec<RouteConfig> = Vec::new();
    let mut seen_match: HashMap<(Option<HostPattern>, String), String> = HashMap::new();
    let mut seen_name: HashMap<String, String> = HashMap::new();
    for t in sections {
        let hosts: Vec<HostPattern> = t
            .string_list("host")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|h| host_pattern(&t, &h))
            .collect();
        let path = match t.string("path") {
            Some(p) if !p.value.starts_with('/') => {
                p.problem(
                    t.doc(),
                    "a route path must start with `/`",
                    Some(format!("write \"/{}\"", p.value)),
                );
                None
            }
            Some(p) => Some(p.value),
            None => Some("/".to_string()),
        };
        let kind = route_kind(&t);
        let connect_timeout =
            positive_duration(&t, "connect_timeout").unwrap_or(defaults::CONNECT_TIMEOUT);
        let response_timeout =
            positive_duration(&t, "response_timeout").unwrap_or(defaults::RESPONSE_TIMEOUT);
        let max_request_body = t.size("max_request_body").or(match kind {
            Some(RouteKind::Llm(_)) => Some(defaults::LLM_MAX_REQUEST_BODY),
            _ => None,
        });
        let preserve_host = t.bool("preserve_host").unwrap_or(true);
        let strip_prefix = t.bool("strip_prefix").unwrap_or(false);
        let max_concurrent_requests = t
            .uint("max_concurrent_requests", MAX_SEMAPHORE_PERMITS)
            .unwrap_or(0) as usize;
        let rate_limit = match (
            t.uint("rate_limit_per_second", u64::from(u32::MAX)),
            t.uint("rate_limit_burst", u64::from(u32::MAX)),
        ) {
            (Some(0), _) => {
                t.problem(
                    "rate_limit_per_second",
                    "must be at least 1",
                    Some("remove the key for no limit".into()),
                );
                None
            }
            (Some(rps), burst) => Some((rps as u32, burst.unwrap_or(rps).max(1) as u32)),
            (None, Some(_)) => {
                t.problem(
                    "rate_limit_burst",
                    "a burst needs `rate_limit_per_second`",
                    Some("add `rate_limit_per_second = 10`".into()),
                );
                None
            }
            (None, None) => None,
        };
        let headers = response_headers(&t);
        let (Some(path), Some(kind)) = (path, kind) else {
            continue;
        };
        let default_name = match hosts.first() {
            Some(h) => format!("{h}{path}"),
            None => format!("*{path}"),
        };
        let name = t.string("name").map(|n| n.value).unwrap_or(default_name);
        if let Some(first) = seen_name.get(&name) {
            t.problem(
                "name",
                format!("route name `{name}` is already used by {first}"),
                Some("give each route a distinct `name`".into()),
            );
        } else {
            seen_name.insert(name.clone(), t.path().to_string());
        }
        let keys: Vec<Option<HostPattern>> = if hosts.is_empty() {
            vec![None]
        } else {
            hosts.iter().cloned().map(Some).collect()
        };
        for k in keys {
            let display = k.as_ref().map_or("any host".to_string(), |h| h.to_string());
            if let Some(first) = seen_match.insert((k, path.clone()), t.path().to_string()) {
                t.problem(
                    "path",
                    format!("{display} with path `{path}` is already routed by {first}"),
                    Some("remove one of the two routes or change its host or path".into()),
                );
            }
        }
        out.push(RouteConfig {
            name,
            hosts,
            path,
            kind,
            connect_timeout,
            response_timeout,
            max_request_body,
            preserve_host,
            strip_prefix,
            max_concurrent_requests,
            rate_limit,
            headers,
        });
    }
    out
}

/// HSTS and the `Server` header a route sets.
fn response_headers(t: &Section<'_, '_>) -> ResponseHeaders {
    let mut h = ResponseHeaders::default();
    if let Some(age) = t.duration("hsts_max_age") {
        let mut v = format!("max-age={}", age.as_secs());
        if t.bool("hsts_include_subdomains").unwrap_or(false) {
            v.push_str("; includeSubDomains");
        }
        if t.bool("hsts_preload").unwrap_or(false) {
            v.push_str("; preload");
        }
        h.hsts = http::HeaderValue::from_str(&v).ok();
    } else {
        for key in ["hsts_include_subdomains", "hsts_preload"] {
            if t.bool(key).is_some() {
                t.problem(
                    key,
                    "needs `hsts_max_age`",
                    Some("add `hsts_max_age = \"365d\"`".into()),
                );
            }
        }
    }
    if let Some(s) = t.string("server_header") {
        h.server = match s.value.as_str() {
            "pass" => ServerHeader::Pass,
            "remove" => ServerHeader::Remove,
            other => match http::HeaderValue::from_str(other) {
                Ok(v) => ServerHeader::Set(v),
                Err(_) => {
                    s.problem(
                        t.doc(),
                        format!("`{other}` is not a valid header value"),
                        Some("use \"pass\", \"remove\" or a printable value".into()),
                    );
                    ServerHeader::Pass
                }
            },
        };
    }
    h
}

/// The route's kind and its kind-specific settings.
fn route_kind(t: &Section<'_, '_>) -> Option<RouteKind> {
    let kind = t.string("kind");
    let protocol = match kind.as_ref().map(|k| k.value.as_str()) {
        None | Some("proxy") => None,
        Some("anthropic") => Some(Protocol::Anthropic),
        Some("openai") => Some(Protocol::OpenAi),
        Some(other) => {
            t.problem(
                "kind",
                format!("unknown route kind `{other}`"),
                Some("use \"proxy\" (the default), \"anthropic\" or \"openai\"".into()),
            );
            return None;
        }
    };
    let other_kind = match protocol {
        None => LLM_ONLY,
        Some(_) => PROXY_ONLY,
    };
    for key in other_kind {
        if t.raw_present(key) {
            t.problem(
                key,
                format!(
                    "`{key}` does not apply to {} routes",
                    kind.as_ref().map_or("proxy", |k| k.value.as_str())
                ),
                Some(match protocol {
                    None => "set `kind = \"anthropic\"` or `kind = \"openai\"` for an LLM route, or remove the key".into(),
                    Some(_) => "remove the key; LLM routes take `[[route.upstreams]]`".into(),
                }),
            );
        }
    }
    match protocol {
        None => match t.string("upstream") {
            Some(u) => upstream_uri(t, &u).map(|upstream| RouteKind::Proxy { upstream }),
            None => {
                t.problem(
                    "upstream",
                    "missing",
                    Some("add `upstream = \"http://127.0.0.1:3000\"`".into()),
                );
                None
            }
        },
        Some(protocol) => llm_settings(t, protocol).map(|s| RouteKind::Llm(Arc::new(s))),
    }
}

fn llm_settings(t: &Section<'_, '_>, protocol: Protocol) -> Option<LlmSettings> {
    let mut upstreams: Vec<LlmUpstreamConfig> = Vec::new();
    let sections = t.tables("upstreams", LLM_UPSTREAM);
    if sections.is_empty() {
        t.problem(
            "upstreams",
            "an LLM route needs at least one upstream",
            Some(format!(
                "add `[[route.upstreams]]` with `name` and `url = \"{}\"`",
                match protocol {
                    Protocol::Anthropic => "https://api.anthropic.com",
                    Protocol::OpenAi => "https://api.openai.com",
                }
            )),
        );
    }
    let mut ok = true;
    for u in sections {
        let Some(name) = u.string("name") else {
            u.problem("name", "missing", Some("add `name = \"primary\"`".into()));
            ok = false;
            continue;
        };
        if name.value.is_empty() || name.value.contains(':') {
            name.problem(
                t.doc(),
                "an upstream name must be non-empty and cannot contain `:`",
                Some("`:` separates an upstream from a model id in `upstreams` lists".into()),
            );
            ok = false;
        }
        if upstreams.iter().any(|x| x.name == name.value) {
            name.problem(
                t.doc(),
                format!("upstream `{}` is defined twice in this route", name.value),
                Some("give each upstream a distinct `name`".into()),
            );
            ok = false;
        }
        let url = match u.string("url") {
            Some(url) => upstream_uri(&u, &url),
            None => {
                u.problem("url", "missing", Some("add `url = \"https://...\"`".into()));
                None
            }
        };
        let credential = credential(&u);
        let connect_timeout =
            positive_duration(&u, "connect_timeout").unwrap_or(defaults::CONNECT_TIMEOUT);
        let api = upstream_api(&u, protocol);
        match (url, credential, api) {
            (Some(url), Some(credential), Some(api)) => upstreams.push(LlmUpstreamConfig {
                name: name.value,
                url,
                credential,
                connect_timeout,
                api,
            }),
            _ => ok = false,
        }
    }
    let choices = |list: Vec<At<String>>| -> Option<Vec<Choice>> {
        let mut out = Vec::new();
        let mut good = true;
        for entry in list {
            let (name, model) = match entry.value.split_once(':') {
                Some((n, m)) => (n, Some(m.to_string())),
                None => (entry.value.as_str(), None),
            };
            match upstreams.iter().position(|u| u.name == name) {
                Some(upstream) => out.push(Choice { upstream, model }),
                None => {
                    entry.problem(
                        t.doc(),
                        format!("no upstream named `{name}` in this route"),
                        Some(format!(
                            "use one of: {}",
                            upstreams
                                .iter()
                                .map(|u| u.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )),
                    );
                    good = false;
                }
            }
        }
        good.then_some(out)
    };
    let mut models = Vec::new();
    for m in t.tables("models", MODEL) {
        let Some(name) = m.string("name") else {
            m.problem(
                "name",
                "missing",
                Some("add `name = \"claude-sonnet-4-5\"`".into()),
            );
            ok = false;
            continue;
        };
        if models.iter().any(|(n, _)| *n == name.value) {
            name.problem(
                t.doc(),
                format!("model `{}` is listed twice", name.value),
                Some("keep one `[[route.models]]` entry per model".into()),
            );
            ok = false;
        }
        let Some(list) = m.string_list("upstreams").filter(|l| !l.is_empty()) else {
            m.problem(
                "upstreams",
                "a model needs at least one upstream",
                Some("add `upstreams = [\"primary\", \"backup:other-model-id\"]`".into()),
            );
            ok = false;
            continue;
        };
        match choices(list) {
            Some(c) => models.push((name.value, c)),
            None => ok = false,
        }
    }
    let default_upstreams = match t.string_list("default_upstreams") {
        Some(list) => choices(list).unwrap_or_else(|| {
            ok = false;
            Vec::new()
        }),
        None if models.is_empty() => (0..upstreams.len())
            .map(|upstream| Choice {
                upstream,
                model: None,
            })
            .collect(),
        None => Vec::new(),
    };
    let client_tokens = client_tokens(t);
    let failover_on = match t.uint_list("failover_on", 599) {
        Some(list) => list.into_iter().map(|s| s.value as u16).collect(),
        None => defaults::LLM_FAILOVER_ON.to_vec(),
    };
    let settings = LlmSettings {
        protocol,
        models,
        default_upstreams,
        client_tokens: client_tokens?,
        max_concurrent_per_token: t
            .uint("max_concurrent_per_token", MAX_SEMAPHORE_PERMITS)
            .unwrap_or(0) as usize,
        first_byte_timeout: positive_duration(t, "first_byte_timeout")
            .unwrap_or(defaults::LLM_FIRST_BYTE_TIMEOUT),
        first_token_timeout: positive_duration(t, "first_token_timeout")
            .unwrap_or(defaults::LLM_FIRST_TOKEN_TIMEOUT),
        stream_idle_timeout: positive_duration(t, "stream_idle_timeout")
            .unwrap_or(defaults::LLM_STREAM_IDLE_TIMEOUT),
        sse_keepalive: positive_duration(t, "sse_keepalive").unwrap_or(defaults::LLM_SSE_KEEPALIVE),
        failover_on,
        served_by_header: t.bool("served_by_header").unwrap_or(false),
        upstreams,
    };
    ok.then_some(settings)
}

/// The API an upstream speaks: the route's own by default; another one
/// means translation, for the pairs weir translates.
fn upstream_api(u: &Section<'_, '_>, route: Protocol) -> Option<UpstreamApi> {
    let Some(p) = u.string("protocol") else {
        return Some(match route {
            Protocol::Anthropic => UpstreamApi::Anthropic,
            Protocol::OpenAi => UpstreamApi::OpenAi,
        });
    };
    let api = match p.value.as_str() {
        "anthropic" => UpstreamApi::Anthropic,
        "openai" => UpstreamApi::OpenAi,
        "openai_responses" => UpstreamApi::OpenAiResponses,
        "openai_chat" => UpstreamApi::OpenAiChat,
        other => {
            p.problem(
                u.doc(),
                format!("unknown protocol `{other}`"),
                Some("use \"anthropic\", \"openai_responses\", \"openai_chat\" or \"openai\" (both OpenAI APIs)".into()),
            );
            return None;
        }
    };
    if route == Protocol::Anthropic && api == UpstreamApi::OpenAi {
        p.problem(
            u.doc(),
            "an Anthropic route must say which OpenAI API the upstream is translated to",
            Some("use \"openai_responses\" or \"openai_chat\"".into()),
        );
        return None;
    }
    Some(api)
}

/// An upstream's key from `api_key_env` or `api_key_file`; neither means
/// the client's own credential is passed through.
fn credential(u: &Section<'_, '_>) -> Option<Credential> {
    let env = u.string("api_key_env");
    let file = u.string("api_key_file");
    match (env, file) {
        (Some(_), Some(_)) => {
            u.problem(
                "api_key_file",
                "set `api_key_env` or `api_key_file`, not both",
                None,
            );
            None
        }
        (Some(var), None) => match std::env::var(&var.value) {
            Ok(key) if !key.trim().is_empty() => Some(Credential::Key(Secret(key.trim().into()))),
            _ => {
                var.problem(
                    u.doc(),
                    format!("environment variable `{}` is not set or empty", var.value),
                    Some("export it before starting weir, or use `api_key_file`".into()),
                );
                None
            }
        },
        (None, Some(f)) => {
            let path = u.doc().base_dir().join(&f.value);
            match std::fs::read_to_string(&path) {
                Ok(key) if !key.trim().is_empty() => {
                    Some(Credential::Key(Secret(key.trim().into())))
                }
                Ok(_) => {
                    f.problem(u.doc(), format!("{} is empty", path.display()), None);
                    None
                }
                Err(e) => {
                    f.problem(
                        u.doc(),
                        format!("cannot read {}: {e}", path.display()),
                        Some("point `api_key_file` at a readable file holding the key".into()),
                    );
                    None
                }
            }
        }
        (None, None) => Some(Credential::Passthrough),
    }
}

/// The admin API's bearer token, from a file or the environment.
fn admin_token(a: &Section<'_, '_>) -> Option<Secret> {
    if let Some(f) = a.string("token_file") {
        let path = a.doc().base_dir().join(&f.value);
        return match std::fs::read_to_string(&path) {
            Ok(t) if !t.trim().is_empty() => Some(Secret(t.trim().to_string())),
            Ok(_) => {
                f.problem(a.doc(), format!("{} is empty", path.display()), None);
                None
            }
            Err(e) => {
                f.problem(
                    a.doc(),
                    format!("cannot read {}: {e}", path.display()),
                    Some("point `token_file` at a file holding the admin token".into()),
                );
                None
            }
        };
    }
    let var = a.string("token_env")?;
    match std::env::var(&var.value) {
        Ok(t) if !t.trim().is_empty() => Some(Secret(t.trim().to_string())),
        _ => {
            var.problem(
                a.doc(),
                format!("environment variable `{}` is not set or empty", var.value),
                Some("export it before starting weir, or use `token_file`".into()),
            );
            None
        }
    }
}

/// Client tokens from a file (one per line, `#` comments) and/or an
/// environment variable (separated by commas or whitespace).
fn client_tokens(t: &Section<'_, '_>) -> Option<Vec<Secret>> {
    let mut tokens = Vec::new();
    let mut ok = true;
    if let Some(f) = t.string("client_tokens_file") {
        let path = t.doc().base_dir().join(&f.value);
        match std::fs::read_to_string(&path) {
            Ok(text) => tokens.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(|l| Secret(l.to_string())),
            ),
            Err(e) => {
                f.problem(
                    t.doc(),
                    format!("cannot read {}: {e}", path.display()),
                    Some("point `client_tokens_file` at a file with one token per line".into()),
                );
                ok = false;
            }
        }
    }
    if let Some(var) = t.string("client_tokens_env") {
        match std::env::var(&var.value) {
            Ok(v) => tokens.extend(
                v.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|s| !s.is_empty())
                    .map(|s| Secret(s.to_string())),
            ),
            Err(_) => {
                var.problem(
                    t.doc(),
                    format!("environment variable `{}` is not set", var.value),
                    Some("export it before starting weir".into()),
                );
                ok = false;
            }
        }
    }
    let configured =
        t.string("client_tokens_file").is_some() || t.string("client_tokens_env").is_some();
    if ok && configured && tokens.is_empty() {
        t.problem(
            "client_tokens_file",
            "client tokens are configured but none were found: every request would get 401",
            Some("add at least one token".into()),
        );
        ok = false;
    }
    ok.then_some(tokens)
}

fn host_pattern(t: &Section<'_, '_>, h: &At<String>) -> Option<HostPattern> {
    let lower = h.value.to_ascii_lowercase();
    let (wildcard, name) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !valid {
        h.problem(
            t.doc(),
            format!("`{}` is not a host name or `*.domain` pattern", h.value),
            Some("write a name like \"example.com\" or \"*.example.com\", without a port".into()),
        );
        return None;
    }
    Some(if wildcard {
        HostPattern::Wildcard(format!(".{name}"))
    } else {
        HostPattern::Exact(name.to_string())
    })
}

fn upstream_uri(t: &Section<'_, '_>, u: &At<String>) -> Option<http::Uri> {
    let fix =
        Some("write it like \"http://127.0.0.1:3000\" or \"https://backend.internal\"".to_string());
    let uri = match u.value.parse::<http::Uri>() {
        Ok(uri) => uri,
        Err(e) => {
            u.problem(t.doc(), format!("`{}` is not a URL: {e}", u.value), fix);
            return None;
        }
    };
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            u.problem(
                t.doc(),
                format!("`{}` must start with http:// or https://", u.value),
                fix,
            );
            return None;
        }
    }
    if uri.authority().is_none_or(|a| a.host().is_empty()) {
        u.problem(t.doc(), format!("`{}` has no host", u.value), fix);
        return None;
    }
    if uri.query().is_some() {
        u.problem(
            t.doc(),
            "an upstream URL cannot have a query",
            Some("remove the `?...` part".into()),
        );
        return None;
    }
    Some(uri)
}

fn upstream(top: &Section<'_, '_>) -> UpstreamSettings {
    let mut s = UpstreamSettings::default();
    let Some(t) = top.table("upstream", UPSTREAM) else {
        return s;
    };
    if let Some(d) = t.duration("pool_idle_timeout") {
        s.pool_idle_timeout = d;
    }
    if let Some(n) = t.uint("pool_max_idle_per_host", 1_000_000) {
        s.pool_max_idle_per_host = n as usize;
    }
    if let Some(p) = required_path_opt(&t, "ca_file") {
        match crate::pki::client_config(Some(&p.value)) {
            Ok(_) => s.ca_file = Some(p.value),
            Err(e) => p.problem(
                t.doc(),
                e.to_string(),
                Some("point `ca_file` at a PEM file of CA certificates".into()),
            ),
        }
    }
    s
}

fn required_path_opt(t: &Section<'_, '_>, key: &str) -> Option<At<PathBuf>> {
    let s = t.string(key)?;
    Some(At {
        value: t.doc().base_dir().join(&s.value),
        span: s.span,
        key: s.key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        match parse(Path::new("w.toml"), text) {
            Ok(_) => Vec::new(),
            Err(p) => p.0.iter().map(|p| p.to_string()).collect(),
        }
    }

    const MINIMAL: &str =
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://127.0.0.1:1\"\n";

    /// A TLS listener with only an `acme` table (plus `acme_extra`), and
    /// routes for `hosts`.
    fn acme_config(dir: &Path, acme_extra: &str, hosts: &[&str], plain: bool) -> String {
        let mut t = String::new();
        if plain {
            t.push_str("[[listener]]\naddress = \"127.0.0.1:0\"\n");
        }
        t.push_str(&format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[listener.tls.acme]\nstate_dir = \"{}\"\n{acme_extra}\n",
            dir.display()
        ));
        for h in hosts {
            t.push_str(&format!(
                "[[route]]\nhost = \"{h}\"\nupstream = \"http://127.0.0.1:1\"\n"
            ));
        }
        t
    }

    fn acme_of(c: &Config) -> &AcmeSettings {
        c.listeners
            .iter()
            .find_map(|l| l.tls.as_ref()?.acme.as_ref())
            .expect("an acme listener")
    }

    #[test]
    fn acme_names_default_to_the_routes_exact_hosts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = acme_config(
            dir.path(),
            "",
            &[
                "b.example.com",
                "A.example.com",
                "*.wild.example.com",
                "10.0.0.1",
            ],
            false,
        );
        let c = parse(Path::new("w.toml"), &text).expect("valid");
        let acme = acme_of(&c);
        assert_eq!(acme.names, ["a.example.com", "b.example.com"]);
        assert_eq!(acme.directory, defaults::ACME_DIRECTORY);
        assert_eq!(acme.challenge, AcmeChallenge::TlsAlpn01);
        assert_eq!(acme.retry_base, defaults::ACME_RETRY_BASE);
        let tls = c.listeners[0].tls.as_ref().expect("tls");
        assert!(tls.certificates.is_empty(), "acme alone is enough");
    }

    #[test]
    fn acme_problems_are_all_reported_with_their_fixes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("a-file");
        std::fs::write(&blocker, "").expect("write");
        let text = acme_config(
            &blocker.join("state"),
            "directory = \"http://ca.example/dir\"\nemail = \"nobody\"\nnames = [\"*.example.com\", \"ok.example.com\", \"bad_name.example.com\"]\nchallenge = \"http-01\"\nexternal_account = { key_id = \"kid\", hmac_key_env = \"WEIR_TEST_SURELY_UNSET_VARIABLE\" }",
            &[],
            false,
        );
        let p = problems(&text).join("\n");
        for want in [
            "tls.acme.directory",
            "not an https:// URL",
            "tls.acme.email",
            "not an email address",
            "wildcard certificates need the dns-01 challenge",
            "`bad_name.example.com` is not a valid DNS name",
            "http-01 is answered on a plain HTTP listener, and there is none",
            "tls.acme.state_dir",
            "is not a writable directory",
            "WEIR_TEST_SURELY_UNSET_VARIABLE",
        ] {
            assert!(p.contains(want), "missing {want:?} in:\n{p}");
        }
    }

    #[test]
    fn acme_without_names_or_with_dns_01_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = problems(&acme_config(dir.path(), "", &["*.example.com"], false)).join("\n");
        assert!(p.contains("no host names to certify"), "{p}");
        let p = problems(&acme_config(
            dir.path(),
            "challenge = \"dns-01\"",
            &["a.example.com"],
            true,
        ))
        .join("\n");
        assert!(p.contains("weir does not answer dns-01"), "{p}");
    }

    #[test]
    fn acme_http_01_with_a_plain_listener_and_eab_is_accepted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("hmac");
        std::fs::write(&key, "c2VjcmV0LWhtYWMta2V5\n").expect("write");
        let text = acme_config(
            &dir.path().join("state"),
            &format!(
                "challenge = \"http-01\"\ndirectory = \"letsencrypt-staging\"\nexternal_account = {{ key_id = \"kid-1\", hmac_key_file = \"{}\" }}",
                key.display()
            ),
            &["a.example.com"],
            true,
        );
        let c = parse(Path::new("w.toml"), &text).expect("valid");
        let acme = acme_of(&c);
        assert_eq!(acme.challenge, AcmeChallenge::Http01);
        assert_eq!(acme.directory, defaults::ACME_STAGING_DIRECTORY);
        let eab = acme.external_account.as_ref().expect("eab");
        assert_eq!(eab.key_id, "kid-1");
        assert_eq!(eab.hmac_key.0, "c2VjcmV0LWhtYWMta2V5");
        assert!(dir.path().join("state").is_dir(), "the state dir is made");
    }

    #[test]
    fn llm_routes_are_validated_with_every_problem_named() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"a\"\nkind = \"anthropic\"\nupstream = \"http://x\"\n\
             [[route.upstreams]]\nname = \"one\"\nurl = \"http://127.0.0.1:1\"\n\
             api_key_env = \"WEIR_TEST_SURELY_UNSET_VARIABLE\"\n\
             [[route.upstreams]]\nname = \"two\"\nurl = \"ftp://x\"\n\
             [[route.models]]\nname = \"m\"\nupstreams = [\"one\", \"three:id\"]\n\
             [[route]]\nname = \"b\"\nkind = \"gemini\"\n\
             [[route]]\nname = \"c\"\nupstream = \"http://x\"\nsse_keepalive = \"1s\"\n",
        );
        let joined = p.join("\n");
        for needle in [
            "route[0].upstream: `upstream` does not apply to anthropic routes",
            "WEIR_TEST_SURELY_UNSET_VARIABLE` is not set",
            "must start with http:// or https://",
            "no upstream named `three`",
            "unknown route kind `gemini`",
            "route[2].sse_keepalive: `sse_keepalive` does not apply to proxy routes",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }

    #[test]
    fn an_llm_route_defaults_to_all_upstreams_and_32_mib() {
        let c = parse(
            Path::new("w.toml"),
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"openai\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n\
             [[route.upstreams]]\nname = \"b\"\nurl = \"http://127.0.0.1:2/base\"\n",
        )
        .expect("valid");
        let r = &c.routes[0];
        assert_eq!(r.max_request_body, Some(defaults::LLM_MAX_REQUEST_BODY));
        let RouteKind::Llm(llm) = &r.kind else {
            panic!("an LLM route");
        };
        assert_eq!(llm.protocol, Protocol::OpenAi);
        let order: Vec<usize> = llm
            .choices("anything")
            .expect("default")
            .iter()
            .map(|c| c.upstream)
            .collect();
        assert_eq!(order, vec![0, 1]);
        assert_eq!(llm.failover_on, defaults::LLM_FAILOVER_ON);
        assert!(
            llm.upstreams
                .iter()
                .all(|u| u.credential == Credential::Passthrough)
        );
    }

    #[test]
    fn minimal_config_is_valid_with_defaults() {
        let c = parse(Path::new("w.toml"), MINIMAL).expect("valid");
        assert_eq!(c.routes[0].path, "/");
        assert_eq!(c.routes[0].connect_timeout, defaults::CONNECT_TIMEOUT);
        assert!(c.routes[0].preserve_host);
        assert_eq!(c.server.shutdown_timeout, defaults::SHUTDOWN_TIMEOUT);
        assert_eq!(c.server.drain_grace, defaults::DRAIN_GRACE);
    }

    #[test]
    fn drain_grace_is_read_and_bounded() {
        let c = parse(
            Path::new("w.toml"),
            &format!("[server]\ndrain_grace = \"250ms\"\n{MINIMAL}"),
        )
        .expect("valid");
        assert_eq!(c.server.drain_grace, std::time::Duration::from_millis(250));
        let p = problems(&format!(
            "[server]\ndrain_grace = \"500000000000y\"\n{MINIMAL}"
        ));
        assert!(
            p.iter().any(|l| l.contains("server.drain_grace: too long")),
            "{p:?}"
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let p = problems(
            "[server]\nshutdown_timout = \"1s\"\n\
             [[listener]]\naddress = \"nope\"\n\
             [[route]]\nhost = \"bad host\"\npath = \"api\"\nupstream = \"ftp://x\"\nconnect_timeout = \"soon\"\n",
        );
        assert_eq!(p.len(), 6, "{p:#?}");
        assert!(p[0].starts_with("w.toml:2:1: server.shutdown_timout: unknown key (fix: did you mean `shutdown_timeout`?)"), "{}", p[0]);
        assert!(
            p.iter()
                .any(|l| l.contains("listener[0].address") && l.contains("not an IP:port"))
        );
        assert!(
            p.iter()
                .any(|l| l.contains("route[0].host") && l.contains("bad host"))
        );
        assert!(
            p.iter()
                .any(|l| l.contains("route[0].upstream") && l.contains("http://"))
        );
        assert!(p.iter().any(|l| l.contains("route[0].connect_timeout")));
    }

    #[test]
    fn duplicate_routes_and_addresses_are_rejected() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:80\"\n[[listener]]\naddress = \"127.0.0.1:80\"\n\
             [[route]]\nupstream = \"http://a\"\n[[route]]\nupstream = \"http://b\"\npath = \"/\"\n",
        );
        assert!(
            p.iter()
                .any(|l| l.contains("listener[1].address") && l.contains("already used")),
            "{p:#?}"
        );
        assert!(
            p.iter().any(|l| l.contains("already routed by route[0]")),
            "{p:#?}"
        );
    }

    #[test]
    fn missing_listener_and_route_are_reported() {
        let p = problems("");
        assert_eq!(p.len(), 2, "{p:#?}");
    }

    #[test]
    fn missing_certificate_file_is_reported_at_its_key() {
        let p = problems(&format!(
            "{MINIMAL}[[listener]]\naddress = \"127.0.0.1:1\"\ntls = {{ certificates = [{{ cert = \"/nonexistent/c.pem\", key = \"/nonexistent/k.pem\" }}] }}\n"
        ));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("listener[1].tls.certificates[0].cert")
                && p[0].contains("/nonexistent/c.pem"),
            "{}",
            p[0]
        );
    }

    #[test]
    fn gate_sizes_a_semaphore_cannot_hold_are_rejected() {
        let p = problems(&format!(
            "[server]\nmax_concurrent_requests = 9223372036854775807\n{MINIMAL}"
        ));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("server.max_concurrent_requests") && p[0].contains("out of range"),
            "{}",
            p[0]
        );
        let c = parse(
            Path::new("w.toml"),
            &format!("[server]\nmax_concurrent_requests = 0\n{MINIMAL}"),
        )
        .expect("0 is valid");
        assert_eq!(c.server.max_concurrent_requests, 0);
    }

    #[test]
    fn host_patterns() {
        let c = parse(
            Path::new("w.toml"),
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nhost = [\"Example.com\", \"*.example.org\"]\nupstream = \"http://a\"\n",
        )
        .expect("valid");
        assert_eq!(
            c.routes[0].hosts[0],
            HostPattern::Exact("example.com".into())
        );
        assert_eq!(
            c.routes[0].hosts[1],
            HostPattern::Wildcard(".example.org".into())
        );
    }
}
