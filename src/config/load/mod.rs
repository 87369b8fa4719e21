//! TOML text → validated [`Config`], collecting every problem on the way.
//!
//! One file per part of the config: [`process`] (`[server]`,
//! `[connections]`, `[http1]`, `[http2]`, `[log]`, `[admin]`,
//! `[upstream]`), [`listeners`] (`[[listener]]` and its TLS certificates),
//! [`acme`] (`[listener.tls.acme]`), [`routes`] (`[[route]]` and proxy
//! routes), [`llm`] (what LLM routes add), [`cluster`] (`[cluster]`) and [`secrets`] (keys and tokens
//! read from files and the environment). A declared key (see [`keys`]) is
//! named, bounded and defaulted by its declaration; the keys of the tables
//! not declared yet are named in the getter that reads them (see
//! [`reader`]). The helpers shared by several parts are here.

mod access;
mod acme;
mod azure;
mod bedrock;
mod cluster;
mod compress;
mod database;
#[cfg(test)]
mod docs;
mod entra;
mod group;
mod idp;
mod listeners;
mod llm;
mod prices;
mod process;
mod rate;
mod routes;
mod rules;
mod secrets;
mod statics;
mod traces;
mod usage;
mod vertex;

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::keys::{self, Key, MAX_SEMAPHORE_PERMITS, MAX_SIZE, TIMER, TIMER_OR_ZERO};
use super::reader::{self, At, Doc, KeyName, Problems, Section};
use super::sources::Sources;
use super::*;

/// One file's text (and the files it includes, read from disk).
#[cfg(test)]
pub(super) fn parse(path: &Path, text: &str) -> Result<Config, Problems> {
    from_sources(&Sources::from_text(path, text.to_string()))
}

/// A config's files, as one validated config.
pub(super) fn from_sources(sources: &Sources) -> Result<Config, Problems> {
    let (text, files) = sources.joined();
    let doc = Doc::of_files(files.clone(), &text);
    match read(&doc, sources, &text, &files) {
        Some(config) if !doc.has_problems() => Ok(config),
        _ => Err(Problems(doc.into_problems())),
    }
}

/// Every key the loader asks for in `text`, per table (for the docs test).
#[cfg(test)]
fn keys_read(path: &Path, text: &str) -> reader::KeysRead {
    let sources = Sources::from_text(path, text.to_string());
    let (text, files) = sources.joined();
    let doc = Doc::of_files(files.clone(), &text);
    let _ = read(&doc, &sources, &text, &files);
    doc.keys_read()
}

/// Read the whole document. The top-level section is dropped on return,
/// which reports its unknown keys, before the caller looks at the problems.
fn read(
    doc: &Doc<'_>,
    sources: &Sources,
    text: &str,
    files: &[(PathBuf, std::ops::Range<usize>)],
) -> Option<Config> {
    let root = sources.document(doc, text, files)?;
    let top = Section::new(doc, root.get_ref(), "", root.span());
    let server = process::server(&top);
    let connections = process::connections(&top);
    let http1 = process::http1(&top);
    let http2 = process::http2(&top);
    let log = process::log(&top);
    let admin = process::admin(&top);
    let cluster = cluster::cluster(&top);
    let database = database::database(&top);
    let idp = idp::idp(&top);
    let teams = idp::team_budgets(&top);
    let routes = routes::routes(&top, cluster.is_some(), server.error_pages.as_ref());
    let listeners = listeners::listeners(&top, admin.as_ref(), &routes);
    let upstream = process::upstream(&top);
    let llm_routes = || {
        routes.iter().filter_map(|r| match &r.kind {
            RouteKind::Llm(l) => Some((r.name.as_str(), &**l)),
            _ => None,
        })
    };
    if database.is_none() && !top.raw_present("database") {
        for (name, _) in llm_routes().filter(|(_, l)| l.runtime_keys) {
            top.problem(
                "database",
                format!("route `{name}` accepts runtime keys (`runtime_keys = true`), and there is no database to keep them in"),
                Some("add a `[database]` table (`url = \"sqlite:weir.db\"` is the default)".into()),
            );
        }
    }
    if idp.is_none() && !top.raw_present("idp") {
        for (name, _) in llm_routes().filter(|(_, l)| l.idp_tokens) {
            top.problem(
                "idp",
                format!("route `{name}` accepts identity tokens (`idp_tokens = true`), and there is no `[idp]` to check them against"),
                Some("add an `[idp]` table with the `issuer` and `audience` of the tokens".into()),
            );
        }
    }
    if top.raw_present("teams") && !top.raw_present("database") && !top.raw_present("idp") {
        top.problem(
            "teams",
            "team budgets apply to runtime keys and the IdP's people, and there is neither a `[database]` nor an `[idp]`",
            Some("add `[database]` (keys with `--team`) or `[idp]`, or remove the `[[teams]]` tables".into()),
        );
    }
    let (traces, metrics_export) = traces::telemetry(&top);
    // Followed when the files were read (see `sources`).
    top.raw_present(super::sources::INCLUDE);
    Some(Config {
        source: files.first().map(|(p, _)| p.clone()).unwrap_or_default(),
        watched: sources.dirs().to_vec(),
        server,
        connections,
        http1,
        http2,
        log,
        admin,
        listeners,
        routes,
        upstream,
        cluster,
        database,
        idp,
        teams: teams?,
        traces,
        metrics_export,
        warnings: doc.warnings(),
    })
}

