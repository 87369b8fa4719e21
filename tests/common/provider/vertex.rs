//! Claude on Google Vertex AI in front of the Anthropic emulator, and
//! Google's OAuth token endpoint (and metadata server) that issues the
//! access tokens it takes. Sources: cloud.google.com, "Use Claude models"
//! (Vertex AI: `rawPredict`/`streamRawPredict` on
//! `projects/{p}/locations/{r}/publishers/anthropic/models/{model}`, the
//! body without `model` and with `anthropic_version: "vertex-2023-10-16"`,
//! `count-tokens:rawPredict`), "Using OAuth 2.0 for Server to Server
//! Applications" (the JWT grant: RS256, `iss`, `scope`, `aud` = the token
//! URI, `iat`, `exp` at most an hour later; `invalid_grant` refusals),
//! "Storing and retrieving instance metadata" (`Metadata-Flavor: Google`),
//! and Google's API error model (`{"error":{"code","message","status"}}`).
//!
//! - The token endpoint verifies each grant's signature against the
//!   service account's public key (a key pair made by the test), and its
//!   claims; it issues access tokens living as long as the test says.
//! - Vertex takes only an unexpired token this endpoint issued (401
//!   `UNAUTHENTICATED`), the right project and region (404), the model in
//!   the path (404 if unknown), a body without `model` and with Vertex's
//!   `anthropic_version` (400 `INVALID_ARGUMENT`; count-tokens keeps its
//!   `model` and takes the version too), `:streamRawPredict`
//!   exactly for `stream: true`; then the Messages rules themselves.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer as _;
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::{Failure, Rejection};

pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
pub const VERSION: &str = "vertex-2023-10-16";
const METADATA_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

/// What the token endpoint has done, shared with the Vertex stand-in.
pub struct AuthState {
    pub client_email: String,
    public_key: Vec<u8>,
    private_pem: String,
    addr: SocketAddr,
    lifetime: Mutex<Duration>,
    /// Issued tokens and when each expires.
    tokens: Mutex<HashMap<String, Instant>>,
    down: AtomicBool,
    pub issued: AtomicUsize,
    /// Why each refused grant was refused.
    pub refused: Mutex<Vec<String>>,
    /// Requests to Vertex refused for their token.
    pub bad_tokens: AtomicUsize,
}

