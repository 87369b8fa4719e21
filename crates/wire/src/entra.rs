//! Microsoft Entra ID's OAuth 2 as Azure OpenAI's callers use it: an
//! app registration's client credentials grant (a client secret, or a
//! federated token as the client assertion: AKS workload identity)
//! exchanged at the tenant's v2.0 token endpoint ([`token_url`],
//! [`secret_form`], [`assertion_form`]), or the instance metadata
//! service's token for the machine's managed identity ([`imds_path`]).
//! Both answer `{"access_token", "expires_in", "token_type"}`
//! ([`read_token`]; IMDS gives `expires_in` as a string). Pure: the bytes
//! of each exchange, no I/O.

use std::time::Duration;

use serde_json::Value;

/// Where Entra ID is for the public cloud (sovereign clouds have their
/// own: `https://login.microsoftonline.us`, `https://login.chinacloudapi.cn`).
pub const AUTHORITY: &str = "https://login.microsoftonline.com";
/// What a token for Azure OpenAI (Cognitive Services) is asked for.
pub const SCOPE: &str = "https://cognitiveservices.azure.com/.default";
/// The suffix every client credentials scope must have.
pub const DEFAULT_SUFFIX: &str = "/.default";
/// The instance metadata service's address.
pub const IMDS_URL: &str = "http://169.254.169.254";
/// The header every IMDS request must carry (value `true`).
pub const METADATA: &str = "metadata";
/// The client assertion type of a federated token (RFC 7523).
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The longest access token taken (Entra's are a few kilobytes).
const MAX_TOKEN: usize = 16 << 10;
/// The longest lifetime taken from a token answer (IMDS's live a day).
const MAX_LIFETIME: Duration = Duration::from_secs(48 * 3600);

/// The v2.0 token endpoint of `tenant` at `authority` (no trailing `/`).
pub fn token_url(authority: &str, tenant: &str) -> String {
    format!(
        "{}/{}/oauth2/v2.0/token",
        authority.trim_end_matches('/'),
        super::path_segment(tenant)
    )
}

/// The form of a client credentials grant with a client secret.
pub fn secret_form(client_id: &str, secret: &str, scope: &str) -> String {
    format!(
        "client_id={}&scope={}&client_secret={}&grant_type=client_credentials",
        enc(client_id),
        enc(scope),
        enc(secret)
    )
}

/// The form of a client credentials grant with a federated token as the
/// client's assertion (workload identity).
pub fn assertion_form(client_id: &str, assertion: &str, scope: &str) -> String {
    format!(
        "client_id={}&scope={}&client_assertion_type={}&client_assertion={}&grant_type=client_credentials",
        enc(client_id),
        enc(scope),
        enc(ASSERTION_TYPE),
        enc(assertion)
    )
}

/// The resource a scope names (IMDS asks for a resource, not a scope):
/// the scope without its `/.default`.
pub fn resource(scope: &str) -> &str {
    scope.strip_suffix(DEFAULT_SUFFIX).unwrap_or(scope)
}

/// The IMDS token path and query for `scope`'s resource, of the
/// user-assigned identity `client_id` when there is one (else the
/// system-assigned one).
pub fn imds_path(scope: &str, client_id: Option<&str>) -> String {
    let mut path = format!(
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource={}",
        enc(resource(scope))
    );
    if let Some(id) = client_id {
        path.push_str("&client_id=");
        path.push_str(&enc(id));
    }
    path
}

/// Form-encoded (every byte but the unreserved ones as `%XX`).
fn enc(s: &str) -> String {
    super::path_segment(s)
}

/// An access token and how long it lives, from Entra's or IMDS's answer
/// (`expires_in` a number or a string of one); None when the answer is
/// not one, or the token could not be a header value.
pub fn read_token(body: &[u8]) -> Option<(String, Duration)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let token = v.get("access_token")?.as_str()?;
    let fits = !token.is_empty()
        && token.len() <= MAX_TOKEN
        && token.bytes().all(|b| b.is_ascii_graphic());
    let expires = v.get("expires_in")?;
    let secs = match expires {
        Value::String(s) => s.trim().parse::<u64>().ok()?,
        other => other.as_u64()?,
    };
    (fits && secs > 0).then(|| {
        (
            token.to_string(),
            Duration::from_secs(secs).min(MAX_LIFETIME),
        )
    })
}

