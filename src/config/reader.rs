//! A typed reader over a spanned TOML document that never stops at the
//! first problem.
//!
//! serde stops at the first error, so a config with five mistakes would take
//! five edit-check rounds. Instead the document is parsed once with spans
//! (`toml::de::DeTable`) and every section is read through a [`Section`],
//! which records each problem (unknown key, wrong type, bad value) with its
//! line and column and carries on. Callers get `Option<T>` back and build
//! the validated config from whatever was readable.
//!
//! A getter is given a key's declaration ([`super::keys::Key`]), which
//! brings the key's name and the bound its value must be within (the
//! tables not declared yet still name their keys, and bounds, in the
//! call). A [`Section`] remembers which keys its getters asked for, and
//! when it is dropped every other key in its table is reported as unknown
//! (with a "did you mean" drawn from the keys that were asked for). A
//! reader must therefore ask for each of its keys on every path, before it
//! returns early.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::keys::{Key, Kind};
pub(crate) use super::problem::{Problem, Problems};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Keys asked for per table, by table path without indices
/// (`route.upstreams`); the top-level table is `""`.
pub(crate) type KeysRead = BTreeMap<String, BTreeSet<&'static str>>;

/// The source text and the problems found in it so far.
pub(crate) struct Doc<'s> {
    /// Each file of the config with its range in `text` (the files end to
    /// end: see [`super::sources`]), the config given first.
    files: Vec<(PathBuf, Range<usize>)>,
    text: &'s str,
    /// Each problem with the offset it is at, to sort them by.
    problems: RefCell<Vec<(Option<usize>, Problem)>>,
    /// What is accepted but should be fixed (a secret file others can
    /// read): printed by `weir check`, logged at start and reload.
    warnings: RefCell<Vec<String>>,
    keys_read: RefCell<KeysRead>,
    /// The key unnamed client tokens are named with (`server.token_id_key_*`),
    /// read before the routes.
    pub(crate) token_id_key: RefCell<Option<crate::config::Secret>>,
}

impl<'s> Doc<'s> {
    /// A config of one file.
    pub(crate) fn new(file: &Path, text: &'s str) -> Self {
        Doc::of_files(vec![(file.to_path_buf(), 0..text.len())], text)
    }

    /// A config of several files laid end to end in `text`.
    pub(crate) fn of_files(files: Vec<(PathBuf, Range<usize>)>, text: &'s str) -> Self {
        Doc {
            files,
            text,
            problems: RefCell::new(Vec::new()),
            warnings: RefCell::new(Vec::new()),
            keys_read: RefCell::new(BTreeMap::new()),
            token_id_key: RefCell::new(None),
        }
    }

    /// Every key the readers asked for so far, whether or not it was set.
    #[cfg(test)]
    pub(crate) fn keys_read(&self) -> KeysRead {
        self.keys_read.borrow().clone()
    }

