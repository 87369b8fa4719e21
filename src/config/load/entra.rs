//! An Azure OpenAI upstream's Entra ID credentials (`credentials =
//! "client_secret"`, `"workload_identity"` or `"managed_identity"`), the
//! alternative to an `api-key`: the keys each kind reads, every one of
//! them checked here, and every key that kind does not read refused by
//! name (docs/decisions/090).

use super::*;
use weir_wire::entra;

/// The keys only Entra ID credentials read (beside `credentials`).
const KEYS: [&str; 7] = [
    "tenant_id",
    "client_id",
    "client_secret_env",
    "client_secret_file",
    "federated_token_file",
    "authority",
    "scope",
];

const CREDENTIALS_FIX: &str = "write `credentials = \"client_secret\"` (an app registration's secret, with `tenant_id`, `client_id` and `client_secret_file`), `\"workload_identity\"` (AKS: the federated token in `AZURE_FEDERATED_TOKEN_FILE`) or `\"managed_identity\"` (the machine's identity from the instance metadata service), or remove it and give an `api_key_file`";

/// An upstream's Entra ID credentials: `Some(None)` when it has none
/// (an upstream of another API must set none of their keys), `None`
/// when reported.
pub(super) fn credentials(
    u: &Section<'_, '_>,
    api: Option<UpstreamApi>,
) -> Option<Option<EntraCredentials>> {
    if !api.is_some_and(UpstreamApi::is_azure) {
        let mut ok = true;
        for key in KEYS {
            if u.other_kinds_key_present(key) && api.is_some() {
                u.problem(
                    key,
                    format!("`{key}` is read only on an Azure OpenAI upstream with Entra ID `credentials`"),
                    Some(format!("remove `{key}`")),
                );
                ok = false;
            }
        }
        return ok.then_some(None);
    }
    let Some(c) = u.string("credentials") else {
        let mut ok = true;
        for key in KEYS {
            if u.raw_present(key) {
                u.problem(
                    key,
                    "read only with Entra ID `credentials`",
                    Some(format!(
                        "add `credentials = \"client_secret\"` (or another kind), or remove `{key}`"
                    )),
                );
                ok = false;
            }
        }
        return ok.then_some(None);
    };
    let scope = scope(u);
    let made = match c.value.split_once(':') {
        None if c.value == "client_secret" => client_secret(u, scope),
        None if c.value == "workload_identity" => workload_identity(u, scope),
        None if c.value == "managed_identity" => managed_identity(u, entra::IMDS_URL, scope),
        Some(("managed_identity", url)) if imds_url(url) => {
            managed_identity(u, url.trim_end_matches('/'), scope)
        }
        Some(("managed_identity", url)) => {
            asked(u);
            c.problem(
                u.doc(),
                format!("`{url}` is not an instance metadata service's address"),
                Some("write it like \"managed_identity:http://169.254.169.254\" (http, no path), or just \"managed_identity\"".into()),
            );
            None
        }
        _ => {
            asked(u);
            c.problem(
                u.doc(),
                format!("`{}` names no Entra ID credentials", c.value),
                Some(CREDENTIALS_FIX.into()),
            );
            None
        }
    };
    made.map(Some)
}

/// Every Entra key asked for, so none is reported unknown beside the
/// problem that stopped reading them.
fn asked(u: &Section<'_, '_>) {
    for key in KEYS {
        u.raw_present(key);
    }
}

/// Whether `url` is an IMDS base URL: http, a host, no path.
fn imds_url(url: &str) -> bool {
    url.parse::<http::Uri>().is_ok_and(|uri| {
        uri.scheme_str() == Some("http") && uri.authority().is_some() && uri.path() == "/"
    })
}

