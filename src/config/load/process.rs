//! The process-wide tables: `[server]`, `[connections]`, `[http1]`,
//! `[http2]`, `[log]`, `[admin]` and `[upstream]`.

use super::*;

/// Request heads (HTTP/1.1) and header lists (HTTP/2): hyper's read
/// buffer cannot be smaller than 8 KiB, and 16 MiB of headers is an attack.
const HEAD_SIZE: RangeInclusive<u64> = 8 * 1024..=16 * 1024 * 1024;
/// `min_body_rate`: a minimum above 1 GiB/s would cut every client.
const MAX_BODY_RATE: u64 = 1 << 30;

pub(super) fn server(top: &Section<'_, '_>) -> ServerSettings {
    let mut s = ServerSettings::default();
    let Some(t) = top.table("server") else {
        return s;
    };
    if let Some(d) = t.duration("shutdown_timeout", TIMER_OR_ZERO) {
        s.shutdown_timeout = d;
    }
    if let Some(d) = t.duration(
        "drain_grace",
        std::time::Duration::ZERO..=defaults::DRAIN_GRACE_MAX,
    ) {
        s.drain_grace = d;
    }
    if let Some(n) = t.uint("workers", 1024) {
        s.workers = n as usize;
    }
    if let Some(n) = t.uint("max_concurrent_requests", MAX_SEMAPHORE_PERMITS) {
        s.max_concurrent_requests = n as usize;
    }
    if let Some(n) = t.size("max_buffered_body_bytes", MAX_SIZE) {
        s.max_buffered_body_bytes = n;
    }
    if let Some(b) = t.bool("watch_config") {
        s.watch_config = b;
    }
    s.trusted_proxies = ip_networks(&t, "trusted_proxies");
    s
}

