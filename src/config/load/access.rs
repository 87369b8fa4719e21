//! A route's `access` rules, `[route.basic_auth]` and its htpasswd file,
//! and `error_pages`: read and checked here, files and all, so a broken
//! one is a config problem and a reload that has one keeps the old config.

use std::path::Path;
use std::sync::Arc;

use super::*;

/// The largest htpasswd file and error page read.
const MAX_FILE: u64 = 1024 * 1024;
/// The largest bcrypt cost accepted: each step doubles the work of every
/// login (cost 10 ≈ 50–100 ms; 14 over a second).
const MAX_BCRYPT_COST: u32 = 14;
/// The largest argon2 parameters accepted: memory in KiB, passes, lanes.
const MAX_ARGON2: (u32, u32, u32) = (256 * 1024, 16, 16);
/// The realm when none is set (Caddy's; nginx makes it required).
const DEFAULT_REALM: &str = "restricted";

/// What the route checks before serving, if anything. Basic auth and error
/// pages are for routes weir answers in HTTP's own terms: an LLM route has
/// client tokens and its protocol's error shape.
pub(super) fn access(t: &Section<'_, '_>, llm: bool) -> Option<Arc<Access>> {
    let addresses = address_rules(t, "access");
    let basic_auth = t.table("basic_auth").and_then(|b| basic_auth(&b));
    if llm && t.raw_present("basic_auth") {
        t.problem(
            "basic_auth",
            "basic authentication does not apply to LLM routes",
            Some("give the route `[[route.client_tokens]]` instead".into()),
        );
    }
    (addresses.is_some() || basic_auth.is_some()).then(|| {
        Arc::new(Access {
            addresses,
            basic_auth,
        })
    })
}

/// `access = ["allow 10.0.0.0/8", "deny all"]`: nginx's `allow`/`deny`,
/// in order, the first match deciding. `None` when unset or empty.
pub(super) fn address_rules(t: &Section<'_, '_>, key: impl KeyName) -> Option<AddressRules> {
    let mut rules = Vec::new();
    for entry in t.string_list(key)? {
        match address_rule(&entry.value) {
            Ok(rule) => rules.push(rule),
            Err(message) => entry.problem(
                t.doc(),
                message,
                Some("write \"allow 10.0.0.0/8\", \"deny 192.0.2.7\" or \"deny all\"".into()),
            ),
        }
    }
    (!rules.is_empty()).then_some(AddressRules { rules })
}

fn address_rule(text: &str) -> Result<AddressRule, String> {
    let mut words = text.split_whitespace();
    let allow = match words.next() {
        Some("allow") => true,
        Some("deny") => false,
        _ => return Err(format!("`{text}` does not start with `allow` or `deny`")),
    };
    let (Some(what), None) = (words.next(), words.next()) else {
        return Err(format!("`{text}` is not `allow`/`deny` and one address"));
    };
    if what == "all" {
        return Ok(AddressRule { allow, net: None });
    }
    let net = what
        .parse::<ipnet::IpNet>()
        .or_else(|_| what.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{what}` is not an IP address, a CIDR block or `all`"))?;
    // Clients are matched by their canonical address, so a mapped rule
    // would never match: say what it means instead.
    if let ipnet::IpNet::V6(v6) = net
        && v6.addr().to_ipv4_mapped().is_some()
        && v6.prefix_len() >= 96
    {
        return Err(format!(
            "`{what}` is an IPv4-mapped IPv6 block; IPv4 clients are matched as IPv4"
        ));
    }
    Ok(AddressRule {
        allow,
        net: Some(net.trunc()),
    })
}

/// `[route.basic_auth]`: `users_file` (required), `realm`.
fn basic_auth(b: &Section<'_, '_>) -> Option<BasicAuth> {
    let realm = b.string("realm");
    let file = b.string("users_file");
    let challenge = match &realm {
        Some(r) if r.value.is_empty() || !r.value.bytes().all(realm_byte) => {
            r.problem(
                b.doc(),
                "a realm is printable ASCII without `\"` or `\\`",
                Some("write a realm like \"staff only\"".into()),
            );
            None
        }
        _ => {
            let realm = realm.as_ref().map_or(DEFAULT_REALM, |r| r.value.as_str());
            http::HeaderValue::from_str(&format!("Basic realm=\"{realm}\", charset=\"UTF-8\"")).ok()
        }
    };
    let Some(file) = file else {
        b.problem(
            "users_file",
            "missing",
            Some(
                "add `users_file = \"/etc/weir/users.htpasswd\"` (made with `htpasswd -B`)".into(),
            ),
        );
        return None;
    };
    let path = b.doc().dir_at(file.span.start).join(&file.value);
    let users = match read_bounded(&path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => htpasswd(&text),
            Err(_) => Err(vec![(0, "is not UTF-8 text".to_string())]),
        },
        Err(e) => Err(vec![(0, e)]),
    };
    let users = match users {
        Ok(users) => users,
        Err(problems) => {
            for (line, message) in problems {
                let place = match line {
                    0 => path.display().to_string(),
                    n => format!("{}:{n}", path.display()),
                };
                file.problem(
                    b.doc(),
                    format!("{place}: {message}"),
                    Some(HTPASSWD_FIX.into()),
                );
            }
            return None;
        }
    };
    Some(BasicAuth {
        challenge: challenge?,
        file: path,
        users,
    })
}

