//! What a Vertex AI upstream (`protocol = "vertex"`) reads beside the
//! keys every LLM upstream has: `project`, `region` and `credentials` (a
//! service account key file, read and checked here, or the metadata
//! server), and its default URL.

use super::*;
use weir_wire::google::{METADATA_URL, ServiceAccount};
use weir_wire::vertex::{self, Place};

/// The keys only a Vertex AI upstream reads.
const KEYS: [&str; 3] = ["project", "region", "credentials"];

const CREDENTIALS_FIX: &str = "write `credentials = \"file:/etc/weir/vertex-sa.json\"` (a service account key), `\"env:GOOGLE_APPLICATION_CREDENTIALS\"` (a variable naming that file), or `\"metadata\"` (the GCE/GKE metadata server)";

/// A Vertex AI upstream's settings: `Some(None)` for an upstream of
/// another API (which must set none of them), `None` when reported.
pub(super) fn settings(
    u: &Section<'_, '_>,
    api: Option<UpstreamApi>,
) -> Option<Option<VertexConfig>> {
    if api != Some(UpstreamApi::Vertex) {
        let mut ok = true;
        // `region` is Bedrock's too, `credentials` Azure's (Entra ID):
        // their settings report them elsewhere.
        let azure = api.is_some_and(UpstreamApi::is_azure);
        let theirs = |k: &&str| *k == "region" || (azure && *k == "credentials");
        for key in KEYS.into_iter().filter(|k| !theirs(k)) {
            if let Some(v) = u.string(key)
                && api.is_some()
            {
                v.problem(
                    u.doc(),
                    format!("`{key}` is read only on a Vertex AI upstream"),
                    Some("remove it, or set `protocol = \"vertex\"`".into()),
                );
                ok = false;
            }
        }
        return ok.then_some(None);
    }
    let project = name(
        u,
        "project",
        "add `project = \"my-project\"` (your Google Cloud project id)",
    );
    let region = name(
        u,
        "region",
        "add `region = \"us-east5\"` (a region Claude is served in, or \"global\")",
    );
    let credentials = credentials(u);
    Some(Some(VertexConfig {
        place: Place {
            project: project?,
            region: region?,
        },
        credentials: credentials?,
    }))
}

/// The default URL of a Vertex AI upstream with no `url` or `servers`:
/// its region's endpoint. None for any other upstream.
pub(super) fn default_url(config: Option<&Option<VertexConfig>>) -> Option<String> {
    let v = config?.as_ref()?;
    Some(vertex::base_url(&v.place.region))
}

/// `key`, a project id or region as the path takes it, which must be set.
fn name(u: &Section<'_, '_>, key: &'static str, fix: &str) -> Option<String> {
    let Some(v) = u.string(key) else {
        u.problem(key, "missing on a Vertex AI upstream", Some(fix.into()));
        return None;
    };
    if !vertex::is_path_name(&v.value) {
        v.problem(
            u.doc(),
            format!(
                "`{}` cannot be a Google Cloud {key}: lowercase letters, digits and `-`, starting with a letter",
                v.value
            ),
            Some(fix.into()),
        );
        return None;
    }
    Some(v.value)
}

/// Where the upstream's access tokens come from.
fn credentials(u: &Section<'_, '_>) -> Option<GoogleCredentials> {
    let Some(c) = u.string("credentials") else {
        u.problem(
            "credentials",
            "missing on a Vertex AI upstream",
            Some(CREDENTIALS_FIX.into()),
        );
        return None;
    };
    let doc = u.doc();
    let path = match c.value.split_once(':') {
        None if c.value == "metadata" => {
            return Some(GoogleCredentials::Metadata(METADATA_URL.into()));
        }
        Some(("metadata", url)) => return metadata_url(u, &c, url),
        Some(("file", path)) if !path.is_empty() => doc.dir_at(c.span.start).join(path),
        Some(("env", var)) if !var.is_empty() => match std::env::var(var) {
            Ok(p) if !p.trim().is_empty() => doc.dir_at(c.span.start).join(p.trim()),
            _ => {
                c.problem(
                    doc,
                    format!("environment variable `{var}` is not set or empty"),
                    Some(format!(
                        "export it with the path of a service account key file, or {CREDENTIALS_FIX}"
                    )),
                );
                return None;
            }
        },
        _ => {
            c.problem(
                doc,
                format!("`{}` names no Google credentials", c.value),
                Some(CREDENTIALS_FIX.into()),
            );
            return None;
        }
    };
    super::secrets::warn_if_readable_by_others(doc, &path);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) => {
            c.problem(
                doc,
                format!("cannot read {}: {e}", path.display()),
                Some("point it at the service account key file (JSON) from the Google Cloud console or `gcloud iam service-accounts keys create`".into()),
            );
            return None;
        }
    };
    match ServiceAccount::from_json(&text) {
        Ok(account) => Some(GoogleCredentials::Key(std::sync::Arc::new(account))),
        Err(why) => {
            c.problem(
                doc,
                format!("{} {why}", path.display()),
                Some("use the key file Google Cloud gives for a service account, unchanged".into()),
            );
            None
        }
    }
}

