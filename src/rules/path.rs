//! The path rewrite of a proxy route: its regex against the path as
//! routed (normalised, so `/a/../old/x` is rewritten as `/old/x` is), the
//! first match replaced, the query kept. `replace_prefix` is carried out
//! where `strip_prefix` is, in the proxy's URI rewrite.

use crate::config::RouteRules;

/// The path to forward after the rewrite: `forwarded` (the path when the
/// lifecycle changed it, else `None` for `routed` as sent), rewritten when
/// the route's regex matches. The replacement starts with `/` (checked at
/// load), and what it takes from the path is path text, so the result is
/// a path; the caller still parses it.
pub(crate) fn rewritten(
    rules: &RouteRules,
    forwarded: Option<String>,
    routed: &str,
) -> Option<String> {
    let Some(rewrite) = &rules.rewrite else {
        return forwarded;
    };
    let path = forwarded.as_deref().unwrap_or(routed);
    match rewrite.regex.replace(path, rewrite.to.as_str()) {
        std::borrow::Cow::Owned(new) => Some(new),
        // No match: the path goes on as it was.
        std::borrow::Cow::Borrowed(_) => forwarded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rewrite;

    fn rules(regex: &str, to: &str) -> RouteRules {
        RouteRules {
            rewrite: Some(Rewrite {
                regex: regex::Regex::new(regex).expect("regex"),
                to: to.into(),
            }),
            ..RouteRules::default()
        }
    }

    #[test]
    fn captures_fill_the_replacement_and_no_match_keeps_the_path() {
        let r = rules("^/old/(.*)$", "/new/${1}");
        assert_eq!(rewritten(&r, None, "/old/a/b").as_deref(), Some("/new/a/b"));
        assert_eq!(rewritten(&r, None, "/other"), None);
        assert_eq!(
            rewritten(&r, Some("/old/x".into()), "/ignored").as_deref(),
            Some("/new/x"),
            "the lifecycle's path wins over the one sent"
        );
    }
}
