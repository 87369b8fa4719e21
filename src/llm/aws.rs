//! AWS Signature Version 4 on an upstream request (Amazon Bedrock), with
//! the well-kept `aws-sigv4` crate (docs/decisions/080): signed last, on
//! the exact method, URI, headers and body bytes that are sent, so no
//! later rewrite can break the signature.
//!
//! The credentials are the member's: keys read with the config
//! ([`AwsKeys`]), or temporary ones for a role from STS with a web
//! identity token ([`WebIdentitySource`]) or from the EC2 instance
//! metadata service ([`ImdsSource`]), refreshed before they expire by
//! [`super::refresh`].

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use super::refresh::{Fresh, Source};
use crate::config::{AwsKeys, Secret, WebIdentity};

/// Sign `req` for `service` in `region` with `keys`, at `now`: the
/// `host` it goes to set, then `x-amz-date`, `x-amz-security-token` (for
/// temporary credentials) and `authorization` added. None when the
/// request cannot be signed (a header that is no string: nothing a
/// client controls reaches here unchecked, but never a panic).
pub(crate) fn sign_request(
    req: &mut http::Request<Full<Bytes>>,
    body: &[u8],
    keys: &AwsKeys,
    region: &str,
    service: &str,
    now: SystemTime,
) -> Option<()> {
    let host = HeaderValue::from_str(req.uri().authority()?.as_str()).ok()?;
    req.headers_mut().insert(header::HOST, host);
    let credentials = Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.0.clone(),
        keys.session_token.as_ref().map(|t| t.0.clone()),
        None,
        "weir",
    );
    let identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .ok()?
        .into();
    let mut headers = Vec::with_capacity(req.headers().len());
    for (name, value) in req.headers() {
        headers.push((name.as_str(), value.to_str().ok()?));
    }
    let uri = req.uri().to_string();
    let signable = SignableRequest::new(
        req.method().as_str(),
        uri,
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .ok()?;
    let (instructions, _) = sign(signable, &params).ok()?.into_parts();
    instructions.apply_to_request_http1x(req);
    Some(())
}

/// Temporary credentials for a role, from STS's
/// `AssumeRoleWithWebIdentity` with the token in a file (EKS's IRSA: the
/// token is re-read on each fetch, as the kubelet rotates it).
pub(crate) struct WebIdentitySource {
    config: WebIdentity,
    /// STS's endpoint: `AWS_ENDPOINT_URL_STS`, else the region's.
    sts: http::Uri,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// Temporary keys and when they expire, or why there are none.
type Fetched = Result<(AwsKeys, SystemTime), String>;

/// How long an STS exchange may take.
const STS_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an STS answer read.
const MAX_STS_ANSWER: usize = 64 * 1024;

impl WebIdentitySource {
    /// None when the endpoint is no URI.
    pub(crate) fn new(
        config: &WebIdentity,
        region: &str,
        tls: &rustls::ClientConfig,
    ) -> Option<WebIdentitySource> {
        let sts = match &config.sts_url {
            Some(url) => url.clone(),
            None => format!("https://sts.{region}.amazonaws.com/"),
        };
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(STS_TIMEOUT));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        Some(WebIdentitySource {
            config: config.clone(),
            sts: sts.parse().ok()?,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    async fn assume_role(&self) -> Fetched {
        let token = tokio::fs::read_to_string(&self.config.token_file)
            .await
            .map_err(|e| format!("{}: {e}", self.config.token_file.display()))?;
        let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
        let form = format!(
            "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn={}&RoleSessionName={}&WebIdentityToken={}",
            enc(&self.config.role_arn),
            enc(&self.config.session_name),
            enc(token.trim()),
        );
        let req = http::Request::post(self.sts.clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/xml")
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| e.to_string())?;
        let (status, body) = exchange(&self.client, req, STS_TIMEOUT)
            .await
            .ok_or("STS did not answer in time")??;
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let message = xml_field(&text, "Message").unwrap_or_default();
            return Err(format!("STS answered {status}: {message}"));
        }
        sts_credentials(&text)
    }
}

impl Source<AwsKeys> for WebIdentitySource {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<AwsKeys>, String>> + Send + '_>> {
        Box::pin(async move { fresh(self.assume_role().await?) })
    }
}

/// The instance role's temporary credentials from the EC2 instance
/// metadata service, IMDSv2: a session token from `PUT /latest/api/token`,
/// sent with each `GET` (an instance that allows IMDSv2 only refuses a
/// `GET` without it with 401), the role's name from
/// `…/iam/security-credentials/`, then its credentials and their
/// `Expiration`. A fresh session token per fetch: a fetch is rare (five
/// minutes before the credentials expire), and no token is kept.
pub(crate) struct ImdsSource {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// How long one call to the metadata service may take (it is local).
const IMDS_TIMEOUT: Duration = Duration::from_secs(5);
/// The session token's life asked for, in seconds (AWS's SDKs ask 6 h).
const IMDS_TOKEN_TTL: &str = "21600";
const IMDS_CREDENTIALS: &str = "/latest/meta-data/iam/security-credentials/";

impl ImdsSource {
    /// `base`: the service's URL without a path (checked at load).
    pub(crate) fn new(base: &str) -> ImdsSource {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(IMDS_TIMEOUT));
        ImdsSource {
            base: base.trim_end_matches('/').to_string(),
            client: Client::builder(TokioExecutor::new()).build(http),
        }
    }

