//! The file a request names, found on a blocking thread: the candidate
//! path under the root made canonical (every symlink resolved) and, unless
//! the route follows symlinks out, refused when it is not under the
//! canonical root; a directory's index; a precompressed sibling the client
//! accepts; the fallback. Only regular files are opened (never a FIFO, a
//! socket or a device), and the answer is from the opened file's own
//! metadata.
//!
//! Between the check and the open a path could be swapped by someone who
//! can write under the root; weir opens the canonical path it checked, so
//! that needs a write under the root (nginx's `disable_symlinks` has the
//! same window without `O_PATH` walks).

use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::path::{Wanted, is_hidden};
use crate::config::{Precompressed, StaticSettings};

/// What a request's path is.
pub(super) enum Found {
    File(Opened),
    /// A directory asked for without its trailing `/`.
    Directory,
    /// A directory without an index file: 403, as nginx (no listing).
    NoIndex,
    Missing,
}

/// A regular file, open, with what its answer needs.
pub(super) struct Opened {
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) modified: Option<SystemTime>,
    /// From the name asked for (an index, the fallback, a symlink's own
    /// name), as nginx takes it from the URI.
    pub(super) content_type: &'static str,
    /// The sibling served instead, when one was.
    pub(super) encoding: Option<Precompressed>,
}

/// Look up what `wanted` names, then the fallback.
pub(super) fn resolve(s: &StaticSettings, wanted: Wanted, accepted: &[Precompressed]) -> Found {
    if let Some(rel) = &wanted.rel {
        match lookup(s, rel, wanted.trailing_slash, accepted) {
            Found::Missing => {}
            found => return found,
        }
    }
    let Some(fallback) = &s.fallback else {
        return Found::Missing;
    };
    let path = s.root.join(fallback.trim_start_matches('/'));
    match inside(s, &path) {
        Some((canonical, meta)) if meta.is_file() => {
            open(s, &path, &canonical, accepted).map_or(Found::Missing, Found::File)
        }
        _ => Found::Missing,
    }
}

fn lookup(
    s: &StaticSettings,
    rel: &Path,
    trailing_slash: bool,
    accepted: &[Precompressed],
) -> Found {
    let candidate = s.root.join(rel);
    let Some((canonical, meta)) = inside(s, &candidate) else {
        return Found::Missing;
    };
    if !s.serve_hidden && canonical.strip_prefix(&s.root).is_ok_and(is_hidden) {
        return Found::Missing;
    }
    if meta.is_dir() {
        if !trailing_slash {
            return Found::Directory;
        }
        for name in &s.index {
            let index = candidate.join(name);
            if let Some((canonical, meta)) = inside(s, &index)
                && meta.is_file()
                && let Some(opened) = open(s, &index, &canonical, accepted)
            {
                return Found::File(opened);
            }
        }
        return Found::NoIndex;
    }
    if trailing_slash || !meta.is_file() {
        return Found::Missing;
    }
    open(s, &candidate, &canonical, accepted).map_or(Found::Missing, Found::File)
}

/// `path` made canonical, with its metadata, when it exists and is under
/// the root (or the route follows symlinks out of it).
fn inside(s: &StaticSettings, path: &Path) -> Option<(PathBuf, Metadata)> {
    let canonical = std::fs::canonicalize(path).ok()?;
    if !s.follow_symlinks && !canonical.starts_with(&s.root) {
        tracing::debug!(path = %path.display(), "static: a symlink out of the root refused");
        return None;
    }
    let meta = std::fs::metadata(&canonical).ok()?;
    Some((canonical, meta))
}

/// Open the file asked for as `asked` (canonical `canonical`), or the
/// first precompressed sibling of it the client accepts.
fn open(
    s: &StaticSettings,
    asked: &Path,
    canonical: &Path,
    accepted: &[Precompressed],
) -> Option<Opened> {
    let content_type = mime_guess::from_path(asked)
        .first_raw()
        .unwrap_or("application/octet-stream");
    for encoding in accepted {
        let mut sibling = asked.as_os_str().to_owned();
        sibling.push(encoding.suffix());
        if let Some((canonical, meta)) = inside(s, Path::new(&sibling))
            && meta.is_file()
            && let Some(mut opened) = open_regular(&canonical, content_type)
        {
            opened.encoding = Some(*encoding);
            return Some(opened);
        }
    }
    open_regular(canonical, content_type)
}

/// Open a regular file and read its metadata from the open descriptor.
fn open_regular(path: &Path, content_type: &'static str) -> Option<Opened> {
    let file = File::open(path).ok()?;
    let meta = file.metadata().ok().filter(Metadata::is_file)?;
    Some(Opened {
        len: meta.len(),
        modified: meta.modified().ok(),
        file,
        content_type,
        encoding: None,
    })
}
