//! A route's rules: `[route.request_headers]` and `[route.response_headers]`
//! (`set`, `add`, `remove`), `request_id_header`, the path rewrite
//! (`rewrite_regex` + `rewrite_to`, `replace_prefix`) and the `redirect`
//! route kind. Every template is parsed here, once; a rule weir could not
//! carry out safely (a framing header, a value with a control byte, an
//! unknown placeholder) is a problem with its position and a fix.

use http::StatusCode;
use http::header::{self, HeaderName, HeaderValue};

use super::*;

/// The largest compiled rewrite regex: an operator's pattern, but a typo
/// such as `(a{1000}){1000}` must not take the memory of the process.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Headers no rule may touch: they frame the message or the connection
/// (RFC 9110 §7.6.1, RFC 9112 §6), and weir sets them itself.
const FRAMING: [HeaderName; 8] = [
    header::CONNECTION,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TE,
    header::TRAILER,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

/// Which side of the proxy a header table is for.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Request,
    Response,
}

/// `[route.response_headers]`, read on every route kind.
pub(super) fn response_headers(t: &Section<'_, '_>) -> Vec<HeaderRule> {
    t.table("response_headers")
        .map(|s| header_table(&s, Side::Response))
        .unwrap_or_default()
}

/// What a proxy route's rules read: `[route.request_headers]`,
/// `request_id_header`, the rewrite and `replace_prefix`.
pub(super) fn proxy_rules(t: &Section<'_, '_>) -> RouteRules {
    let request = t
        .table("request_headers")
        .map(|s| header_table(&s, Side::Request))
        .unwrap_or_default();
    let request_id_header =
        t.string("request_id_header").and_then(|h| {
            match HeaderName::from_bytes(h.value.as_bytes()) {
                Ok(name) if !FRAMING.contains(&name) && name != header::HOST => Some(name),
                _ => {
                    h.problem(
                        t.doc(),
                        format!("`{}` cannot carry the request id", h.value),
                        Some("name an end-to-end header, such as \"X-Request-Id\"".into()),
                    );
                    None
                }
            }
        });
    let headers = (!request.is_empty() || request_id_header.is_some()).then(|| HeaderRules {
        request,
        response: Vec::new(),
        request_id_header,
    });
    RouteRules {
        headers,
        rewrite: rewrite(t),
        replace_prefix: replace_prefix(t),
    }
}

/// `set`, `add` and `remove` of one header table, in that order of
/// application: removes, sets, adds.
fn header_table(s: &Section<'_, '_>, side: Side) -> Vec<HeaderRule> {
    let mut rules = Vec::new();
    for item in s.string_list("remove").unwrap_or_default() {
        if let Some(name) = rule_name(s, &item, &item.value, HeaderAction::Remove, side) {
            rules.push(HeaderRule {
                action: HeaderAction::Remove,
                name,
                value: None,
            });
        }
    }
    for action in [HeaderAction::Set, HeaderAction::Add] {
        let key = match action {
            HeaderAction::Set => "set",
            _ => "add",
        };
        for item in s.string_list(key).unwrap_or_default() {
            let Some((name, value)) = item.value.split_once(':') else {
                item.problem(
                    s.doc(),
                    format!("`{}` has no `:` between the name and the value", item.value),
                    Some("write \"Name: value\"".into()),
                );
                continue;
            };
            let name = rule_name(s, &item, name.trim(), action, side);
            let value = rule_value(s, &item, value.trim());
            if let (Some(name), Some(value)) = (name, value) {
                rules.push(HeaderRule {
                    action,
                    name,
                    value: Some(value),
                });
            }
        }
    }
    rules
}

/// A rule's header name, if a rule may touch it.
fn rule_name(
    s: &Section<'_, '_>,
    item: &At<String>,
    name: &str,
    action: HeaderAction,
    side: Side,
) -> Option<HeaderName> {
    let Ok(parsed) = HeaderName::from_bytes(name.as_bytes()) else {
        item.problem(
            s.doc(),
            format!("`{name}` is not a header name"),
            Some("use letters, digits and `-`, such as \"X-Frame-Options\"".into()),
        );
        return None;
    };
    if FRAMING.contains(&parsed) {
        item.problem(
            s.doc(),
            format!("`{name}` frames the message; weir sets it and no rule may"),
            Some("remove the rule".into()),
        );
        return None;
    }
    // Host may be set upstream (nginx's `proxy_set_header Host`), never
    // added (two Host lines) or removed (HTTP/1.1 requires one).
    if parsed == header::HOST && (side == Side::Response || action != HeaderAction::Set) {
        item.problem(
            s.doc(),
            "`Host` can only be set, on the request",
            Some(
                "use `set = [\"Host: name\"]` in `[route.request_headers]`, or `preserve_host`"
                    .into(),
            ),
        );
        return None;
    }
    Some(parsed)
}

