//! The key tables in docs/configuration.md list exactly the keys the
//! loader reads: every declared key ([`keys::ALL`]) is in its table with
//! its declared default, and every documented key of a declared table is
//! declared; every key asked for while loading [`every_key`] (a config
//! that sets every key of every table) is documented in the table for its
//! section, and every documented key is asked for. And a default the docs
//! give as a value is the default: setting the key to it changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use toml::de::DeTable;

use super::keys::{Default, Key, Kind};
use super::*;

const DOCS: &str = include_str!("../../../docs/configuration.md");

/// Every key of every table, each set once: the declared keys (from
/// their declarations), then the keys of the tables not declared yet.
/// Relative paths are resolved in a temporary directory; what they name
/// need not exist (problems are fine: only the keys asked for count).
/// Each duration is `"1s"` on a line of its own, except `hsts_max_age`
/// and the keys that may be longer than a year (their default), for the
/// bounds test in `super`.
pub(super) fn every_key() -> String {
    let mut text = String::new();
    for (table, keys) in declared() {
        // `[[listener]]`, and the tables of a declared array of tables.
        let array = table == "listener"
            || keys::ALL.iter().any(|k| {
                matches!(k.kind, Kind::Tables) && format!("{}.{}", k.table, k.name) == table
            });
        match array {
            true => text.push_str(&format!("\n[[{table}]]\n")),
            false => text.push_str(&format!("\n[{table}]\n")),
        }
        // A sub-table is set by its own header, which follows.
        for key in keys
            .iter()
            .filter(|k| !matches!(k.kind, Kind::Table | Kind::Tables))
        {
            text.push_str(&format!("{} = {}\n", key.name, sample(key)));
        }
    }
    text + UNDECLARED
}

/// A value `key` accepts, or at least reads as its kind.
fn sample(key: &Key) -> String {
    match (&key.kind, key.default) {
        (Kind::Duration(range), Default::Duration(d))
            if *range.end() > std::time::Duration::from_secs(400 * 86_400) =>
        {
            format!("\"{}\"", super::reader::duration_text(d))
        }
        (Kind::Duration(_), _) => "\"1s\"".into(),
        (_, Default::Size(n) | Default::Uint(n)) => n.to_string(),
        (_, Default::Bool(b)) => b.to_string(),
        (_, Default::Str(s)) => format!("\"{s}\""),
        (_, Default::Empty) | (Kind::List, _) => "[]".into(),
        (Kind::Bool, _) => "true".into(),
        (Kind::Size { .. } | Kind::Uint { .. }, _) => "1".into(),
        (Kind::Number { .. }, _) => "0.5".into(),
        (Kind::String | Kind::Path | Kind::Choice(_), _) => "\"x\"".into(),
        (Kind::Table | Kind::Tables, _) => "{}".into(),
    }
}

/// The declared keys by table, in the order of their declarations.
fn declared() -> Vec<(&'static str, Vec<&'static Key>)> {
    let mut out: Vec<(&'static str, Vec<&'static Key>)> = Vec::new();
    for key in keys::ALL {
        match out.iter_mut().find(|(t, _)| *t == key.table) {
            Some((_, keys)) => keys.push(key),
            None => out.push((key.table, vec![key])),
        }
    }
    out
}

/// The keys of the tables not declared yet.
const UNDECLARED: &str = r#"
[[route]]
name = "proxy"
host = ["a.example.com"]
path = "/"
upstream = "http://127.0.0.1:3"
strip_prefix = true
preserve_host = false
raw_path = true
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
access = ["allow 10.0.0.0/8", "deny all"]
error_pages = ["404 404.html"]
intercept_upstream_errors = true
[route.basic_auth]
users_file = "users.htpasswd"
realm = "staff"

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
[route.compress]
enabled = true
algorithms = ["gzip"]
types = ["text/*"]
min_size = 1
gzip_level = 1
brotli_level = 1
zstd_level = 1

