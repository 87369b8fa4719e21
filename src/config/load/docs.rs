//! The key tables in docs/configuration.md list exactly the keys the
//! loader reads: every key asked for while loading [`EVERY_KEY`] (a config
//! that sets every key of every table) is documented in the table for its
//! section, and every documented key is asked for. And a default the docs
//! give as a value is the default: setting the key to it changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use toml::de::DeTable;

use super::*;

const DOCS: &str = include_str!("../../../docs/configuration.md");

/// Every key of every table, each set once. Relative paths are resolved
/// in a temporary directory; what they name need not exist (problems are
/// fine: only the keys asked for count). Each duration is `"1s"` on a line
/// of its own, except `hsts_max_age`, for the bounds test in `super`.
pub(super) const EVERY_KEY: &str = r#"
[server]
shutdown_timeout = "1s"
drain_grace = "1s"
trusted_proxies = ["10.0.0.0/8"]
workers = 1
max_concurrent_requests = 10
max_buffered_body_bytes = "1MiB"
watch_config = false

[connections]
max = 10
max_per_ip = 1
tls_handshake_timeout = "1s"
request_head_timeout = "1s"
keepalive_timeout = "1s"
max_requests = 10
min_body_rate = 1
body_rate_period = "1s"
send_timeout = "1s"
pressure_threshold = 50
pressure_timeout = "1s"

[http1]
max_headers = 10
max_head_size = "64KiB"

[http2]
max_concurrent_streams = 10
max_header_list_size = "64KiB"
max_pending_resets = 1
max_control_frames_per_second = 10

[log]
format = "json"
level = "info"
access_log = false
file = "weir.log"
access_file = "access.log"
usage_log = true
usage_file = "usage.log"

[admin]
address = "127.0.0.1:9"
token_file = "admin-token"
token_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"

[[listener]]
name = "plain"
address = "127.0.0.1:1"
redirect_https = true
https_port = 8443
proxy_protocol_from = ["10.0.0.0/8"]

[[listener]]
address = "127.0.0.1:2"
[listener.tls]
certificates = [{ cert = "c.pem", key = "k.pem" }]
[listener.tls.acme]
directory = "letsencrypt-staging"
ca_file = "ca.pem"
email = "ops@example.com"
names = ["a.example.com"]
challenge = "http-01"
state_dir = "acme"
retry_base = "1s"
external_account = { key_id = "kid", hmac_key_env = "WEIR_TEST_SURELY_UNSET_VARIABLE", hmac_key_file = "hmac" }

[[route]]
name = "proxy"
host = ["a.example.com"]
path = "/"
upstream = "http://127.0.0.1:3"
strip_prefix = true
preserve_host = false
connect_timeout = "1s"
response_timeout = "1s"
max_request_body = "1MiB"
max_concurrent_requests = 1
rate_limit_per_second = 1
rate_limit_burst = 1
limit_scope = "cluster"
hsts_max_age = "365d"
hsts_include_subdomains = true
hsts_preload = true
server_header = "remove"
http_version = "2"

[[route]]
name = "group"
path = "/group"
servers = ["http://127.0.0.1:5", { url = "http://127.0.0.1:6", weight = 2, backup = true }]
balance = "hash"
hash_key = "client_ip"
eject_after = 3
eject_base = "1s"
eject_max = "1s"
max_ejected_percent = 50
slow_start = "1s"
retry_methods = ["GET", "PUT"]
retry_budget_percent = 10
retry_budget_min_per_second = 1
retry_budget_window = "1s"
[route.health_check]
path = "/healthz"
interval = "1s"
timeout = "1s"
rise = 1
fall = 1
expect_status = [200]

