//! Amazon Bedrock (`bedrock-runtime`) in front of the Anthropic emulator:
//! the Messages body and events (those rules are Anthropic's, checked by
//! `anthropic`), reached the way Bedrock is reached. Sources: AWS's
//! "Signature Version 4 for API requests" (the canonical request, the
//! double-encoded path of every service but S3, the signing key chain),
//! the Bedrock API reference (InvokeModel, InvokeModelWithResponseStream,
//! their errors and `x-amzn-ErrorType`), "Anthropic Claude Messages API"
//! in the Bedrock user guide (`anthropic_version: "bedrock-2023-05-31"`,
//! `anthropic_beta`, no `model`/`stream` in the body), and the
//! `application/vnd.amazon.eventstream` framing of the AWS SDKs.
//!
//! - Credentials: SigV4 with the stand-in's access key, recomputed here
//!   independently of weir (its own canonical request and HMAC chain) and
//!   compared; a missing, malformed, wrong, foreign-region or stale
//!   (past 5 minutes) signature is 403 in Bedrock's shape. Or a Bedrock
//!   API key as `Authorization: Bearer`, when one is set.
//! - `POST /model/{modelId}/invoke` and `/invoke-with-response-stream`,
//!   the model id percent-decoded from its one segment and known to the
//!   stand-in (else 404 `ResourceNotFoundException`).
//! - The body must have `anthropic_version` `bedrock-2023-05-31` and must
//!   not have `model` or `stream` (400 `ValidationException`, as Bedrock
//!   refuses them); the rest is checked by the Anthropic rules.
//! - A stream is answered in event-stream frames with both CRCs, each
//!   `chunk` holding one Messages event base64-encoded; exceptions are
//!   exception frames (`:message-type: exception`).

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use http::HeaderMap;
use serde_json::{Value, json};

use super::{Failure, Rejection};

pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";
const TYPE_TAIL: &str = ":http://internal.amazon.com/coral/com.amazon.bedrock/";