/// Google's token endpoint (`POST /token`) and metadata server, on
/// 127.0.0.1:0; stopped when dropped.
pub struct GoogleAuth {
    pub state: Arc<AuthState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GoogleAuth {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GoogleAuth {
    /// A token endpoint issuing tokens that live `lifetime`, for a new
    /// service account whose key pair is made here.
    pub async fn spawn(lifetime: Duration) -> GoogleAuth {
        let pair =
            aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("keygen");
        let der = pair.as_der().expect("pkcs8");
        let private_pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der.as_ref())
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(AuthState {
            client_email: "weir-gateway@test-project.iam.gserviceaccount.com".into(),
            public_key: pair.public_key().as_ref().to_vec(),
            private_pem,
            addr,
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
        GoogleAuth { state, task }
    }

    pub fn token_uri(&self) -> String {
        format!("http://{}/token", self.state.addr)
    }

    /// The metadata server's base URL (`credentials = "metadata:…"`).
    pub fn metadata_url(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    /// The service account key file's JSON, as Google Cloud gives it.
    pub fn key_json(&self) -> String {
        json!({
            "type": "service_account",
            "project_id": "test-project",
            "private_key_id": "0123456789abcdef",
            "private_key": self.state.private_pem,
            "client_email": self.state.client_email,
            "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.token_uri(),
        })
        .to_string()
    }

    /// Answer every token request 503 (or serve again).
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// Revoke every token issued so far (as Google does when a key or
    /// the account is disabled, or a token is revoked).
    pub fn revoke_all(&self) {
        self.state.tokens.lock().expect("tokens").clear();
    }

    pub fn issued(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }

    pub fn refused(&self) -> Vec<String> {
        self.state.refused.lock().expect("refused").clone()
    }
}

impl AuthState {
    async fn serve(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if self.down.load(Ordering::SeqCst) {
            return reply(503, json!({"error": "temporarily_unavailable"}));
        }
        let answer = match (parts.method.as_str(), parts.uri.path()) {
            ("POST", "/token") => self.grant(&parts.headers, &body),
            ("GET", METADATA_PATH) => {
                let flavor = parts
                    .headers
                    .get("metadata-flavor")
                    .and_then(|v| v.to_str().ok());
                if flavor == Some("Google") {
                    Ok(())
                } else {
                    Err((403, "Missing required header: Metadata-Flavor".to_string()))
                }
            }
            _ => Err((404, "not found".into())),
        };
        match answer {
            Ok(()) => self.issue(),
            Err((status, why)) => {
                self.refused.lock().expect("refused").push(why.clone());
                reply(
                    status,
                    json!({"error": "invalid_grant", "error_description": why}),
                )
            }
        }
    }

    fn issue(&self) -> Response<Full<Bytes>> {
        let n = self.issued.fetch_add(1, Ordering::SeqCst);
        let token = format!("ya29.test-{n}-{:016x}", fastrand::u64(..));
        let lifetime = *self.lifetime.lock().expect("lifetime");
        self.tokens
            .lock()
            .expect("tokens")
            .insert(token.clone(), Instant::now() + lifetime);
        let secs = lifetime.as_secs().max(1);
        reply(
            200,
            json!({"access_token": token, "expires_in": secs, "token_type": "Bearer"}),
        )
    }

    /// A JWT bearer grant, checked as Google does.
    fn grant(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), (u16, String)> {
        let form = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if !form {
            return Err((400, "Invalid Content-Type".into()));
        }
        let text = String::from_utf8_lossy(body);
        let field = |name: &str| {
            text.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .map(|v| v.replace("%3A", ":").replace("%3a", ":"))
        };
        if field("grant_type").as_deref() != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
            return Err((400, "Invalid grant_type".into()));
        }
        let jwt = field("assertion").ok_or((400, "Missing assertion".to_string()))?;
        let parts: Vec<&str> = jwt.split('.').collect();
        let [h, c, s] = parts[..] else {
            return Err((400, "Invalid JWT: not three parts".into()));
        };
        let decode = |p: &str| {
            URL_SAFE_NO_PAD
                .decode(p)
                .map_err(|_| (400, "Invalid JWT: not base64url".to_string()))
        };
        let header: Value = serde_json::from_slice(&decode(h)?)
            .map_err(|_| (400, "Invalid JWT header".to_string()))?;
        if header["alg"] != "RS256" {
            return Err((400, "Invalid JWT: alg must be RS256".into()));
        }
        let verifier = aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
            &self.public_key,
        );
        if verifier
            .verify(format!("{h}.{c}").as_bytes(), &decode(s)?)
            .is_err()
        {
            return Err((400, "Invalid JWT Signature.".into()));
        }
        let claims: Value = serde_json::from_slice(&decode(c)?)
            .map_err(|_| (400, "Invalid JWT claims".to_string()))?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let (iat, exp) = (
            claims["iat"].as_u64().unwrap_or(0),
            claims["exp"].as_u64().unwrap_or(0),
        );
        let checks = [
            (
                claims["iss"] == self.client_email.as_str(),
                "iss is not the account",
            ),
            (
                claims
                    .get("sub")
                    .is_none_or(|s| s == self.client_email.as_str()),
                "sub is not the account",
            ),
            (
                claims["aud"] == format!("http://{}/token", self.addr).as_str(),
                "aud is not the token URI",
            ),
            (
                claims["scope"]
                    .as_str()
                    .is_some_and(|s| s.split(' ').any(|x| x == SCOPE)),
                "no cloud-platform scope",
            ),
            (iat <= now + 60, "iat is in the future"),
            (
                exp > now && exp <= iat + 3600,
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, why)) => Err((400, why.to_string())),
            None => Ok(()),
        }
    }

    /// Whether `token` was issued here and has not expired.
    fn valid(&self, token: &str) -> bool {
        self.tokens
            .lock()
            .expect("tokens")
            .get(token)
            .is_some_and(|until| Instant::now() < *until)
    }
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}

/// One Vertex AI project and region serving Claude models.
#[derive(Clone)]
pub struct Vertex {
    pub project: String,
    pub region: String,
    pub models: Vec<String>,
    pub auth: Arc<AuthState>,
}

impl std::fmt::Debug for Vertex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vertex({}/{})", self.project, self.region)
    }
}

impl Vertex {
    pub fn new(auth: &GoogleAuth, project: &str, region: &str, models: &[&str]) -> Vertex {
        Vertex {
            project: project.into(),
            region: region.into(),
            models: models.iter().map(|m| m.to_string()).collect(),
            auth: auth.state.clone(),
        }
    }

