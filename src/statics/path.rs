//! The request path as a file path under the root: percent-decoded per
//! segment, never absolute, never with a dot segment, a NUL or a
//! separator decoded into a name; hidden names (`.git`, `.env`) answered
//! as missing unless the route serves them. Pure.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What a request asks for under the root.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Wanted {
    /// The relative path, or `None` for a hidden name: nothing is looked
    /// up (the fallback may still answer).
    pub(super) rel: Option<PathBuf>,
    /// The path ended in `/`: a directory's index, never a file.
    pub(super) trailing_slash: bool,
}

/// `uri_path` (normalised by the lifecycle) as a path under the root,
/// after `strip` (the route's prefix) when the route strips it. `None`
/// for what no file name can be: the caller answers 400.
pub(super) fn under_root(
    strip: Option<&str>,
    uri_path: &str,
    serve_hidden: bool,
) -> Option<Wanted> {
    let path = match strip {
        Some(prefix) => uri_path.strip_prefix(prefix.trim_end_matches('/'))?,
        None => uri_path,
    };
    let trailing_slash = path.is_empty() || path.ends_with('/');
    let mut rel = PathBuf::new();
    let mut hidden = false;
    for (i, segment) in path.split('/').filter(|s| !s.is_empty()).enumerate() {
        let name: Vec<u8> = percent_encoding::percent_decode_str(segment).collect();
        if name == b"." || name == b".." || name.iter().any(|b| matches!(b, b'/' | b'\\' | 0)) {
            return None;
        }
        if name.first() == Some(&b'.') && !(i == 0 && name == b".well-known") {
            hidden = true;
        }
        rel.push(OsStr::from_bytes(&name));
    }
    Some(Wanted {
        rel: (serve_hidden || !hidden).then_some(rel),
        trailing_slash,
    })
}

/// Whether a canonical path under the root has a hidden component (a
/// symlink with a plain name may point at `.git/config`).
pub(super) fn is_hidden(rel: &std::path::Path) -> bool {
    rel.components().enumerate().any(|(i, c)| {
        let name = c.as_os_str().as_bytes();
        name.first() == Some(&b'.') && !(i == 0 && name == b".well-known")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(strip: Option<&str>, p: &str) -> Option<Option<String>> {
        under_root(strip, p, false).map(|w| w.rel.map(|r| r.display().to_string()))
    }

    #[test]
    fn paths_map_under_the_root_and_nothing_escapes_it() {
        assert_eq!(rel(None, "/a/b.txt"), Some(Some("a/b.txt".into())));
        assert_eq!(rel(None, "/"), Some(Some(String::new())));
        assert_eq!(
            rel(None, "/my%20file.txt"),
            Some(Some("my file.txt".into()))
        );
        assert_eq!(
            rel(Some("/static"), "/static/a.css"),
            Some(Some("a.css".into()))
        );
        assert_eq!(
            rel(Some("/static/"), "/static/a.css"),
            Some(Some("a.css".into()))
        );
        assert_eq!(rel(Some("/static"), "/static"), Some(Some(String::new())));
        // What the lifecycle's normalisation removes is still refused here.
        for bad in [
            "/../etc/passwd",
            "/a/%2e%2e/b",
            "/a/./b",
            "/a%2fb",
            "/a%00b",
            "/a%5cb",
        ] {
            assert_eq!(rel(None, bad), None, "{bad}");
        }
        let w = under_root(None, "/dir/", false).expect("valid");
        assert!(w.trailing_slash);
        assert!(
            !under_root(None, "/dir", false)
                .expect("valid")
                .trailing_slash
        );
    }

    #[test]
    fn hidden_names_are_nothing_unless_served() {
        assert_eq!(rel(None, "/.git/config"), Some(None));
        assert_eq!(rel(None, "/a/.env"), Some(None));
        assert_eq!(
            rel(None, "/.well-known/security.txt"),
            Some(Some(".well-known/security.txt".into()))
        );
        assert_eq!(rel(None, "/a/.well-known/x"), Some(None));
        let shown = under_root(None, "/.env", true).expect("valid");
        assert_eq!(
            shown.rel.map(|r| r.display().to_string()).as_deref(),
            Some(".env")
        );
        assert!(is_hidden(std::path::Path::new("a/.git/config")));
        assert!(!is_hidden(std::path::Path::new(".well-known/a")));
    }
}