/// A file's bytes, if it is at most `max`; else what is wrong, as a
/// sentence's end (`cannot be read: …`, `is larger than 1 MiB`).
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("is larger than {}", reader::size_text(max)));
    }
    Ok(bytes)
}

/// A timer of a table not declared yet: more than zero, at most a day.
fn timer(t: &Section<'_, '_>, key: &'static str) -> Option<Duration> {
    t.duration_in(key, TIMER)
}

fn socket_addr(t: &Section<'_, '_>, key: impl KeyName) -> Option<SocketAddr> {
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

/// A list of IP networks (`"10.0.0.0/8"`, or a bare address for one
/// host); each entry that is neither is reported at its place.
fn ip_networks(t: &Section<'_, '_>, key: impl KeyName) -> Vec<ipnet::IpNet> {
    let mut out = Vec::new();
    for entry in t.string_list(key).unwrap_or_default() {
        let parsed = entry.value.parse::<ipnet::IpNet>().or_else(|_| {
            entry
                .value
                .parse::<std::net::IpAddr>()
                .map(ipnet::IpNet::from)
        });
        match parsed {
            Ok(net) => out.push(net),
            Err(_) => entry.problem(
                t.doc(),
                format!("`{}` is not an IP address or CIDR block", entry.value),
                Some("write it like \"10.0.0.0/8\" or \"192.0.2.7\"".into()),
            ),
        }
    }
    out
}

/// A required address; reports it missing.
fn required_socket_addr(
    t: &Section<'_, '_>,
    key: impl KeyName,
    example: &str,
) -> Option<SocketAddr> {
    if !t.raw_present(key) {
        let key = key.key_name();
        t.problem(key, "missing", Some(format!("add `{key} = \"{example}\"`")));
        return None;
    }
    socket_addr(t, key)
}

/// A path, resolved against the config file's directory.
fn path_opt(t: &Section<'_, '_>, key: impl KeyName) -> Option<At<PathBuf>> {
    let s = t.string(key)?;
    Some(At {
        value: t.doc().dir_at(s.span.start).join(&s.value),
        span: s.span,
        key: s.key,
    })
}

/// `ca_file`: a PEM file of CA certificates a TLS client trusts besides
/// the web PKI roots, checked by building that client's configuration.
fn ca_file(t: &Section<'_, '_>, key: impl KeyName) -> Option<At<PathBuf>> {
    let p = path_opt(t, key)?;
    match crate::pki::client_config(Some(&p.value)) {
        Ok(_) => Some(p),
        Err(e) => {
            p.problem(
                t.doc(),
                e.to_string(),
                Some("point `ca_file` at a PEM file of CA certificates".into()),
            );
            None
        }
    }
}

/// A required path to a PEM file; reports it missing.
fn required_path(t: &Section<'_, '_>, key: impl KeyName) -> Option<At<PathBuf>> {
    if !t.raw_present(key) {
        let key = key.key_name();
        t.problem(
            key,
            "missing",
            Some(format!("add `{key} = \"path/to/file.pem\"`")),
        );
        return None;
    }
    path_opt(t, key)
}

fn upstream_uri(t: &Section<'_, '_>, u: &At<String>) -> Option<http::Uri> {
    let fix =
        Some("write it like \"http://127.0.0.1:3000\" or \"https://backend.internal\"".to_string());
    if u.value.starts_with("unix:") || u.value.starts_with("unix/") {
        u.problem(
            t.doc(),
            format!(
                "`{}`: unix-socket upstreams are for proxy routes only",
                u.value
            ),
            Some("reach this upstream over TCP: \"http://127.0.0.1:8000\"".into()),
        );
        return None;
    }
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

/// The longest unix socket path the kernel takes (`sun_path` is 108
/// bytes on Linux, with its terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// A proxy route's server: a URL as [`upstream_uri`] reads it, or a unix
/// socket, `unix:/run/app.sock` (Caddy's `unix//run/app.sock` too), a
/// relative path resolved against the config file's directory. Whether the
/// socket exists is not asked: the app behind it may start later.
fn server_url(t: &Section<'_, '_>, u: &At<String>) -> Option<ServerUrl> {
    let fix = || Some("write it like \"unix:/run/app.sock\"".to_string());
    let v = u.value.as_str();
    let path = match (v.strip_prefix("unix:"), v.strip_prefix("unix/")) {
        (Some(p), _) | (None, Some(p)) => p,
        (None, None) => {
            let tls = ["https://unix:", "unix+https:", "https+unix:", "unixs:"];
            if tls.iter().any(|p| v.starts_with(p)) {
                u.problem(
                    t.doc(),
                    format!("`{v}`: TLS over a unix socket is not supported"),
                    Some("speak plain HTTP over the socket: \"unix:/run/app.sock\"".into()),
                );
                return None;
            }
            if v.starts_with("http://unix:") {
                u.problem(
                    t.doc(),
                    format!("`{v}` is nginx's spelling of a unix socket"),
                    fix(),
                );
                return None;
            }
            return upstream_uri(t, u).map(ServerUrl::from);
        }
    };
    if path.is_empty() || path.starts_with("//") || path.contains('\0') {
        u.problem(t.doc(), format!("`{v}` does not name a socket path"), fix());
        return None;
    }
    let path = t.doc().dir_at(u.span.start).join(path);
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        u.problem(
            t.doc(),
            format!(
                "the socket path {} is longer than the {MAX_SOCKET_PATH} bytes a unix socket address holds",
                path.display()
            ),
            Some("use a shorter path (an absolute one, or a shorter directory)".into()),
        );
        return None;
    }
    Some(ServerUrl::unix(path.into()))
}

/// `"a", "b" or "c"`: the values a key takes, in a fix.
pub(super) fn names<const N: usize>(names: [&str; N]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn problems(text: &str) -> Vec<String> {
        match parse(Path::new("w.toml"), text) {
            Ok(_) => Vec::new(),
            Err(p) => p.0.iter().map(|p| p.to_string()).collect(),
        }
    }

    pub(super) const MINIMAL: &str =
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://127.0.0.1:1\"\n";

    #[test]
    fn minimal_config_is_valid_with_defaults() {
        let c = parse(Path::new("w.toml"), MINIMAL).expect("valid");
        assert_eq!(c.routes[0].path, "/");
        assert_eq!(c.routes[0].connect_timeout, defaults::CONNECT_TIMEOUT);
        assert!(c.routes[0].preserve_host);
        assert_eq!(
            c.server.shutdown_timeout,
            keys::server::SHUTDOWN_TIMEOUT.duration()
        );
    }

    #[test]
    fn a_budget_time_zone_is_an_iana_zone_and_an_unknown_one_is_refused() {
        let text = |zone: &str| format!("[server]\nbudget_time_zone = \"{zone}\"\n{MINIMAL}");
        let c = parse(Path::new("w.toml"), &text("Europe/Berlin")).expect("valid");
        assert_eq!(
            c.server.budget_time_zone,
            crate::calendar::Zone::named("Europe/Berlin").expect("known")
        );
        let c = parse(Path::new("w.toml"), MINIMAL).expect("valid");
        assert_eq!(c.server.budget_time_zone, crate::calendar::Zone::UTC);
        let p = problems(&text("Europe/Atlantis"));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].starts_with("w.toml:2:")
                && p[0].contains("server.budget_time_zone")
                && p[0].contains("`Europe/Atlantis` is not a time zone")
                && p[0].contains("Europe/Berlin"),
            "{}",
            p[0]
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
    fn unknown_keys_are_reported_in_every_table() {
        let p = problems(&format!(
            "colour = 1\n[server]\nworkers = 1\nwrkers = 2\n{MINIMAL}\
             [[listener]]\naddress = \"127.0.0.1:1\"\ntls = {{ certificates = [{{ cert = \"c\", key = \"k\", pass = \"x\" }}] }}\n\
             [[route]]\npath = \"/l\"\nkind = \"openai\"\nmodels = [{{ name = \"m\", upstreams = [\"a\"], weight = 1 }}]\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://a\"\napi_key = \"sk\"\n"
        ))
        .join("\n");
        for want in [
            "w.toml:1:1: colour: unknown key (fix: known keys here: server, connections,",
            "server.wrkers: unknown key (fix: did you mean `workers`?)",
            "listener[1].tls.certificates[0].pass: unknown key",
            "route[1].models[0].weight: unknown key",
            "route[1].upstreams[0].api_key: unknown key (fix: did you mean `api_key_env`?)",
        ] {
            assert!(p.contains(want), "missing {want:?} in:\n{p}");
        }
    }

    #[test]
    fn a_timer_beyond_a_day_is_refused_with_the_range() {
        let p = problems(&format!(
            "[connections]\nkeepalive_timeout = \"2days\"\nsend_timeout = \"24h\"\n{MINIMAL}"
        ));
        assert_eq!(
            p,
            [
                "w.toml:2:21: connections.keepalive_timeout: `2days` is longer than the longest allowed, 1day \
                 (fix: use a duration from \"1ms\" to \"1day\")"
            ]
        );
    }

    #[test]
    fn a_timer_of_zero_is_refused_unless_zero_means_at_once() {
        let p = problems(&format!(
            "[server]\nshutdown_timeout = \"0s\"\n[upstream]\npool_idle_timeout = \"0s\"\n\
             [connections]\nsend_timeout = \"0s\"\n{MINIMAL}"
        ));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("connections.send_timeout: must be greater than zero"),
            "{}",
            p[0]
        );
    }

    /// Regression (issue 23): this passed validation and overflowed
    /// `Instant + Duration` in the relay.
    #[test]
    fn a_keepalive_of_years_is_a_config_error() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\nsse_keepalive = \"500000000000y\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n",
        );
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].starts_with(
                "w.toml:5:17: route[0].sse_keepalive: `500000000000y` is longer than the longest allowed, 1day"
            ),
            "{}",
            p[0]
        );
        assert!(
            p[0].contains("(fix: use a duration from \"1ms\" to \"1day\")"),
            "{}",
            p[0]
        );
    }

    #[test]
    fn every_duration_key_is_bounded() {
        // The config that exercises every key writes each duration as
        // "1s" on a line of its own; a year must be refused for each.
        let dir = tempfile::tempdir().expect("tempdir");
        let every_key = docs::every_key();
        let text = every_key.replace("\"1s\"", "\"400days\"");
        let p = match parse(&dir.path().join("w.toml"), &text) {
            Ok(_) => String::new(),
            Err(p) => p.to_string(),
        };
        let mut durations = 0;
        for line in every_key.lines().filter(|l| l.ends_with("= \"1s\"")) {
            let key = line.trim_end_matches(" = \"1s\"");
            assert!(
                p.contains(&format!(
                    ".{key}: `400days` is longer than the longest allowed"
                )),
                "{key} accepts 400 days:\n{p}"
            );
            durations += 1;
        }
        assert_eq!(durations, 39, "duration keys exercised");
        assert_eq!(p.matches("`400days` is longer").count(), durations, "{p}");
    }

    #[test]
    fn a_size_beyond_its_bound_is_refused_with_the_range() {
        let p = problems(&format!(
            "[server]\nmax_buffered_body_bytes = \"2TiB\"\n\
             [http2]\nmax_header_list_size = \"17MiB\"\n\
             [connections]\nmin_body_rate = \"2GiB\"\n{MINIMAL}max_request_body = \"500000000000EiB\"\n"
        ));
        assert_eq!(p.len(), 4, "{p:#?}");
        for (got, want) in p.iter().zip([
            "server.max_buffered_body_bytes: \"2TiB\" is out of range (fix: use a size from 0 to \"1TiB\")",
            "http2.max_header_list_size: \"17MiB\" is out of range (fix: use a size from 0 to \"16MiB\")",
            "connections.min_body_rate: \"2GiB\" is out of range (fix: use a size from 0 to \"1GiB\")",
            "route[0].max_request_body: \"500000000000EiB\" is out of range (fix: use a size from 0 to \"1TiB\")",
        ]) {
            assert!(got.contains(want), "{got}\nwant {want}");
        }
    }

    #[test]
    fn missing_listener_and_route_are_reported() {
        let p = problems("");
        assert_eq!(p.len(), 2, "{p:#?}");
    }
}
