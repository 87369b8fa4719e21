//! A typed reader over a spanned TOML document that never stops at the
//! first problem.
//!
//! serde stops at the first error, so a config with five mistakes would take
//! five edit-check rounds. Instead the document is parsed once with spans
//! (`toml::de::DeTable`) and every section is read through a [`Section`],
//! which records each problem (unknown key, wrong type, bad value) with its
//! line and column and carries on. Callers get `Option<T>` back and build
//! the validated config from whatever was readable.

use std::cell::RefCell;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One thing wrong with a config file, located as precisely as we can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    /// 1-based line and column; `None` when the problem has no single place.
    pub position: Option<(usize, usize)>,
    /// Dotted key path such as `route[2].upstream`.
    pub key: String,
    pub message: String,
    /// How to fix it, when there is an obvious fix.
    pub fix: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

/// Every problem found in one config, reported together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} problem{} in the configuration:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.0 {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// The source text and the problems found in it so far.
pub struct Doc<'s> {
    file: PathBuf,
    text: &'s str,
    problems: RefCell<Vec<Problem>>,
}

impl<'s> Doc<'s> {
    pub fn new(file: &Path, text: &'s str) -> Self {
        Doc {
            file: file.to_path_buf(),
            text,
            problems: RefCell::new(Vec::new()),
        }
    }

    /// Directory that relative paths in the config are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        self.file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rfind('\n')
            .map_or(before.len(), |nl| before.len() - nl - 1)
            + 1;
        (line, col)
    }

    /// Record a problem at a byte span of the source.
    pub fn report(
        &self,
        span: Option<Range<usize>>,
        key: &str,
        message: String,
        fix: Option<String>,
    ) {
        let position = span.map(|s| self.position(s.start));
        self.problems.borrow_mut().push(Problem {
            file: self.file.clone(),
            position,
            key: key.to_string(),
            message,
            fix,
        });
    }

    pub fn has_problems(&self) -> bool {
        !self.problems.borrow().is_empty()
    }

    /// Every problem, in the order they appear in the file.
    pub fn into_problems(self) -> Vec<Problem> {
        let mut problems = self.problems.into_inner();
        problems.sort_by_key(|p| p.position);
        problems
    }
}

/// A value together with where it was written, so later validation can point
/// at it.
#[derive(Debug, Clone)]
pub struct At<T> {
    pub value: T,
    pub span: Range<usize>,
    pub key: String,
}

/// One TOML table being read. Unknown keys are reported on construction.
pub struct Section<'a, 'i> {
    doc: &'a Doc<'a>,
    table: &'a DeTable<'i>,
    path: String,
    span: Range<usize>,
}