    /// Directory that a relative path written at `offset` is resolved
    /// against: that of the file it is written in.
    pub(crate) fn dir_at(&self, offset: usize) -> PathBuf {
        self.file_at(offset)
            .0
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// The file `offset` is in, with its range (the first file when none).
    fn file_at(&self, offset: usize) -> (&Path, Range<usize>) {
        let found = self
            .files
            .iter()
            .find(|(_, r)| r.contains(&offset) || r.end == offset)
            .or(self.files.first());
        found.map_or((Path::new(""), 0..0), |(p, r)| (p.as_path(), r.clone()))
    }

    /// `file:line` of an offset, for a message that points at a second place.
    pub(crate) fn place(&self, offset: usize) -> String {
        let (file, _) = self.file_at(offset);
        let (line, _) = self.position(offset);
        format!("{}:{line}", file.display())
    }

    /// The text written at `span`.
    fn source(&self, span: Range<usize>) -> &str {
        self.text.get(span).unwrap_or("the value")
    }

    /// Line and column of an offset in the file it is in.
    fn position(&self, offset: usize) -> (usize, usize) {
        let (_, range) = self.file_at(offset);
        // An offset inside a character counts from that character's start.
        let mut end = offset.min(self.text.len()).max(range.start);
        while end > range.start && !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let before = self.text.get(range.start..end).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let col = before
            .rfind('\n')
            .map_or(before.len(), |nl| before.len() - nl - 1)
            + 1;
        (line, col)
    }

    /// Record a problem at a byte span of the source.
    pub(crate) fn report(
        &self,
        span: Option<Range<usize>>,
        key: &str,
        message: String,
        fix: Option<String>,
    ) {
        let offset = span.map(|s| s.start);
        let file = self.file_at(offset.unwrap_or(0)).0.to_path_buf();
        let position = offset.map(|o| self.position(o));
        self.problems.borrow_mut().push((
            offset,
            Problem {
                file,
                position,
                key: key.to_string(),
                message,
                fix,
            },
        ));
    }

    /// Record a warning: the config loads, but says what to fix.
    pub(crate) fn warn(&self, warning: String) {
        self.warnings.borrow_mut().push(warning);
    }

    pub(crate) fn warnings(&self) -> Vec<String> {
        self.warnings.borrow().clone()
    }

    pub(crate) fn has_problems(&self) -> bool {
        !self.problems.borrow().is_empty()
    }

    /// Every problem, in the order they appear in the files.
    pub(crate) fn into_problems(self) -> Vec<Problem> {
        let mut problems = self.problems.into_inner();
        problems.sort_by_key(|(offset, _)| *offset);
        problems.into_iter().map(|(_, p)| p).collect()
    }
}

/// A value together with where it was written, so later validation can point
/// at it.
#[derive(Debug, Clone)]
pub(crate) struct At<T> {
    pub(crate) value: T,
    pub(crate) span: Range<usize>,
    pub(crate) key: String,
}

/// An item of a list of strings or tables.
pub(crate) enum Item<'a, 'i> {
    String(At<String>),
    Table(Section<'a, 'i>),
}

/// How a getter is told which key to read: by its declaration (a
/// [`Key`]), or, in the tables not declared yet, by its name.
pub(crate) trait KeyName: Copy {
    fn key_name(self) -> &'static str;
    /// The table a declared key is in.
    fn declared_in(self) -> Option<&'static str> {
        None
    }
}

impl KeyName for &'static str {
    fn key_name(self) -> &'static str {
        self
    }
}

impl KeyName for &Key {
    fn key_name(self) -> &'static str {
        self.name
    }
    fn declared_in(self) -> Option<&'static str> {
        Some(self.table)
    }
}

/// One TOML table being read. The keys its getters asked for are
/// remembered; the others are reported as unknown when it is dropped.
pub(crate) struct Section<'a, 'i> {
    doc: &'a Doc<'a>,
    table: &'a DeTable<'i>,
    path: String,
    span: Range<usize>,
    /// Keys asked for, in the order the reader asked.
    asked: RefCell<Vec<&'static str>>,
    /// Keys of another kind of table, looked at only to be refused by
    /// name: not unknown, and not listed among the keys known here.
    refused: RefCell<Vec<&'static str>>,
}

impl<'a, 'i> Section<'a, 'i> {
    /// Read `table`, found at `path`.
    pub(crate) fn new(
        doc: &'a Doc<'a>,
        table: &'a DeTable<'i>,
        path: &str,
        span: Range<usize>,
    ) -> Self {
        Section {
            doc,
            table,
            path: path.to_string(),
            span,
            asked: RefCell::new(Vec::new()),
            refused: RefCell::new(Vec::new()),
        }
    }

    /// The keys `read` asks for, learnt by running it on an empty table
    /// (whose problems are discarded). For a reader that asks for every
    /// key before it returns early, these are all the keys it accepts.
    pub(crate) fn keys_read_by(read: impl FnOnce(&Section<'_, '_>)) -> Vec<&'static str> {
        let doc = Doc::new(Path::new(""), "");
        let table = DeTable::new();
        let section = Section::new(&doc, &table, "", 0..0);
        read(&section);
        section.asked.take()
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Where the table is in the document.
    pub(crate) fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    pub(crate) fn doc(&self) -> &'a Doc<'a> {
        self.doc
    }

