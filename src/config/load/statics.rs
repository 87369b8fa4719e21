//! What a `kind = "static"` route reads: the directory and how paths map
//! into it. Every problem is reported; the root is checked here (it must
//! be a directory) and kept canonical, so the serving side compares
//! canonical paths against it.

use super::*;

/// The keys only static routes read, as a route's kind-specific settings.
pub(super) fn static_settings(t: &Section<'_, '_>) -> Option<StaticSettings> {
    let root = root(t);
    let index = index(t);
    let fallback = fallback(t);
    let follow_symlinks = t.bool("follow_symlinks").unwrap_or(false);
    let serve_hidden = t.bool("serve_hidden").unwrap_or(false);
    let precompressed = precompressed(t);
    let cache_control = cache_control(t);
    Some(StaticSettings {
        root: root?,
        index,
        fallback,
        follow_symlinks,
        serve_hidden,
        precompressed,
        cache_control,
    })
}

/// `root`: required, a directory, resolved against the config's directory
/// and made canonical.
fn root(t: &Section<'_, '_>) -> Option<PathBuf> {
    let Some(root) = path_opt(t, "root") else {
        if !t.raw_present("root") {
            t.problem(
                "root",
                "a static route needs the directory it serves",
                Some("add `root = \"/srv/www\"`".into()),
            );
        }
        return None;
    };
    match std::fs::canonicalize(&root.value) {
        Ok(canonical) if canonical.is_dir() => Some(canonical),
        Ok(_) => {
            root.problem(
                t.doc(),
                format!("`{}` is not a directory", root.value.display()),
                Some("point `root` at the directory to serve".into()),
            );
            None
        }
        Err(e) => {
            root.problem(
                t.doc(),
                format!("cannot open `{}`: {e}", root.value.display()),
                Some("point `root` at an existing, readable directory".into()),
            );
            None
        }
    }
}

/// `index`: file names (no `/`, not hidden), `["index.html"]` by default;
/// `[]` serves no index.
fn index(t: &Section<'_, '_>) -> Vec<String> {
    let Some(list) = t.string_list("index") else {
        return vec!["index.html".to_string()];
    };
    let mut out = Vec::with_capacity(list.len());
    for name in list {
        if name.value.is_empty()
            || name.value.contains(['/', '\\', '\0'])
            || name.value.starts_with('.')
        {
            name.problem(
                t.doc(),
                format!("`{}` is not a file name", name.value),
                Some("write a name such as \"index.html\", without `/`".into()),
            );
        } else {
            out.push(name.value);
        }
    }
    out
}

/// `fallback`: a path under the root, `/` first, without dot segments.
fn fallback(t: &Section<'_, '_>) -> Option<String> {
    let f = t.string("fallback")?;
    let clean = f.value.starts_with('/')
        && !f.value.ends_with('/')
        && !f.value.contains(['\\', '\0', '%', '?', '#'])
        && f.value
            .split('/')
            .skip(1)
            .all(|s| !matches!(s, "" | "." | ".."));
    if clean {
        Some(f.value)
    } else {
        f.problem(
            t.doc(),
            format!("`{}` is not a file path under the root", f.value),
            Some("write a path such as \"/index.html\"".into()),
        );
        None
    }
}

/// `precompressed`: which siblings to look for, in the order preferred.
fn precompressed(t: &Section<'_, '_>) -> Vec<Precompressed> {
    let mut out = Vec::new();
    for name in t.string_list("precompressed").unwrap_or_default() {
        match Precompressed::ALL.iter().find(|p| p.name() == name.value) {
            Some(p) if !out.contains(p) => out.push(*p),
            Some(_) => name.problem(
                t.doc(),
                format!("`{}` is listed twice", name.value),
                Some("list each encoding once".into()),
            ),
            None => name.problem(
                t.doc(),
                format!("`{}` is not a precompressed encoding", name.value),
                Some("use \"br\", \"zstd\" or \"gzip\"".into()),
            ),
        }
    }
    out
}

/// `cache_control`: sent as it is written.
fn cache_control(t: &Section<'_, '_>) -> Option<http::HeaderValue> {
    let s = t.string("cache_control")?;
    match http::HeaderValue::from_str(&s.value) {
        Ok(v) if !s.value.is_empty() => Some(v),
        _ => {
            s.problem(
                t.doc(),
                format!("`{}` is not a header value", s.value),
                Some("write a value such as \"public, max-age=3600\"".into()),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    fn config(dir: &std::path::Path, keys: &str) -> String {
        format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"static\"\nroot = \"{}\"\n{keys}",
            dir.display()
        )
    }

    #[test]
    fn a_static_route_reads_its_keys_with_their_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = parse(Path::new("w.toml"), &config(dir.path(), "")).expect("valid");
        let RouteKind::Static(s) = &c.routes[0].kind else {
            panic!("not static");
        };
        let canonical = std::fs::canonicalize(dir.path()).expect("canonical");
        assert_eq!(s.root, canonical);
        assert_eq!(s.index, ["index.html"]);
        assert_eq!((s.fallback.as_deref(), s.follow_symlinks), (None, false));
        assert!(s.precompressed.is_empty() && s.cache_control.is_none() && !s.serve_hidden);
    }

    #[test]
    fn every_bad_static_key_is_reported_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").expect("file");
        let p = problems(&config(
            &file,
            "index = [\"a/b\"]\nfallback = \"../x\"\nprecompressed = [\"lzma\"]\n\
             cache_control = \"\"\nupstream = \"http://x\"\n",
        ));
        let joined = p.join("\n");
        for expected in [
            "route[0].root: `",
            "is not a directory",
            "route[0].index[0]: `a/b` is not a file name",
            "route[0].fallback: `../x` is not a file path under the root",
            "route[0].precompressed[0]: `lzma` is not a precompressed encoding",
            "route[0].cache_control: `` is not a header value",
            "route[0].upstream: `upstream` does not apply to static routes",
        ] {
            assert!(joined.contains(expected), "{expected}: {joined}");
        }
        let p = problems(&format!(
            "[server]\nmax_open_static_files = 0\n{}",
            config(dir.path(), "")
        ));
        assert!(
            p[0].contains("server.max_open_static_files: must be at least 1"),
            "{p:?}"
        );
        let p = problems("[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nkind = \"static\"\n");
        assert!(
            p[0].contains("route[0].root: a static route needs the directory it serves"),
            "{p:?}"
        );
        let p = problems(&format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://x\"\nroot = \"{}\"\n",
            dir.path().display()
        ));
        assert!(
            p[0].contains("`root` does not apply to proxy routes")
                && p[0].contains("kind = \\\"static\\\"") | p[0].contains("kind = \"static\""),
            "{p:?}"
        );
    }
}