[[route]]
name = "static"
path = "/static"
kind = "static"
root = "."
index = ["index.html"]
fallback = "/index.html"
follow_symlinks = true
serve_hidden = true
precompressed = ["br", "gzip"]
cache_control = "no-cache"

[[route]]
name = "rules"
path = "/rules"
upstream = "http://127.0.0.1:3"
request_id_header = "X-Request-Id"
rewrite_regex = "^/rules/old/(.*)$"
rewrite_to = "/new/${1}"
replace_prefix = "/v2"
[route.request_headers]
remove = ["X-Debug"]
set = ["X-Real-Client: {client_ip}"]
add = ["X-Via: weir"]
[route.response_headers]
remove = ["X-Powered-By"]
set = ["X-Frame-Options: DENY"]
add = ["X-Request-Id: {request_id}"]

[[route]]
name = "redirect"
path = "/old"
redirect = "https://example.com{path}"
redirect_status = 308
redirect_keep_query = false

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
runtime_keys = false
idp_tokens = false
tokens_per_minute = 1000
tokens_per_day = 10000
spend_per_day = 1.5
tokens_per_week = 100000
spend_per_week = 5.0
tokens_per_month = 400000
spend_per_month = 20.0
warn_at = 80
default_max_tokens = 1024
[[route.clients]]
name = "alice"
token_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"
token_file = "alice-token"
tokens_per_minute = 100
tokens_per_day = 1000
spend_per_day = 0.5
tokens_per_week = 1000
spend_per_week = 1.0
tokens_per_month = 4000
spend_per_month = 4.0
warn_at = 90
models = ["m*"]
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
name = "az"
url = "https://r.openai.azure.com"
protocol = "azure_chat"
api_version = "v1"
[[route.upstreams]]
name = "ae"
url = "https://r.openai.azure.com"
protocol = "azure"
credentials = "client_secret"
tenant_id = "contoso.onmicrosoft.com"
client_id = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
client_secret_env = "WEIR_TEST_SURELY_UNSET_VARIABLE"
client_secret_file = "entra-secret"
federated_token_file = "azure-identity-token"
authority = "https://login.microsoftonline.com"
scope = "https://cognitiveservices.azure.com/.default"
[[route.upstreams]]
name = "br"
protocol = "bedrock"
region = "us-east-1"
aws_credentials_file = "aws-credentials"
aws_profile = "default"
[[route.upstreams]]
name = "vx"
protocol = "vertex"
project = "my-project"
region = "us-east5"
credentials = "metadata"
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

[[idp.teams]]
name = "platform"
models = ["m*"]
tokens_per_minute = 100
tokens_per_day = 1000
spend_per_day = 0.5
tokens_per_week = 1000
spend_per_week = 1.0
tokens_per_month = 4000
spend_per_month = 4.0
warn_at = 90
max_concurrent = 2

[[teams]]
name = "platform"
tokens_per_minute = 1000
tokens_per_day = 10000
spend_per_day = 5.0
tokens_per_week = 50000
spend_per_week = 20.0
tokens_per_month = 200000
spend_per_month = 50.0
warn_at = 80
"#;

/// The keys documented per table: the first cell of each row of a key
/// table, under the heading that names the table (`` ## `[server]` ``,
/// `` ### `[[route.upstreams]]` ``). A deeper heading without a table
/// name (`### LLM routes`) continues the table above it; the top-level
/// table's keys are the headings' first names (a table's, or a key's:
/// `` ## `include` ``).
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
                // `` ## `include` ``: a top-level key of its own.
                None if heading.starts_with("# ") && first_code(heading).is_some() => {
                    if let Some(key) = first_code(heading) {
                        out.entry(String::new())
                            .or_default()
                            .insert(key.to_string());
                    }
                    current = None;
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
    let read: BTreeMap<String, BTreeSet<String>> =
        keys_read(&dir.path().join("w.toml"), &every_key())
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
    const STATIC: &str = "[[route]]\nkind = \"static\"\nroot = \"/\"\n";
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
            format!("{LISTENER}{STATIC}{line}\n"),
        ],
        "route.upstreams" => vec![
            format!("{LISTENER}{LLM}{LLM_UPSTREAM}{line}\n"),
            format!("{LISTENER}{LLM}{LLM_UPSTREAM}protocol = \"openai_chat\"\n{line}\n"),
            format!("{LISTENER}{LLM}{LLM_UPSTREAM}protocol = \"azure_chat\"\n{line}\n"),
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

/// The default cell of every documented key: (table, key) → the cell's
/// text, under the same headings as [`documented`].
fn default_cells(docs: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
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
        if let (Some(key), Some(default)) = (cells.next(), cells.next()) {
            let key = key.trim_end_matches('`').to_string();
            out.insert((table.clone(), key), default.to_string());
        }
    }
    out
}

