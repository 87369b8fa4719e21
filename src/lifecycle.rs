//! The request lifecycle, phase by phase, in the order a request travels:
//!
//! 1. **accept** — the connection's listener, peer and TLS state
//!    ([`ConnInfo`]); the request takes the current [`Snapshot`].
//! 2. **framing** — what hyper accepts but RFC 9112 forbids (two Host
//!    lines, chunked twice) is 400 and close.
//! 3. **acme** — an ACME http-01 challenge in progress is answered, on any
//!    listener, before redirects, gates and rate limits.
//! 4. **redirect** — a redirecting listener answers 308 to HTTPS and stops.
//! 5. **admit** — the process-wide gate: shed with 503, never queue.
//! 6. **route** — host + path select a route, or 404: the Host checked
//!    and normalised, the path as the upstream will resolve it
//!    ([`normal`]), which is then the path forwarded. From here on errors
//!    are written in the route's shape.
//! 7. **route policy** — the route's own gate; a declared body over the
//!    route limit gets 413 before a byte of it is read.
//! 8. **serve** — one `match` on the route's [`Target`]: a proxy route
//!    forwards upstream and streams the answer back; an LLM route routes by
//!    model with failover ([`crate::llm`]).
//! 9. **respond** — the body is wrapped so the access log and metrics are
//!    written when it ends.
//!
//! Every failure on the way is a [`Rescue`], answered in one place.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::acme::Challenges;
use crate::admit::{self, rate::Client, rate::Refusal};
use crate::compress;
use crate::config::{Config, RedirectSettings};
use crate::conn::state::CloseReason;
use crate::conn::{self, info::ConnInfo};
use crate::llm;
use crate::proxy::{self, ClientSide};
use crate::respond::{
    ErrorShape, InFlight, Payload, Recorded, RequestRecord, Rescue, ResponseBody,
};
use crate::route::normal::{self, Host};
use crate::route::{Route, Target};
use crate::rules;
use crate::snapshot::{BuildError, People, Snapshot, Standing};
use crate::statics;
use crate::telemetry::{Metrics, trace};

/// The request handler: the current snapshot, swappable as a whole, and
/// the long-lived state every snapshot shares.
pub(crate) struct Gateway {
    current: ArcSwap<Snapshot>,
    standing: Standing,
    /// ACME challenge answers (http-01 tokens).
    challenges: Arc<Challenges>,
    /// With `[telemetry.metrics]`: the OTLP metrics exporter (its task
    /// ends with the gateway).
    metrics_export: Option<crate::telemetry::otlp_metrics::MetricsExport>,
}

impl Gateway {
    pub(crate) fn new(
        config: &Config,
        metrics: Arc<Metrics>,
        challenges: Arc<Challenges>,
        people: People,
    ) -> Result<Self, BuildError> {
        let records =
            crate::telemetry::RecordSink::open(&config.log).map_err(BuildError::UsageLog)?;
        let tracer = match &config.traces {
            Some(t) => Some(
                crate::telemetry::trace::Tracer::start(t, metrics.trace_spans())
                    .map_err(BuildError::Traces)?,
            ),
            None => None,
        };
        let metrics_export = match &config.metrics_export {
            Some(m) => Some(
                crate::telemetry::otlp_metrics::MetricsExport::start(m, metrics.clone())
                    .map_err(BuildError::MetricsExport)?,
            ),
            None => None,
        };
        let mut standing = Standing::new(
            config.server.max_concurrent_requests,
            config.server.max_buffered_body_bytes,
            config.server.max_open_static_files,
            metrics,
            records,
            config.cluster.as_ref(),
            people,
        );
        standing.tracer = tracer;
        let snapshot = Snapshot::build(config, &standing)?;
        Ok(Gateway {
            current: ArcSwap::from_pointee(snapshot),
            standing,
            challenges,
            metrics_export,
        })
    }

    /// Build a snapshot from `config` and make it current; requests already
    /// running keep the one they started with. On error the current
    /// snapshot stays. Returns the new generation.
    pub(crate) fn replace(&self, config: &Config) -> Result<u64, BuildError> {
        let snapshot = Snapshot::build(config, &self.standing)?;
        let generation = snapshot.generation;
        self.current.store(Arc::new(snapshot));
        Ok(generation)
    }

