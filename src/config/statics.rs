//! A static route's settings (`kind = "static"`): the directory it serves
//! and how a request path becomes a file there.

use std::path::PathBuf;

/// What a `kind = "static"` route serves and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaticSettings {
    /// The directory served, canonical (symlinks resolved) when loaded:
    /// every file served is under it unless `follow_symlinks`.
    pub(crate) root: PathBuf,
    /// File names tried, in order, for a path ending in `/`.
    pub(crate) index: Vec<String>,
    /// A path under `root` (`/index.html`) served, with 200, for a GET or
    /// HEAD whose path names nothing servable (a single-page app's routes).
    pub(crate) fallback: Option<String>,
    /// Follow a symlink whose target is outside `root` (by default such a
    /// file is answered as missing).
    pub(crate) follow_symlinks: bool,
    /// Serve files and directories whose name starts with `.` (other than
    /// `/.well-known/`); by default they are answered as missing.
    pub(crate) serve_hidden: bool,
    /// Compressed siblings looked for, in the order preferred.
    pub(crate) precompressed: Vec<Precompressed>,
    /// `Cache-Control` sent with every file (200, 206 and 304).
    pub(crate) cache_control: Option<http::HeaderValue>,
}

/// A precompressed sibling: `name.br` for `name`, and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precompressed {
    Br,
    Zstd,
    Gzip,
}

impl Precompressed {
    pub(crate) const ALL: [Precompressed; 3] =
        [Precompressed::Br, Precompressed::Zstd, Precompressed::Gzip];

    /// The config's name and the `Content-Encoding` token.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Precompressed::Br => "br",
            Precompressed::Zstd => "zstd",
            Precompressed::Gzip => "gzip",
        }
    }

    /// The sibling's file-name suffix.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Precompressed::Br => ".br",
            Precompressed::Zstd => ".zst",
            Precompressed::Gzip => ".gz",
        }
    }
}
