//! What an Azure OpenAI upstream (`protocol = "azure"`, `"azure_responses"`
//! or `"azure_chat"`) reads beside the keys every LLM upstream has: its
//! surface (`api_version`), its resource URL, and the deployment names
//! its model entries send.

use super::*;
use weir_wire::azure::Surface;

/// Whether `model`, the id a model entry sends `upstream`, can name an
/// Azure deployment (any id can name another upstream's model).
pub(super) fn deployment_fits(upstream: &LlmUpstreamConfig, model: Option<&str>) -> bool {
    !upstream.api.is_azure() || model.is_none_or(weir_wire::azure::is_deployment_name)
}

/// An Azure OpenAI upstream's surface, from its `api_version` (the v1 API
/// when unset): `Some(None)` for an upstream of another API (which must
/// not set it), `None` when reported.
pub(super) fn surface(u: &Section<'_, '_>, api: Option<UpstreamApi>) -> Option<Option<Surface>> {
    let version = u.string("api_version");
    let azure = api.is_some_and(UpstreamApi::is_azure);
    match version {
        None if azure => Some(Some(Surface::V1)),
        None => Some(None),
        Some(v) if !azure => {
            if api.is_some() {
                v.problem(
                    u.doc(),
                    "`api_version` is read only on an Azure OpenAI upstream",
                    Some(
                        "remove it, or set `protocol = \"azure_responses\"`, \"azure_chat\" or \"azure\""
                            .into(),
                    ),
                );
            }
            None
        }
        Some(v) => match Surface::from_version(&v.value) {
            Ok(surface) => Some(Some(surface)),
            Err(why) => {
                v.problem(
                    u.doc(),
                    why,
                    Some("use \"v1\" (the default), or the dated version your deployments are called with, such as \"2024-10-21\"".into()),
                );
                None
            }
        },
    }
}

/// An Azure upstream's endpoints are resources: weir adds the `/openai/…`
/// paths itself, so a URL with a path would send every request to the
/// wrong place. Whether they are.
pub(super) fn servers(u: &Section<'_, '_>, servers: &[Member<http::Uri>]) -> bool {
    let Some(bad) = servers
        .iter()
        .find(|s| !s.target.path().trim_end_matches('/').is_empty())
    else {
        return true;
    };
    let key = if u.raw_present("url") {
        "url"
    } else {
        "servers"
    };
    u.problem(
        key,
        format!(
            "`{}`: an Azure OpenAI upstream is its resource's URL, without a path (weir adds `/openai/v1/…` or the deployment path)",
            bad.target
        ),
        Some("write it like \"https://my-resource.openai.azure.com\"".into()),
    );
    false
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    #[test]
    fn an_azure_upstream_reads_its_surface_and_sends_its_key_in_api_key() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("k"), "azure-key\n").expect("key");
        let c = parse(
            &dir.path().join("w.toml"),
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"openai\"\n\
             [[route.upstreams]]\nname = \"az\"\nurl = \"https://res.openai.azure.com/\"\n\
             protocol = \"azure\"\napi_key_file = \"k\"\n\
             [[route.upstreams]]\nname = \"old\"\nurl = \"https://res.openai.azure.com\"\n\
             protocol = \"azure_chat\"\napi_version = \"2024-10-21\"\n\
             [[route.upstreams]]\nname = \"openai\"\nurl = \"https://api.openai.com\"\n\
             [[route.models]]\nname = \"gpt-5\"\nupstreams = [\"az:my-gpt5.1_a\", \"old:dep\"]\n",
        )
        .expect("valid");
        let RouteKind::Llm(llm) = &c.routes[0].kind else {
            panic!("an LLM route");
        };
        let surfaces: Vec<_> = llm.upstreams.iter().map(|u| u.azure.clone()).collect();
        assert_eq!(
            surfaces,
            [
                Some(Surface::V1),
                Some(Surface::Dated("2024-10-21".into())),
                None
            ]
        );
        assert_eq!(llm.upstreams[0].api, UpstreamApi::Azure);
        assert_eq!(llm.upstreams[0].api.key_header("k").0.as_str(), "api-key");
        assert_eq!(
            llm.upstreams[0].keys[0].credential,
            Credential::Key(Secret("azure-key".into()))
        );
    }

    #[test]
    fn every_azure_problem_is_named_with_its_place_and_fix() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\nfailover_on = [400, 429]\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"https://r.openai.azure.com\"\nprotocol = \"azure\"\n\
             [[route.upstreams]]\nname = \"b\"\nurl = \"https://r.openai.azure.com/openai/v1\"\nprotocol = \"azure_chat\"\n\
             [[route.upstreams]]\nname = \"c\"\nurl = \"https://r.openai.azure.com\"\nprotocol = \"azure_chat\"\n\
             api_version = \"2024-13\"\n\
             [[route.upstreams]]\nname = \"d\"\nurl = \"http://127.0.0.1:1\"\nprotocol = \"openai_chat\"\n\
             api_version = \"v1\"\n\
             [[route.upstreams]]\nname = \"e\"\nurl = \"https://r.openai.azure.com\"\nprotocol = \"azure_responses\"\n\
             [[route.models]]\nname = \"m\"\nupstreams = [\"e:gpt/5\", \"d:any/id\"]\n",
        );
        let joined = p.join("\n");
        for needle in [
            "route[0].failover_on: 400 on a route with an Azure OpenAI upstream",
            "(fix: remove 400 from `failover_on`)",
            "route[0].upstreams[0].protocol: `azure` names more than one API",
            "(fix: use \"azure_responses\" or \"azure_chat\")",
            "route[0].upstreams[1].url: `https://r.openai.azure.com/openai/v1`: an Azure OpenAI upstream is its resource's URL, without a path",
            "route[0].upstreams[2].api_version: `2024-13` is not an Azure OpenAI API version",
            "route[0].upstreams[3].api_version: `api_version` is read only on an Azure OpenAI upstream",
            "route[0].models[0].upstreams[0]: `gpt/5` cannot be an Azure OpenAI deployment name",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
        assert!(
            !joined.contains("any/id"),
            "any id names another upstream's model"
        );
        assert!(p.iter().all(|l| l.starts_with("w.toml:")), "{joined}");
    }
}
