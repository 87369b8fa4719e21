//! The files a config is made of — the one given and those its `include`
//! lists name — read, then assembled into one document.
//!
//! `include = ["conf.d/*.conf", "routes/*.toml"]` at the top of any file
//! names more files: relative to the including file, a glob's matches in
//! sorted order (a glob matching nothing is not a problem, nginx's rule; a
//! literal path that does not exist is), an included file's own includes
//! followed depth-first, at most [`MAX_INCLUDE_DEPTH`] deep, a cycle or a
//! file included twice refused.
//!
//! Each file is a TOML document of its own. The files' texts are laid end
//! to end in one text; each file is parsed from its slice and its spans
//! moved to the whole text's offsets, so a span still says which file and
//! line a value came from ([`super::reader::Doc`] maps it back). The
//! documents are then merged at the top: arrays (`[[route]]`,
//! `[[listener]]`) are appended in file order, and a table (`[server]`) or
//! value defined in two files is a problem naming both places. On the way
//! every string value has its `${VAR}` expanded ([`super::env`]).

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::env;
use super::reader::Doc;

/// How deep includes may nest (the config given is depth 0).
pub(crate) const MAX_INCLUDE_DEPTH: usize = 8;

/// The top-level key that names more files.
pub(crate) const INCLUDE: &str = "include";

/// Every file of one config, root first, then each included file in the
/// order it is included.
pub(crate) struct Sources {
    files: Vec<SourceFile>,
    /// Problems found following the includes, reported once the files'
    /// places in the whole text are known.
    pending: Vec<Pending>,
    /// Directories a change in may change the config: each file's, and
    /// the fixed directory of each glob.
    dirs: Vec<PathBuf>,
}

struct SourceFile {
    path: PathBuf,
    /// The file as it resolves, to find cycles and repeats.
    canonical: Option<PathBuf>,
    text: String,
}

struct Pending {
    file: usize,
    span: Range<usize>,
    key: String,
    message: String,
    fix: Option<String>,
}

impl Sources {
    /// Read `root` and every file it includes. Only `root` itself being
    /// unreadable is an error; an included file that is unreadable is a
    /// config problem at the `include` that names it.
    pub(crate) fn read(root: &Path) -> std::io::Result<Sources> {
        let text = std::fs::read_to_string(root)?;
        Ok(Sources::from_text(root, text))
    }

    /// The config whose root file `root` holds `text`; its includes are
    /// read from disk.
    pub(crate) fn from_text(root: &Path, text: String) -> Sources {
        let mut sources = Sources {
            files: vec![SourceFile {
                path: root.to_path_buf(),
                canonical: std::fs::canonicalize(root).ok(),
                text,
            }],
            pending: Vec::new(),
            dirs: Vec::new(),
        };
        sources.watch_dir(dir_of(root));
        sources.follow(0, &mut vec![0]);
        sources
    }

    /// The directories to watch for a change.
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// What was read, to tell whether anything changed since: every
    /// file's path and text, and what could not be read.
    pub(crate) fn fingerprint(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in &self.files {
            out.extend_from_slice(f.path.as_os_str().as_encoded_bytes());
            out.push(0);
            out.extend_from_slice(f.text.as_bytes());
            out.push(0);
        }
        for p in &self.pending {
            out.extend_from_slice(p.message.as_bytes());
            out.push(0);
        }
        out
    }