[[route]]
name = "llm"
path = "/llm"
kind = "anthropic"
default_upstreams = ["a"]
client_tokens_file = "tokens"
client_tokens_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"
max_concurrent_per_token = 1
first_byte_timeout = "1s"
first_token_timeout = "1s"
stream_idle_timeout = "1s"
sse_keepalive = "1s"
failover_on = [429]
served_by_header = true
tokens_per_minute = 1000
tokens_per_day = 10000
spend_per_day = 1.5
default_max_tokens = 1024
[[route.clients]]
name = "alice"
token_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"
token_file = "alice-token"
tokens_per_minute = 100
tokens_per_day = 1000
spend_per_day = 0.5
[[route.prices]]
model = "m"
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75
[[route.upstreams]]
name = "a"
url = "http://127.0.0.1:4"
protocol = "openai_chat"
api_key_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"
api_key_file = "api-key"
connect_timeout = "1s"
reasoning = "auto"
max_tokens_field = "both"
http_version = "auto"
[[route.upstreams]]
name = "b"
servers = ["http://127.0.0.1:7", { url = "http://127.0.0.1:8", weight = 2, backup = true }]
keys = ["env:WEIR_TEST_SURELY_UNSET_VARIABLE", "file:api-key"]
balance = "hash"
hash_key = "conversation"
eject_after = 3
eject_base = "1s"
eject_max = "1s"
max_ejected_percent = 50
slow_start = "1s"
[[route.models]]
name = "m"
upstreams = ["a"]

[upstream]
pool_idle_timeout = "1s"
pool_max_idle_per_host = 1
ca_file = "ca.pem"
nameservers = ["127.0.0.1:53"]
resolve_interval = "1s"

[cluster]
url = "redis://127.0.0.1:6379/0"
password_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"
password_file = "redis-password"
key_prefix = "weir:"
timeout = "1s"
on_failure = "fail_closed"
lease_ttl = "1s"
ca_file = "redis-ca.pem"
"#;

/// The keys documented per table: the first cell of each row of a key
/// table, under the heading that names the table (`` ## `[server]` ``,
/// `` ### `[[route.upstreams]]` ``). A deeper heading without a table
/// name (`### LLM routes`) continues the table above it; the top-level
/// table's keys are the headings' first names.
fn documented(docs: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in docs.lines() {
        if let Some(heading) = line.strip_prefix('#') {
            let named = first_code(heading).filter(|c| c.starts_with('['));
            match named {
                Some(code) => {
                    let table = code.trim_matches(|c| c == '[' || c == ']').to_string();
                    if !table.contains('.') {
                        out.entry(String::new()).or_default().insert(table.clone());
                    }
                    current = Some(table);
                }
                // `## Descriptor budget` ends the tables; `### LLM routes`
                // continues `[[route]]`.
                None if !heading.starts_with("##") => current = None,
                None => {}
            }
            continue;
        }
        let Some(table) = &current else { continue };
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        if let Some(key) = cell.split('`').next() {
            out.entry(table.clone())
                .or_default()
                .insert(key.to_string());
        }
    }
    out
}

fn first_code(text: &str) -> Option<&str> {
    let start = text.find('`')? + 1;
    let len = text[start..].find('`')?;
    Some(&text[start..start + len])
}

