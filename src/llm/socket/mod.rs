//! Codex's Responses-over-WebSocket transport on `openai` routes: a
//! `GET /v1/responses` with `Upgrade: websocket` is authenticated as an
//! HTTP request is (the same 401 before upgrading), then answered 101;
//! each `response.create` frame after it is one request through the same
//! pipeline an HTTP `POST /v1/responses` with `stream: true` takes
//! ([`super::generate`]: model, allow-lists, admission, budgets, failover,
//! translation, usage, access records), its events sent back one text
//! frame each ([`turn`]).
//!
//! The connection holds its slot under the connection cap and a place
//! under the per-address tunnel cap, never a request slot between turns.
//! It ends when:
//! - it carried no frame for `tunnel_idle_timeout` between turns;
//! - it reached its age (`tunnel_max_lifetime`, else an hour): an error
//!   frame with the code `websocket_connection_limit_reached` first, which
//!   Codex answers by opening a new one;
//! - the client closes it, shutdown begins, or the registry reclaims it.
//!
//! Every upstream is spoken to over SSE: the bridge keeps the
//! connection's conversation ([`conversation`]) so that
//! `previous_response_id` can be expanded into a complete request.

mod conversation;
mod deflate;
mod relay;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use weir_wire::Endpoint;
use weir_wire::responses::websocket as ws;

use self::deflate::Deflating;
use super::{Context, LlmRoute};
use crate::admit::tunnels::{CapTicket, TunnelLimits};
use crate::admit::{Admitter, Gate, rate::RateLimit};
use crate::config::RouteConfig;
use crate::conn::registry::Slot;
use crate::conn::state::CloseReason;
use crate::respond::{Payload, Rescue};
use crate::telemetry::{Metrics, RouteMetrics};

/// A connection's age when none is configured: what OpenAI's own
/// endpoint allows (60 minutes).
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(60 * 60);

/// A message's limit when the route sets no body limit: tungstenite's.
const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// The read and write buffers of a connection.
const BUFFER: usize = 16 << 10;

type Socket = WebSocketStream<Deflating<TokioIo<hyper::upgrade::Upgraded>>>;

/// Whether `req` asks to open the WebSocket transport: an HTTP/1.1
/// `GET` with `Upgrade: websocket` on an `openai` route's Responses path
/// (as is, or under the route's mount point).
pub(crate) fn asks_upgrade(llm: &LlmRoute, mount: &str, req: &Request<Incoming>) -> bool {
    let upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let connection_upgrade = weir_wire::fields::connection_upgrade(req.headers());
    let path = req.uri().path();
    let responses = |p: &str| {
        Endpoint::find(llm.settings.protocol, &http::Method::POST, p) == Some(Endpoint::Responses)
    };
    upgrade
        && connection_upgrade
        && req.method() == http::Method::GET
        && req.version() == http::Version::HTTP_11
        && (responses(path) || responses(super::api_path(mount, path)))
}

/// What a connection keeps of the request that opened it and of its
/// route, for the turns to come (each a request of its own: admitted,
/// recorded and accounted as one).
pub(crate) struct Opening {
    pub(crate) llm: Arc<LlmRoute>,
    pub(crate) route_name: Arc<str>,
    pub(crate) route: RouteConfig,
    pub(crate) route_metrics: Arc<RouteMetrics>,
    pub(crate) gate: Gate,
    pub(crate) rate: Option<Arc<RateLimit>>,
    pub(crate) admitter: Admitter,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) access_log: bool,
    pub(crate) body_read_timeout: Duration,
    pub(crate) host: String,
    pub(crate) slot: Arc<Slot>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) limits: TunnelLimits,
    /// Its place under the per-address tunnel cap (`None`: at the cap).
    pub(crate) cap: Option<CapTicket>,
    /// With `[telemetry.traces]`: each turn is traced as a request is,
    /// from the upgrade's head (its `traceparent`, the agents' hints).
    pub(crate) tracer: Option<Arc<crate::telemetry::trace::Tracer>>,
    /// Whether the connection is over TLS (`url.scheme` of the spans).
    pub(crate) tls: bool,
}

/// What the turns of one connection share: the opening, the client's
/// token and the headers each turn's request is made from.
struct Bridge {
    open: Opening,
    peer: std::net::IpAddr,
    token: Token,
    /// The upgrade request's head without its WebSocket fields: what each
    /// turn's `POST` carries upstream.
    head: http::request::Parts,
    api_path: String,
}

