//! The layering docs/architecture.md promises, checked on the source:
//!
//! - no import cycle between files (a file may use what its own module's
//!   `mod.rs` defines; anything else that leads back to it is a circle),
//!   nor between weir's top-level modules;
//! - the pure crate (`crates/wire`) depends on no runtime, no HTTP stack
//!   and nothing of the gateway's;
//! - the connection driver imports nothing above it on the data path, and
//!   only the CLI (and the test seams) reach the demo.
//!
//! Paths are read from `use` trees and from inline `crate::…`, `super::…`,
//! `self::…` and child-module paths; a name a `mod.rs` re-exports from one
//! of its files resolves to that file. Comments and `#[cfg(test)]` code
//! are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A source file of one crate: its module path (`["llm", "relay"]`), and
/// whether it is a `mod.rs`/`lib.rs` (whose children are its modules).
#[derive(Debug, Clone)]
struct File {
    krate: String,
    module: Vec<String>,
    code: String,
}

/// Every production source file of the gateway (`src/`) and the pure crate.
fn files() -> Vec<File> {
    let mut out = Vec::new();
    for (krate, dir) in [("weir", "src"), ("weir_wire", "crates/wire/src")] {
        let base = Path::new(ROOT).join(dir);
        let mut paths = Vec::new();
        collect(&base, &mut paths);
        for path in paths {
            let rel = path.strip_prefix(&base).expect("under the crate");
            let rel = rel.to_string_lossy().replace('\\', "/");
            if rel == "main.rs" || rel.ends_with("/tests.rs") || rel.contains("/tests/") {
                continue;
            }
            let mut module: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            out.push(File {
                krate: krate.to_string(),
                module,
                code: production(&text),
            });
        }
    }
    out
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// A file's code without comments and without its `#[cfg(test)]` items
/// (a test module, or a test-only item: the attribute and the item after).
fn production(text: &str) -> String {
    let text = &without_strings(text);
    let mut out = String::new();
    let mut skip_item = false;
    let mut depth = 0i32;
    for line in text.lines() {
        let line = match line.find("//") {
            // A `//` inside a string (a URL) is rare in paths; good enough.
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        if line.trim() == "#[cfg(test)]" {
            skip_item = true;
            depth = 0;
            continue;
        }
        if skip_item {
            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            let ends = (depth <= 0 && line.contains('}'))
                || (depth == 0 && line.trim_end().ends_with(';'));
            if ends {
                skip_item = false;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `text` with the insides of string and char literals taken out, so
/// that neither a `use ` nor a brace in a string is read as code.
fn without_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // A char literal holding a quote or a brace: `'"'`, `'{'`, `'\''`.
        if c == b'\'' && i + 2 < b.len() && b[i + 2] == b'\'' {
            out.extend_from_slice(b"' '");
            i += 3;
            continue;
        }
        if c == b'\'' && i + 3 < b.len() && b[i + 1] == b'\\' && b[i + 3] == b'\'' {
            out.extend_from_slice(b"' '");
            i += 4;
            continue;
        }
        // Raw strings: r"…", r#"…"#.
        if c == b'r' && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) {
            let mut j = i + 1;
            while j < b.len() && b[j] == b'#' {
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let hashes = j - i - 1;
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let end = b[j + 1..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| j + 1 + p + close.len());
                out.extend_from_slice(b"\"\"");
                i = end;
                continue;
            }
        }
        if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.extend_from_slice(b"\"\"");
            i = j + 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every path a file's `use` statements name, `use` trees expanded.
fn use_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // Whole statements: they may span lines and nest braces.
    let mut rest = code;
    while let Some(at) = find_word(rest, "use ") {
        let after = &rest[at + 4..];
        let Some(end) = after.find(';') else { break };
        let tree: String = after[..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        expand(&tree, &mut Vec::new(), &mut out);
        rest = &after[end..];
    }
    out
}

/// Every path a file's code names: its `use` paths and inline ones
/// (`crate::a::b`, `super::x`, `child::y`, `weir_wire::z`).
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = use_paths(code);
    let bytes = code.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let starts = (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_')
            && (i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let s = j;
            while j < bytes.len() && word(bytes[j]) {
                j += 1;
            }
            segs.push(code[s..j].to_string());
            let more = code[j..].starts_with("::")
                && code[j + 2..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
            if !more {
                break;
            }
            j += 2;
        }
        if segs.len() > 1 {
            out.push(segs);
        }
        i = j.max(i + 1);
    }
    out
}

/// Whether a file's code defines an item called `name`.
fn defines(code: &str, name: &str) -> bool {
    [
        "fn", "struct", "enum", "type", "const", "static", "trait", "mod",
    ]
    .iter()
    .any(|kw| {
        let needle = format!("{kw} {name}");
        code.match_indices(&needle).any(|(at, _)| {
            let after = code[at + needle.len()..].chars().next();
            let before = code[..at].chars().next_back();
            after.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
                && before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
    })
}

/// `a::b::{c, d::{e, f}}` → `a::b::c`, `a::b::d::e`, `a::b::d::f`.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand(part, prefix, out);
        }
        prefix.truncate(n);
    } else {
        let mut path = prefix.clone();
        let name = tree
            .split(" as ")
            .next()
            .unwrap_or(tree)
            .split("as")
            .next()
            .unwrap_or(tree);
        path.extend(name.split("::").filter(|s| !s.is_empty()).map(String::from));
        if path.last().is_some_and(|s| s == "self") {
            path.pop();
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
}

fn split_top(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = s[from..].find(word) {
        let at = from + at;
        let before = s[..at].chars().next_back();
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Files by (crate, module path), and what each `mod.rs` re-exports from
/// which of its children (`name → child`; `*` for a glob).
struct Tree {
    files: BTreeMap<(String, Vec<String>), File>,
}

impl Tree {
    fn new() -> Tree {
        let files = files()
            .into_iter()
            .map(|f| ((f.krate.clone(), f.module.clone()), f))
            .collect();
        Tree { files }
    }

    fn is_module(&self, krate: &str, module: &[String]) -> bool {
        self.files
            .contains_key(&(krate.to_string(), module.to_vec()))
    }

    /// The file a path from `from` names, or `None` for a path outside
    /// weir (std, a dependency, a type's associated item).
    fn resolve(&self, from: &File, path: &[String], depth: u8) -> Option<(String, Vec<String>)> {
        let (krate, mut base, rest): (String, Vec<String>, &[String]) = match path[0].as_str() {
            "crate" => (from.krate.clone(), Vec::new(), &path[1..]),
            "weir_wire" => ("weir_wire".to_string(), Vec::new(), &path[1..]),
            "self" => (from.krate.clone(), from.module.clone(), &path[1..]),
            "super" => {
                let mut base = from.module.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (from.krate.clone(), base, rest)
            }
            child => {
                let mut m = from.module.clone();
                m.push(child.to_string());
                if !self.is_module(&from.krate, &m) {
                    return None;
                }
                (from.krate.clone(), from.module.clone(), path)
            }
        };
        // The longest module prefix, then a re-export followed.
        let mut i = 0;
        while i < rest.len() {
            let mut next = base.clone();
            next.push(rest[i].clone());
            if !self.is_module(&krate, &next) {
                break;
            }
            base = next;
            i += 1;
        }
        if let Some(found) = rest
            .get(i)
            .and_then(|name| self.reexported_from(&krate, &base, name, depth))
        {
            return Some(found);
        }
        Some((krate, base))
    }

    /// Where a name that a module re-exports (`pub(crate) use a::Name`, or
    /// a glob that brings it) is defined.
    fn reexported_from(
        &self,
        krate: &str,
        module: &[String],
        name: &str,
        depth: u8,
    ) -> Option<(String, Vec<String>)> {
        let file = self.files.get(&(krate.to_string(), module.to_vec()))?;
        if depth > 8 || defines(&file.code, name) {
            return None;
        }
        for path in use_paths(&file.code) {
            let Some(last) = path.last() else { continue };
            let mut named = path.clone();
            if last == "*" {
                named.pop();
                named.push(name.to_string());
            } else if last != name {
                continue;
            }
            let Some(found) = self.resolve(file, &named, depth + 1) else {
                continue;
            };
            let here = found.0 == krate && found.1 == module;
            let there = &self.files[&found];
            if !here
                && (last != "*" || defines(&there.code, name) || found.1.len() > module.len() + 1)
            {
                return Some(found);
            }
        }
        None
    }

    /// File → the files its code names (not itself, not its ancestors'
    /// `mod.rs`: a module's files may use what the module defines).
    fn graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in self.files.values() {
            let me = label(&file.krate, &file.module);
            let edges = graph.entry(me.clone()).or_default();
            for path in paths(&file.code) {
                let Some((krate, target)) = self.resolve(file, &path, 0) else {
                    continue;
                };
                let ancestor = krate == file.krate && file.module.starts_with(&target);
                if !ancestor {
                    edges.insert(label(&krate, &target));
                }
            }
        }
        graph
    }
}

fn label(krate: &str, module: &[String]) -> String {
    format!("{krate}::{}", module.join("::"))
}

/// The strongly connected groups of more than one node (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.out.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The graph folded to weir's top-level modules (and the wire crate).
fn top_level(files: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |l: &str| -> String {
        let (krate, module) = l.split_once("::").unwrap_or((l, ""));
        if krate == "weir_wire" {
            return "weir_wire".to_string();
        }
        module.split("::").next().unwrap_or("").to_string()
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in files {
        let f = top(from);
        let edges = graph.entry(f.clone()).or_default();
        for to in tos {
            let t = top(to);
            if t != f && !t.is_empty() {
                edges.insert(t);
            }
        }
    }
    graph.remove("");
    graph
}

#[test]
fn there_are_no_import_cycles_between_files() {
    let tree = Tree::new();
    let graph = tree.graph();
    assert!(graph.len() > 100, "the whole tree is read: {}", graph.len());
    // The reader sees through a re-export: `respond` re-exports `Rescue`
    // from `respond::rescue`, so naming it is an edge to that file.
    assert!(
        graph["weir::lifecycle"].contains("weir::respond::rescue"),
        "{:?}",
        graph["weir::lifecycle"]
    );
    let found = circles(&graph);
    assert!(found.is_empty(), "import circles between files: {found:#?}");
}

#[test]
fn there_are_no_import_cycles_between_modules() {
    let graph = top_level(&Tree::new().graph());
    assert!(graph.contains_key("conn") && graph.contains_key("lifecycle"));
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "import cycles between modules: {found:#?}"
    );
}

#[test]
fn the_wire_crate_is_pure() {
    let manifest =
        std::fs::read_to_string(Path::new(ROOT).join("crates/wire/Cargo.toml")).expect("manifest");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|d| d.split("\n[").next())
        .unwrap_or("");
    for banned in ["tokio", "hyper", "h2", "rustls", "weir ", "weir="] {
        let named = deps.lines().any(|l| l.trim_start().starts_with(banned));
        assert!(!named, "crates/wire depends on {banned}");
    }
    let graph = Tree::new().graph();
    let wrong: Vec<_> = graph
        .iter()
        .filter(|(from, _)| from.starts_with("weir_wire::"))
        .flat_map(|(from, tos)| {
            tos.iter()
                .filter(|t| t.starts_with("weir::"))
                .map(move |t| format!("{from} → {t}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}

#[test]
fn the_connection_driver_imports_nothing_above_it() {
    let graph = top_level(&Tree::new().graph());
    let above = [
        "listen",
        "lifecycle",
        "snapshot",
        "route",
        "llm",
        "proxy",
        "respond",
        "server",
        "admin",
    ];
    let conn = &graph["conn"];
    let wrong: Vec<&&str> = above.iter().filter(|m| conn.contains(**m)).collect();
    assert!(wrong.is_empty(), "conn imports {wrong:?}");
}

#[test]
fn the_upstream_side_imports_nothing_above_it() {
    let graph = top_level(&Tree::new().graph());
    let below = ["config", "pki", "telemetry", "sync", "worker", "weir_wire"];
    let upstream = &graph["upstream"];
    let wrong: Vec<&String> = upstream
        .iter()
        .filter(|m| !below.contains(&m.as_str()))
        .collect();
    assert!(wrong.is_empty(), "upstream imports {wrong:?}");
    // Both route kinds use it.
    assert!(graph["proxy"].contains("upstream") && graph["llm"].contains("upstream"));
}

#[test]
fn only_the_cli_and_the_test_seams_reach_the_demo() {
    let graph = top_level(&Tree::new().graph());
    let wrong: Vec<&String> = graph
        .iter()
        .filter(|(from, tos)| {
            tos.contains("demo") && !["cli", "testing", "demo"].contains(&from.as_str())
        })
        .map(|(from, _)| from)
        .collect();
    assert!(wrong.is_empty(), "serving code imports the demo: {wrong:?}");
}
