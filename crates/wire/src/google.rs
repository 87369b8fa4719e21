//! Google's OAuth 2 as Vertex AI's callers use it: a service account key
//! file ([`ServiceAccount`]) whose private key signs a JWT grant
//! ([`ServiceAccount::assertion`], RFC 7523, RS256) exchanged at the key's
//! `token_uri` for an access token ([`grant_form`]), or the metadata
//! server's token of the machine's own account ([`METADATA_TOKEN_PATH`]).
//! Both answer `{"access_token", "expires_in", "token_type"}`
//! ([`read_token`]). Pure: the bytes of each exchange, no I/O, no clock
//! (the caller gives the time).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

/// The grant type of a JWT bearer assertion (RFC 7523).
pub const JWT_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long a grant is valid for: Google takes at most an hour.
pub const GRANT_LIFETIME: u64 = 3600;
/// The metadata server's default address.
pub const METADATA_URL: &str = "http://metadata.google.internal";
/// Where the metadata server gives the default service account's token.
pub const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// The header every metadata request must carry (value `Google`).
pub const METADATA_FLAVOR: &str = "metadata-flavor";
/// The longest access token taken (Google's are a few hundred bytes).
const MAX_TOKEN: usize = 8192;
/// The longest lifetime taken from a token answer.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// A service account key file's signing identity.
pub struct ServiceAccount {
    pub client_email: String,
    /// Where grants are exchanged for access tokens.
    pub token_uri: String,
    pub private_key_id: Option<String>,
    key: aws_lc_rs::signature::RsaKeyPair,
    /// The key's PKCS#8 DER, to tell two keys apart (never shown).
    der: Vec<u8>,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ServiceAccount {
    fn eq(&self, other: &Self) -> bool {
        self.client_email == other.client_email
            && self.token_uri == other.token_uri
            && self.der == other.der
    }
}

impl ServiceAccount {
    /// A key file's JSON (`"type": "service_account"`, `client_email`,
    /// `private_key` as PKCS#8 PEM, `token_uri`), or what is wrong with it.
    pub fn from_json(text: &[u8]) -> Result<ServiceAccount, String> {
        let v: Value = serde_json::from_slice(text).map_err(|e| {
            format!("is not JSON ({e}): a service account key file is the JSON Google Cloud gives")
        })?;
        let field = |name: &str| -> Result<String, String> {
            v.get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("has no `{name}`"))
        };
        let kind = field("type")?;
        if kind != "service_account" {
            return Err(format!(
                "is of type `{kind}`, not `service_account` (only service account keys are read)"
            ));
        }
        let client_email = field("client_email")?;
        let token_uri = field("token_uri")?;
        if !(token_uri.starts_with("https://") || token_uri.starts_with("http://")) {
            return Err(format!("has a `token_uri` that is no URL: `{token_uri}`"));
        }
        let der = pem_pkcs8(&field("private_key")?)?;
        let key = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(&der)
            .map_err(|e| format!("has a `private_key` that is no RSA key ({e})"))?;
        Ok(ServiceAccount {
            client_email,
            token_uri,
            private_key_id: v["private_key_id"].as_str().map(str::to_string),
            key,
            der,
        })
    }

    /// A signed JWT grant for `scope`, issued at `now` (Unix seconds) and
    /// valid for [`GRANT_LIFETIME`].
    pub fn assertion(&self, scope: &str, now: u64) -> Result<String, String> {
        let mut header = json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = &self.private_key_id {
            header["kid"] = kid.as_str().into();
        }
        let claims = json!({
            "iss": self.client_email,
            "sub": self.client_email,
            "aud": self.token_uri,
            "scope": scope,
            "iat": now,
            "exp": now.saturating_add(GRANT_LIFETIME),
        });
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &aws_lc_rs::signature::RSA_PKCS1_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "the service account key could not sign".to_string())?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// The body of the grant's exchange (`application/x-www-form-urlencoded`):
/// a JWT is base64url and dots, nothing to escape.
pub fn grant_form(assertion: &str) -> String {
    format!(
        "grant_type={}&assertion={assertion}",
        JWT_GRANT.replace(':', "%3A")
    )
}

/// The DER inside a `-----BEGIN PRIVATE KEY-----` PEM block.
fn pem_pkcs8(pem: &str) -> Result<Vec<u8>, String> {
    let inner = pem
        .split_once("-----BEGIN PRIVATE KEY-----")
        .and_then(|(_, rest)| rest.split_once("-----END PRIVATE KEY-----"))
        .map(|(inner, _)| inner)
        .ok_or("has a `private_key` that is not a PEM `PRIVATE KEY` block")?;
    let b64: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD
        .decode(b64)
        .map_err(|_| "has a `private_key` whose PEM is not base64".to_string())
}

/// An access token and how long it lives, from a token endpoint's (or
/// the metadata server's) answer; None when the answer is not one, or the
/// token could not be a header value.
pub fn read_token(body: &[u8]) -> Option<(String, Duration)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let token = v.get("access_token")?.as_str()?;
    let fits = !token.is_empty()
        && token.len() <= MAX_TOKEN
        && token.bytes().all(|b| b.is_ascii_graphic());
    let lifetime = v.get("expires_in")?.as_u64().filter(|s| *s > 0)?;
    fits.then(|| {
        (
            token.to_string(),
            Duration::from_secs(lifetime).min(MAX_LIFETIME),
        )
    })
}