    /// The fleet's shared state, with `[cluster]` (as at start).
    pub(crate) fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.standing.cluster.as_ref()
    }

    /// The OTLP metrics exporter, with `[telemetry.metrics]` (as at
    /// start).
    pub(crate) fn metrics_export(&self) -> Option<&crate::telemetry::otlp_metrics::MetricsExport> {
        self.metrics_export.as_ref()
    }

    /// The tracer, with `[telemetry.traces]` (as at start).
    pub(crate) fn tracer(&self) -> Option<&Arc<crate::telemetry::trace::Tracer>> {
        self.standing.tracer.as_ref()
    }

    /// The snapshot new requests use.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }
}

/// Every request of every connection enters here (the connection driver is
/// generic over [`conn::Handler`], so this call is not dynamic): phases 1
/// and 9 around `Gateway::phases` — the request record opened here ends
/// with the response body.
impl conn::Handler for Gateway {
    type Body = ResponseBody;

    async fn handle(&self, req: Request<Incoming>, conn: &ConnInfo) -> Response<ResponseBody> {
        let start = Instant::now();
        let snapshot = self.current.load_full();
        let metrics = &self.standing.metrics;
        let conn_state = &conn.slot.state;
        let nth_request = conn_state.request_started();
        let in_flight = InFlight::new(conn_state.clone());
        let last_on_connection = snapshot.max_requests_per_connection > 0
            && nth_request >= snapshot.max_requests_per_connection;
        let http1 = req.version() <= http::Version::HTTP_11;
        let host_sent = target_host(&req);
        let mut record = RequestRecord {
            start,
            client: conn.peer.ip(),
            host: host_sent.clone(),
            method: req.method().clone(),
            path: req.uri().path_and_query().cloned(),
            status: 0,
            route: None,
            route_metrics: None,
            upstream: None,
            metrics: metrics.clone(),
            access_log: snapshot.access_log,
            in_flight: Some(in_flight),
            admission: None,
            kind: None,
            request_id: None,
            trace: None,
        };
        if let Some(tracer) = &self.standing.tracer {
            record.trace = trace::http::begin(tracer, &req, conn.peer.ip(), conn.tls);
        }

        // Until a route is known, errors take the plain shape.
        let mut shape = ErrorShape::for_plain_route(req.headers());
        let mut resp = match self
            .phases(
                &snapshot,
                req,
                conn,
                host_sent.as_ref(),
                &mut shape,
                &mut record,
            )
            .await
        {
            Ok(resp) => resp,
            // Before routing, the server's pages; after, the route chose.
            Err(rescue) if record.route.is_none() && snapshot.error_pages.is_some() => rescue
                .with_page(snapshot.error_pages.as_deref())
                .answer(shape, metrics, None),
            Err(rescue) => rescue.answer(shape, metrics, record.route.as_ref()),
        };
        if last_on_connection {
            // The per-connection request cap: finish this one, then close
            // (Connection: close on HTTP/1.1, GOAWAY on HTTP/2).
            conn_state.close(CloseReason::MaxRequests);
        }
        // In a drain (shutdown or hand-over) every HTTP/1.1 answer is the
        // connection's last: hyper closes after it, and the client's next
        // request goes to a new connection — to whoever listens now. (An
        // upgrade's 101 keeps its own Connection header.)
        let draining = *conn.shutdown.borrow();
        if http1
            && (last_on_connection || draining)
            && resp.status() != http::StatusCode::SWITCHING_PROTOCOLS
        {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        record.status = resp.status().as_u16();
        record.answered(resp.headers());
        resp.map(|body| Recorded::new(body, Some(record)))
    }
}

/// What the phases before routing decided: weir answered already, or the
/// request goes on with this host.
enum Front<'a> {
    Answered(Response<Payload>),
    Host(Host<'a>),
}

impl Gateway {
    /// Phases 2 to 8; any failure is a [`Rescue`] for the caller to answer.
    async fn phases(
        &self,
        snapshot: &Snapshot,
        req: Request<Incoming>,
        conn: &ConnInfo,
        host_sent: Option<&HeaderValue>,
        shape: &mut ErrorShape,
        record: &mut RequestRecord,
    ) -> Result<Response<Payload>, Rescue> {
        let host_sent = host_sent.and_then(|h| h.to_str().ok());
        let host = match self.front(snapshot, &req, conn, host_sent)? {
            Front::Answered(resp) => return Ok(resp),
            Front::Host(host) => host,
        };

        // Phase: admit — the process-wide gate, before any routing work,
        // so unknown-route floods are bounded too.
        match self.standing.admitter.admit(conn.peer.ip()) {
            Ok(a) => record.admission = Some(a),
            Err(shed) => {
                record.traced(|s| trace::http::admission(s, "shed", Some(shed.label())));
                return Err(Rescue::shed(shed.label()));
            }
        }

        // Phase: route, by the path as the upstream will resolve it.
        let path = normal::path(req.uri().path());
        let Some(route) = snapshot.router.find(host.name(), &path.path) else {
            return Err(Rescue::status(StatusCode::NOT_FOUND));
        };
        record.route = Some(route.name.clone());
        record.traced(|s| trace::http::routed(s, &route.name));
        record.route_metrics = Some(route.metrics.clone());
        record.upstream = route.target.label().cloned();
        *shape = route.target.error_shape(req.headers());
        let facts = route.config.rules.as_deref().and_then(|r| {
            let arrival = rules::Arrival {
                host: host.authority(),
                peer: conn.peer,
                tls: conn.tls,
                trusted_proxies: &snapshot.trusted_proxies,
            };
            rules::facts(r, &req, &path.path, &arrival)
        });
        record.request_id = facts.as_ref().and_then(|f| f.request_id.clone());

        // From here an error may be answered with the route's page.
        let pages = route.config.error_pages.as_deref();
        let forwarded = path_forwarded(path, route);
        // What the request asks of a compressing route, read before the
        // request is consumed (one branch for a route that does not).
        let compress = (route.config.compress.as_deref())
            .map(|settings| (settings, compress::Asked::of(settings, &req)));
        let served: Result<Response<Payload>, Rescue> = async {
            let forwarded = forwarded?;
            let forwarded = match route.config.rules.as_deref() {
                Some(rules) => rules::path::rewritten(rules, forwarded, req.uri().path()),
                None => forwarded,
            };
            let mut req = with_path(req, forwarded)?;
            self.route_policy(route, &req, conn, host.name(), record)
                .await?;
            if let Some(access) = &route.access {
                let asking = crate::access::Asking {
                    peer: conn.peer.ip(),
                    trusted_proxies: &snapshot.trusted_proxies,
                    route: &route.name,
                    host: host.name(),
                };
                access.check(req.headers_mut(), &asking).await?;
            }
            self.serve(snapshot, route, req, conn, &host, facts.as_ref(), record)
                .await
        }
        .await;
        let served = served.map_err(|r| r.with_page(pages)).map(|mut resp| {
            if let Some(pages) = pages.filter(|p| p.intercept_upstream) {
                resp = crate::respond::intercept_error_page(resp, pages);
            }
            route_headers(&route.config, conn.tls, resp.headers_mut());
            match compress {
                Some((settings, asked)) => compress::respond(settings, &asked, resp),
                None => resp,
            }
        });
        // Response rules hold for weir's own answers too (nginx's `always`).
        let (Some(facts), Some(rules)) = (&facts, route_header_rules(route)) else {
            return served;
        };
        let metrics = &self.standing.metrics;
        let mut resp = served.unwrap_or_else(|r| r.answer(*shape, metrics, record.route.as_ref()));
        rules::headers::to_client(resp.headers_mut(), rules, facts);
        Ok(resp)
    }

