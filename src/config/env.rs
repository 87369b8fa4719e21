//! Environment values in config strings: `"${VAR}"` and
//! `"${VAR:-default}"`, the syntax of POSIX shells and Docker Compose.
//!
//! Every string value of the document is expanded before the key that
//! holds it reads it, so the value is then checked by that key's rules (a
//! `${PORT}` in an address must still make an address). Keys are never
//! expanded. `$${` writes a literal `${`; any other `$` is kept as
//! written, so no string without `${` changes meaning.

use std::borrow::Cow;

/// Why a string could not be expanded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EnvProblem {
    /// `${NAME}` with no such variable and no default.
    Missing(String),
    /// The variable is set, but not to UTF-8 text.
    NotUnicode(String),
    /// `${` without its `}`, or a name that is not one.
    Malformed(String),
}

impl EnvProblem {
    /// The message and the fix a config problem shows.
    pub(crate) fn describe(&self) -> (String, String) {
        match self {
            EnvProblem::Missing(name) => (
                format!("the environment variable `{name}` is not set"),
                format!(
                    "set `{name}` in weir's environment, or give a default: `${{{name}:-value}}`"
                ),
            ),
            EnvProblem::NotUnicode(name) => (
                format!("the environment variable `{name}` is not UTF-8"),
                format!("set `{name}` to UTF-8 text"),
            ),
            EnvProblem::Malformed(why) => (
                why.clone(),
                "write `${NAME}` or `${NAME:-default}` (a name of letters, digits and `_`), \
                 or `$${` for a literal `${`"
                    .to_string(),
            ),
        }
    }
}

/// `text` with its `${...}` replaced, looking names up in weir's
/// environment; borrowed when there is nothing to replace.
pub(crate) fn expand(text: &str) -> Result<Cow<'_, str>, EnvProblem> {
    expand_with(text, |name| match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(EnvProblem::NotUnicode(name.to_string())),
    })
}

/// [`expand`] with its lookup given (for tests).
fn expand_with(
    text: &str,
    lookup: impl Fn(&str) -> Result<Option<String>, EnvProblem>,
) -> Result<Cow<'_, str>, EnvProblem> {
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let Some(end) = tail.find('}') else {
                return Err(EnvProblem::Malformed(format!(
                    "`${{` without its `}}` in `{text}`"
                )));
            };
            let inner = &tail[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            if !is_name(name) {
                return Err(EnvProblem::Malformed(format!(
                    "`{name}` is not an environment variable name"
                )));
            }
            // As in the shell, `:-` also stands in for a variable set empty.
            match (lookup(name)?, default) {
                (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => return Err(EnvProblem::Missing(name.to_string())),
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

/// A portable environment variable name: a letter or `_`, then letters,
/// digits and `_`.
fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Result<Option<String>, EnvProblem> {
        Ok(match name {
            "PORT" => Some("8080".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        })
    }

    fn x(text: &str) -> Result<String, EnvProblem> {
        expand_with(text, lookup).map(Cow::into_owned)
    }

    #[test]
    fn variables_and_defaults_are_replaced() {
        assert_eq!(x("127.0.0.1:${PORT}"), Ok("127.0.0.1:8080".into()));
        assert_eq!(x("${NOPE:-9000}/${PORT:-1}"), Ok("9000/8080".into()));
        assert_eq!(x("${EMPTY:-fallback}"), Ok("fallback".into()));
        assert_eq!(x("${EMPTY}"), Ok(String::new()));
        assert_eq!(x("${NOPE:-}"), Ok(String::new()));
    }

    #[test]
    fn a_string_without_a_reference_is_kept_as_written() {
        for s in ["", "a$b", "$", "$$", "^/api$", "pa$$word", "{host}"] {
            assert!(matches!(expand_with(s, lookup), Ok(Cow::Borrowed(b)) if b == s));
        }
        assert_eq!(x("$${PORT} costs $5"), Ok("${PORT} costs $5".into()));
    }

    #[test]
    fn a_missing_variable_or_a_bad_reference_is_named() {
        assert_eq!(x("${NOPE}"), Err(EnvProblem::Missing("NOPE".into())));
        assert!(matches!(x("${PORT"), Err(EnvProblem::Malformed(_))));
        assert!(matches!(x("${1X}"), Err(EnvProblem::Malformed(_))));
        assert!(matches!(x("${}"), Err(EnvProblem::Malformed(_))));
        assert!(matches!(x("${A B}"), Err(EnvProblem::Malformed(_))));
    }
}
