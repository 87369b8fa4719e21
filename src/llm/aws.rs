//! AWS Signature Version 4 on an upstream request (Amazon Bedrock), with
//! the well-kept `aws-sigv4` crate (docs/decisions/080): signed last, on
//! the exact method, URI, headers and body bytes that are sent, so no
//! later rewrite can break the signature.
//!
//! The credentials are the member's ([`AwsKeys`]); where they come from
//! (weir's environment, read with the config) is the config's business.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http_body_util::Full;

use crate::config::AwsKeys;

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