    /// The Messages path this request stands for and its body as the
    /// Messages API takes it (`model` from the path), once the token,
    /// the path and Vertex's body rules pass.
    pub(crate) fn admit(
        &self,
        parts: &http::request::Parts,
        body: Option<&Value>,
    ) -> Result<(String, Option<Value>), Rejection> {
        let token = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !token.is_some_and(|t| self.auth.valid(t)) {
            self.auth.bad_tokens.fetch_add(1, Ordering::SeqCst);
            return Err(google(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
            ));
        }
        let prefix = format!(
            "/v1/projects/{}/locations/{}/publishers/anthropic/models/",
            self.project, self.region
        );
        let path = parts.uri.path();
        let Some(rest) = path.strip_prefix(&prefix) else {
            return Err(google(
                404,
                "NOT_FOUND",
                &format!("Resource not found: {path}"),
            ));
        };
        let (model, method) = rest
            .rsplit_once(':')
            .ok_or_else(|| google(404, "NOT_FOUND", "no method"))?;
        let model = model.replace("%40", "@");
        let Some(mut body) = body.cloned().filter(Value::is_object) else {
            return Err(google(
                400,
                "INVALID_ARGUMENT",
                "Invalid JSON payload received.",
            ));
        };
        if model == "count-tokens" && method == "rawPredict" {
            let known = body["model"]
                .as_str()
                .is_some_and(|m| self.models.iter().any(|k| k == m));
            if !known {
                return Err(google(
                    400,
                    "INVALID_ARGUMENT",
                    "count-tokens needs a known `model` in the body",
                ));
            }
            let object = body.as_object_mut().expect("object");
            if object.remove("anthropic_version") != Some(Value::from(VERSION)) {
                return Err(google(
                    400,
                    "INVALID_ARGUMENT",
                    "anthropic_version: vertex-2023-10-16 is required",
                ));
            }
            return Ok(("/v1/messages/count_tokens".into(), Some(body)));
        }
        if !self.models.contains(&model) {
            return Err(google(
                404,
                "NOT_FOUND",
                &format!(
                    "Publisher Model `projects/{}/locations/{}/publishers/anthropic/models/{model}` not found.",
                    self.project, self.region
                ),
            ));
        }
        let stream = body["stream"].as_bool().unwrap_or(false);
        match method {
            "rawPredict" if !stream => {}
            "streamRawPredict" if stream => {}
            "rawPredict" | "streamRawPredict" => {
                return Err(google(
                    400,
                    "INVALID_ARGUMENT",
                    "stream must be true on streamRawPredict and false on rawPredict",
                ));
            }
            _ => return Err(google(404, "NOT_FOUND", "unknown method")),
        }
        let object = body.as_object_mut().expect("object");
        if object.contains_key("model") {
            return Err(google(
                400,
                "INVALID_ARGUMENT",
                "Invalid JSON payload received. Unknown name \"model\": Cannot find field.",
            ));
        }
        if object.remove("anthropic_version") != Some(Value::from(VERSION)) {
            return Err(google(
                400,
                "INVALID_ARGUMENT",
                "anthropic_version: vertex-2023-10-16 is required",
            ));
        }
        object.insert("model".into(), model.into());
        Ok(("/v1/messages".into(), Some(body)))
    }
}

/// Google's error envelope.
fn google(code: u16, status: &str, message: &str) -> Rejection {
    let mut r = Rejection::new(code, message);
    r.body = Some(json!({"error": {"code": code, "message": message, "status": status}}));
    r
}

/// Vertex's quota answer, with a `RetryInfo` of `retry` seconds when set.
pub fn resource_exhausted(retry: Option<u64>) -> Failure {
    let mut error = json!({"code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude-sonnet-4-5. Please submit a quota increase request."});
    if let Some(s) = retry {
        error["details"] = json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{s}s")}]);
    }
    let mut f = Failure::new(429);
    f.body = Some(json!({"error": error}));
    f
}

/// A Google error of `code` and `status` (`UNAVAILABLE`, `INVALID_ARGUMENT`).
pub fn google_failure(code: u16, status: &str, message: &str) -> Failure {
    let mut f = Failure::new(code).with_message(message);
    f.body = Some(json!({"error": {"code": code, "message": message, "status": status}}));
    f
}
