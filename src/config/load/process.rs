//! The process-wide tables: `[server]`, `[connections]`, `[http1]`,
//! `[http2]`, `[log]`, `[admin]` and `[upstream]`.

use super::keys::{admin, connections, http1, http2, log, server, upstream};
use super::*;

pub(super) fn server(top: &Section<'_, '_>) -> ServerSettings {
    let mut s = ServerSettings::default();
    let Some(t) = top.table("server") else {
        return s;
    };
    if let Some(d) = t.duration(&server::SHUTDOWN_TIMEOUT) {
        s.shutdown_timeout = d;
    }
    if let Some(d) = t.duration(&server::DRAIN_GRACE) {
        s.drain_grace = d;
    }
    if let Some(n) = t.uint(&server::WORKERS) {
        s.workers = n as usize;
    }
    if let Some(n) = t.uint(&server::MAX_CONCURRENT_REQUESTS) {
        s.max_concurrent_requests = n as usize;
    }
    if let Some(n) = t.size(&server::MAX_BUFFERED_BODY_BYTES) {
        s.max_buffered_body_bytes = n;
    }
    match t.uint(&server::MAX_OPEN_STATIC_FILES) {
        Some(0) => t.problem(
            server::MAX_OPEN_STATIC_FILES.name,
            "must be at least 1: no static file could be served",
            Some("remove the key for the default, 256".into()),
        ),
        Some(n) => s.max_open_static_files = n as usize,
        None => {}
    }
    if let Some(d) = t.duration(&server::BODY_READ_TIMEOUT) {
        s.body_read_timeout = d;
    }
    if let Some(b) = t.bool(&server::WATCH_CONFIG) {
        s.watch_config = b;
    }
    if let Some(name) = t.string(&server::BUDGET_TIME_ZONE) {
        match crate::calendar::Zone::named(&name.value) {
            Ok(zone) => s.budget_time_zone = zone,
            Err(why) => name.problem(
                t.doc(),
                format!("`{}` is not a time zone weir knows: {why}", name.value),
                Some("use an IANA name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\" (`timedatectl list-timezones` lists them)".into()),
            ),
        }
    }
    s.trusted_proxies = ip_networks(&t, &server::TRUSTED_PROXIES);
    s.error_pages = access::server_error_pages(&t, &server::ERROR_PAGES);
    if let Ok(Some((key, _))) = secrets::secret(
        &t,
        &server::TOKEN_ID_KEY_ENV,
        &server::TOKEN_ID_KEY_FILE,
        "the key client tokens are named with",
    ) {
        *t.doc().token_id_key.borrow_mut() = Some(key);
    }
    s
}

pub(super) fn connections(top: &Section<'_, '_>) -> ConnectionSettings {
    let mut s = ConnectionSettings::default();
    let Some(t) = top.table("connections") else {
        return s;
    };
    if let Some(n) = t.uint(&connections::MAX) {
        s.max = n as usize;
    }
    if let Some(n) = t.uint(&connections::MAX_PER_IP) {
        s.max_per_ip = n as usize;
    }
    if let Some(d) = t.duration(&connections::TLS_HANDSHAKE_TIMEOUT) {
        s.tls_handshake_timeout = d;
    }
    if let Some(d) = t.duration(&connections::REQUEST_HEAD_TIMEOUT) {
        s.request_head_timeout = d;
    }
    if let Some(d) = t.duration(&connections::KEEPALIVE_TIMEOUT) {
        s.keepalive_timeout = d;
    }
    if let Some(n) = t.uint(&connections::MAX_REQUESTS) {
        s.max_requests = n;
    }
    if let Some(n) = t.size(&connections::MIN_BODY_RATE) {
        s.min_body_rate = n;
    }
    if let Some(d) = t.duration(&connections::BODY_RATE_PERIOD) {
        s.body_rate_period = d;
    }
    if let Some(d) = t.duration(&connections::SEND_TIMEOUT) {
        s.send_timeout = d;
    }
    if let Some(n) = t.uint(&connections::PRESSURE_THRESHOLD) {
        if n == 0 {
            t.problem(
                connections::PRESSURE_THRESHOLD.name,
                "0% would keep deadlines shrunk at all times",
                Some("use a percentage from 1 to 100 (100 = only at the cap)".into()),
            );
        } else {
            s.pressure_threshold_percent = n as u8;
        }
    }
    if let Some(d) = t.duration(&connections::PRESSURE_TIMEOUT) {
        s.pressure_timeout = d;
    }
    if let Some(d) = t.duration(&connections::TUNNEL_IDLE_TIMEOUT) {
        s.tunnel_idle_timeout = d;
    }
    if let Some(d) = t.duration(&connections::TUNNEL_MAX_LIFETIME) {
        s.tunnel_max_lifetime = d;
    }
    if let Some(n) = t.uint(&connections::MAX_TUNNELS_PER_IP) {
        s.max_tunnels_per_ip = n as usize;
    }
    s
}

pub(super) fn http1(top: &Section<'_, '_>) -> Http1Settings {
    let mut h = Http1Settings::default();
    let Some(t) = top.table("http1") else {
        return h;
    };
    if let Some(n) = t.uint(&http1::MAX_HEADERS) {
        h.max_headers = n as usize;
    }
    if let Some(n) = t.size(&http1::MAX_HEAD_SIZE) {
        h.max_head_size = n as usize;
    }
    h
}