    /// Phases before routing: framing, ACME's http-01 answers, the Host,
    /// CONNECT, the HTTPS redirect.
    fn front<'h>(
        &self,
        snapshot: &Snapshot,
        req: &Request<Incoming>,
        conn: &ConnInfo,
        host_sent: Option<&'h str>,
    ) -> Result<Front<'h>, Rescue> {
        // Phase: framing — what hyper accepts but RFC 9112 does not.
        if ambiguous_framing(req) {
            return Err(Rescue::status(StatusCode::BAD_REQUEST).closing());
        }
        // Phase: acme — the CA's validator, whatever the listener does.
        if let Some(token) = req.uri().path().strip_prefix(ACME_CHALLENGE_PATH)
            && let Some(answer) = self.challenges.http01(token)
        {
            return Ok(Front::Answered(acme_answer(&answer)));
        }

        // RFC 9110 §7.2: a name or an IP literal and a port, nothing else.
        let Some(host) = host_sent.and_then(normal::host) else {
            return Err(Rescue::status(StatusCode::BAD_REQUEST).closing());
        };

        // A reverse proxy is not a forward proxy: no CONNECT tunnels.
        if req.method() == http::Method::CONNECT {
            return Err(Rescue::status(StatusCode::METHOD_NOT_ALLOWED));
        }