/// A rule's value: its text must be header text; the facts it names are
/// checked per request.
fn rule_value(s: &Section<'_, '_>, item: &At<String>, value: &str) -> Option<Template> {
    let template = match Template::parse(value, &Fact::ALL) {
        Ok(t) => t,
        Err(message) => {
            item.problem(
                s.doc(),
                message,
                Some(format!(
                    "placeholders are {}",
                    Template::placeholders(&Fact::ALL)
                )),
            );
            return None;
        }
    };
    let text_ok = template.pieces.iter().all(|p| match p {
        Piece::Text(text) => text.is_ascii() && HeaderValue::from_str(text).is_ok(),
        Piece::Fact(_) => true,
    });
    if !text_ok {
        item.problem(
            s.doc(),
            "the value holds a byte a header value cannot (a control character or non-ASCII)",
            Some("write printable ASCII".into()),
        );
        return None;
    }
    Some(template)
}

/// `rewrite_regex` and `rewrite_to`, both or neither.
fn rewrite(t: &Section<'_, '_>) -> Option<Rewrite> {
    let regex = t.string("rewrite_regex");
    let to = t.string("rewrite_to");
    let (regex, to) = match (regex, to) {
        (Some(r), Some(to)) => (r, to),
        (None, None) => return None,
        (Some(_), None) => {
            t.problem(
                "rewrite_regex",
                "needs `rewrite_to`",
                Some("add `rewrite_to = \"/new/$1\"`".into()),
            );
            return None;
        }
        (None, Some(_)) => {
            t.problem(
                "rewrite_to",
                "needs `rewrite_regex`",
                Some("add `rewrite_regex = \"^/old/(.*)$\"`".into()),
            );
            return None;
        }
    };
    let compiled = regex::RegexBuilder::new(&regex.value)
        .size_limit(REGEX_SIZE_LIMIT)
        .build();
    let compiled = match compiled {
        Ok(r) => Some(r),
        Err(e) => {
            let first = e.to_string();
            let first = first.lines().last().unwrap_or("invalid").trim().to_string();
            regex.problem(
                t.doc(),
                format!("not a regex weir can use: {first}"),
                Some("write a regex as the `regex` crate reads it, such as \"^/old/(.*)$\"".into()),
            );
            None
        }
    };
    let path_ok = to.value.starts_with('/') && path_text(&to.value);
    if !path_ok {
        to.problem(
            t.doc(),
            "the rewritten path must start with `/` and hold only path characters (no `?`, `#` or spaces)",
            Some("write a path such as \"/new/$1\"; the query is kept as sent".into()),
        );
    }
    compiled.filter(|_| path_ok).map(|regex| Rewrite {
        regex,
        to: to.value,
    })
}

/// `replace_prefix`: a path put in place of the matched route prefix.
fn replace_prefix(t: &Section<'_, '_>) -> Option<String> {
    let p = t.string("replace_prefix")?;
    if !p.value.starts_with('/') || !path_text(&p.value) || p.value.contains('$') {
        p.problem(
            t.doc(),
            "a prefix must start with `/` and hold only path characters",
            Some("write a path such as \"/v2\"".into()),
        );
        return None;
    }
    // `/v2/` + `/users` would give `//users`.
    Some(p.value.trim_end_matches('/').to_string())
}

/// Whether `text` holds only what a URI path may (RFC 3986 `pchar` and
/// `/`; `%` escapes as written), with `$` and `{}` for replacements.
fn path_text(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%{}".contains(&b))
}

