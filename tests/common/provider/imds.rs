//! The EC2 instance metadata service as an instance that allows IMDSv2
//! only (`HttpTokens = required`): a session token from
//! `PUT /latest/api/token` (its `X-aws-ec2-metadata-token-ttl-seconds`
//! required, 1–21600), then every `GET` carrying it in
//! `X-aws-ec2-metadata-token`; a `GET` without one (IMDSv1) or with a
//! token it did not issue, or one past its life, is refused 401. A `PUT`
//! carrying `X-Forwarded-For` is refused 403, as the service does.
//! Serves the instance role's name and its credentials document with an
//! `Expiration`. Source: the EC2 user guide, "Use IMDSv2" and "Retrieve
//! security credentials from instance metadata".

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;

const ROLES: &str = "/latest/meta-data/iam/security-credentials/";

/// The role and the credentials the instance has.
#[derive(Clone, Debug)]
pub struct Role {
    pub name: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    /// How long each credentials document issued lasts.
    pub lifetime: Duration,
}

struct State {
    role: Role,
    tokens: Mutex<Vec<(String, Instant)>>,
    /// Credentials documents served.
    issued: AtomicUsize,
    /// GETs refused for want of a valid token.
    refused: AtomicUsize,
}

/// A running stand-in; stopped when dropped.
pub struct Imds {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Imds {
    pub async fn spawn(role: Role) -> Imds {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State {
            role,
            tokens: Mutex::new(Vec::new()),
            issued: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        });
        let shared = state.clone();
        let task = super::serve_http1(listener, move |req| {
            let state = shared.clone();
            async move { serve(&state, req) }
        });
        Imds { addr, state, task }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Credentials documents served so far.
    pub fn issued(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }

    /// GETs refused 401 so far.
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }
}

impl Drop for Imds {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn serve(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let path = req.uri().path().to_string();
    if req.method() == Method::PUT && path == "/latest/api/token" {
        if header("x-forwarded-for").is_some() {
            return text(403, "Forbidden");
        }
        let ttl =
            header("x-aws-ec2-metadata-token-ttl-seconds").and_then(|v| v.parse::<u64>().ok());
        let Some(ttl) = ttl.filter(|t| (1..=21_600).contains(t)) else {
            return text(400, "Bad Request");
        };
        let token = format!("imds-session-{:016x}", fastrand::u64(..));
        let until = Instant::now() + Duration::from_secs(ttl);
        state
            .tokens
            .lock()
            .expect("tokens")
            .push((token.clone(), until));
        return text(200, &token);
    }
    if req.method() != Method::GET {
        return text(405, "Method Not Allowed");
    }
    let valid = header("x-aws-ec2-metadata-token").is_some_and(|t| {
        let tokens = state.tokens.lock().expect("tokens");
        tokens
            .iter()
            .any(|(issued, until)| *issued == t && Instant::now() < *until)
    });
    if !valid {
        state.refused.fetch_add(1, Ordering::SeqCst);
        return text(401, "Unauthorized");
    }
    let role = &state.role;
    if path == ROLES {
        return text(200, &role.name);
    }
    if path.strip_prefix(ROLES) == Some(role.name.as_str()) {
        state.issued.fetch_add(1, Ordering::SeqCst);
        let now = SystemTime::now();
        let document = serde_json::json!({
            "Code": "Success",
            "LastUpdated": super::sts::iso8601(now),
            "Type": "AWS-HMAC",
            "AccessKeyId": role.access_key_id,
            "SecretAccessKey": role.secret_access_key,
            "Token": role.session_token,
            "Expiration": super::sts::iso8601(now + role.lifetime),
        });
        return text(200, &document.to_string());
    }
    text(404, "Not Found")
}

fn text(status: u16, body: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}