/// What Entra's (or IMDS's) refusal says, in a line: `error` and the
/// first line of `error_description` (the rest is trace and correlation
/// ids), for the log and the client's 503.
pub fn refusal(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let error = v["error"].as_str().unwrap_or("no OAuth error");
    let description = v["error_description"]
        .as_str()
        .and_then(|d| d.lines().next());
    match description {
        Some(d) => format!("{error}: {d}"),
        None => error.to_string(),
    }
    .chars()
    .take(300)
    .collect()
}

/// Whether `id` is a GUID (`8-4-4-4-12` hex digits): what Entra's client
/// (application) ids and tenant ids are.
pub fn is_guid(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Whether `tenant` can name a tenant: a GUID, or a verified domain
/// (`contoso.onmicrosoft.com`): letters, digits, `-` and `.`.
pub fn is_tenant(tenant: &str) -> bool {
    is_guid(tenant)
        || ((1..=253).contains(&tenant.len())
            && tenant.contains('.')
            && tenant
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exchanges_are_entras() {
        assert_eq!(
            token_url(
                "https://login.microsoftonline.com/",
                "contoso.onmicrosoft.com"
            ),
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
        );
        assert_eq!(
            secret_form("c1", "s~k+/=&x", SCOPE),
            "client_id=c1&scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default\
             &client_secret=s~k%2B%2F%3D%26x&grant_type=client_credentials"
        );
        let form = assertion_form("c1", "eyJ.a.b", SCOPE);
        assert!(form.contains(
            "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
        ));
        assert!(form.contains("&client_assertion=eyJ.a.b&"), "{form}");
        assert_eq!(
            imds_path(SCOPE, None),
            "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fcognitiveservices.azure.com"
        );
        assert!(imds_path(SCOPE, Some("id-1")).ends_with("&client_id=id-1"));
    }

    #[test]
    fn tokens_are_read_from_either_answer() {
        let entra = br#"{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"eyJ0"}"#;
        assert_eq!(
            read_token(entra),
            Some(("eyJ0".into(), Duration::from_secs(3599)))
        );
        let imds = br#"{"access_token":"eyJ1","expires_in":"86399","token_type":"Bearer"}"#;
        assert_eq!(
            read_token(imds),
            Some(("eyJ1".into(), Duration::from_secs(86399)))
        );
        for bad in [
            &br#"{"access_token":"a b","expires_in":1}"#[..],
            br#"{"access_token":"a","expires_in":0}"#,
            br#"{"access_token":"a","expires_in":"soon"}"#,
            br#"{"access_token":"a"}"#,
            b"<html>",
        ] {
            assert_eq!(read_token(bad), None);
        }
        let refused = br#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided.\r\nTrace ID: 1","error_codes":[7000215]}"#;
        assert_eq!(
            refusal(refused),
            "invalid_client: AADSTS7000215: Invalid client secret provided."
        );
    }

    #[test]
    fn ids_and_tenants_are_checked() {
        assert!(is_guid("0a1b2c3d-4e5f-6789-abcd-ef0123456789"));
        assert!(!is_guid("0a1b2c3d-4e5f-6789-abcd-ef012345678"));
        assert!(!is_guid("0a1b2c3d_4e5f-6789-abcd-ef0123456789"));
        assert!(is_tenant("contoso.onmicrosoft.com"));
        assert!(is_tenant("0a1b2c3d-4e5f-6789-abcd-ef0123456789"));
        assert!(!is_tenant("common/../x"));
        assert!(!is_tenant("contoso"));
    }
}
