//! Microsoft Entra ID's token endpoint and Azure's instance metadata
//! service, issuing the access tokens the Azure OpenAI stand-in
//! ([`super::azure`]) takes. Sources: learn.microsoft.com, "Microsoft
//! identity platform and the OAuth 2.0 client credentials flow" (`POST
//! /{tenant}/oauth2/v2.0/token`, form-encoded `client_id`, `scope`
//! ending in `/.default`, `client_secret` or `client_assertion_type` +
//! `client_assertion`, `grant_type=client_credentials`; the answer
//! `{"token_type","expires_in","ext_expires_in","access_token"}`; errors
//! `{"error","error_description","error_codes",…}` with their AADSTS
//! codes), "How to use managed identities for Azure resources on an
//! Azure VM to acquire an access token" (`GET
//! /metadata/identity/oauth2/token?api-version=2018-02-01&resource=…`
//! with `Metadata: true`, `expires_in` as a string), and "Azure OpenAI:
//! authentication" (the scope `https://cognitiveservices.azure.com/.default`).
//!
//! - The token endpoint checks the tenant, the content type, the grant
//!   type, the client id, the secret (or the federated assertion and its
//!   type) and the scope exactly, refusing each as Entra does.
//! - IMDS wants `Metadata: true`, `api-version`, the Cognitive Services
//!   resource, and a `client_id` only of an identity it has.
//! - Tokens live as long as the test says; Azure takes only one this
//!   stand-in issued, unexpired ([`EntraState::valid`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;

pub const SCOPE: &str = "https://cognitiveservices.azure.com/.default";
pub const RESOURCE: &str = "https://cognitiveservices.azure.com";
pub const TENANT: &str = "contoso.onmicrosoft.com";
pub const CLIENT_ID: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
/// The user-assigned managed identity's client id.
pub const IDENTITY_ID: &str = "9f8e7d6c-5b4a-4321-9876-543210fedcba";
const IMDS_PATH: &str = "/metadata/identity/oauth2/token";
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// What Entra has done, shared with the Azure stand-in.
pub struct EntraState {
    addr: SocketAddr,
    secret: Mutex<String>,
    /// The federated token a workload identity presents.
    pub federated: String,
    lifetime: Mutex<Duration>,
    tokens: Mutex<HashMap<String, Instant>>,
    down: AtomicBool,
    pub issued: AtomicUsize,
    /// Each refusal's `error: description`.
    pub refused: Mutex<Vec<String>>,
    /// Requests to Azure refused for their bearer.
    pub bad_tokens: AtomicUsize,
}

impl std::fmt::Debug for EntraState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntraState")
    }
}

