//! Header rules carried out: on the request as it goes to the upstream
//! (after weir's own forwarding headers, so a rule has the last word),
//! and on every response of the route, weir's own errors included (as
//! nginx's `add_header … always`).

use http::HeaderMap;

use super::Facts;
use crate::config::{HeaderAction, HeaderRule, HeaderRules};

/// The request to the upstream: the request id in its header, then the
/// route's request rules.
pub(crate) fn to_upstream(headers: &mut HeaderMap, rules: &HeaderRules, facts: &Facts) {
    if let (Some(name), Some(id)) = (&rules.request_id_header, &facts.request_id) {
        headers.insert(name.clone(), id.clone());
    }
    apply(headers, &rules.request, facts);
}

/// The response to the client.
pub(crate) fn to_client(headers: &mut HeaderMap, rules: &HeaderRules, facts: &Facts) {
    apply(headers, &rules.response, facts);
}

/// Rules in order. A value a fact made invalid skips its rule (logged at
/// debug: the client chose the bytes).
fn apply(headers: &mut HeaderMap, rules: &[HeaderRule], facts: &Facts) {
    for rule in rules {
        let value = match (&rule.value, rule.action) {
            (_, HeaderAction::Remove) | (None, _) => {
                headers.remove(&rule.name);
                continue;
            }
            (Some(template), _) => facts.header_value(template),
        };
        let Some(value) = value else {
            tracing::debug!(header = %rule.name, "header rule skipped: the value is not header text");
            continue;
        };
        match rule.action {
            HeaderAction::Set => {
                headers.insert(rule.name.clone(), value);
            }
            HeaderAction::Add => {
                headers.append(rule.name.clone(), value);
            }
            HeaderAction::Remove => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Fact, Template};
    use http::HeaderValue;
    use http::header::HeaderName;

    fn rule(action: HeaderAction, name: &'static str, value: Option<&str>) -> HeaderRule {
        HeaderRule {
            action,
            name: HeaderName::from_static(name),
            value: value.map(|v| Template::parse(v, &Fact::ALL).expect("valid")),
        }
    }

    #[test]
    fn remove_set_add_and_a_skipped_value() {
        let mut f = super::super::tests::facts();
        f.path = "/bad\nline".into();
        let rules = HeaderRules {
            request: vec![
                rule(HeaderAction::Remove, "x-gone", None),
                rule(HeaderAction::Set, "x-one", Some("{client_ip}")),
                rule(HeaderAction::Add, "x-many", Some("b")),
                rule(HeaderAction::Set, "x-path", Some("{path}")),
            ],
            response: vec![],
            request_id_header: Some(HeaderName::from_static("x-request-id")),
        };
        let mut h = HeaderMap::new();
        h.insert("x-gone", HeaderValue::from_static("1"));
        h.append("x-one", HeaderValue::from_static("old1"));
        h.append("x-one", HeaderValue::from_static("old2"));
        h.insert("x-many", HeaderValue::from_static("a"));
        h.insert("x-path", HeaderValue::from_static("kept"));
        to_upstream(&mut h, &rules, &f);
        assert!(!h.contains_key("x-gone"));
        assert_eq!(
            h.get_all("x-one").iter().collect::<Vec<_>>(),
            ["2001:db8::1"]
        );
        assert_eq!(h.get_all("x-many").iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(
            h["x-path"], "kept",
            "a rule whose value is not header text is skipped"
        );
        assert_eq!(h["x-request-id"], "abc");
    }
}