/// Whether a docs' default cell says `default`: a value is written first
/// in the cell (`` `"60s"` ``, `` `0` (off) ``) and means the same; words
/// are the whole cell.
fn says(cell: &str, default: Default) -> bool {
    let literal = cell.strip_prefix('`').and_then(|c| c.split('`').next());
    let quoted = literal.and_then(|l| l.strip_prefix('"')?.strip_suffix('"'));
    match default {
        Default::Words(words) => cell == words,
        Default::Duration(d) => quoted.and_then(|q| humantime::parse_duration(q).ok()) == Some(d),
        Default::Size(n) => {
            let bytes = match quoted {
                Some(q) => q.parse::<bytesize::ByteSize>().ok().map(|b| b.as_u64()),
                None => literal.and_then(|l| l.parse().ok()),
            };
            bytes == Some(n)
        }
        Default::Uint(n) => literal.and_then(|l| l.parse::<u64>().ok()) == Some(n),
        Default::Bool(b) => literal == Some(if b { "true" } else { "false" }),
        Default::Str(s) => quoted == Some(s),
        Default::Empty => literal == Some("[]"),
    }
}

#[test]
fn every_declared_key_is_documented_with_its_default_and_read() {
    let cells = default_cells(DOCS);
    let documented = documented(DOCS);
    let dir = tempfile::tempdir().expect("tempdir");
    let read = keys_read(&dir.path().join("w.toml"), &every_key());
    let mut wrong = Vec::new();
    for (table, keys) in declared() {
        let names: BTreeSet<&str> = keys.iter().map(|k| k.name).collect();
        for key in keys {
            match cells.get(&(table.to_string(), key.name.to_string())) {
                None => wrong.push(format!(
                    "{table}: `{}` is declared but not in the docs' table",
                    key.name
                )),
                Some(cell) if !says(cell, key.default) => wrong.push(format!(
                    "{table}.{}: the docs say the default is {cell}, the declaration {:?}",
                    key.name, key.default
                )),
                Some(_) => {}
            }
        }
        for key in documented.get(table).into_iter().flatten() {
            if !names.contains(key.as_str()) {
                wrong.push(format!("{table}: `{key}` is documented but not declared"));
            }
        }
        // The loader names a declared table's keys only by declaration.
        let asked: BTreeSet<&str> = read.get(table).into_iter().flatten().copied().collect();
        if asked != names {
            wrong.push(format!(
                "{table}: the loader reads {asked:?}, the declarations are {names:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the declarations and docs/configuration.md disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_default_cell_says_a_value_or_words() {
    assert!(says(
        "`\"60s\"`",
        Default::Duration(Duration::from_secs(60))
    ));
    assert!(!says(
        "`\"60s\"`",
        Default::Duration(Duration::from_secs(61))
    ));
    assert!(says("`\"64KiB\"`", Default::Size(65536)));
    assert!(says("`0` (off)", Default::Uint(0)));
    assert!(says("`true`", Default::Bool(true)));
    assert!(!says("`true`", Default::Bool(false)));
    assert!(says("`\"text\"`", Default::Str("text")));
    assert!(says("`[]`", Default::Empty));
    assert!(says("none (stderr)", Default::Words("none (stderr)")));
    assert!(!says("none", Default::Words("required")));
}
