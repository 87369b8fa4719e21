//! What only an Amazon Bedrock upstream reads: its region (the `region`
//! key, or the region of its `bedrock-runtime` URL), its endpoint when it
//! names none, and — when it has no Bedrock API key — its AWS
//! credentials, found as AWS's tools find them: `aws_profile` or
//! `aws_credentials_file` name a profile of a shared credentials file;
//! without them, weir's environment (`AWS_ACCESS_KEY_ID`, …), then the
//! shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
//! `~/.aws/credentials`) under `AWS_PROFILE` or `default`.
//! `aws_credentials = "metadata"` names the EC2 instance metadata service
//! instead (the instance role's temporary credentials).

use super::*;
use crate::config::llm::{AwsKeys, BedrockSettings, WebIdentity};
use weir_wire::bedrock;

/// The environment variables AWS's tools read an access key from.
const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";

const CREDENTIALS_FIX: &str = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) in weir's environment, name a profile of a credentials file with `aws_profile` / `aws_credentials_file`, or give a Bedrock API key: `api_key_env = \"AWS_BEARER_TOKEN_BEDROCK\"`";

/// A Bedrock upstream without `url` or `servers`: the regional endpoint
/// of its `region` (None, unreported, without one: [`settings`] reports
/// the missing region).
pub(super) fn default_server(u: &Section<'_, '_>) -> Option<Vec<Member<http::Uri>>> {
    let region = u.string("region")?;
    if !bedrock::is_region(&region.value) {
        return None;
    }
    let target = bedrock::endpoint(&region.value).parse().ok()?;
    Some(vec![Member {
        target,
        weight: 1,
        backup: false,
    }])
}

/// A Bedrock upstream's settings: `Some(None)` for an upstream of another
/// API (which must not set `region`), None when reported.
pub(super) fn settings(
    u: &Section<'_, '_>,
    api: Option<UpstreamApi>,
    servers: Option<&[Member<http::Uri>]>,
) -> Option<Option<BedrockSettings>> {
    let region = u.string("region");
    if api != Some(UpstreamApi::Bedrock) {
        // A Vertex AI upstream reads `region` too (its own settings).
        if let (Some(r), Some(api)) = (region, api)
            && api != UpstreamApi::Vertex
        {
            r.problem(
                u.doc(),
                "`region` is read only on an Amazon Bedrock or Vertex AI upstream",
                Some(
                    "remove it, or set `protocol = \"bedrock\"` or `protocol = \"vertex\"`".into(),
                ),
            );
            return None;
        }
        return Some(None);
    }
    let from_host = servers
        .and_then(|s| s.first())
        .and_then(|s| s.target.host())
        .and_then(bedrock::region_of_host)
        .map(str::to_string);
    let region = match (region, from_host) {
        (Some(r), _) if !bedrock::is_region(&r.value) => {
            r.problem(
                u.doc(),
                format!("`{}` is not an AWS region", r.value),
                Some("write the region's code, such as \"us-east-1\"".into()),
            );
            return None;
        }
        (Some(r), _) => r.value,
        (None, Some(host)) => host,
        (None, None) => {
            u.problem(
                "region",
                "missing: a Bedrock upstream's requests are signed for its region, and its URL names none",
                Some("add `region = \"us-east-1\"` (the endpoint is then https://bedrock-runtime.us-east-1.amazonaws.com unless `url` says otherwise)".into()),
            );
            return None;
        }
    };
    Some(Some(BedrockSettings { region }))
}

/// The AWS credentials of a Bedrock upstream that has no Bedrock API
/// key, as its one key; None when reported.
pub(super) fn aws_key(u: &Section<'_, '_>) -> Option<ApiKey> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let file = u.string("aws_credentials_file");
    let profile = u.string("aws_profile");
    if let Some(c) = u.string("aws_credentials") {
        if let Some(other) = (file.as_ref().map(|_| "aws_credentials_file"))
            .or(profile.as_ref().map(|_| "aws_profile"))
        {
            u.problem(
                other,
                "`aws_credentials` and a credentials file's profile are two sources of AWS credentials",
                Some("keep one: `aws_credentials = \"metadata\"` on EC2, or the profile".into()),
            );
            return None;
        }
        let Some(url) = imds_url(&c.value, &env) else {
            c.problem(
                u.doc(),
                format!("`{}` names no AWS credentials source", c.value),
                Some(IMDS_FIX.into()),
            );
            return None;
        };
        return Some(ApiKey {
            source: format!("aws:instance-metadata:{url}"),
            credential: Credential::AwsImds(url),
        });
    }
    let named = file.is_some() || profile.is_some();
    if !named && let (Some(id), Some(secret)) = (env(ACCESS_KEY_ID), env(SECRET_ACCESS_KEY)) {
        return Some(ApiKey {
            credential: Credential::Aws(AwsKeys {
                access_key_id: id.trim().to_string(),
                secret_access_key: Secret(secret.trim().to_string()),
                session_token: env(SESSION_TOKEN).map(|t| Secret(t.trim().to_string())),
            }),
            source: "aws:environment".into(),
        });
    }
    if !named && let Some(identity) = web_identity(&env) {
        return Some(ApiKey {
            source: format!("aws:web-identity:{}", identity.role_arn),
            credential: Credential::AwsWebIdentity(identity),
        });
    }
    let path = match &file {
        Some(f) => Some(u.doc().dir_at(f.span.start).join(&f.value)),
        None => env("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".aws/credentials"))),
    };
    let profile_name = profile
        .as_ref()
        .map(|p| p.value.clone())
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let text = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
    let key = if named {
        file.as_ref()
            .map_or("aws_profile", |_| "aws_credentials_file")
    } else {
        "protocol"
    };
    let Some(text) = text else {
        let shown = path.map_or_else(|| "~/.aws/credentials".into(), |p| p.display().to_string());
        let message = if named {
            format!("the AWS credentials file `{shown}` cannot be read")
        } else {
            format!(
                "a Bedrock upstream without an API key signs its requests with AWS credentials, and there are none: `{ACCESS_KEY_ID}` is not set in weir's environment and `{shown}` cannot be read"
            )
        };
        u.problem(key, message, Some(CREDENTIALS_FIX.into()));
        return None;
    };
    match profile_keys(&text, &profile_name) {
        Ok(keys) => Some(ApiKey {
            credential: Credential::Aws(keys),
            source: format!("aws:profile:{profile_name}"),
        }),
        Err(why) => {
            let key = if profile.is_some() {
                "aws_profile"
            } else {
                key
            };
            u.problem(
                key,
                format!("profile `{profile_name}` of the AWS credentials file: {why}"),
                Some(CREDENTIALS_FIX.into()),
            );
            None
        }
    }
}

