//! Which API an LLM upstream speaks: its `protocol` key, or the route's
//! own, and why a route cannot be served by the one it names.

use super::super::*;

/// The API an upstream speaks, from its `protocol` key.
pub(super) fn upstream_api(u: &Section<'_, '_>, route: Protocol) -> Option<UpstreamApi> {
    let p = u.string("protocol");
    let asked = match p.as_ref().map(|p| p.value.as_str()) {
        None => None,
        Some(name) => match UpstreamApi::from_name(name) {
            Some(api) => Some(api),
            None => {
                u.problem(
                    "protocol",
                    format!("unknown protocol `{name}`"),
                    Some(format!(
                        "use {}",
                        super::super::names(UpstreamApi::ALL.map(UpstreamApi::name))
                    )),
                );
                return None;
            }
        },
    };
    match serving_api(route, asked) {
        Ok(api) => Some(api),
        Err(Refused { message, fix }) => {
            u.problem("protocol", message, Some(fix));
            None
        }
    }
}

/// Why a route cannot be served by an upstream API.
#[derive(Debug, PartialEq)]
struct Refused {
    message: String,
    fix: String,
}

/// Which upstream API serves a route of protocol `route`: `asked` (the
/// upstream's `protocol` key) or, without one, the route's own. The rule
/// is the wire module's (`Protocol::upstream_api`); the fix names the APIs
/// that would do.
fn serving_api(route: Protocol, asked: Option<UpstreamApi>) -> Result<UpstreamApi, Refused> {
    route.upstream_api(asked).map_err(|message| {
        // The APIs of the service asked for: OpenAI's, or Azure's.
        let azure = asked.is_some_and(UpstreamApi::is_azure);
        let apis: Vec<&str> = UpstreamApi::ALL
            .into_iter()
            .filter(|a| a.is_specific() && !route.is_native(*a) && a.is_azure() == azure)
            // Bedrock and Vertex AI are services of their own, not one
            // API of a family.
            .filter(|a| !matches!(a, UpstreamApi::Bedrock | UpstreamApi::Vertex))
            .map(UpstreamApi::name)
            .collect();
        let quoted: Vec<String> = apis.iter().map(|n| format!("\"{n}\"")).collect();
        Refused {
            message,
            fix: format!("use {}", quoted.join(" or ")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::problems;
    use super::*;

    #[test]
    fn an_anthropic_route_must_name_the_openai_api() {
        assert_eq!(
            serving_api(Protocol::Anthropic, None),
            Ok(UpstreamApi::Anthropic)
        );
        assert_eq!(serving_api(Protocol::OpenAi, None), Ok(UpstreamApi::OpenAi));
        assert_eq!(
            serving_api(Protocol::OpenAi, Some(UpstreamApi::Anthropic)),
            Ok(UpstreamApi::Anthropic)
        );
        assert!(serving_api(Protocol::Anthropic, Some(UpstreamApi::OpenAi)).is_err());
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\nprotocol = \"openai\"\n",
        );
        assert_eq!(
            p,
            [
                "w.toml:8:12: route[0].upstreams[0].protocol: `openai` names more than one API; \
              on a route of kind `anthropic` say which one the upstream is translated to \
              (fix: use \"openai_responses\" or \"openai_chat\")"
            ]
        );
    }
}