/// What a token endpoint's refusal says, in a line (`error` and
/// `error_description`, as OAuth 2 answers), for the log.
pub fn refusal(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let error = v["error"].as_str().unwrap_or("no OAuth error");
    match v["error_description"].as_str() {
        Some(d) => format!("{error}: {d}"),
        None => error.to_string(),
    }
    .chars()
    .take(300)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer as _;
    use aws_lc_rs::signature::KeyPair as _;

    fn key_json(email: &str) -> (String, Vec<u8>) {
        let pair =
            aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("keygen");
        let der = pair.as_der().expect("pkcs8");
        let b64 = STANDARD.encode(der.as_ref());
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        let public = pair.public_key().as_ref().to_vec();
        let text = json!({"type": "service_account", "project_id": "p", "private_key_id": "k1",
            "private_key": pem, "client_email": email, "token_uri": "https://oauth2.googleapis.com/token"});
        (text.to_string(), public)
    }

    #[test]
    fn a_grant_is_signed_by_the_key_and_names_the_account() {
        let (text, public) = key_json("sa@p.iam.gserviceaccount.com");
        let sa = ServiceAccount::from_json(text.as_bytes()).expect("key");
        let jwt = sa
            .assertion(super::super::vertex::SCOPE, 1_000)
            .expect("signed");
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
        assert_eq!(claims["iss"], "sa@p.iam.gserviceaccount.com");
        assert_eq!(claims["aud"], "https://oauth2.googleapis.com/token");
        assert_eq!(claims["exp"], 4_600);
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).expect("b64")).expect("json");
        assert_eq!(
            (header["alg"].as_str(), header["kid"].as_str()),
            (Some("RS256"), Some("k1"))
        );
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).expect("b64");
        let verifier = aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
            &public,
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        assert!(verifier.verify(signed.as_bytes(), &signature).is_ok());
        assert!(grant_form(&jwt).starts_with(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=ey"
        ));
    }

    #[test]
    fn a_bad_key_file_says_what_is_wrong() {
        let err = |t: &str| ServiceAccount::from_json(t.as_bytes()).expect_err(t);
        assert!(err("{not json").contains("not JSON"));
        assert!(err(r#"{"type":"authorized_user"}"#).contains("authorized_user"));
        assert!(err(r#"{"type":"service_account"}"#).contains("client_email"));
        let no_pem = r#"{"type":"service_account","client_email":"a@b","token_uri":"https://t","private_key":"abc"}"#;
        assert!(err(no_pem).contains("PEM"));
        let not_rsa = r#"{"type":"service_account","client_email":"a@b","token_uri":"https://t","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"}"#;
        assert!(err(not_rsa).contains("no RSA key"));
    }

    #[test]
    fn token_answers_are_read_strictly() {
        let ok = br#"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#;
        assert_eq!(
            read_token(ok),
            Some(("ya29.abc".into(), Duration::from_secs(3599)))
        );
        for bad in [
            &br#"{"access_token":"a b","expires_in":5}"#[..],
            br#"{"access_token":"","expires_in":5}"#,
            br#"{"access_token":"x","expires_in":0}"#,
            br#"{"access_token":"x"}"#,
            b"nope",
        ] {
            assert_eq!(read_token(bad), None);
        }
        assert_eq!(
            refusal(br#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#),
            "invalid_grant: Invalid JWT Signature."
        );
    }
}
