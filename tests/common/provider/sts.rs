//! AWS STS's `AssumeRoleWithWebIdentity`, as EKS's IRSA uses it: a form
//! POST (unsigned) naming the role, a session name and the web identity
//! token; answered with temporary credentials and their expiry in STS's
//! XML, or `InvalidIdentityToken` (403) for a token it did not issue or a
//! role it does not know. Source: the STS API reference,
//! "AssumeRoleWithWebIdentity".

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::net::TcpListener;

/// What the stand-in issues and to whom.
#[derive(Clone, Debug)]
pub struct Grant {
    pub role_arn: String,
    pub token: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    /// How long the issued credentials last.
    pub lifetime: Duration,
}

struct State {
    grant: Grant,
    calls: AtomicUsize,
    delay_ms: AtomicU64,
}

/// A running STS stand-in; stopped when dropped.
pub struct Sts {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Sts {
    pub async fn spawn(grant: Grant) -> Sts {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State {
            grant,
            calls: AtomicUsize::new(0),
            delay_ms: AtomicU64::new(0),
        });
        let shared = state.clone();
        let task = super::serve_http1(listener, move |req| {
            let state = shared.clone();
            async move { serve(&state, req).await }
        });
        Sts { addr, state, task }
    }

    /// `http://127.0.0.1:<port>/`, for `AWS_ENDPOINT_URL_STS`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The exchanges answered so far.
    pub fn calls(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// Answer every later exchange after `delay`.
    pub fn set_delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.state.delay_ms.store(ms, Ordering::SeqCst);
    }
}

impl Drop for Sts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let raw = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let form: Vec<(String, String)> = url_form(&String::from_utf8_lossy(&raw));
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    state.calls.fetch_add(1, Ordering::SeqCst);
    let g = &state.grant;
    if get("Action") != Some("AssumeRoleWithWebIdentity") || get("Version") != Some("2011-06-15") {
        return xml(400, error("InvalidAction", "Could not find operation"));
    }
    if get("RoleSessionName").is_none_or(str::is_empty) {
        return xml(400, error("ValidationError", "RoleSessionName is required"));
    }
    if get("RoleArn") != Some(g.role_arn.as_str())
        || get("WebIdentityToken") != Some(g.token.as_str())
    {
        return xml(
            403,
            error(
                "InvalidIdentityToken",
                "Couldn't retrieve verification key from your identity provider",
            ),
        );
    }
    let expires = iso8601(SystemTime::now() + g.lifetime);
    xml(
        200,
        format!(
            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <AssumeRoleWithWebIdentityResult><Credentials>\
             <AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey>\
             <SessionToken>{}</SessionToken><Expiration>{expires}</Expiration>\
             </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
            g.access_key_id, g.secret_access_key, g.session_token
        ),
    )
}

fn error(code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>\
         <Code>{code}</Code><Message>{message}</Message></Error></ErrorResponse>"
    )
}

fn xml(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/xml")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

/// `a=b&c=d`, percent- and `+`-decoded.
fn url_form(text: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_encoding::percent_decode_str(&s)
            .decode_utf8_lossy()
            .into_owned()
    };
    text.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The civil date and time of `t` (UTC): year, month, day, hour, minute,
/// second.
pub fn civil(t: SystemTime) -> (u64, u64, u64, u64, u64, u64) {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after epoch")
        .as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

pub fn iso8601(t: SystemTime) -> String {
    let (y, m, d, h, mi, s) = civil(t);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}
