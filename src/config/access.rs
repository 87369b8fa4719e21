//! Who may use a route, and what weir's own error answers look like on it:
//! address rules (nginx's `allow`/`deny`), the users of basic
//! authentication (an htpasswd file) and error pages (nginx's
//! `error_page`), as read and checked from the config. What is done with
//! them per request is in `crate::access` and `crate::respond`.

use std::net::IpAddr;
use std::path::PathBuf;

use bytes::Bytes;
use http::HeaderValue;
use ipnet::IpNet;

/// Ordered `allow`/`deny` rules, evaluated as nginx does: the first rule
/// whose network holds the client decides; when none does, the client is
/// allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddressRules {
    pub(crate) rules: Vec<AddressRule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AddressRule {
    pub(crate) allow: bool,
    /// `None`: `all`, every address.
    pub(crate) net: Option<IpNet>,
}

impl AddressRules {
    /// Whether `ip` may come in. An IPv4 client on a dual-stack socket
    /// arrives as `::ffff:a.b.c.d`: it is matched as the IPv4 address it is.
    pub(crate) fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.rules
            .iter()
            .find(|r| r.net.is_none_or(|n| n.contains(&ip)))
            .is_none_or(|r| r.allow)
    }
}

/// What a route checks before it serves: the client's address, then its
/// credentials. Absent (`None` on the route) when it checks neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access {
    pub(crate) addresses: Option<AddressRules>,
    pub(crate) basic_auth: Option<BasicAuth>,
}

/// A route's basic authentication: the realm and the users of the
/// htpasswd file, read (and every hash checked) with the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BasicAuth {
    /// `Basic realm="…", charset="UTF-8"`, what a 401 carries.
    pub(crate) challenge: HeaderValue,
    /// Where the users came from, for logs.
    pub(crate) file: PathBuf,
    pub(crate) users: Vec<User>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) hash: PasswordHash,
}

/// A password hash weir verifies; the others are refused at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PasswordHash {
    /// `$2a$`, `$2b$` or `$2y$` (`htpasswd -B`).
    Bcrypt(String),
    /// A PHC string, `$argon2id$v=19$m=…,t=…,p=…$salt$hash`.
    Argon2(String),
}

/// A route's error pages: files served instead of the body weir would
/// generate for a 4xx or 5xx answer, read with the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorPages {
    /// By exact status first, then by class (`4xx`, `5xx`): the first
    /// entry that matches.
    pub(crate) pages: Vec<(StatusMatch, ErrorPage)>,
    /// Also replace the bodies of the upstream's 4xx/5xx answers (nginx's
    /// `proxy_intercept_errors`).
    pub(crate) intercept_upstream: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusMatch {
    Exact(u16),
    /// `4` for `4xx`, `5` for `5xx`.
    Class(u16),
}

/// One error page's bytes and type, ready to serve without file I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorPage {
    pub(crate) body: Bytes,
    pub(crate) content_type: HeaderValue,
}

impl ErrorPages {
    /// The page for `status`: an exact entry wins over a class.
    pub(crate) fn for_status(&self, status: u16) -> Option<&ErrorPage> {
        let exact = self
            .pages
            .iter()
            .find(|(m, _)| *m == StatusMatch::Exact(status));
        exact
            .or_else(|| {
                self.pages
                    .iter()
                    .find(|(m, _)| *m == StatusMatch::Class(status / 100))
            })
            .map(|(_, page)| page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(bool, Option<&str>)]) -> AddressRules {
        AddressRules {
            rules: list
                .iter()
                .map(|(allow, net)| AddressRule {
                    allow: *allow,
                    net: net.map(|n| n.parse().expect("net")),
                })
                .collect(),
        }
    }

    #[test]
    fn first_matching_rule_decides_and_none_matching_allows() {
        let r = rules(&[
            (false, Some("10.1.0.0/16")),
            (true, Some("10.0.0.0/8")),
            (true, Some("2001:db8::/32")),
            (false, None),
        ]);
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert!(!r.allows(ip("10.1.2.3")), "the earlier deny wins");
        assert!(r.allows(ip("10.2.0.1")));
        assert!(r.allows(ip("2001:db8::1")));
        assert!(!r.allows(ip("192.0.2.1")), "deny all");
        assert!(r.allows(ip("::ffff:10.2.0.1")), "IPv4-mapped is IPv4");
        assert!(!r.allows(ip("::ffff:10.1.0.1")));
        let open = rules(&[(false, Some("192.0.2.0/24"))]);
        assert!(open.allows(ip("198.51.100.1")), "no rule matched: allowed");
    }

    #[test]
    fn exact_status_wins_over_its_class() {
        let page = |s: &'static str| ErrorPage {
            body: Bytes::from_static(s.as_bytes()),
            content_type: HeaderValue::from_static("text/html"),
        };
        let pages = ErrorPages {
            pages: vec![
                (StatusMatch::Class(5), page("5xx")),
                (StatusMatch::Exact(503), page("503")),
            ],
            intercept_upstream: false,
        };
        assert_eq!(
            pages.for_status(503).map(|p| &p.body[..]),
            Some(&b"503"[..])
        );
        assert_eq!(
            pages.for_status(502).map(|p| &p.body[..]),
            Some(&b"5xx"[..])
        );
        assert!(pages.for_status(404).is_none());
    }
}