/// The keys `kind` does not read, refused by name; whether none is set.
fn unread(u: &Section<'_, '_>, kind: &str, keys: &[&'static str]) -> bool {
    let mut ok = true;
    for key in keys {
        if u.raw_present(*key) {
            u.problem(
                key,
                format!("not read with `credentials = \"{kind}\"`"),
                Some(format!("remove `{key}`")),
            );
            ok = false;
        }
    }
    ok
}

fn client_secret(u: &Section<'_, '_>, scope: Option<String>) -> Option<EntraCredentials> {
    let ok = unread(u, "client_secret", &["federated_token_file"]);
    let authority = authority(u, entra::AUTHORITY.into());
    let tenant = tenant_id(u, None);
    let client_id = client_id(u, None);
    let secret = match secrets::secret(
        u,
        "client_secret_env",
        "client_secret_file",
        "the client secret",
    ) {
        Ok(Some((secret, _))) => Some(secret),
        Ok(None) => {
            u.problem(
                "client_secret_file",
                "missing with `credentials = \"client_secret\"`",
                Some("add `client_secret_file = \"/etc/weir/entra-secret\"` (the secret's value, not its id), or `client_secret_env = \"AZURE_CLIENT_SECRET\"`".into()),
            );
            None
        }
        Err(secrets::Reported) => None,
    };
    let (authority, tenant, client_id, secret, scope) =
        (authority?, tenant?, client_id?, secret?, scope?);
    ok.then(|| EntraCredentials::Secret {
        token_url: entra::token_url(&authority, &tenant),
        client_id,
        secret,
        scope,
    })
}

fn workload_identity(u: &Section<'_, '_>, scope: Option<String>) -> Option<EntraCredentials> {
    let ok = unread(
        u,
        "workload_identity",
        &["client_secret_env", "client_secret_file"],
    );
    let host = env_value("AZURE_AUTHORITY_HOST").unwrap_or_else(|| entra::AUTHORITY.into());
    let authority = authority(u, host);
    let tenant = tenant_id(u, Some("AZURE_TENANT_ID"));
    let client_id = client_id(u, Some("AZURE_CLIENT_ID"));
    let token_file = match u.string("federated_token_file") {
        Some(f) => Some(u.doc().dir_at(f.span.start).join(&f.value)),
        None => match env_value("AZURE_FEDERATED_TOKEN_FILE") {
            Some(path) => Some(path.into()),
            None => {
                u.problem(
                    "federated_token_file",
                    "missing with `credentials = \"workload_identity\"`, and `AZURE_FEDERATED_TOKEN_FILE` is not set",
                    Some("run weir in a pod with the workload identity label (the webhook sets it), or add `federated_token_file = \"/var/run/secrets/azure/tokens/azure-identity-token\"`".into()),
                );
                None
            }
        },
    };
    let (authority, tenant, client_id, token_file, scope) =
        (authority?, tenant?, client_id?, token_file?, scope?);
    ok.then(|| EntraCredentials::Federated {
        token_url: entra::token_url(&authority, &tenant),
        client_id,
        token_file,
        scope,
    })
}

fn managed_identity(
    u: &Section<'_, '_>,
    url: &str,
    scope: Option<String>,
) -> Option<EntraCredentials> {
    let ok = unread(
        u,
        "managed_identity",
        &[
            "tenant_id",
            "client_secret_env",
            "client_secret_file",
            "federated_token_file",
            "authority",
        ],
    );
    // A user-assigned identity is named by its client id; none: the
    // system-assigned one.
    let client_id = match u.string("client_id") {
        None => Some(None),
        Some(_) => client_id(u, None).map(Some),
    };
    let (client_id, scope) = (client_id?, scope?);
    ok.then(|| EntraCredentials::Managed {
        url: url.into(),
        client_id,
        scope,
    })
}

/// A non-empty environment variable's value.
fn env_value(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `tenant_id`, else (workload identity) the variable the webhook sets.
fn tenant_id(u: &Section<'_, '_>, env: Option<&str>) -> Option<String> {
    let fix = "add `tenant_id = \"contoso.onmicrosoft.com\"` (or the tenant's GUID: Entra ID > Overview > Tenant ID)";
    let Some(t) = u.string("tenant_id") else {
        if let Some(v) = env.and_then(env_value) {
            return Some(v).filter(|v| entra::is_tenant(v)).or_else(|| {
                u.problem(
                    "tenant_id",
                    format!("`{}` has no tenant id", env.unwrap_or_default()),
                    Some(fix.into()),
                );
                None
            });
        }
        u.problem("tenant_id", "missing", Some(fix.into()));
        return None;
    };
    if entra::is_tenant(&t.value) {
        return Some(t.value);
    }
    t.problem(
        u.doc(),
        format!("`{}` cannot name a tenant: a GUID or a domain", t.value),
        Some(fix.into()),
    );
    None
}

/// `client_id`, else (workload identity) the variable the webhook sets.
fn client_id(u: &Section<'_, '_>, env: Option<&str>) -> Option<String> {
    let fix =
        "write the application (client) id, a GUID like \"0a1b2c3d-4e5f-6789-abcd-ef0123456789\"";
    let Some(c) = u.string("client_id") else {
        if let Some(v) = env.and_then(env_value) {
            return Some(v).filter(|v| entra::is_guid(v)).or_else(|| {
                u.problem(
                    "client_id",
                    format!("`{}` has no client id", env.unwrap_or_default()),
                    Some(fix.into()),
                );
                None
            });
        }
        u.problem(
            "client_id",
            "missing",
            Some(format!("add `client_id`: {fix}")),
        );
        return None;
    };
    if entra::is_guid(&c.value) {
        return Some(c.value);
    }
    c.problem(
        u.doc(),
        format!("`{}` is not a client id", c.value),
        Some(fix.into()),
    );
    None
}

/// `authority`, the Entra ID host (a sovereign cloud's, a test's).
fn authority(u: &Section<'_, '_>, default: String) -> Option<String> {
    let Some(a) = u.string("authority") else {
        return Some(default.trim_end_matches('/').into());
    };
    let ok = a.value.parse::<http::Uri>().is_ok_and(|uri| {
        matches!(uri.scheme_str(), Some("https" | "http"))
            && uri.authority().is_some()
            && uri.path() == "/"
            && uri.query().is_none()
    });
    if ok {
        return Some(a.value.trim_end_matches('/').into());
    }
    a.problem(
        u.doc(),
        format!("`{}` is not an Entra ID authority host", a.value),
        Some("write it like \"https://login.microsoftonline.com\" (no path: weir adds `/{tenant}/oauth2/v2.0/token`)".into()),
    );
    None
}

/// `scope`: a resource's `/.default`, the only scope client credentials
/// may ask for.
fn scope(u: &Section<'_, '_>) -> Option<String> {
    let Some(s) = u.string("scope") else {
        return Some(entra::SCOPE.into());
    };
    let ok = s.value.starts_with("https://")
        && s.value.ends_with(entra::DEFAULT_SUFFIX)
        && !s.value.contains(char::is_whitespace);
    if ok {
        return Some(s.value);
    }
    s.problem(
        u.doc(),
        format!("`{}` is not a resource's `/.default` scope", s.value),
        Some(format!("remove it for \"{}\", or write another cloud's like \"https://cognitiveservices.azure.us/.default\"", entra::SCOPE)),
    );
    None
}

/// An upstream with Entra ID credentials has one credential, the token
/// weir gets: an API key or `keys` beside it is a problem.
pub(super) fn keys(u: &Section<'_, '_>) -> Option<Vec<ApiKey>> {
    super::secrets::token_only(
        u,
        "an upstream with Entra ID `credentials` takes no API key: weir sends the token it gets",
        |key| format!("remove `{key}`, or remove `credentials` to send the key in `api-key`"),
        "entra",
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    const HEAD: &str = "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nkind = \"openai\"\n";
    const CLIENT: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";

    fn upstream(name: &str, keys: &str) -> String {
        format!(
            "[[route.upstreams]]\nname = \"{name}\"\nurl = \"https://r.openai.azure.com\"\nprotocol = \"azure\"\n{keys}\n"
        )
    }

    #[test]
    fn every_entra_problem_is_named_with_its_place_and_fix() {
        let ups = [
            upstream("a", "credentials = \"client_secret\""),
            upstream(
                "b",
                "credentials = \"client_secret\"\ntenant_id = \"contoso\"\nclient_id = \"app\"\n\
                 client_secret_env = \"WEIR_TEST_SURELY_UNSET_VARIABLE\"\nauthority = \"https://login.example/x\"\n\
                 scope = \"https://cognitiveservices.azure.com\"\nfederated_token_file = \"t\"",
            ),
            upstream(
                "c",
                "credentials = \"managed_identity\"\ntenant_id = \"contoso.onmicrosoft.com\"\n\
                 client_secret_file = \"s\"\napi_key_env = \"PATH\"",
            ),
            upstream("d", "credentials = \"managed_identity:https://x/y\""),
            upstream("e", "credentials = \"oauth\""),
            upstream("f", "tenant_id = \"contoso.onmicrosoft.com\""),
            upstream(
                "g",
                "credentials = \"workload_identity\"\nclient_secret_file = \"s\"",
            ),
            "[[route.upstreams]]\nname = \"h\"\nurl = \"http://127.0.0.1:1\"\nclient_id = \"x\"\n"
                .to_string(),
        ];
        let p = problems(&format!("{HEAD}{}", ups.concat()));
        let joined = p.join("\n");
        for needle in [
            "route[0].upstreams[0].tenant_id: missing (fix: add `tenant_id = \"contoso.onmicrosoft.com\"`",
            "route[0].upstreams[0].client_id: missing",
            "route[0].upstreams[0].client_secret_file: missing with `credentials = \"client_secret\"` (fix: add `client_secret_file",
            "route[0].upstreams[1].tenant_id: `contoso` cannot name a tenant",
            "route[0].upstreams[1].client_id: `app` is not a client id",
            "route[0].upstreams[1].client_secret_env: environment variable `WEIR_TEST_SURELY_UNSET_VARIABLE` is not set or empty",
            "route[0].upstreams[1].authority: `https://login.example/x` is not an Entra ID authority host",
            "route[0].upstreams[1].scope: `https://cognitiveservices.azure.com` is not a resource's `/.default` scope",
            "route[0].upstreams[1].federated_token_file: not read with `credentials = \"client_secret\"`",
            "route[0].upstreams[2].tenant_id: not read with `credentials = \"managed_identity\"`",
            "route[0].upstreams[2].client_secret_file: not read with `credentials = \"managed_identity\"`",
            "route[0].upstreams[2].api_key_env: an upstream with Entra ID `credentials` takes no API key",
            "route[0].upstreams[3].credentials: `https://x/y` is not an instance metadata service's address",
            "route[0].upstreams[4].credentials: `oauth` names no Entra ID credentials",
            "route[0].upstreams[5].tenant_id: read only with Entra ID `credentials`",
            "route[0].upstreams[6].client_secret_file: not read with `credentials = \"workload_identity\"`",
            "route[0].upstreams[7].client_id: `client_id` is read only on an Azure OpenAI upstream with Entra ID `credentials`",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
        assert!(p.iter().all(|l| l.starts_with("w.toml:")), "{joined}");
    }

    #[test]
    fn each_kind_reads_its_credentials() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("secret"), "s3cret\n").expect("secret");
        let text = format!(
            "{HEAD}{}{}{}",
            upstream(
                "cs",
                &format!(
                    "credentials = \"client_secret\"\ntenant_id = \"contoso.onmicrosoft.com\"\n\
                     client_id = \"{CLIENT}\"\nclient_secret_file = \"secret\""
                )
            ),
            upstream("mi", "credentials = \"managed_identity\""),
            upstream(
                "wi",
                &format!(
                    "credentials = \"workload_identity\"\ntenant_id = \"{CLIENT}\"\nclient_id = \"{CLIENT}\"\n\
                     federated_token_file = \"tok\"\nauthority = \"https://login.microsoftonline.us/\"\n\
                     scope = \"https://cognitiveservices.azure.us/.default\""
                )
            ),
        );
        let c = parse(&dir.path().join("w.toml"), &text).expect("valid");
        let RouteKind::Llm(llm) = &c.routes[0].kind else {
            panic!("an LLM route");
        };
        let got: Vec<_> = llm.upstreams.iter().map(|u| u.entra.clone()).collect();
        assert_eq!(
            got,
            [
                Some(EntraCredentials::Secret {
                    token_url: "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token".into(),
                    client_id: CLIENT.into(),
                    secret: Secret("s3cret".into()),
                    scope: entra::SCOPE.into(),
                }),
                Some(EntraCredentials::Managed {
                    url: entra::IMDS_URL.into(),
                    client_id: None,
                    scope: entra::SCOPE.into(),
                }),
                Some(EntraCredentials::Federated {
                    token_url: format!("https://login.microsoftonline.us/{CLIENT}/oauth2/v2.0/token"),
                    client_id: CLIENT.into(),
                    token_file: dir.path().join("tok"),
                    scope: "https://cognitiveservices.azure.us/.default".into(),
                }),
            ]
        );
        for u in &llm.upstreams {
            assert_eq!(u.keys[0].credential, Credential::Refreshed, "{}", u.name);
        }
    }
}