#[test]
fn the_docs_key_tables_list_exactly_the_keys_the_loader_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let read: BTreeMap<String, BTreeSet<String>> = keys_read(&dir.path().join("w.toml"), EVERY_KEY)
        .into_iter()
        .map(|(table, keys)| (table, keys.into_iter().map(String::from).collect()))
        .collect();
    let documented = documented(DOCS);
    let tables: BTreeSet<&String> = read.keys().chain(documented.keys()).collect();
    let mut wrong = Vec::new();
    let empty = BTreeSet::new();
    for table in tables {
        let r = read.get(table).unwrap_or(&empty);
        let d = documented.get(table).unwrap_or(&empty);
        let name = if table.is_empty() { "top level" } else { table };
        for key in r.difference(d) {
            wrong.push(format!(
                "{name}: `{key}` is read but not in the docs' table"
            ));
        }
        for key in d.difference(r) {
            wrong.push(format!("{name}: `{key}` is documented but never read"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/configuration.md and the loader disagree:\n{}",
        wrong.join("\n")
    );
    // The test reads what it should: a table the loader asks for is found.
    assert!(read["route.upstreams"].contains("api_key_file"));
    assert!(documented["connections"].contains("pressure_threshold"));
}

#[test]
fn documented_tables_are_found_under_their_headings() {
    let docs = "# Configuration\n| `no` | x |\n## `[server]`\n| key | default |\n|---|---|\n\
                | `a` | 1 |\n### LLM routes (`kind`)\n| `b` | 2 |\n### `[server.sub]`\n| `c` | 3 |\n\
                ## Budget\n| `d` | 4 |\n";
    let d = documented(docs);
    assert_eq!(d.len(), 3, "{d:?}");
    assert_eq!(d[""], BTreeSet::from(["server".to_string()]));
    assert_eq!(
        d["server"],
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    assert_eq!(d["server.sub"], BTreeSet::from(["c".to_string()]));
}

/// Documented defaults: (table, key, the literal the default cell starts
/// with), for the rows whose default is a TOML value (`"30s"`, `1024`,
/// `` `0` (off) ``); rows like "none" or "required" are left out.
fn documented_defaults(docs: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in docs.lines() {
        if let Some(heading) = line.strip_prefix('#') {
            match first_code(heading).filter(|c| c.starts_with('[')) {
                Some(code) => current = Some(code.trim_matches(|c| c == '[' || c == ']').into()),
                None if !heading.starts_with("##") => current = None,
                None => {}
            }
            continue;
        }
        let (Some(table), Some(row)) = (&current, line.strip_prefix("| `")) else {
            continue;
        };
        let mut cells = row.split(" | ");
        let (Some(key), Some(default)) = (cells.next(), cells.next()) else {
            continue;
        };
        let key = key.trim_end_matches('`');
        if let Some(literal) = default.strip_prefix('`').and_then(|d| d.split('`').next()) {
            out.push((table.clone(), key.to_string(), literal.to_string()));
        }
    }
    out
}

/// A config holding `line` in a table of kind `table`, if this test knows
/// where such a table can stand.
fn with_line(table: &str, line: &str) -> Vec<String> {
    const LISTENER: &str = "[[listener]]\naddress = \"127.0.0.1:0\"\n";
    const PROXY: &str = "[[route]]\nupstream = \"http://127.0.0.1:1\"\n";
    const LLM: &str = "[[route]]\nkind = \"anthropic\"\n";
    const LLM_UPSTREAM: &str = "[[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n";
    match table {
        "server" | "connections" | "http1" | "http2" | "log" | "upstream" => {
            vec![format!("[{table}]\n{line}\n{LISTENER}{PROXY}")]
        }
        "listener" => vec![
            format!("{LISTENER}{line}\n{PROXY}"),
            format!("{LISTENER}redirect_https = true\n{line}\n{PROXY}"),
        ],
        "route" => vec![
            format!("{LISTENER}{PROXY}{line}\n"),
            format!("{LISTENER}{LLM}{line}\n{LLM_UPSTREAM}"),
            format!("{LISTENER}{PROXY}hsts_max_age = \"1d\"\n{line}\n"),
        ],
        "route.upstreams" => vec![
            format!("{LISTENER}{LLM}{LLM_UPSTREAM}{line}\n"),
            format!("{LISTENER}{LLM}{LLM_UPSTREAM}protocol = \"openai_chat\"\n{line}\n"),
        ],
        _ => Vec::new(),
    }
}

#[test]
fn setting_a_key_to_its_documented_default_changes_nothing() {
    let path = Path::new("w.toml");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (table, key, literal) in documented_defaults(DOCS) {
        let without = with_line(&table, "");
        let with = with_line(&table, &format!("{key} = {literal}"));
        let pairs: Vec<_> = without
            .iter()
            .zip(&with)
            .filter_map(|(a, b)| Some((parse(path, a).ok()?, parse(path, b).ok()?)))
            .collect();
        // A default named by another key (`rate_limit_per_second`) is
        // not a value; a value no config here accepts is a wrong row.
        let is_value = DeTable::parse(&format!("x = {literal}")).is_ok();
        let Some((default, set)) = pairs.first() else {
            if is_value && !with.is_empty() {
                wrong.push(format!("{table}.{key} = {literal}: not accepted"));
            }
            continue;
        };
        checked += 1;
        // Certificates aside, Debug shows every field of a Config.
        if format!("{default:?}") != format!("{set:?}") {
            wrong.push(format!("{table}.{key}: the default is not {literal}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/configuration.md:\n{}",
        wrong.join("\n")
    );
    assert!(checked >= 45, "only {checked} defaults checked");
}