const HTPASSWD_FIX: &str =
    "make each entry with `htpasswd -B <file> <user>` (bcrypt) or as an argon2id PHC string";

/// A quoted-string's byte that needs no escape (RFC 9110 §5.6.4), printable.
fn realm_byte(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
}

/// A file's bytes, if it is at most [`MAX_FILE`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    super::read_bounded(path, MAX_FILE)
}

/// An htpasswd file's users, or every line's problem (line numbers from
/// 1). Blank lines and `#` comments are skipped.
fn htpasswd(text: &str) -> Result<Vec<User>, Vec<(usize, String)>> {
    let mut users: Vec<User> = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, hash)) = line.split_once(':') else {
            problems.push((n, "is not `user:hash`".to_string()));
            continue;
        };
        if name.is_empty() {
            problems.push((n, "has no user name".to_string()));
            continue;
        }
        if users.iter().any(|u| u.name == name) {
            problems.push((n, format!("user `{name}` is listed twice")));
            continue;
        }
        match password_hash(hash) {
            Ok(hash) => users.push(User {
                name: name.to_string(),
                hash,
            }),
            Err(message) => problems.push((n, format!("user `{name}`: {message}"))),
        }
    }
    if users.is_empty() && problems.is_empty() {
        problems.push((0, "has no users: nobody could log in".to_string()));
    }
    if problems.is_empty() {
        Ok(users)
    } else {
        Err(problems)
    }
}

/// A hash weir can verify, with bounded work per login.
fn password_hash(hash: &str) -> Result<PasswordHash, String> {
    if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
        let parts: bcrypt::HashParts = hash
            .parse()
            .map_err(|e| format!("the bcrypt hash is malformed ({e})"))?;
        if parts.get_cost() > MAX_BCRYPT_COST {
            return Err(format!(
                "bcrypt cost {} is above {MAX_BCRYPT_COST}: every login would take seconds",
                parts.get_cost()
            ));
        }
        return Ok(PasswordHash::Bcrypt(hash.to_string()));
    }
    if hash.starts_with("$argon2") {
        let phc = argon2::PasswordHash::new(hash)
            .map_err(|e| format!("the argon2 hash is malformed ({e})"))?;
        let params = argon2::Params::try_from(&phc)
            .map_err(|e| format!("the argon2 parameters are invalid ({e})"))?;
        let (m, t, p) = MAX_ARGON2;
        if params.m_cost() > m || params.t_cost() > t || params.p_cost() > p {
            return Err(format!(
                "argon2 parameters above m={m},t={t},p={p}: every login would cost too much"
            ));
        }
        return Ok(PasswordHash::Argon2(hash.to_string()));
    }
    let kind = if hash.starts_with("$apr1$") {
        "an MD5 (`$apr1$`) hash"
    } else if hash.starts_with("{SHA}") {
        "a SHA-1 (`{SHA}`) hash"
    } else if hash.starts_with('$') {
        "a crypt(3) hash of a kind weir does not verify"
    } else {
        "a DES crypt(3) hash or a plain password"
    };
    Err(format!("{kind} is not accepted (too weak to keep)"))
}

/// `error_pages = ["404 errors/404.html", "500 502 503 errors/5xx.html",
/// "4xx errors/4xx.html"]` (nginx's `error_page` lines) and
/// `intercept_upstream_errors`.
pub(super) fn error_pages(
    t: &Section<'_, '_>,
    llm: bool,
    server: Option<&Arc<ErrorPages>>,
) -> Option<Arc<ErrorPages>> {
    let list = t.string_list("error_pages");
    let intercept = t.bool("intercept_upstream_errors");
    if llm {
        for key in ["error_pages", "intercept_upstream_errors"] {
            if t.raw_present(key) {
                t.problem(
                    key,
                    "LLM routes answer errors in their protocol's shape, never with a page",
                    Some("remove the key".into()),
                );
            }
        }
        return None;
    }
    let Some(list) = list else {
        // nginx's inheritance: a route without its own takes the server's.
        if let Some(server) = server {
            return Some(match intercept {
                Some(intercept_upstream) => Arc::new(ErrorPages {
                    pages: server.pages.clone(),
                    intercept_upstream,
                }),
                None => server.clone(),
            });
        }
        if intercept == Some(true) {
            t.problem(
                "intercept_upstream_errors",
                "there are no `error_pages` to answer with",
                Some("add `error_pages = [\"5xx /srv/errors/5xx.html\"]`".into()),
            );
        }
        return None;
    };
    let pages = page_list(t, list)?;
    Some(Arc::new(ErrorPages {
        pages,
        intercept_upstream: intercept.unwrap_or(false),
    }))
}

