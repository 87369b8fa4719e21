//! The module layering docs/architecture.md promises, checked on the source:
//! no import cycles between weir's top-level modules, and the connection
//! driver imports nothing above it on the data path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its production code names
/// (`crate::x`); comments and `#[cfg(test)]` code are left out.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    collect(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
        &mut files,
    );
    for file in files {
        let rel = file
            .strip_prefix(concat!(env!("CARGO_MANIFEST_DIR"), "/src/"))
            .expect("under src");
        let rel = rel.to_string_lossy();
        let module = rel
            .split('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_string();
        if module == "main" || module == "lib" || rel.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable");
        // Unit tests sit in a `mod tests` at the end of a file.
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        let names = graph.entry(module.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                if !name.is_empty() && name != module {
                    names.insert(name.to_string());
                }
            }
        }
    }
    graph
}

fn collect(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// A path from `from` back to itself, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("never empty");
        for next in graph.get(last).into_iter().flatten() {
            if next == from {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn there_are_no_import_cycles_between_modules() {
    let graph = imports();
    assert!(graph.contains_key("conn") && graph.contains_key("lifecycle"));
    let cycles: Vec<String> = graph
        .keys()
        .filter_map(|m| cycle_through(&graph, m))
        .map(|c| c.join(" → "))
        .collect();
    assert!(cycles.is_empty(), "import cycles: {cycles:#?}");
}

#[test]
fn the_connection_driver_imports_nothing_above_it() {
    let graph = imports();
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