        // Phase: redirect.
        if let Some(redirect) = conn.redirect {
            return redirect_to_https(snapshot, req, host.name(), redirect).map(Front::Answered);
        }
        Ok(Front::Host(host))
    }

    /// Phase: route policy — what the route kind leaves to this phase
    /// ([`Target::at_entry`]): the client's rate, the route's gate, a
    /// declared body too large.
    async fn route_policy(
        &self,
        route: &Route,
        req: &Request<Incoming>,
        conn: &ConnInfo,
        host: &str,
        record: &mut RequestRecord,
    ) -> Result<(), Rescue> {
        let at_entry = route.target.at_entry();
        if let Some(rate) = &route.rate
            && at_entry.rate_by_address
        {
            let client = Client::ip(conn.peer.ip());
            let refused = match rate.cluster() {
                // The fleet's limit: one round trip (or none while Redis is down).
                Some(_) => admit::limit_client(Some(rate), client, None, None, None)
                    .await
                    .err(),
                None => rate.check(client).err().map(Refusal::Limited),
            };
            if let Some(refused) = refused {
                record.admission = None;
                record.traced(|s| trace::http::admission(s, "rate_limited", None));
                return Err(match refused {
                    Refusal::Limited(limited) | Refusal::KeyLimited(limited) => {
                        Rescue::rate_limited(limited, conn.peer.ip(), &route.name, host)
                    }
                    Refusal::Full | Refusal::Unavailable => Rescue::cluster_unavailable(),
                });
            }
        }

        // The route's own gate.
        if let Some(admission) = &mut record.admission
            && let Err(shed) = admission.enter_route(&route.gate)
        {
            record.admission = None;
            record.traced(|s| trace::http::admission(s, "shed", Some(shed.label())));
            return Err(Rescue::shed(shed.label()));
        }
        record.traced(|s| trace::http::admission(s, "admitted", None));

        // A declared body over the limit, refused unread.
        if let Some(limit) = route.config.max_request_body
            && at_entry.refuse_declared_body
            && declared_length(req).is_some_and(|len| len > limit)
        {
            return Err(Rescue::status(StatusCode::PAYLOAD_TOO_LARGE).closing());
        }
        Ok(())
    }

    /// Phase: serve, by route kind — the one place route kinds are
    /// dispatched. `host` is the Host as checked and normalised: its name
    /// routed, its authority is what goes upstream; `facts` are there when
    /// the route has header rules.
    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &self,
        snapshot: &Snapshot,
        route: &Route,
        req: Request<Incoming>,
        conn: &ConnInfo,
        host: &Host<'_>,
        facts: Option<&rules::Facts>,
        record: &mut RequestRecord,
    ) -> Result<Response<Payload>, Rescue> {
        match &route.target {
            Target::Proxy(upstream) => {
                let client = ClientSide {
                    conn,
                    trusted_proxies: &snapshot.trusted_proxies,
                    body_rate: snapshot.body_rate,
                    tunnel_limits: snapshot.tunnel_limits,
                    tunnel_cap: &self.standing.tunnel_cap,
                    metrics: &self.standing.metrics,
                    rules: route_header_rules(route).zip(facts),
                };
                proxy::forward(
                    req,
                    &route.config,
                    upstream,
                    &client,
                    Some(host.authority()),
                    &mut record.admission,
                    proxy::Report {
                        metrics: &self.standing.metrics,
                        route: &route.name,
                        served_by: &mut record.upstream,
                        trace: record.trace.as_deref(),
                    },
                )
                .await
                .map_err(|e| e.rescue())
            }
            Target::Llm(llm) if llm::asks_websocket(llm, &route.config.path, &req) => {
                self.open_websocket(snapshot, route, llm, req, conn, host, record)
                    .await
            }
            Target::Llm(llm) => {
                let facts = llm::SharedLlmFacts::default();
                record.kind = Some(Arc::new(llm::LlmRecord(facts.clone())));
                let cx = self.llm_context(snapshot, route, conn, host, &facts, record);
                llm::serve(llm, req, cx).await
            }
            Target::Static(site) => statics::serve(site, &req).await,
            Target::Redirect(redirect) => {
                rules::redirect::answer(redirect, &req, host.authority(), conn.peer, conn.tls)
            }
        }
    }
}