pub(super) fn connections(top: &Section<'_, '_>) -> ConnectionSettings {
    let mut c = ConnectionSettings::default();
    let Some(t) = top.table("connections") else {
        return c;
    };
    if let Some(n) = t.uint("max", MAX_SEMAPHORE_PERMITS) {
        c.max = n as usize;
    }
    if let Some(n) = t.uint("max_per_ip", MAX_SEMAPHORE_PERMITS) {
        c.max_per_ip = n as usize;
    }
    if let Some(d) = timer(&t, "tls_handshake_timeout") {
        c.tls_handshake_timeout = d;
    }
    if let Some(d) = timer(&t, "request_head_timeout") {
        c.request_head_timeout = d;
    }
    if let Some(d) = timer(&t, "keepalive_timeout") {
        c.keepalive_timeout = d;
    }
    if let Some(n) = t.uint("max_requests", u64::MAX) {
        c.max_requests = n;
    }
    if let Some(n) = t.size("min_body_rate", MAX_BODY_RATE) {
        c.min_body_rate = n;
    }
    if let Some(d) = timer(&t, "body_rate_period") {
        c.body_rate_period = d;
    }
    if let Some(d) = timer(&t, "send_timeout") {
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
    if let Some(d) = timer(&t, "pressure_timeout") {
        c.pressure_timeout = d;
    }
    c
}

/// A request head or header list size, within [`HEAD_SIZE`].
fn head_size(t: &Section<'_, '_>, key: &'static str) -> Option<u64> {
    let n = t.size(key, *HEAD_SIZE.end())?;
    if n < *HEAD_SIZE.start() {
        t.problem(
            key,
            format!("{n} bytes is less than 8KiB"),
            Some("use a size from \"8KiB\" to \"16MiB\", like \"64KiB\"".into()),
        );
        return None;
    }
    Some(n)
}

pub(super) fn http1(top: &Section<'_, '_>) -> Http1Settings {
    let mut h = Http1Settings::default();
    let Some(t) = top.table("http1") else {
        return h;
    };
    if let Some(n) = t.uint("max_headers", 10_000) {
        h.max_headers = n as usize;
    }
    if let Some(n) = head_size(&t, "max_head_size") {
        h.max_head_size = n as usize;
    }
    h
}

pub(super) fn http2(top: &Section<'_, '_>) -> Http2Settings {
    let mut h = Http2Settings::default();
    let Some(t) = top.table("http2") else {
        return h;
    };
    if let Some(n) = t.uint("max_concurrent_streams", u32::MAX as u64) {
        h.max_concurrent_streams = n as u32;
    }
    if let Some(n) = t.size("max_header_list_size", *HEAD_SIZE.end()) {
        h.max_header_list_size = n as u32;
    }
    if let Some(n) = t.uint("max_pending_resets", 1_000_000) {
        h.max_pending_resets = n as usize;
    }
    if let Some(n) = t.uint("max_control_frames_per_second", u32::MAX as u64) {
        h.max_control_frames_per_second = n as u32;
    }
    h
}

pub(super) fn log(top: &Section<'_, '_>) -> LogSettings {
    let mut l = LogSettings::default();
    let Some(t) = top.table("log") else {
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
    l.file = writable_file(&t, "file");
    l.access_file = writable_file(&t, "access_file");
    if let Some(b) = t.bool("usage_log") {
        l.usage_log = b;
    }
    l.usage_file = writable_file(&t, "usage_file");
    l
}

fn writable_file(t: &Section<'_, '_>, key: &'static str) -> Option<PathBuf> {
    let p = path_opt(t, key)?;
    let writable = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p.value);
    match writable {
        Ok(_) => Some(p.value),
        Err(e) => {
            p.problem(
                t.doc(),
                format!("cannot write {}: {e}", p.value.display()),
                Some("point it at a file in a directory weir may write to".into()),
            );
            None
        }
    }
}

pub(super) fn admin(top: &Section<'_, '_>) -> Option<AdminSettings> {
    let a = top.table("admin")?;
    let address = required_socket_addr(&a, "address", "127.0.0.1:9900");
    let token = secrets::secret(&a, "token_env", "token_file", "the admin token")
        .ok()
        .flatten()
        .map(|(token, _)| token);
    address.map(|address| AdminSettings { address, token })
}

pub(super) fn upstream(top: &Section<'_, '_>) -> UpstreamSettings {
    let mut s = UpstreamSettings::default();
    let Some(t) = top.table("upstream") else {
        return s;
    };
    if let Some(d) = t.duration("pool_idle_timeout", TIMER_OR_ZERO) {
        s.pool_idle_timeout = d;
    }
    if let Some(n) = t.uint("pool_max_idle_per_host", 1_000_000) {
        s.pool_max_idle_per_host = n as usize;
    }
    if let Some(d) = timer(&t, "resolve_interval") {
        s.resolve_interval = d;
    }
    for ns in t.string_list("nameservers").into_iter().flatten() {
        // A bare address means the DNS port.
        let parsed = ns.value.parse::<SocketAddr>().or_else(|_| {
            ns.value
                .parse::<std::net::IpAddr>()
                .map(|ip| SocketAddr::new(ip, 53))
        });
        match parsed {
            Ok(addr) => s.nameservers.push(addr),
            Err(_) => t.doc().report(
                Some(ns.span.clone()),
                &ns.key,
                format!("`{}` is not an IP address", ns.value),
                Some("write it like \"10.0.0.2\" or \"127.0.0.1:5353\"".into()),
            ),
        }
    }
    s.ca_file = ca_file(&t).map(|p| p.value);
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;

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
    fn head_sizes_are_bounded_on_both_sides() {
        let p = problems(&format!(
            "[http1]\nmax_head_size = \"4KiB\"\n[http2]\nmax_header_list_size = \"4GiB\"\n{MINIMAL}"
        ));
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(
            p[0].contains("http1.max_head_size: 4096 bytes is less than 8KiB"),
            "{}",
            p[0]
        );
        assert!(
            p[1].contains("http2.max_header_list_size: \"4GiB\" is out of range (fix: use a size from 0 to \"16MiB\")"),
            "{}",
            p[1]
        );
    }

    #[test]
    fn admin_needs_an_address_and_at_most_one_token_source() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, "t0ken\n").expect("write");
        let p = problems(&format!(
            "[admin]\ntoken_env = \"HOME\"\ntoken_file = \"{}\"\n{MINIMAL}",
            token.display()
        ));
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(p[0].contains("admin.address: missing"), "{}", p[0]);
        assert!(
            p[1].contains("admin.token_file: set `token_env` or `token_file`, not both"),
            "{}",
            p[1]
        );
        let c = parse(
            Path::new("w.toml"),
            &format!(
                "[admin]\naddress = \"127.0.0.1:9\"\ntoken_file = \"{}\"\n{MINIMAL}",
                token.display()
            ),
        )
        .expect("valid");
        let admin = c.admin.expect("admin");
        assert_eq!(admin.token, Some(Secret("t0ken".into())));
    }
}