    /// A key's name; a declared key must be read in its own table (or in
    /// the nameless one of [`Section::keys_read_by`]).
    fn name_of(&self, key: impl KeyName) -> &'static str {
        if let Some(table) = key.declared_in() {
            debug_assert!(
                self.path.is_empty() || without_indices(&self.path) == table,
                "{} is declared in {table}, read in {}",
                key.key_name(),
                self.path
            );
        }
        key.key_name()
    }

    /// `key`'s value, remembering that the key was asked for.
    fn raw(&self, key: &'static str) -> Option<&'a Spanned<DeValue<'i>>> {
        let mut asked = self.asked.borrow_mut();
        if !asked.contains(&key) {
            asked.push(key);
        }
        self.table.get(key)
    }

    /// Whether `key` is present, whatever its value (this reads the key).
    pub(crate) fn raw_present(&self, key: impl KeyName) -> bool {
        self.raw(self.name_of(key)).is_some()
    }

    /// Whether `key`, a key of another kind of this table (another route
    /// kind's), is present; it is then the caller's to refuse by name, and
    /// it is never listed as a key known here.
    pub(crate) fn other_kinds_key_present(&self, key: &'static str) -> bool {
        let mut refused = self.refused.borrow_mut();
        if !refused.contains(&key) {
            refused.push(key);
        }
        self.table.contains_key(key)
    }

    /// Whether `key` holds a string (for a key that takes a string or a
    /// number; this reads the key).
    pub(crate) fn holds_string(&self, key: impl KeyName) -> bool {
        self.raw(self.name_of(key))
            .is_some_and(|v| v.get_ref().as_str().is_some())
    }

    pub(crate) fn key_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Report a problem with this section's `key` (or with the section when
    /// the key is absent).
    pub(crate) fn problem(&self, key: &str, message: impl Into<String>, fix: Option<String>) {
        let span = self
            .table
            .get(key)
            .map(Spanned::span)
            .unwrap_or(self.span.clone());
        self.doc
            .report(Some(span), &self.key_path(key), message.into(), fix);
    }

    fn wrong_type(&self, key: &str, value: &Spanned<DeValue<'i>>, expected: &str, example: &str) {
        self.doc.report(
            Some(value.span()),
            &self.key_path(key),
            format!("expected {expected}, found {}", value.get_ref().type_str()),
            Some(format!("write it like `{key} = {example}`")),
        );
    }

    /// A sub-table.
    pub(crate) fn table(&self, key: impl KeyName) -> Option<Section<'a, 'i>> {
        let key = self.name_of(key);
        let v = self.raw(key)?;
        match v.get_ref().as_table() {
            Some(t) => Some(Section::new(self.doc, t, &self.key_path(key), v.span())),
            None => {
                self.wrong_type(key, v, "a table", &format!("{{ ... }}` or `[{key}]"));
                None
            }
        }
    }

    /// An array of tables (`[[key]]`); a single table is accepted too.
    pub(crate) fn tables(&self, key: impl KeyName) -> Vec<Section<'a, 'i>> {
        let key = self.name_of(key);
        let Some(v) = self.raw(key) else {
            return Vec::new();
        };
        if let Some(t) = v.get_ref().as_table() {
            return vec![Section::new(self.doc, t, &self.key_path(key), v.span())];
        }
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "an array of tables", &format!("[[{key}]]"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", self.key_path(key));
            match item.get_ref().as_table() {
                Some(t) => out.push(Section::new(self.doc, t, &path, item.span())),
                None => self.doc.report(
                    Some(item.span()),
                    &path,
                    format!("expected a table, found {}", item.get_ref().type_str()),
                    None,
                ),
            }
        }
        out
    }

    /// A list whose items are each a string or a table (`servers =
    /// ["http://a", { url = "http://b", weight = 2 }]`, or `[[key]]`
    /// tables); other items are reported.
    pub(crate) fn strings_or_tables(&self, key: impl KeyName) -> Option<Vec<Item<'a, 'i>>> {
        let key = self.name_of(key);
        let v = self.raw(key)?;
        if let Some(t) = v.get_ref().as_table() {
            let section = Section::new(self.doc, t, &self.key_path(key), v.span());
            return Some(vec![Item::Table(section)]);
        }
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "a list", "[\"http://10.0.0.1:8080\", ...]");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", self.key_path(key));
            if let Some(s) = item.get_ref().as_str() {
                out.push(Item::String(At {
                    value: s.to_string(),
                    span: item.span(),
                    key: path,
                }));
            } else if let Some(t) = item.get_ref().as_table() {
                out.push(Item::Table(Section::new(self.doc, t, &path, item.span())));
            } else {
                self.doc.report(
                    Some(item.span()),
                    &path,
                    format!(
                        "expected a string or a table, found {}",
                        item.get_ref().type_str()
                    ),
                    None,
                );
            }
        }
        Some(out)
    }

    fn at<T>(&self, key: &str, v: &Spanned<DeValue<'i>>, value: T) -> At<T> {
        At {
            value,
            span: v.span(),
            key: self.key_path(key),
        }
    }
}