impl Gateway {
    /// What an LLM route's request needs from the lifecycle.
    fn llm_context<'a>(
        &'a self,
        snapshot: &Snapshot,
        route: &'a Route,
        conn: &ConnInfo,
        host: &'a Host<'_>,
        facts: &'a llm::SharedLlmFacts,
        record: &'a mut RequestRecord,
    ) -> llm::Context<'a> {
        llm::Context {
            route_name: &route.name,
            route: &route.config,
            body_rate: snapshot.body_rate,
            body_read_timeout: snapshot.body_read_timeout,
            metrics: &self.standing.metrics,
            facts,
            admission: &mut record.admission,
            started: record.start,
            rate: route.rate.as_ref(),
            peer: conn.peer.ip(),
            host: host.name(),
            trace: record.trace.as_deref(),
        }
    }

    /// Codex's WebSocket transport on an `openai` route: the upgrade
    /// checked and answered by `llm`, which admits each turn after it as
    /// a request of its own.
    #[allow(clippy::too_many_arguments)]
    async fn open_websocket(
        &self,
        snapshot: &Snapshot,
        route: &Route,
        llm: &Arc<llm::LlmRoute>,
        req: Request<Incoming>,
        conn: &ConnInfo,
        host: &Host<'_>,
        record: &mut RequestRecord,
    ) -> Result<Response<Payload>, Rescue> {
        let facts = llm::SharedLlmFacts::default();
        let cx = self.llm_context(snapshot, route, conn, host, &facts, record);
        let opening = llm::Opening {
            llm: llm.clone(),
            route_name: route.name.clone(),
            route: route.config.clone(),
            route_metrics: route.metrics.clone(),
            gate: route.gate.clone(),
            rate: route.rate.clone(),
            admitter: self.standing.admitter.clone(),
            metrics: self.standing.metrics.clone(),
            access_log: snapshot.access_log,
            body_read_timeout: snapshot.body_read_timeout,
            host: host.name().to_string(),
            slot: conn.slot.clone(),
            shutdown: conn.shutdown.clone(),
            limits: snapshot.tunnel_limits,
            cap: self.standing.tunnel_cap.take(conn.peer.ip()),
            tracer: self.standing.tracer.clone(),
            tls: conn.tls,
        };
        llm::accept_websocket(opening, req, &cx).await
    }
}

/// A route's header rules, if it has any.
fn route_header_rules(route: &Route) -> Option<&crate::config::HeaderRules> {
    route.config.rules.as_ref()?.headers.as_ref()
}

