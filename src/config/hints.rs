//! What an unknown key an nginx or Caddy user writes is called in weir.
//!
//! `gzip`, `proxy_pass` or `server_name` in a weir config is not a typo a
//! "did you mean" can mend: it is a directive of another proxy whose
//! feature weir has under another name. The reader (see
//! [`super::reader`]) looks an unknown key up here before it guesses, and
//! the fix then points at weir's name (docs/migrating-from-nginx.md has the
//! whole map).

/// nginx's and Caddy's names, each with where the feature is in weir.
const OTHER_NAMES: &[(&str, &str)] = &[
    // nginx
    (
        "proxy_pass",
        "a proxy route's `upstream = \"http://127.0.0.1:3000\"` (or `servers = [...]`)",
    ),
    (
        "listen",
        "a `[[listener]]` table's `address = \"0.0.0.0:443\"`",
    ),
    (
        "server_name",
        "a route's `host = [\"example.com\", \"*.example.com\"]`",
    ),
    (
        "location",
        "a `[[route]]` table per location, with its `path = \"/api\"`",
    ),
    (
        "ssl_certificate",
        "`[[listener.tls.certificates]]` `cert = \"fullchain.pem\"`",
    ),
    (
        "ssl_certificate_key",
        "`[[listener.tls.certificates]]` `key = \"privkey.pem\"`",
    ),
    ("gzip", "a route's `[route.compress]` table"),
    ("gzip_types", "a route's `[route.compress]` table"),
    ("brotli", "a route's `[route.compress]` table"),
    ("add_header", "a route's `response_headers` rules"),
    ("proxy_set_header", "a route's `request_headers` rules"),
    ("proxy_hide_header", "a route's `response_headers` rules"),
    (
        "return",
        "a redirect route: `redirect = \"https://example.com{path}\"` with `redirect_status`",
    ),
    (
        "rewrite",
        "a proxy route's `rewrite_regex` and `rewrite_to`, or `replace_prefix`",
    ),
    ("root", "a route with `kind = \"static\"` and its `root`"),
    ("alias", "a route with `kind = \"static\"` and its `root`"),
    (
        "try_files",
        "a route with `kind = \"static\"` and its `fallback = \"/index.html\"`",
    ),
    ("auth_basic", "a route's `basic_auth`"),
    ("auth_basic_user_file", "a route's `basic_auth`"),
    (
        "error_page",
        "a route's `error_pages` (or `[server] error_pages`)",
    ),
    (
        "proxy_intercept_errors",
        "a route's `intercept_upstream_errors`",
    ),
    (
        "allow",
        "a route's (or listener's) `access = [\"allow 10.0.0.0/8\", \"deny all\"]`",
    ),
    (
        "deny",
        "a route's (or listener's) `access = [\"allow 10.0.0.0/8\", \"deny all\"]`",
    ),
    ("index", "a static route's `index`"),
    ("autoindex", "nothing: weir serves no directory listing"),
    ("expires", "a static route's `cache_control`"),
    ("proxy_connect_timeout", "a route's `connect_timeout`"),
    (
        "proxy_read_timeout",
        "a route's `response_timeout` (a WebSocket's idle time: `[connections] tunnel_idle_timeout`)",
    ),
    (
        "client_max_body_size",
        "a route's `max_request_body = \"10MiB\"`",
    ),
    (
        "client_body_timeout",
        "`[connections] min_body_rate` and `[server] body_read_timeout`",
    ),
    ("keepalive_timeout", "`[connections] keepalive_timeout`"),
    ("worker_processes", "`[server] workers`"),
    ("worker_connections", "`[connections] max`"),
    (
        "limit_req",
        "a route's `rate_limit = \"10/s\"` and `rate_limit_burst`",
    ),
    (
        "limit_req_zone",
        "a route's `rate_limit = \"10/s\"` and `rate_limit_burst`",
    ),
    ("limit_conn", "`[connections] max_per_ip`"),
    ("access_log", "`[log] access_log`"),
    ("error_log", "the `[log]` table"),
    // Caddy
    (
        "reverse_proxy",
        "a proxy route's `upstream` (or `servers = [...]`)",
    ),
    ("encode", "a route's `[route.compress]` table"),
    (
        "header",
        "a route's `request_headers` and `response_headers` rules",
    ),
    (
        "redir",
        "a redirect route: `redirect = \"https://example.com{path}\"` with `redirect_status`",
    ),
    ("file_server", "a route with `kind = \"static\"`"),
    ("basicauth", "a route's `basic_auth`"),
    ("handle_errors", "a route's `error_pages`"),
    ("basic_auth", "a route's `[route.basic_auth]` table"),
    ("import", "the top-level `include = [\"conf.d/*.toml\"]`"),
    ("remote_ip", "a route's `access` rules"),
    ("lb_policy", "a proxy route's `balance`"),
    (
        "health_uri",
        "a proxy route's `[route.health_check]` `path`",
    ),
];

/// Where weir has the feature another proxy calls `key`.
pub(crate) fn other_name(key: &str) -> Option<&'static str> {
    OTHER_NAMES
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, weir)| *weir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_listed_once() {
        let mut names: Vec<&str> = OTHER_NAMES.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
        assert_eq!(
            other_name("gzip"),
            Some("a route's `[route.compress]` table")
        );
        assert_eq!(other_name("upstream"), None);
    }
}