pub(super) fn http2(top: &Section<'_, '_>) -> Http2Settings {
    let mut h = Http2Settings::default();
    let Some(t) = top.table("http2") else {
        return h;
    };
    if let Some(n) = t.uint(&http2::MAX_CONCURRENT_STREAMS) {
        h.max_concurrent_streams = n as u32;
    }
    if let Some(n) = t.size(&http2::MAX_HEADER_LIST_SIZE) {
        h.max_header_list_size = n as u32;
    }
    if let Some(n) = t.uint(&http2::MAX_PENDING_RESETS) {
        h.max_pending_resets = n as usize;
    }
    if let Some(n) = t.uint(&http2::MAX_CONTROL_FRAMES_PER_SECOND) {
        h.max_control_frames_per_second = n as u32;
    }
    h
}

pub(super) fn log(top: &Section<'_, '_>) -> LogSettings {
    let mut s = LogSettings::default();
    let Some(t) = top.table("log") else {
        return s;
    };
    if let Some(f) = t.string(&log::FORMAT) {
        match f.value.as_str() {
            "text" => s.format = LogFormat::Text,
            "json" => s.format = LogFormat::Json,
            other => f.problem(
                t.doc(),
                format!("unknown format `{other}`"),
                Some("use \"text\" or \"json\"".into()),
            ),
        }
    }
    if let Some(level) = t.string(&log::LEVEL) {
        match tracing_subscriber::EnvFilter::try_new(&level.value) {
            Ok(_) => s.level = level.value,
            Err(e) => level.problem(
                t.doc(),
                format!("`{}` is not a log filter: {e}", level.value),
                Some("use a level like \"info\" or a filter like \"weir=debug\"".into()),
            ),
        }
    }
    if let Some(b) = t.bool(&log::ACCESS_LOG) {
        s.access_log = b;
    }
    // Log files must be writable: found now, not at the first line.
    s.file = writable_file(&t, &log::FILE);
    s.access_file = writable_file(&t, &log::ACCESS_FILE);
    if let Some(b) = t.bool(&log::USAGE_LOG) {
        s.usage_log = b;
    }
    s.usage_file = writable_file(&t, &log::USAGE_FILE);
    s
}

fn writable_file(t: &Section<'_, '_>, key: &Key) -> Option<PathBuf> {
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
    let t = top.table("admin")?;
    let address = required_socket_addr(&t, &admin::ADDRESS, "127.0.0.1:9900");
    let token = secrets::secret(&t, &admin::TOKEN_ENV, &admin::TOKEN_FILE, "the admin token")
        .ok()
        .flatten()
        .map(|(token, _)| token);
    let view_token = secrets::secret(
        &t,
        &admin::VIEW_TOKEN_ENV,
        &admin::VIEW_TOKEN_FILE,
        "the dashboard's read-only token",
    )
    .ok()
    .flatten();
    // The same secret for both would make the read-only token a full one.
    let view_token = match (view_token, &token) {
        (Some((view, at)), Some(full)) if view == *full => {
            at.problem(
                t.doc(),
                "the view token is the admin token: it would not be read-only",
                Some("give the view token a secret of its own".into()),
            );
            None
        }
        (view, _) => view.map(|(view, _)| view),
    };
    let dashboard_interval = t
        .duration(&admin::DASHBOARD_INTERVAL)
        .unwrap_or(admin::DASHBOARD_INTERVAL.duration());
    address.map(|address| AdminSettings {
        address,
        token,
        view_token,
        dashboard_interval,
    })
}

pub(super) fn upstream(top: &Section<'_, '_>) -> UpstreamSettings {
    let mut s = UpstreamSettings::default();
    let Some(t) = top.table("upstream") else {
        return s;
    };
    if let Some(d) = t.duration(&upstream::POOL_IDLE_TIMEOUT) {
        s.pool_idle_timeout = d;
    }
    if let Some(n) = t.uint(&upstream::POOL_MAX_IDLE_PER_HOST) {
        s.pool_max_idle_per_host = n as usize;
    }
    if let Some(d) = t.duration(&upstream::RESOLVE_INTERVAL) {
        s.resolve_interval = d;
    }
    for ns in t.string_list(&upstream::NAMESERVERS).into_iter().flatten() {
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
    s.ca_file = ca_file(&t, &upstream::CA_FILE).map(|p| p.value);
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
        assert_eq!(
            (admin.view_token, admin.dashboard_interval.as_secs()),
            (None, 5)
        );
    }

    #[test]
    fn the_view_token_is_read_only_so_it_may_not_be_the_admin_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, secret) in [("admin", "t0ken"), ("same", "t0ken"), ("view", "v1ew")] {
            std::fs::write(dir.path().join(name), format!("{secret}\n")).expect("write");
        }
        let config = |view: &str| {
            format!(
                "[admin]\naddress = \"127.0.0.1:9\"\ntoken_file = \"{}\"\nview_token_file = \"{}\"\n\
                 dashboard_interval = \"2s\"\n{MINIMAL}",
                dir.path().join("admin").display(),
                dir.path().join(view).display()
            )
        };
        let p = problems(&config("same"));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("admin.view_token_file: the view token is the admin token"),
            "{}",
            p[0]
        );
        let c = parse(Path::new("w.toml"), &config("view")).expect("valid");
        let admin = c.admin.expect("admin");
        assert_eq!(admin.view_token, Some(Secret("v1ew".into())));
        assert_eq!(admin.dashboard_interval.as_secs(), 2);
        let p = problems(&format!(
            "[admin]\naddress = \"127.0.0.1:9\"\ndashboard_interval = \"2min\"\n{MINIMAL}"
        ));
        assert!(p[0].contains("admin.dashboard_interval"), "{p:#?}");
    }
}