/// `metadata:URL`: the metadata server at another address (a test's, a
/// proxy's).
fn metadata_url(u: &Section<'_, '_>, c: &At<String>, url: &str) -> Option<GoogleCredentials> {
    let ok = url.parse::<http::Uri>().is_ok_and(|uri| {
        uri.scheme_str() == Some("http") && uri.authority().is_some() && uri.path() == "/"
    });
    if ok {
        return Some(GoogleCredentials::Metadata(
            url.trim_end_matches('/').into(),
        ));
    }
    c.problem(
        u.doc(),
        format!("`{url}` is not a metadata server's address"),
        Some("write it like \"metadata:http://169.254.169.254\" (http, no path), or just \"metadata\"".into()),
    );
    None
}

/// A Vertex AI upstream's one credential, the access token weir gets
/// from its `credentials`: an API key or `keys` beside it is a problem.
pub(super) fn keys(u: &Section<'_, '_>) -> Option<Vec<ApiKey>> {
    super::secrets::token_only(
        u,
        "a Vertex AI upstream takes no API key: weir gets its access tokens from `credentials`",
        |key| format!("remove `{key}`"),
        "google",
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    const HEAD: &str = "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nkind = \"anthropic\"\n";

    fn upstream(name: &str, keys: &str) -> String {
        format!("[[route.upstreams]]\nname = \"{name}\"\nprotocol = \"vertex\"\n{keys}\n")
    }

    #[test]
    fn every_vertex_problem_is_named_with_its_place_and_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let malformed = dir.path().join("bad.json");
        std::fs::write(&malformed, "{\"type\": \"service_account\",").expect("write");
        let missing = dir.path().join("absent.json");
        let text = format!(
            "{HEAD}{}{}{}{}{}{}\
             [[route.upstreams]]\nname = \"g\"\nurl = \"http://127.0.0.1:1\"\nproject = \"p-1\"\n",
            upstream("a", "credentials = \"metadata\""),
            upstream(
                "b",
                "project = \"Bad_Project\"\nregion = \"us-east5\"\ncredentials = \"metadata\""
            ),
            upstream(
                "c",
                &format!(
                    "project = \"p\"\nregion = \"us-east5\"\ncredentials = \"file:{}\"",
                    missing.display()
                )
            ),
            upstream(
                "d",
                &format!(
                    "project = \"p\"\nregion = \"us-east5\"\ncredentials = \"file:{}\"",
                    malformed.display()
                )
            ),
            upstream(
                "e",
                "project = \"p\"\nregion = \"us-east5\"\ncredentials = \"oauth\"\napi_key_env = \"PATH\""
            ),
            upstream(
                "f",
                "project = \"p\"\nregion = \"us-east5\"\ncredentials = \"metadata:https://x/y\""
            ),
        ) + &upstream(
            "h",
            "project = \"p\"\nregion = \"us-east5\"\ncredentials = \"env:WEIR_TEST_SURELY_UNSET_VARIABLE\"",
        );
        let p = problems(&text);
        let joined = p.join("\n");
        for needle in [
            "route[0].upstreams[0].project: missing on a Vertex AI upstream",
            "(fix: add `project = \"my-project\"`",
            "route[0].upstreams[0].region: missing on a Vertex AI upstream",
            "route[0].upstreams[1].project: `Bad_Project` cannot be a Google Cloud project",
            "route[0].upstreams[2].credentials: cannot read",
            "absent.json",
            "route[0].upstreams[3].credentials:",
            "bad.json is not JSON",
            "route[0].upstreams[4].credentials: `oauth` names no Google credentials",
            "route[0].upstreams[4].api_key_env: a Vertex AI upstream takes no API key",
            "route[0].upstreams[5].credentials: `https://x/y` is not a metadata server's address",
            "route[0].upstreams[6].project: `project` is read only on a Vertex AI upstream",
            "route[0].upstreams[7].credentials: environment variable `WEIR_TEST_SURELY_UNSET_VARIABLE` is not set or empty",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
        // A missing url is no problem on Vertex: the region names it.
        assert!(!joined.contains(".url"), "{joined}");
    }

    #[test]
    fn a_vertex_upstream_defaults_its_url_to_the_region_and_reads_its_place() {
        let text = format!(
            "{HEAD}{}{}",
            upstream(
                "v",
                "project = \"my-proj\"\nregion = \"europe-west1\"\ncredentials = \"metadata\""
            ),
            upstream(
                "g",
                "project = \"my-proj\"\nregion = \"global\"\ncredentials = \"metadata:http://127.0.0.1:9\""
            ),
        );
        let c = crate::config::load::parse(std::path::Path::new("w.toml"), &text).expect("valid");
        let crate::config::RouteKind::Llm(llm) = &c.routes[0].kind else {
            panic!("an LLM route");
        };
        let v = &llm.upstreams[0];
        assert_eq!(
            v.servers[0].target.to_string(),
            "https://europe-west1-aiplatform.googleapis.com/"
        );
        assert_eq!(v.keys[0].credential, Credential::Refreshed);
        let vx = v.vertex.as_ref().expect("vertex");
        assert_eq!(vx.place.project, "my-proj");
        assert_eq!(
            vx.credentials,
            GoogleCredentials::Metadata(METADATA_URL.into())
        );
        let g = &llm.upstreams[1];
        assert_eq!(
            g.servers[0].target.to_string(),
            "https://aiplatform.googleapis.com/"
        );
        assert_eq!(
            g.vertex.as_ref().map(|v| &v.credentials),
            Some(&GoogleCredentials::Metadata("http://127.0.0.1:9".into()))
        );
    }
}