impl Drop for Section<'_, '_> {
    /// Report every key no getter asked for, and record the keys asked for.
    fn drop(&mut self) {
        let asked = self.asked.take();
        let refused = self.refused.take();
        for (key, _) in self.table.iter() {
            let name: &str = key.get_ref();
            if asked.contains(&name) || refused.contains(&name) {
                continue;
            }
            // Another proxy's name for a feature weir has: say where it is.
            let suggestion = super::hints::other_name(name)
                .map(|weir| format!("`{name}` is nginx's or Caddy's; weir's equivalent is {weir}"))
                .or_else(|| {
                    asked
                        .iter()
                        .map(|k| (strsim::jaro_winkler(k, name), *k))
                        .filter(|(score, _)| *score > 0.8)
                        .max_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, k)| format!("did you mean `{k}`?"))
                })
                .unwrap_or_else(|| format!("known keys here: {}", asked.join(", ")));
            self.doc.report(
                Some(key.span()),
                &join(&self.path, name),
                "unknown key".into(),
                Some(suggestion),
            );
        }
        self.doc
            .keys_read
            .borrow_mut()
            .entry(without_indices(&self.path))
            .or_default()
            .extend(asked);
    }
}

/// `route[2].upstreams[0]` → `route.upstreams`.
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

/// A duration as a config would write it: `"24h"`, `"2years"`.
pub(crate) fn duration_text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A size as a config would write it: the largest binary unit that divides
/// it exactly (`"16MiB"`), else bytes.
pub(crate) fn size_text(n: u64) -> String {
    const UNITS: [(u32, &str); 6] = [
        (60, "EiB"),
        (50, "PiB"),
        (40, "TiB"),
        (30, "GiB"),
        (20, "MiB"),
        (10, "KiB"),
    ];
    for (shift, unit) in UNITS {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

impl<T> At<T> {
    /// Report a problem with this value.
    pub(crate) fn problem(&self, doc: &Doc<'_>, message: impl Into<String>, fix: Option<String>) {
        doc.report(Some(self.span.clone()), &self.key, message.into(), fix);
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Parse TOML text into a spanned table, reporting every syntax error (a
/// config's files are parsed by [`super::sources`]; this is the readers'
/// tests').
#[cfg(test)]
pub(crate) fn parse<'i>(doc: &Doc<'_>, text: &'i str) -> Option<Spanned<DeTable<'i>>> {
    let (table, errors) = DeTable::parse_recoverable(text);
    if errors.is_empty() {
        return Some(table);
    }
    for e in errors {
        doc.report(
            e.span(),
            "",
            format!("TOML syntax: {}", e.message().trim()),
            None,
        );
    }
    None
}

mod values;

#[cfg(test)]
mod tests;