/// A `redirect` route: `redirect` (the target), `redirect_status`,
/// `redirect_keep_query`.
pub(super) fn redirect(t: &Section<'_, '_>) -> Option<RedirectRoute> {
    let to = t.string("redirect");
    let status = t.uint_in("redirect_status", 999);
    let keep_query = t.bool("redirect_keep_query").unwrap_or(true);
    let status = match status {
        None => StatusCode::MOVED_PERMANENTLY,
        Some(s @ (301 | 302 | 303 | 307 | 308)) => {
            StatusCode::from_u16(s as u16).unwrap_or(StatusCode::MOVED_PERMANENTLY)
        }
        Some(s) => {
            t.problem(
                "redirect_status",
                format!("{s} is not a redirect status"),
                Some("use 301, 302, 303, 307 or 308".into()),
            );
            return None;
        }
    };
    let to = to?;
    const FACTS: [Fact; 4] = [Fact::Host, Fact::Path, Fact::Query, Fact::Scheme];
    let template = match Template::parse(&to.value, &FACTS) {
        Ok(template) => template,
        Err(message) => {
            to.problem(
                t.doc(),
                message,
                Some(format!(
                    "a redirect may use {}",
                    Template::placeholders(&FACTS)
                )),
            );
            return None;
        }
    };
    let text_ok = template.pieces.iter().all(|p| match p {
        Piece::Text(text) => HeaderValue::from_str(text).is_ok() && !text.contains(' '),
        Piece::Fact(_) => true,
    });
    if !text_ok || template.pieces.is_empty() {
        to.problem(
            t.doc(),
            "not a redirect target: it must be a URL or a path, without spaces or control bytes",
            Some("write a target such as \"https://example.com{path}\"".into()),
        );
        return None;
    }
    let writes_query = template.names(Fact::Query)
        || template
            .pieces
            .iter()
            .any(|p| matches!(p, Piece::Text(text) if text.contains('?')));
    Some(RedirectRoute {
        to: template,
        status,
        keep_query: keep_query && !writes_query,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;

    #[test]
    fn header_rules_read_in_order_and_refuse_framing_headers() {
        let c = parse(
            Path::new("w.toml"),
            &format!(
                "{MINIMAL}request_id_header = \"X-Request-Id\"\n\
                 [route.request_headers]\nadd = [\"X-A: {{client_ip}}\"]\nset = [\"Host: internal\"]\nremove = [\"X-B\"]\n\
                 [route.response_headers]\nset = [\"X-Frame-Options: DENY\"]\n"
            ),
        )
        .expect("valid");
        let rules = c.routes[0].rules.as_ref().expect("rules");
        let h = rules.headers.as_ref().expect("headers");
        let actions: Vec<_> = h
            .request
            .iter()
            .map(|r| (r.action, r.name.as_str()))
            .collect();
        assert_eq!(
            actions,
            [
                (HeaderAction::Remove, "x-b"),
                (HeaderAction::Set, "host"),
                (HeaderAction::Add, "x-a"),
            ]
        );
        assert_eq!(h.response.len(), 1);
        assert!(h.needs_request_id());

        let p = problems(&format!(
            "{MINIMAL}[route.request_headers]\nset = [\"Content-Length: 1\", \"X-A: {{nope}}\", \"Bad Name: x\", \"X-C\"]\nadd = [\"Host: x\"]\n\
             [route.response_headers]\nremove = [\"Transfer-Encoding\"]\nset = [\"X-D: caf\u{e9}\"]\n"
        ));
        assert_eq!(p.len(), 7, "{p:#?}");
        assert!(
            p[0].contains("`content-length` frames the message")
                || p[0].contains("`Content-Length` frames"),
            "{}",
            p[0]
        );
        assert!(p[1].contains("unknown placeholder `{nope}`"), "{}", p[1]);
        assert!(p[2].contains("`Bad Name` is not a header name"), "{}", p[2]);
        assert!(p[3].contains("has no `:`"), "{}", p[3]);
        assert!(p[4].contains("`Host` can only be set"), "{}", p[4]);
        assert!(p[5].contains("frames the message"), "{}", p[5]);
        assert!(p[6].contains("a header value cannot"), "{}", p[6]);
    }

    #[test]
    fn rewrites_and_redirects_are_checked_at_load() {
        let p = problems(&format!(
            "{MINIMAL}rewrite_regex = \"^/(a\"\nrewrite_to = \"new/$1\"\nreplace_prefix = \"v2\"\n"
        ));
        assert_eq!(p.len(), 3, "{p:#?}");
        assert!(
            p[0].contains("route[0].rewrite_regex: not a regex"),
            "{}",
            p[0]
        );
        assert!(p[1].contains("must start with `/`"), "{}", p[1]);
        assert!(p[2].contains("route[0].replace_prefix"), "{}", p[2]);
        // Unicode `\w` a hundred times compiles to over 1 MiB (under the
        // regex crate's own 10 MiB default); ASCII classes stay small.
        let ascii =
            format!("{MINIMAL}rewrite_regex = \"^/[a-z0-9_]{{100}}$\"\nrewrite_to = \"/x\"\n");
        assert!(parse(Path::new("w.toml"), &ascii).is_ok());
        let huge = problems(&format!(
            "{MINIMAL}rewrite_regex = \"\\\\w{{100}}\"\nrewrite_to = \"/x\"\n"
        ));
        assert!(
            huge.len() == 1 && huge[0].contains("size limit"),
            "{huge:#?}"
        );
    }
}