/// The instance metadata service's address when none is given: AWS's.
const IMDS_URL: &str = "http://169.254.169.254";

const IMDS_FIX: &str = "write `aws_credentials = \"metadata\"` (the EC2 instance metadata service, at `AWS_EC2_METADATA_SERVICE_ENDPOINT` or http://169.254.169.254) or `\"metadata:http://HOST:PORT\"`";

/// The base URL `aws_credentials` names: `metadata` (the environment's
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT`, else AWS's address) or
/// `metadata:URL` (http, no path). None for anything else.
fn imds_url(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let url = match value.split_once(':') {
        None if value == "metadata" => {
            env("AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|| IMDS_URL.into())
        }
        Some(("metadata", url)) => url.to_string(),
        _ => return None,
    };
    let url = url.trim().trim_end_matches('/');
    let ok = url.parse::<http::Uri>().is_ok_and(|uri| {
        uri.scheme_str() == Some("http") && uri.authority().is_some() && uri.path() == "/"
    });
    ok.then(|| url.to_string())
}

/// The role of a web identity, when weir's environment names one as EKS
/// does (`AWS_ROLE_ARN`, `AWS_WEB_IDENTITY_TOKEN_FILE`, optionally
/// `AWS_ROLE_SESSION_NAME` and `AWS_ENDPOINT_URL_STS`).
fn web_identity(env: &dyn Fn(&str) -> Option<String>) -> Option<WebIdentity> {
    Some(WebIdentity {
        role_arn: env("AWS_ROLE_ARN")?.trim().to_string(),
        token_file: PathBuf::from(env("AWS_WEB_IDENTITY_TOKEN_FILE")?.trim()),
        session_name: env("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| "weir".into()),
        sts_url: env("AWS_ENDPOINT_URL_STS"),
    })
}

/// The keys of `profile` in a shared credentials file (INI: `[name]`
/// sections of `key = value` lines, `#` and `;` comments).
fn profile_keys(text: &str, profile: &str) -> Result<AwsKeys, String> {
    let mut in_profile = false;
    let mut found = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = name.trim() == profile;
            found |= in_profile;
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if in_profile {
            let v = Some(v.trim().to_string());
            match k.trim() {
                "aws_access_key_id" => id = v,
                "aws_secret_access_key" => secret = v,
                "aws_session_token" => token = v,
                _ => {}
            }
        }
    }
    match (found, id, secret) {
        (false, _, _) => Err("no such profile".into()),
        (true, Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => Ok(AwsKeys {
            access_key_id: id,
            secret_access_key: Secret(secret),
            session_token: token.filter(|t| !t.is_empty()).map(Secret),
        }),
        _ => Err("`aws_access_key_id` and `aws_secret_access_key` are both required".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_metadata_address_comes_from_the_value_then_the_environment() {
        let none = |_: &str| None;
        let set = |k: &str| {
            (k == "AWS_EC2_METADATA_SERVICE_ENDPOINT").then(|| "http://[fd00:ec2::254]/".into())
        };
        assert_eq!(imds_url("metadata", &none).as_deref(), Some(IMDS_URL));
        assert_eq!(
            imds_url("metadata", &set).as_deref(),
            Some("http://[fd00:ec2::254]")
        );
        assert_eq!(
            imds_url("metadata:http://127.0.0.1:9", &set).as_deref(),
            Some("http://127.0.0.1:9")
        );
        for bad in [
            "imds",
            "metadata:https://x",
            "metadata:http://x/latest",
            "file:x",
        ] {
            assert_eq!(imds_url(bad, &none), None, "{bad}");
        }
    }

    #[test]
    fn a_profile_is_read_from_its_section() {
        let text = "# c\n[default]\naws_access_key_id = A\naws_secret_access_key = S\n\n[dev]\naws_access_key_id=B\naws_secret_access_key=T\naws_session_token = X\n";
        let dev = profile_keys(text, "dev").expect("dev");
        assert_eq!(dev.access_key_id, "B");
        assert_eq!(dev.secret_access_key, Secret("T".into()));
        assert_eq!(dev.session_token, Some(Secret("X".into())));
        let d = profile_keys(text, "default").expect("default");
        assert_eq!((d.access_key_id.as_str(), d.session_token), ("A", None));
        assert!(profile_keys(text, "prod").is_err());
        assert!(profile_keys("[p]\naws_access_key_id = A\n", "p").is_err());
    }
}