/// One Bedrock account in one region: its access key, its models, and how
/// its streams misbehave when a test asks.
#[derive(Clone, Debug)]
pub struct Bedrock {
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Temporary credentials: the token `x-amz-security-token` must carry.
    pub session_token: Option<String>,
    /// A Bedrock API key, taken as `Authorization: Bearer`.
    pub api_key: Option<String>,
    pub models: Vec<String>,
    /// The message CRC of this frame (0-based) of a stream is wrong.
    pub corrupt_frame: Option<usize>,
    /// After this many frames, this exception frame (`throttlingException`,
    /// …) ends the stream.
    pub exception_after: Option<(usize, String)>,
    /// After this many frames the stream stalls, a `ping` every 20 ms,
    /// until the reader goes away.
    pub stall_after: Option<usize>,
    /// Streams whose reader went away while stalled.
    pub cancelled: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Bedrock {
    pub fn new(region: &str, access_key_id: &str, secret: &str, models: &[&str]) -> Bedrock {
        Bedrock {
            region: region.into(),
            access_key_id: access_key_id.into(),
            secret_access_key: secret.into(),
            session_token: None,
            api_key: None,
            models: models.iter().map(|m| m.to_string()).collect(),
            corrupt_frame: None,
            exception_after: None,
            stall_after: None,
            cancelled: Default::default(),
        }
    }

    /// What an admitted request stands for: the Messages body as the
    /// Anthropic rules read it (the model and stream from the path put
    /// back), and whether its `anthropic_beta` allows `system` turns (the
    /// header's betas travel in the body on Bedrock).
    pub(crate) fn admit(
        &self,
        parts: &http::request::Parts,
        raw: &[u8],
        json: Option<&Value>,
    ) -> Result<(Value, bool), Rejection> {
        self.authenticate(parts, raw, SystemTime::now())?;
        let rest = parts
            .uri
            .path()
            .strip_prefix("/model/")
            .ok_or_else(unknown_operation)?;
        let (model, stream) = match rest.split_once('/') {
            Some((m, "invoke")) => (m, false),
            Some((m, "invoke-with-response-stream")) => (m, true),
            _ => return Err(unknown_operation()),
        };
        let model = percent_decode(model).ok_or_else(unknown_operation)?;
        if !self.models.contains(&model) {
            return Err(exception(
                404,
                "ResourceNotFoundException",
                "The provided model identifier is invalid.",
            ));
        }
        let Some(Value::Object(body)) = json else {
            return Err(validation(
                "Malformed input request, please reformat your input and try again.",
            ));
        };
        let mut body = body.clone();
        match body.remove("anthropic_version") {
            Some(Value::String(v)) if v == ANTHROPIC_VERSION => {}
            Some(_) => return Err(validation("Invalid API version")),
            None => {
                return Err(validation(
                    "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again.",
                ));
            }
        }
        for refused in ["model", "stream"] {
            if body.contains_key(refused) {
                return Err(validation(&format!(
                    "Malformed input request: #: extraneous key [{refused}] is not permitted, please reformat your input and try again."
                )));
            }
        }
        let betas = match body.remove("anthropic_beta") {
            None => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => a,
            Some(_) => return Err(validation("anthropic_beta: expected an array of strings")),
        };
        let system_turns = betas
            .iter()
            .any(|b| b.as_str() == Some(super::anthropic::PER_TURN_SYSTEM_BETA));
        body.insert("model".into(), model.into());
        body.insert("stream".into(), stream.into());
        Ok((Value::Object(body), system_turns))
    }

    fn authenticate(
        &self,
        parts: &http::request::Parts,
        raw: &[u8],
        now: SystemTime,
    ) -> Result<(), Rejection> {
        let auth = header(&parts.headers, "authorization").ok_or_else(|| {
            exception(
                403,
                "MissingAuthenticationTokenException",
                "Missing Authentication Token",
            )
        })?;
        if let Some(key) = auth.strip_prefix("Bearer ") {
            return match &self.api_key {
                Some(k) if k == key => Ok(()),
                _ => Err(exception(
                    403,
                    "UnrecognizedClientException",
                    "Invalid API Key format: Must start with pre-defined prefix",
                )),
            };
        }
        let want = sigv4_signature(
            parts,
            raw,
            &Signer {
                access_key_id: &self.access_key_id,
                secret: &self.secret_access_key,
                region: &self.region,
                service: "bedrock",
            },
            now,
        )?;
        if want != auth {
            return Err(exception(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
            ));
        }
        let token = header(&parts.headers, "x-amz-security-token");
        if token != self.session_token.as_deref() {
            return Err(exception(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            ));
        }
        Ok(())
    }
}

/// What a SigV4 signature is computed with.
pub struct Signer<'a> {
    pub access_key_id: &'a str,
    pub secret: &'a str,
    pub region: &'a str,
    pub service: &'a str,
}

/// The `Authorization` header a correct signer sends for this request,
/// recomputed from the headers it names as signed; a refusal for a
/// request that cannot be (a date too far from `now`, a scope not this
/// signer's, `host` or `x-amz-date` unsigned).
pub fn sigv4_signature(
    parts: &http::request::Parts,
    raw: &[u8],
    signer: &Signer<'_>,
    now: SystemTime,
) -> Result<String, Rejection> {
    let auth = header(&parts.headers, "authorization").unwrap_or_default();
    let incomplete = || {
        exception(
            403,
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.",
        )
    };
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(incomplete)?;
    let mut credential = None;
    let mut signed = None;
    for part in rest.split(", ") {
        if let Some(c) = part.strip_prefix("Credential=") {
            credential = Some(c);
        } else if let Some(s) = part.strip_prefix("SignedHeaders=") {
            signed = Some(s);
        }
    }
    let (credential, signed) = credential.zip(signed).ok_or_else(incomplete)?;
    let amz_date = header(&parts.headers, "x-amz-date").ok_or_else(incomplete)?;
    let names: Vec<&str> = signed.split(';').collect();
    if !names.contains(&"host") || !names.contains(&"x-amz-date") {
        return Err(incomplete());
    }
    let date = amz_date.get(..8).ok_or_else(incomplete)?;
    let scope = format!("{date}/{}/{}/aws4_request", signer.region, signer.service);
    if credential != format!("{}/{scope}", signer.access_key_id) {
        return Err(exception(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ));
    }
    let signed_at = parse_amz_date(amz_date).ok_or_else(incomplete)?;
    let skew = match now.duration_since(signed_at) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    if skew > Duration::from_secs(300) {
        return Err(exception(
            403,
            "InvalidSignatureException",
            &format!("Signature expired: {amz_date} is now earlier than the allowed window."),
        ));
    }
    let mut canonical_headers = String::new();
    for name in &names {
        let values: Vec<String> = parts
            .headers
            .get_all(*name)
            .iter()
            .map(|v| collapse(v.to_str().unwrap_or_default()))
            .collect();
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        parts.method,
        uri_encode_path(parts.uri.path()),
        canonical_query(parts.uri.query().unwrap_or_default()),
        hex(&sha256(raw)),
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&sha256(canonical.as_bytes()))
    );
    let mut key = hmac(format!("AWS4{}", signer.secret).as_bytes(), date.as_bytes());
    for part in [signer.region, signer.service, "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    Ok(format!(
        "AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed}, Signature={signature}"
    ))
}