    /// The files' texts end to end, each followed by a newline, and each
    /// file's path with its range in that text.
    pub(crate) fn joined(&self) -> (String, Vec<(PathBuf, Range<usize>)>) {
        let mut text = String::new();
        let mut ranges = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let start = text.len();
            text.push_str(&f.text);
            ranges.push((f.path.clone(), start..text.len()));
            text.push('\n');
        }
        (text, ranges)
    }

    /// The files of `text` (from [`Sources::joined`]) as one document:
    /// each parsed, its spans moved to `text`'s offsets, its strings
    /// expanded, merged into the first. Every problem goes to `doc`;
    /// `None` when a file is not TOML.
    pub(crate) fn document<'t>(
        &self,
        doc: &Doc<'_>,
        text: &'t str,
        ranges: &[(PathBuf, Range<usize>)],
    ) -> Option<Spanned<DeTable<'t>>> {
        for p in &self.pending {
            let start = ranges.get(p.file).map_or(0, |(_, r)| r.start);
            let span = start + p.span.start..start + p.span.end;
            doc.report(Some(span), &p.key, p.message.clone(), p.fix.clone());
        }
        let mut merged: Option<Spanned<DeTable<'t>>> = None;
        let mut syntax_errors = false;
        for (index, (_, range)) in ranges.iter().enumerate() {
            let slice = text.get(range.clone()).unwrap_or_default();
            let (table, errors) = DeTable::parse_recoverable(slice);
            for e in &errors {
                let span = e.span().map(|s| moved(s, range.start));
                let message = format!("TOML syntax: {}", e.message().trim());
                doc.report(span, "", message, None);
            }
            syntax_errors |= !errors.is_empty();
            let span = moved(table.span(), range.start);
            let mut table = moved_table(table.into_inner(), range.start, "", doc);
            if index > 0 {
                // Followed already; only the root's is read as a key.
                table.remove(INCLUDE);
            }
            match &mut merged {
                None => merged = Some(Spanned::new(span, table)),
                Some(into) => merge(doc, into.get_mut(), table),
            }
        }
        if syntax_errors { None } else { merged }
    }

    /// Follow file `index`'s includes; `chain` is the files that led to it.
    fn follow(&mut self, index: usize, chain: &mut Vec<usize>) {
        let dir = self.files.get(index).map(|f| dir_of(&f.path));
        let Some(dir) = dir else { return };
        for (written, span) in self.include_items(index) {
            let problem = |message: String, fix: &str| Pending {
                file: index,
                span: span.clone(),
                key: INCLUDE.to_string(),
                message,
                fix: Some(fix.to_string()),
            };
            let pattern = match env::expand(&written) {
                Ok(p) => p.into_owned(),
                Err(e) => {
                    let (message, fix) = e.describe();
                    self.pending.push(problem(message, &fix));
                    continue;
                }
            };
            let path = dir.join(&pattern);
            let paths = if is_glob(&pattern) {
                match self.glob(&path) {
                    Ok(paths) => paths,
                    Err(message) => {
                        let fix = "write a glob like \"conf.d/*.toml\"";
                        self.pending.push(problem(message, fix));
                        continue;
                    }
                }
            } else {
                vec![path]
            };
            for path in paths {
                if let Err(message) = self.include(path, chain) {
                    let fix = "point `include` at existing TOML files, without cycles";
                    self.pending.push(problem(message, fix));
                }
            }
        }
    }

    /// Read `path` as included by the last file of `chain`, and follow it.
    fn include(&mut self, path: PathBuf, chain: &mut Vec<usize>) -> Result<(), String> {
        let shown = path.display().to_string();
        let canonical =
            std::fs::canonicalize(&path).map_err(|e| format!("cannot include `{shown}`: {e}"))?;
        let same = |f: &SourceFile| f.canonical.as_ref() == Some(&canonical);
        if let Some(at) = chain
            .iter()
            .position(|&i| self.files.get(i).is_some_and(same))
        {
            let mut cycle: Vec<String> = chain[at..]
                .iter()
                .filter_map(|&i| self.files.get(i))
                .map(|f| f.path.display().to_string())
                .collect();
            cycle.push(shown);
            return Err(format!("the includes make a cycle: {}", cycle.join(" → ")));
        }
        if self.files.iter().any(same) {
            return Err(format!("`{shown}` is included twice"));
        }
        if chain.len() > MAX_INCLUDE_DEPTH {
            return Err(format!(
                "includes nest deeper than {MAX_INCLUDE_DEPTH} files at `{shown}`"
            ));
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("cannot include `{shown}`: {e}"))?;
        self.watch_dir(dir_of(&path));
        self.files.push(SourceFile {
            path,
            canonical: Some(canonical),
            text,
        });
        let index = self.files.len() - 1;
        chain.push(index);
        self.follow(index, chain);
        chain.pop();
        Ok(())
    }

    /// The files a glob matches, sorted; its fixed directory is watched.
    fn glob(&mut self, pattern: &Path) -> Result<Vec<PathBuf>, String> {
        let Some(text) = pattern.to_str() else {
            return Err(format!("`{}` is not UTF-8", pattern.display()));
        };
        let fixed: PathBuf = pattern
            .components()
            .take_while(|c| !is_glob(&c.as_os_str().to_string_lossy()))
            .collect();
        self.watch_dir(fixed);
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            // Editors' and package managers' hidden files stay out.
            require_literal_leading_dot: true,
        };
        let matches = glob::glob_with(text, options).map_err(|e| format!("`{text}`: {e}"))?;
        let mut paths: Vec<PathBuf> = matches
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        Ok(paths)
    }

    /// File `index`'s `include` items with their spans in the file (an
    /// item that is not a string is a problem).
    fn include_items(&mut self, index: usize) -> Vec<(String, Range<usize>)> {
        let Some(file) = self.files.get(index) else {
            return Vec::new();
        };
        // Syntax errors are reported when the document is assembled.
        let (table, _) = DeTable::parse_recoverable(&file.text);
        let Some(value) = table.get_ref().get(INCLUDE) else {
            return Vec::new();
        };
        let mut items = Vec::new();
        let mut wrong = Vec::new();
        match value.get_ref() {
            DeValue::String(s) => items.push((s.to_string(), value.span())),
            DeValue::Array(list) => {
                for item in list.iter() {
                    match item.get_ref() {
                        DeValue::String(s) => items.push((s.to_string(), item.span())),
                        _ => wrong.push(item.span()),
                    }
                }
            }
            _ => wrong.push(value.span()),
        }
        for span in wrong {
            self.pending.push(Pending {
                file: index,
                span,
                key: INCLUDE.to_string(),
                message: "expected a file path or a list of them".to_string(),
                fix: Some("write it like `include = [\"conf.d/*.toml\"]`".to_string()),
            });
        }
        items
    }

    fn watch_dir(&mut self, dir: PathBuf) {
        if !self.dirs.contains(&dir) {
            self.dirs.push(dir);
        }
    }
}