impl<'a, 'i> Section<'a, 'i> {
    /// Read `table` (found at `path`) accepting only `known` keys.
    pub fn new(
        doc: &'a Doc<'a>,
        table: &'a DeTable<'i>,
        path: &str,
        span: Range<usize>,
        known: &[&str],
    ) -> Self {
        for (key, _) in table.iter() {
            let name: &str = key.get_ref();
            if !known.contains(&name) {
                let suggestion = known
                    .iter()
                    .map(|k| (strsim::jaro_winkler(k, name), *k))
                    .filter(|(score, _)| *score > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, k)| format!("did you mean `{k}`?"))
                    .unwrap_or_else(|| format!("known keys here: {}", known.join(", ")));
                doc.report(
                    Some(key.span()),
                    &join(path, name),
                    "unknown key".into(),
                    Some(suggestion),
                );
            }
        }
        Section {
            doc,
            table,
            path: path.to_string(),
            span,
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn doc(&self) -> &'a Doc<'a> {
        self.doc
    }

    fn raw(&self, key: &str) -> Option<&'a Spanned<DeValue<'i>>> {
        self.table.get(key)
    }

    /// Whether `key` is present, whatever its value.
    pub fn raw_present(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    pub fn key_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Report a problem with this section's `key` (or with the section when
    /// the key is absent).
    pub fn problem(&self, key: &str, message: impl Into<String>, fix: Option<String>) {
        let span = self
            .raw(key)
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

    pub fn string(&self, key: &str) -> Option<At<String>> {
        let v = self.raw(key)?;
        match v.get_ref().as_str() {
            Some(s) => Some(self.at(key, v, s.to_string())),
            None => {
                self.wrong_type(key, v, "a string", "\"...\"");
                None
            }
        }
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        let v = self.raw(key)?;
        match v.get_ref().as_bool() {
            Some(b) => Some(b),
            None => {
                self.wrong_type(key, v, "true or false", "true");
                None
            }
        }
    }

    /// A non-negative integer no larger than `max`.
    pub fn uint(&self, key: &str, max: u64) -> Option<u64> {
        let v = self.raw(key)?;
        let Some(int) = v.get_ref().as_integer() else {
            self.wrong_type(key, v, "an integer", "10");
            return None;
        };
        match u64::from_str_radix(int.as_str(), int.radix()) {
            Ok(n) if n <= max => Some(n),
            _ => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("{} is out of range", int.as_str()),
                    Some(format!("use a whole number from 0 to {max}")),
                );
                None
            }
        }
    }

    /// A duration written like `"10s"`, `"500ms"` or `"1m 30s"`.
    pub fn duration(&self, key: &str) -> Option<Duration> {
        let v = self.raw(key)?;
        let Some(s) = v.get_ref().as_str() else {
            self.wrong_type(key, v, "a duration string", "\"10s\"");
            return None;
        };
        match humantime::parse_duration(s) {
            Ok(d) => Some(d),
            Err(e) => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("`{s}` is not a duration: {e}"),
                    Some("write it like \"10s\", \"500ms\" or \"2m\"".into()),
                );
                None
            }
        }
    }

    /// A byte size written as an integer or a string like `"10MiB"`.
    pub fn size(&self, key: &str) -> Option<u64> {
        let v = self.raw(key)?;
        if v.get_ref().is_integer() {
            return self.uint(key, u64::MAX);
        }
        let Some(s) = v.get_ref().as_str() else {
            self.wrong_type(key, v, "a size", "\"10MiB\"");
            return None;
        };
        match s.parse::<bytesize::ByteSize>() {
            Ok(b) => Some(b.as_u64()),
            Err(e) => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("`{s}` is not a size: {e}"),
                    Some("write it like \"512KiB\", \"10MiB\" or a number of bytes".into()),
                );
                None
            }
        }
    }

    /// A list of strings; a single string is accepted as a list of one.
    pub fn string_list(&self, key: &str) -> Option<Vec<At<String>>> {
        let v = self.raw(key)?;
        if let Some(s) = v.get_ref().as_str() {
            return Some(vec![self.at(key, v, s.to_string())]);
        }
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "a list of strings", "[\"...\"]");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.get_ref().as_str() {
                Some(s) => out.push(At {
                    value: s.to_string(),
                    span: item.span(),
                    key: format!("{}[{i}]", self.key_path(key)),
                }),
                None => self.doc.report(
                    Some(item.span()),
                    &format!("{}[{i}]", self.key_path(key)),
                    format!("expected a string, found {}", item.get_ref().type_str()),
                    None,
                ),
            }
        }
        Some(out)
    }

    /// A list of integers, each no larger than `max`.
    pub fn uint_list(&self, key: &str, max: u64) -> Option<Vec<At<u64>>> {
        let v = self.raw(key)?;
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "a list of integers", "[429, 503]");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", self.key_path(key));
            let parsed = item
                .get_ref()
                .as_integer()
                .and_then(|int| u64::from_str_radix(int.as_str(), int.radix()).ok())
                .filter(|n| *n <= max);
            match parsed {
                Some(n) => out.push(At {
                    value: n,
                    span: item.span(),
                    key: path,
                }),
                None => self.doc.report(
                    Some(item.span()),
                    &path,
                    "expected a whole number in range".into(),
                    Some(format!("use a number from 0 to {max}")),
                ),
            }
        }
        Some(out)
    }

    /// A sub-table.
    pub fn table(&self, key: &str, known: &[&str]) -> Option<Section<'a, 'i>> {
        let v = self.raw(key)?;
        match v.get_ref().as_table() {
            Some(t) => Some(Section::new(
                self.doc,
                t,
                &self.key_path(key),
                v.span(),
                known,
            )),
            None => {
                self.wrong_type(key, v, "a table", &format!("{{ ... }}` or `[{key}]"));
                None
            }
        }
    }

    /// An array of tables (`[[key]]`); a single table is accepted too.
    pub fn tables(&self, key: &str, known: &[&str]) -> Vec<Section<'a, 'i>> {
        let Some(v) = self.raw(key) else {
            return Vec::new();
        };
        if let Some(t) = v.get_ref().as_table() {
            return vec![Section::new(
                self.doc,
                t,
                &self.key_path(key),
                v.span(),
                known,
            )];
        }
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "an array of tables", &format!("[[{key}]]"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", self.key_path(key));
            match item.get_ref().as_table() {
                Some(t) => out.push(Section::new(self.doc, t, &path, item.span(), known)),
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

    fn at<T>(&self, key: &str, v: &Spanned<DeValue<'i>>, value: T) -> At<T> {
        At {
            value,
            span: v.span(),
            key: self.key_path(key),
        }
    }
}

impl<T> At<T> {
    /// Report a problem with this value.
    pub fn problem(&self, doc: &Doc<'_>, message: impl Into<String>, fix: Option<String>) {
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

/// Parse TOML text into a spanned table, reporting every syntax error.
pub fn parse<'i>(doc: &Doc<'_>, text: &'i str) -> Option<Spanned<DeTable<'i>>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read<F: FnOnce(&Section<'_, '_>)>(text: &str, known: &[&str], f: F) -> Vec<Problem> {
        let doc = Doc::new(Path::new("t.toml"), text);
        if let Some(t) = parse(&doc, text) {
            let s = Section::new(&doc, t.get_ref(), "", t.span(), known);
            f(&s);
        }
        doc.into_problems()
    }

    #[test]
    fn unknown_keys_are_reported_with_position_and_suggestion() {
        let p = read(
            "a = 1\nconect_timeout = \"1s\"\n",
            &["a", "connect_timeout"],
            |_| {},
        );
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].position, Some((2, 1)));
        assert_eq!(p[0].key, "conect_timeout");
        assert!(p[0].fix.as_deref().unwrap().contains("connect_timeout"));
    }

    #[test]
    fn all_problems_are_collected() {
        let p = read("d = \"ten\"\nn = \"x\"\nz = 3\n", &["d", "n"], |s| {
            assert!(s.duration("d").is_none());
            assert!(s.uint("n", 10).is_none());
        });
        assert_eq!(p.len(), 3, "{p:?}");
    }

    #[test]
    fn durations_and_sizes_parse() {
        let p = read(
            "d = \"1m 30s\"\ns = \"2MiB\"\nb = 512\n",
            &["d", "s", "b"],
            |s| {
                assert_eq!(s.duration("d"), Some(Duration::from_secs(90)));
                assert_eq!(s.size("s"), Some(2 * 1024 * 1024));
                assert_eq!(s.size("b"), Some(512));
            },
        );
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn syntax_errors_have_positions() {
        let p = read("a = 1\nb = \n", &["a", "b"], |_| {});
        assert!(!p.is_empty());
        assert_eq!(p[0].position.map(|x| x.0), Some(2));
    }

    #[test]
    fn out_of_range_integer() {
        let p = read("n = 70000\n", &["n"], |s| {
            assert!(s.uint("n", 65535).is_none());
        });
        assert_eq!(p.len(), 1);
        assert!(
            p[0].to_string()
                .contains("t.toml:1:5: n: 70000 is out of range")
        );
    }
}