fn sha256(data: &[u8]) -> Vec<u8> {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data)
        .as_ref()
        .to_vec()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
    aws_lc_rs::hmac::sign(&key, data).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A header's value trimmed, its runs of spaces made one.
fn collapse(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every byte but the unreserved ones percent-encoded (so a `%` of the
/// path as sent becomes `%25`: every service but S3 signs the path
/// encoded twice), `/` kept between segments.
fn uri_encode_path(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                        char::from(b).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    pairs.sort_unstable();
    pairs.join("&")
}

/// `YYYYMMDD'T'HHMMSS'Z'` as a time.
fn parse_amz_date(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<u64>().ok();
    let (y, mo, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (h, mi, se) = (n(9..11)?, n(11..13)?, n(13..15)?);
    // Days from 1970-01-01 to the date (civil-from-days, inverted).
    let (y, mo) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hexed = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hexed, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A Bedrock exception: its status, and its name in `code`.
pub(crate) fn exception(status: u16, name: &'static str, message: &str) -> Rejection {
    Rejection::new(status, message).code(name)
}

fn validation(message: &str) -> Rejection {
    exception(400, "ValidationException", message)
}

fn unknown_operation() -> Rejection {
    exception(404, "UnknownOperationException", "")
}

/// Bedrock's error answer: the exception in `x-amzn-ErrorType`, the
/// message in the body.
pub(crate) fn error_parts(r: &Rejection) -> (Vec<(String, String)>, Value) {
    let name = r.code.unwrap_or("InternalServerException");
    (
        vec![("x-amzn-ErrorType".into(), format!("{name}{TYPE_TAIL}"))],
        json!({"message": r.message}),
    )
}

/// A scripted Bedrock exception answer.
pub fn failure(status: u16, name: &'static str, message: &str) -> Failure {
    let (headers, body) = error_parts(&exception(status, name, message));
    Failure {
        status,
        headers,
        message: message.into(),
        body: Some(body),
    }
}

/// One event-stream frame of string headers, both CRCs computed.
pub fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(7);
        block.extend_from_slice(&(value.len() as u16).to_be_bytes());
        block.extend_from_slice(value.as_bytes());
    }
    let total = 16 + block.len() + payload.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(block.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out
}

/// A `chunk` frame carrying one Messages event (its SSE `data`).
pub fn chunk(event: &Value) -> Vec<u8> {
    let bytes = base64::engine::general_purpose::STANDARD.encode(event.to_string());
    let payload = json!({"bytes": bytes, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"});
    frame(
        &[
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

/// An exception frame (`throttlingException`, …).
pub fn exception_frame(name: &str, message: &str) -> Vec<u8> {
    frame(
        &[
            (":exception-type", name),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({"message": message}).to_string().as_bytes(),
    )
}

/// The Anthropic emulator's SSE events as the frames Bedrock sends, bent
/// as the account's options say.
pub(crate) fn frames(events: &[String], bedrock: &Bedrock) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for event in events {
        let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        if let Some((after, name)) = &bedrock.exception_after
            && out.len() == *after
        {
            out.push(exception_frame(name, "scripted exception"));
            return out;
        }
        let mut f = chunk(&v);
        if bedrock.corrupt_frame == Some(out.len()) {
            let at = f.len() - 1;
            f[at] ^= 0xff;
        }
        out.push(f);
    }
    out
}