    /// One call: the answer's body as text, or why there is none.
    async fn call(
        &self,
        method: http::Method,
        path: &str,
        header: (&str, &str),
    ) -> Result<String, String> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(header.0, header.1)
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let (status, body) = exchange(&self.client, req, IMDS_TIMEOUT)
            .await
            .ok_or_else(|| {
                format!("the instance metadata service did not answer {path} in time")
            })??;
        if !status.is_success() {
            return Err(format!(
                "the instance metadata service answered {path} {status}"
            ));
        }
        String::from_utf8(body.to_vec()).map_err(|_| format!("{path}: not text"))
    }

    async fn role_credentials(&self) -> Fetched {
        let token = self
            .call(
                http::Method::PUT,
                "/latest/api/token",
                ("x-aws-ec2-metadata-token-ttl-seconds", IMDS_TOKEN_TTL),
            )
            .await?;
        let token = token.trim();
        let with_token = ("x-aws-ec2-metadata-token", token);
        let roles = self
            .call(http::Method::GET, IMDS_CREDENTIALS, with_token)
            .await?;
        let role = roles
            .lines()
            .map(str::trim)
            .find(|r| !r.is_empty())
            .ok_or("the instance has no IAM role (no instance profile)")?;
        if role.contains(['/', '?', '#', '%']) {
            return Err(format!("`{role}` is no role name"));
        }
        let path = format!("{IMDS_CREDENTIALS}{role}");
        imds_credentials(&self.call(http::Method::GET, &path, with_token).await?)
    }
}

impl Source<AwsKeys> for ImdsSource {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<AwsKeys>, String>> + Send + '_>> {
        Box::pin(async move { fresh(self.role_credentials().await?) })
    }
}

/// The credentials of the role's document (`Code`, `AccessKeyId`,
/// `SecretAccessKey`, `Token`, `Expiration`).
fn imds_credentials(json: &str) -> Fetched {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Document {
        code: String,
        access_key_id: String,
        secret_access_key: String,
        token: String,
        expiration: String,
    }
    let d: Document =
        serde_json::from_str(json).map_err(|e| format!("the role's credentials document: {e}"))?;
    if d.code != "Success" {
        return Err(format!("the instance metadata service says `{}`", d.code));
    }
    let expires =
        httpdate_rfc3339(&d.expiration).ok_or_else(|| format!("`{}` is no time", d.expiration))?;
    let keys = AwsKeys {
        access_key_id: d.access_key_id,
        secret_access_key: Secret(d.secret_access_key),
        session_token: Some(Secret(d.token)),
    };
    Ok((keys, expires))
}