/// Entra ID and IMDS on 127.0.0.1:0; stopped when dropped.
pub struct Entra {
    pub state: Arc<EntraState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Entra {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Entra {
    /// Issuing tokens that live `lifetime` to the app [`CLIENT_ID`] of
    /// [`TENANT`] (its secret made here) and to the machine's identities.
    pub async fn spawn(lifetime: Duration) -> Entra {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(EntraState {
            addr,
            secret: Mutex::new(format!("Xy8Q~{:016x}+/=", fastrand::u64(..))),
            federated: format!("eyJhbGciOiJSUzI1NiJ9.fed-{:016x}.sig", fastrand::u64(..)),
            lifetime: Mutex::new(lifetime),
            tokens: Mutex::new(HashMap::new()),
            down: AtomicBool::new(false),
            issued: AtomicUsize::new(0),
            refused: Mutex::new(Vec::new()),
            bad_tokens: AtomicUsize::new(0),
        });
        let shared = state.clone();
        let task = super::serve_http1(listener, move |req| {
            let state = shared.clone();
            async move { state.serve(req).await }
        });
        Entra { state, task }
    }

    /// The authority host (`authority = …`), standing for
    /// `https://login.microsoftonline.com`; also IMDS's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    pub fn secret(&self) -> String {
        self.state.secret.lock().expect("secret").clone()
    }

    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    pub fn issued(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }

    pub fn refused(&self) -> Vec<String> {
        self.state.refused.lock().expect("refused").clone()
    }

    pub fn bad_tokens(&self) -> usize {
        self.state.bad_tokens.load(Ordering::SeqCst)
    }
}

/// A refusal: status, `error`, AADSTS code and description.
type Refusal = (u16, &'static str, u32, String);

impl EntraState {
    async fn serve(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if self.down.load(Ordering::SeqCst) {
            return reply(
                503,
                json!({"error": "temporarily_unavailable",
                "error_description": "AADSTS90033: A transient error has occurred. Please try again."}),
            );
        }
        let token_path = format!("/{TENANT}/oauth2/v2.0/token");
        let path = parts.uri.path();
        let answer = match (parts.method.as_str(), path) {
            ("POST", p) if p == token_path => self.grant(&parts.headers, &body).map(|()| false),
            ("POST", p) if p.ends_with("/oauth2/v2.0/token") => Err((
                400,
                "invalid_request",
                90002,
                format!(
                    "AADSTS90002: Tenant '{}' not found.",
                    p.split('/').nth(1).unwrap_or_default()
                ),
            )),
            ("GET", IMDS_PATH) => self.imds(&parts).map(|()| true),
            _ => Err((404, "invalid_request", 0, "not found".into())),
        };
        match answer {
            Ok(imds) => self.issue(imds),
            Err((status, error, code, description)) => {
                self.refused
                    .lock()
                    .expect("refused")
                    .push(format!("{error}: {description}"));
                reply(
                    status,
                    json!({"error": error,
                        "error_description": format!("{description}\r\nTrace ID: 0000\r\nCorrelation ID: 0000\r\nTimestamp: 2026-12-03 12:00:00Z"),
                        "error_codes": [code],
                        "timestamp": "2026-12-03 12:00:00Z",
                        "trace_id": "00000000-0000-0000-0000-000000000000",
                        "correlation_id": "00000000-0000-0000-0000-000000000000",
                        "error_uri": format!("https://login.microsoftonline.com/error?code={code}")}),
                )
            }
        }
    }

    /// A client credentials grant, checked as Entra does.
    fn grant(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        let form = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if !form {
            return Err((400, "invalid_request", 900144,
                "AADSTS900144: The request body must contain the following parameter: 'grant_type'.".into()));
        }
        let fields = decode_form(body);
        let field = |name: &str| fields.get(name).map(String::as_str);
        if field("grant_type") != Some("client_credentials") {
            return Err((
                400,
                "unsupported_grant_type",
                70003,
                "AADSTS70003: The app requested an unsupported grant type.".into(),
            ));
        }
        if field("client_id") != Some(CLIENT_ID) {
            return Err((
                400,
                "unauthorized_client",
                700016,
                format!(
                    "AADSTS700016: Application with identifier '{}' was not found in the directory '{TENANT}'.",
                    field("client_id").unwrap_or_default()
                ),
            ));
        }
        match (field("client_secret"), field("client_assertion")) {
            (Some(secret), None) => {
                if secret != *self.secret.lock().expect("secret") {
                    return Err((
                        401,
                        "invalid_client",
                        7000215,
                        format!(
                            "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '{CLIENT_ID}'."
                        ),
                    ));
                }
            }
            (None, Some(assertion)) => {
                if field("client_assertion_type") != Some(ASSERTION_TYPE) {
                    return Err((
                        400,
                        "invalid_request",
                        50027,
                        "AADSTS50027: JWT token is invalid or malformed.".into(),
                    ));
                }
                if assertion != self.federated {
                    return Err((400, "invalid_client", 700213,
                        "AADSTS700213: No matching federated identity record found for presented assertion subject.".into()));
                }
            }
            _ => {
                return Err((401, "invalid_client", 7000218,
                    "AADSTS7000218: The request body must contain the following parameter: 'client_assertion' or 'client_secret'.".into()));
            }
        }
        match field("scope") {
            Some(SCOPE) => Ok(()),
            Some(s) if !s.ends_with("/.default") => Err((
                400,
                "invalid_scope",
                1002012,
                format!(
                    "AADSTS1002012: The provided value for scope {s} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."
                ),
            )),
            s => Err((
                400,
                "invalid_resource",
                500011,
                format!(
                    "AADSTS500011: The resource principal named {} was not found in the tenant named {TENANT}.",
                    s.unwrap_or_default().trim_end_matches("/.default")
                ),
            )),
        }
    }

    /// IMDS's token request, checked as IMDS does.
    fn imds(&self, parts: &http::request::Parts) -> Result<(), Refusal> {
        let metadata = parts.headers.get("metadata").and_then(|v| v.to_str().ok());
        if metadata != Some("true") {
            return Err((
                400,
                "invalid_request",
                0,
                "Required metadata header not specified".into(),
            ));
        }
        let query = decode_form(parts.uri.query().unwrap_or_default().as_bytes());
        if query.get("api-version").map(String::as_str) != Some("2018-02-01") {
            return Err((
                400,
                "invalid_request",
                0,
                "Invalid or missing api-version".into(),
            ));
        }
        let resource = query.get("resource").map(|r| r.trim_end_matches('/'));
        if resource != Some(RESOURCE) {
            return Err((
                400,
                "invalid_resource",
                500011,
                format!(
                    "AADSTS500011: The resource principal named {} was not found in the tenant.",
                    resource.unwrap_or_default()
                ),
            ));
        }
        match query.get("client_id").map(String::as_str) {
            None | Some(IDENTITY_ID) => Ok(()),
            Some(_) => Err((400, "invalid_request", 0, "Identity not found".into())),
        }
    }

    fn issue(&self, imds: bool) -> Response<Full<Bytes>> {
        let n = self.issued.fetch_add(1, Ordering::SeqCst);
        let token = format!(
            "eyJ0eXAiOiJKV1QifQ.entra-{n}-{:016x}.sig",
            fastrand::u64(..)
        );
        let lifetime = *self.lifetime.lock().expect("lifetime");
        self.tokens
            .lock()
            .expect("tokens")
            .insert(token.clone(), Instant::now() + lifetime);
        let secs = lifetime.as_secs().max(1);
        let body = match imds {
            true => json!({"access_token": token, "client_id": IDENTITY_ID,
                "expires_in": secs.to_string(), "expires_on": "1796299200",
                "ext_expires_in": secs.to_string(), "not_before": "1796295600",
                "resource": RESOURCE, "token_type": "Bearer"}),
            false => json!({"token_type": "Bearer", "expires_in": secs,
                "ext_expires_in": secs, "access_token": token}),
        };
        reply(200, body)
    }

    /// Whether `token` was issued here and has not expired.
    pub fn valid(&self, token: &str) -> bool {
        self.tokens
            .lock()
            .expect("tokens")
            .get(token)
            .is_some_and(|until| Instant::now() < *until)
    }
}

/// `application/x-www-form-urlencoded` fields (a repeated one: the last).
fn decode_form(body: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}