/// Accept the upgrade: authenticated as an HTTP request is (401 in the
/// route's shape), then 101 and the bridge spawned on the upgraded
/// connection.
pub(crate) async fn accept(
    open: Opening,
    mut req: Request<Incoming>,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let metrics = open.llm.metrics.clone();
    let accepted = handshake(&open, &req, cx).await;
    metrics.websocket_upgrade(if accepted.is_ok() {
        "accepted"
    } else {
        "refused"
    });
    let (accept_key, token) = accepted?;
    let agreed = deflate::negotiate(req.headers());
    let on_upgrade = hyper::upgrade::on(&mut req);
    open.slot.state.upgraded();
    let api_path = super::api_path(&open.route.path, req.uri().path()).to_string();
    let (head, _) = req.into_parts();
    let bridge = Bridge {
        peer: cx.peer,
        token,
        head: turn::head_for_turns(head),
        api_path,
        open,
    };
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "websocket upgrade did not complete");
                return;
            }
        };
        let limit =
            (bridge.open.route.max_request_body).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        // Buffers of 16 KiB, not tungstenite's 128 KiB each: an idle
        // connection costs little, and events are small.
        // A frame is bounded as a body is (else by tungstenite's 64 MiB
        // message, 16 MiB frame). With compression a message inflated is
        // bounded the same, and a frame by the message limit: an inflated
        // frame is handed on whole.
        let config = WebSocketConfig::default()
            .read_buffer_size(BUFFER)
            .write_buffer_size(BUFFER);
        let message_limit = limit
            .or(config.max_message_size)
            .unwrap_or(DEFAULT_MAX_MESSAGE);
        let frame_limit = match (limit, agreed) {
            (Some(l), _) => Some(l),
            (None, Some(_)) => Some(message_limit),
            (None, None) => config.max_frame_size,
        };
        let config = config
            .max_message_size(Some(message_limit))
            .max_frame_size(frame_limit);
        let io = Deflating::new(TokioIo::new(upgraded), agreed, message_limit);
        let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        let reason = run(&bridge, socket).await;
        tracing::debug!(reason, "websocket closed");
        bridge.open.metrics.tunnel_closed(reason);
    });
    let mut resp = Response::new(Payload::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert("sec-websocket-accept", accept_key);
    if let Some(agreed) = agreed {
        h.insert("sec-websocket-extensions", agreed.header());
    }
    Ok(resp)
}

/// Who an upgrade presented and the headers that carried it; `None` on a
/// route that does not ask.
type Token = Option<super::client::Presenting>;

/// The checks before a 101: the client token, the WebSocket fields, a
/// place under the tunnel cap. The `Sec-WebSocket-Accept` value and the
/// token found.
async fn handshake(
    open: &Opening,
    req: &Request<Incoming>,
    cx: &Context<'_>,
) -> Result<(HeaderValue, Token), Rescue> {
    let token = super::client::authenticate(&open.llm, req.headers(), cx).await?;
    let key = req.headers().get("sec-websocket-key");
    let version_13 = req
        .headers()
        .get("sec-websocket-version")
        .is_some_and(|v| v.as_bytes() == b"13");
    let (Some(key), true) = (key, version_13) else {
        return Err(Rescue::status(StatusCode::BAD_REQUEST)
            .saying("a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13"));
    };
    if open.cap.is_none() {
        return Err(Rescue::shed("tunnels_per_ip")
            .saying("this address holds as many open WebSocket connections as it may"));
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let accept = HeaderValue::from_str(&accept)
        .map_err(|_| Rescue::status(StatusCode::BAD_REQUEST).saying("bad Sec-WebSocket-Key"))?;
    Ok((accept, token))
}

/// The connection's life: frames read between turns, each
/// `response.create` served as a turn; the reason it ended.
async fn run(bridge: &Bridge, mut socket: Socket) -> &'static str {
    let open = &bridge.open;
    let opened = Instant::now();
    let max_age = open.limits.max_lifetime.unwrap_or(DEFAULT_MAX_AGE);
    let mut shutdown = open.shutdown.clone();
    let mut kept = conversation::Kept::default();
    loop {
        let idle = Instant::now() + open.limits.idle;
        let message = tokio::select! {
            m = socket.next() => m,
            () = tokio::time::sleep_until(idle) => {
                close(&mut socket, CloseCode::Away, "idle").await;
                return "idle_timeout";
            }
            () = tokio::time::sleep_until(opened + max_age) => {
                let frame = error_frame(400, ws::error(
                    "invalid_request_error",
                    "websocket_connection_limit_reached",
                    "Responses websocket connection limit reached. Create a new websocket connection to continue.",
                    None,
                ));
                let _ = socket.send(frame).await;
                close(&mut socket, CloseCode::Normal, "connection age").await;
                return "max_lifetime";
            }
            () = async { let _ = shutdown.wait_for(|s| *s).await; } => {
                close(&mut socket, CloseCode::Away, "shutdown").await;
                return "shutdown";
            }
            closed = open.slot.state.close_requested(CloseReason::None) => {
                close(&mut socket, CloseCode::Away, "closing").await;
                return match closed {
                    CloseReason::Reclaimed => "reclaimed",
                    _ => "connection",
                };
            }
        };
        open.slot.state.tunnel_active();
        let text = match message {
            Some(Err(e)) if too_big(&e) => {
                close(&mut socket, CloseCode::Size, "message too big").await;
                return "message_too_big";
            }
            None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return "closed",
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                let e = turn::invalid("binary frames are not part of this protocol");
                if socket.send(e).await.is_err() {
                    return "closed";
                }
                continue;
            }
            // tungstenite answers pings itself.
            Some(Ok(_)) => continue,
        };
        if turn::serve(bridge, &mut socket, &mut kept, text)
            .await
            .is_err()
        {
            return "closed";
        }
        socket.get_mut().rest();
    }
}

/// Whether a read failed on a message past the limit, as it came or
/// inflated: the close then says so (1009).
fn too_big(e: &tokio_tungstenite::tungstenite::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Capacity(_) => true,
        Error::Io(e) => deflate::stream::is_too_big(e),
        _ => false,
    }
}

/// The socket is gone: the connection ends.
struct Gone;

/// Send one frame.
async fn send(socket: &mut Socket, message: Message) -> Result<(), Gone> {
    socket.send(message).await.map_err(|_| Gone)
}

/// An error frame with no headers.
fn error_frame(status: u16, error: serde_json::Value) -> Message {
    let frame = ws::error_frame(status, error, serde_json::Map::new());
    Message::text(frame.to_string())
}

/// Send a close frame (best effort: the peer may be gone).
async fn close(socket: &mut Socket, code: CloseCode, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
}
