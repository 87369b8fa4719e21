//! One sample line of the registry's text exposition, read back: what
//! the dashboard (`admin::dashboard::scrape`) and the OTLP metrics export
//! (`otlp_metrics`) show is what `/metrics` serves, from the same
//! counters, so nothing is counted twice and nothing is added to the
//! request path.

/// `name{a="x",b="y"} 1.5` or `name 1.5`, as read.
pub(crate) struct Line<'t> {
    pub(crate) name: &'t str,
    pub(crate) labels: Vec<(String, String)>,
    /// The value as written (a timestamp or exemplar after it is left
    /// out).
    pub(crate) value: &'t str,
}

/// A sample line; `None` for a comment or anything malformed.
pub(crate) fn line(text: &str) -> Option<Line<'_>> {
    if text.starts_with('#') {
        return None;
    }
    let (name, rest) = text.split_at(text.find(['{', ' '])?);
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(inner) => labels(inner)?,
        None => (Vec::new(), rest),
    };
    let value = rest.split_whitespace().next()?;
    Some(Line {
        name,
        labels,
        value,
    })
}

/// The labels after `{`, up to the closing `}`, and what follows it;
/// values unescaped (`\\`, `\"`, `\n`).
fn labels(mut text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut out = Vec::new();
    loop {
        text = text.trim_start_matches([',', ' ']);
        if let Some(rest) = text.strip_prefix('}') {
            return Some((out, rest));
        }
        let (key, rest) = text.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        out.push((key.trim().to_string(), value));
        text = rest.get(end + 1..)?;
    }
}