/// `[server] error_pages`: the pages before routing, and the default of
/// every plain route (a route's own list replaces them, as in nginx).
pub(super) fn server_error_pages(
    t: &Section<'_, '_>,
    key: impl KeyName,
) -> Option<Arc<ErrorPages>> {
    let pages = page_list(t, t.string_list(key)?)?;
    Some(Arc::new(ErrorPages {
        pages,
        intercept_upstream: false,
    }))
}

/// Each `error_pages` line's pages, its file read; `None` when empty.
fn page_list(t: &Section<'_, '_>, list: Vec<At<String>>) -> Option<Vec<(StatusMatch, ErrorPage)>> {
    let mut pages = Vec::new();
    for entry in list {
        match error_page_line(t.doc().dir_at(entry.span.start).as_path(), &entry.value) {
            Ok(more) => pages.extend(more),
            Err(message) => entry.problem(
                t.doc(),
                message,
                Some("write statuses or classes, then a file: \"404 errors/404.html\", \"5xx errors/5xx.html\"".into()),
            ),
        }
    }
    (!pages.is_empty()).then_some(pages)
}

/// One `error_pages` line: its statuses, each with the file's page.
fn error_page_line(base: &Path, line: &str) -> Result<Vec<(StatusMatch, ErrorPage)>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((file, statuses)) = words.split_last().filter(|(_, s)| !s.is_empty()) else {
        return Err(format!("`{line}` needs at least one status and a file"));
    };
    let mut matches = Vec::with_capacity(statuses.len());
    for s in statuses {
        let m = match s.as_bytes() {
            [c @ (b'4' | b'5'), b'x', b'x'] => StatusMatch::Class(u16::from(c - b'0')),
            _ => match s.parse::<u16>() {
                Ok(n) if (400..600).contains(&n) => StatusMatch::Exact(n),
                _ => return Err(format!("`{s}` is not a 4xx or 5xx status, `4xx` or `5xx`")),
            },
        };
        matches.push(m);
    }
    let path = base.join(file);
    let body = read_bounded(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let page = ErrorPage {
        body: body.into(),
        content_type: http::HeaderValue::from_static(content_type(&path)),
    };
    Ok(matches.into_iter().map(|m| (m, page.clone())).collect())
}

/// The media type of an error page, by its extension.
fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("svg") => "image/svg+xml",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("png") => "image/png",
        Some("txt") | None => "text/plain; charset=utf-8",
        Some(_) => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htpasswd_takes_bcrypt_and_argon2_and_names_each_weak_line() {
        let bcrypt = bcrypt::hash("pw", 4).expect("hash");
        let argon = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG";
        let ok = htpasswd(&format!("# staff\nalice:{bcrypt}\n\nbob:{argon}\n")).expect("valid");
        assert_eq!(ok.len(), 2);
        assert!(matches!(ok[1].hash, PasswordHash::Argon2(_)));
        let bad = htpasswd(&format!(
            "a:$apr1$abc$def\nb:{{SHA}}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\nc:abJnggxhB/yWI\nnocolon\na:{bcrypt}\nd:$2y$15$012345678901234567890uXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\n"
        ))
        .expect_err("all refused");
        let lines: Vec<usize> = bad.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [1, 2, 3, 4, 6], "{bad:#?}");
        assert!(bad[0].1.contains("MD5"), "{}", bad[0].1);
        assert!(bad[1].1.contains("SHA-1"), "{}", bad[1].1);
        assert!(htpasswd("# nobody\n").is_err());
    }

    #[test]
    fn address_rules_parse_like_nginx_lines() {
        assert_eq!(
            address_rule("allow 10.1.2.3/8"),
            Ok(AddressRule {
                allow: true,
                net: Some("10.0.0.0/8".parse().expect("net"))
            })
        );
        assert_eq!(
            address_rule("deny all"),
            Ok(AddressRule {
                allow: false,
                net: None
            })
        );
        assert!(address_rule("deny 2001:db8::1").is_ok());
        for bad in [
            "permit 10.0.0.0/8",
            "allow",
            "allow 10.0.0.0/33",
            "deny ::ffff:10.0.0.0/104",
            "allow 1.2.3.4 5.6.7.8",
        ] {
            assert!(address_rule(bad).is_err(), "{bad}");
        }
    }
}