/// The directory relative paths in `file` are resolved against.
fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

fn moved(span: Range<usize>, by: usize) -> Range<usize> {
    span.start.saturating_add(by)..span.end.saturating_add(by)
}

/// `table` with every span moved `by` and every string expanded; `path`
/// is the table's key path, for problems.
fn moved_table<'t>(table: DeTable<'t>, by: usize, path: &str, doc: &Doc<'_>) -> DeTable<'t> {
    let mut out = DeTable::new();
    for (key, value) in table {
        let key_path = join(path, key.get_ref());
        // `include` was expanded (and its problems reported) when followed.
        let expand = key_path != INCLUDE;
        let value = moved_value(value, by, &key_path, expand, doc);
        out.insert(Spanned::new(moved(key.span(), by), key.into_inner()), value);
    }
    out
}

fn moved_value<'t>(
    value: Spanned<DeValue<'t>>,
    by: usize,
    path: &str,
    expand: bool,
    doc: &Doc<'_>,
) -> Spanned<DeValue<'t>> {
    let span = moved(value.span(), by);
    let inner = match value.into_inner() {
        DeValue::String(s) if !expand => DeValue::String(s),
        DeValue::String(s) => DeValue::String(match env::expand(&s) {
            Ok(std::borrow::Cow::Borrowed(_)) => s,
            Ok(std::borrow::Cow::Owned(expanded)) => expanded.into(),
            Err(e) => {
                let (message, fix) = e.describe();
                doc.report(Some(span.clone()), path, message, Some(fix));
                s
            }
        }),
        DeValue::Array(mut items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let taken = std::mem::replace(item, Spanned::new(0..0, DeValue::Boolean(false)));
                *item = moved_value(taken, by, &format!("{path}[{i}]"), expand, doc);
            }
            DeValue::Array(items)
        }
        DeValue::Table(t) => DeValue::Table(moved_table(t, by, path, doc)),
        other => other,
    };
    Spanned::new(span, inner)
}

/// Merge an included file's top level into the document's.
fn merge<'t>(doc: &Doc<'_>, into: &mut DeTable<'t>, from: DeTable<'t>) {
    for (key, value) in from {
        let name: &str = key.get_ref();
        let first = into.get_key_value(name).map(|(k, _)| k.span().start);
        let Some(first) = first else {
            into.insert(key, value);
            continue;
        };
        let existing = into.get_mut(name).map(Spanned::get_mut);
        match (existing, value.into_inner()) {
            (Some(DeValue::Array(list)), DeValue::Array(more)) => {
                for item in more {
                    list.push(item);
                }
            }
            _ => {
                doc.report(
                    Some(key.span()),
                    name,
                    format!("`{name}` is also defined at {}", doc.place(first)),
                    Some(format!(
                        "define `{name}` in one file (only `[[...]]` arrays such as `[[route]]` add up across files)"
                    )),
                );
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