/// Keys and their expiry as the refresher takes them: how long they live
/// from now (none left: a refused answer).
fn fresh((keys, expires): (AwsKeys, SystemTime)) -> Result<Fresh<AwsKeys>, String> {
    let lifetime = (expires.duration_since(SystemTime::now()))
        .map_err(|_| "the credentials given have already expired".to_string())?;
    Ok(Fresh {
        value: std::sync::Arc::new(keys),
        lifetime,
    })
}

/// One exchange with a credentials service: its status and at most
/// 64 KiB of its answer, or why not; None when it took past `timeout`.
async fn exchange<C>(
    client: &Client<C, Full<Bytes>>,
    req: http::Request<Full<Bytes>>,
    timeout: Duration,
) -> Option<Result<(http::StatusCode, Bytes), String>>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let exchange = async {
        let resp = client.request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_STS_ANSWER)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange).await.ok()
}

/// The text of the first `<name>…</name>` in `xml` (STS's answers are
/// flat enough that no XML parser is needed to read five fields).
fn xml_field<'x>(xml: &'x str, name: &str) -> Option<&'x str> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&format!("</{name}>"))?;
    Some(xml[start..start + len].trim())
}

/// The credentials of an `AssumeRoleWithWebIdentity` answer.
fn sts_credentials(xml: &str) -> Fetched {
    let field = |name: &str| {
        xml_field(xml, name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("STS's answer has no {name}"))
    };
    let expires = field("Expiration")?;
    let expires = httpdate_rfc3339(expires).ok_or_else(|| format!("`{expires}` is no time"))?;
    let keys = AwsKeys {
        access_key_id: field("AccessKeyId")?.to_string(),
        secret_access_key: Secret(field("SecretAccessKey")?.to_string()),
        session_token: Some(Secret(field("SessionToken")?.to_string())),
    };
    Ok((keys, expires))
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` as a time.
fn httpdate_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<u64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, se) = (n(11..13)?, n(14..16)?, n(17..19)?);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    // Days since 1970-01-01 (the civil-from-days algorithm, inverted).
    let (y, mo) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sts_answer_gives_keys_and_their_expiry() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
            <AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>s/k</SecretAccessKey>\
            <SessionToken>tok</SessionToken><Expiration>2026-12-03T12:00:00Z</Expiration>\
            </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        let (keys, expires) = sts_credentials(xml).expect("credentials");
        assert_eq!(keys.access_key_id, "ASIA1");
        assert_eq!(keys.session_token, Some(Secret("tok".into())));
        let secs = expires
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after");
        assert_eq!(secs.as_secs(), 1_796_299_200);
        assert!(sts_credentials("<Credentials></Credentials>").is_err());
        assert_eq!(
            httpdate_rfc3339("1970-01-01T00:00:01.5Z").map(|t| t
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .ok()),
            Some(Some(1))
        );
        assert!(httpdate_rfc3339("yesterday").is_none());
    }

    #[test]
    fn an_imds_document_gives_keys_and_their_expiry() {
        let doc = r#"{"Code":"Success","LastUpdated":"2026-12-03T11:00:00Z","Type":"AWS-HMAC",
            "AccessKeyId":"ASIA2","SecretAccessKey":"s","Token":"t","Expiration":"2026-12-03T12:00:00Z"}"#;
        let (keys, _) = imds_credentials(doc).expect("credentials");
        assert_eq!(keys.access_key_id, "ASIA2");
        assert_eq!(keys.session_token, Some(Secret("t".into())));
        assert!(imds_credentials(&doc.replace("Success", "Failed")).is_err());
        assert!(imds_credentials("{}").is_err());
    }
}