/// The response headers a route sets on what it serves: HSTS on HTTPS,
/// and the upstream's `Server` header removed or replaced.
fn route_headers(route: &crate::config::RouteConfig, tls: bool, h: &mut http::HeaderMap) {
    if tls && let Some(hsts) = &route.headers.hsts {
        h.insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    match &route.headers.server {
        crate::config::ServerHeader::Pass => {}
        crate::config::ServerHeader::Remove => {
            h.remove(header::SERVER);
        }
        crate::config::ServerHeader::Set(v) => {
            h.insert(header::SERVER, v.clone());
        }
    }
}

/// Where RFC 8555 §8.3 puts an http-01 answer.
const ACME_CHALLENGE_PATH: &str = "/.well-known/acme-challenge/";

fn acme_answer(key_authorization: &str) -> Response<Payload> {
    let mut resp = Response::new(Payload::text(key_authorization.to_string()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    resp
}

/// 308 to the same host and path over HTTPS — only for hosts some route
/// serves, so the listener cannot be used as an open redirector.
fn redirect_to_https(
    snapshot: &Snapshot,
    req: &Request<Incoming>,
    host: &str,
    redirect: RedirectSettings,
) -> Result<Response<Payload>, Rescue> {
    if !snapshot.router.knows_host(host) {
        return Err(Rescue::status(StatusCode::NOT_FOUND));
    }
    let pq = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let location = if redirect.https_port == 443 {
        format!("https://{host}{pq}")
    } else {
        format!("https://{host}:{}{pq}", redirect.https_port)
    };
    let Ok(location) = HeaderValue::from_str(&location) else {
        return Err(Rescue::status(StatusCode::BAD_REQUEST));
    };
    let mut resp = Response::new(Payload::empty());
    *resp.status_mut() = StatusCode::PERMANENT_REDIRECT;
    resp.headers_mut().insert(header::LOCATION, location);
    Ok(resp)
}

/// The path that goes on to be served when it is not the client's: the
/// one the request was routed by, unless its route takes raw paths. A path
/// holding an encoded separator or a broken escape is refused on a route
/// that normalises: the upstream could decode it into a path weir did not
/// route.
fn path_forwarded(path: normal::Path<'_>, route: &Route) -> Result<Option<String>, Rescue> {
    if route.config.raw_path {
        return Ok(None);
    }
    if let Some(refused) = path.refused {
        tracing::debug!(route = %route.name, ?refused, "path refused");
        return Err(Rescue::status(StatusCode::BAD_REQUEST));
    }
    Ok(match path.path {
        std::borrow::Cow::Owned(path) => Some(path),
        std::borrow::Cow::Borrowed(_) => None,
    })
}

/// The request with its path replaced by `path`, the query kept.
fn with_path(
    mut req: Request<Incoming>,
    path: Option<String>,
) -> Result<Request<Incoming>, Rescue> {
    let Some(path) = path else {
        return Ok(req);
    };
    let pq = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = Some(
        http::uri::PathAndQuery::try_from(pq)
            .map_err(|_| Rescue::status(StatusCode::BAD_REQUEST))?,
    );
    *req.uri_mut() =
        http::Uri::from_parts(parts).map_err(|_| Rescue::status(StatusCode::BAD_REQUEST))?;
    Ok(req)
}

/// The host a request is for. The target's authority wins over `Host`:
/// HTTP/2 carries the host as `:authority`, and an HTTP/1.1 request in
/// absolute form (`GET http://a.example/x`) names it in the target, which
/// RFC 9112 §3.2.2 says must be used instead of the Host header. Cloning a
/// parsed header value shares its bytes.
fn target_host<B>(req: &Request<B>) -> Option<HeaderValue> {
    req.uri()
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        .or_else(|| req.headers().get(header::HOST).cloned())
}

/// Framing hyper lets through that RFC 9112 forbids, and that two parsers
/// could read differently: more than one Host line (§3.2: answer 400), or
/// chunked applied more than once (§6.1). (Content-Length together with
/// Transfer-Encoding is handled by hyper: the body is read as chunked, the
/// length is dropped, and the connection is closed after the response.)
fn ambiguous_framing<B>(req: &Request<B>) -> bool {
    let h = req.headers();
    if h.get_all(header::HOST).iter().nth(1).is_some() {
        return true;
    }
    let chunked = h
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .filter(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"chunked"))
        .count();
    chunked > 1
}

/// The body length a request declares, if any.
fn declared_length<B>(req: &Request<B>) -> Option<u64> {
    weir_wire::fields::content_length(req.headers())
}
