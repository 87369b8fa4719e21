//! How a failure is answered, as one value.
//!
//! Whoever understands a failure (the gate that shed, the proxy whose
//! upstream timed out, the body that crossed its limit) says once, in a
//! [`Rescue`], what the client gets: the status, whether the connection can
//! still be trusted, whether the client may simply try again, and what the
//! failure counts as in metrics. [`Rescue::answer`] carries that out in one
//! place, so the status, the close decision and the metric cannot drift
//! apart. (linkerd2-proxy answers failures the same way, with one synthetic
//! response value.)

use std::net::IpAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

use super::Payload;
use super::error::{ErrorShape, GrpcCode, MAX_RETRY_AFTER, grpc_response, render};
use crate::admit::rate::{self, Limited};
use crate::config::{ErrorPage, ErrorPages};
use crate::telemetry::{Metrics, UpstreamErrorKind};

/// What a failure counts as, besides the request's own status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Nothing beyond the request metrics.
    Request,
    /// A request shed by the named gate.
    Shed(&'static str),
    /// A failed upstream request, by kind (logged at warn).
    Upstream(UpstreamErrorKind),
    /// A defensive connection close, by reason.
    ConnectionClosed(&'static str),
}

/// How a failure is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rescue {
    pub(crate) status: StatusCode,
    /// The connection can no longer be trusted (an unread body is still on
    /// the wire, or the request could not be framed): answer, then close.
    pub(crate) close: bool,
    /// Nothing was done with the request, so the client may send it again
    /// as it is, after this many seconds (`Retry-After`; on LLM routes also
    /// `retry-after-ms` and `x-should-retry: true`, which the official SDKs
    /// honour). Above [`MAX_RETRY_AFTER`] only from
    /// [`Rescue::retry_after_long`].
    pub(crate) retry_after: Option<u64>,
    pub(crate) counted: Counted,
    /// Weir's own words for LLM routes (plain routes keep the fixed
    /// message per status).
    pub(crate) message: Option<Arc<str>>,
    /// `WWW-Authenticate` for a 401 (basic auth's challenge).
    /// (Boxed, as the page: a `Rescue` is every failure's `Err`, kept small.)
    pub(crate) challenge: Option<Box<HeaderValue>>,
    /// The route's error page for this status, served instead of weir's
    /// generated body (plain shapes only).
    pub(crate) page: Option<Box<ErrorPage>>,
}

impl Rescue {
    /// A plain answer: this status, nothing else to do.
    pub(crate) const fn status(status: StatusCode) -> Self {
        Rescue {
            status,
            close: false,
            retry_after: None,
            counted: Counted::Request,
            message: None,
            challenge: None,
            page: None,
        }
    }

    /// The same answer, with this `WWW-Authenticate` challenge.
    pub(crate) fn challenging(self, challenge: HeaderValue) -> Self {
        Rescue {
            challenge: Some(Box::new(challenge)),
            ..self
        }
    }

    /// The same answer, with the route's page for its status, if any.
    pub(crate) fn with_page(self, pages: Option<&ErrorPages>) -> Self {
        let page = pages
            .and_then(|p| p.for_status(self.status.as_u16()))
            .map(|p| Box::new(p.clone()));
        Rescue { page, ..self }
    }

    /// The same answer, and close the connection after it.
    pub(crate) fn closing(self) -> Self {
        Rescue {
            close: true,
            ..self
        }
    }

    /// The same answer, counted as `counted`.
    pub(crate) fn counting(self, counted: Counted) -> Self {
        Rescue { counted, ..self }
    }

    /// The same answer, explained in weir's words (LLM routes).
    pub(crate) fn saying(self, message: impl Into<Arc<str>>) -> Self {
        Rescue {
            message: Some(message.into()),
            ..self
        }
    }

    /// The same answer, retryable after `seconds` (capped, at least 1).
    pub(crate) fn retry_after(self, seconds: u64) -> Self {
        Rescue {
            retry_after: Some(seconds.clamp(1, MAX_RETRY_AFTER)),
            ..self
        }
    }

    /// The same answer, retryable only after `seconds` (at least 1), however
    /// long: a spent budget frees when its window ends, and the client is
    /// told so (and told not to retry before, on LLM routes).
    pub(crate) fn retry_after_long(self, seconds: u64) -> Self {
        Rescue {
            retry_after: Some(seconds.max(1)),
            ..self
        }
    }

    /// 503 from a full gate: retry shortly.
    pub(crate) fn shed(gate: &'static str) -> Self {
        Rescue::status(StatusCode::SERVICE_UNAVAILABLE)
            .retry_after(1)
            .counting(Counted::Shed(gate))
    }

    /// 503 when a limit the fleet shares cannot be decided (Redis did not
    /// answer in time, `fail_closed`): retry shortly.
    pub(crate) fn cluster_unavailable() -> Self {
        Rescue::shed("cluster")
    }

    /// 429 for a client over a rate limit (by address or by client
    /// token), writing the fail2ban line when the limiter says it is due.
    pub(crate) fn rate_limited(limited: Limited, peer: IpAddr, route: &str, host: &str) -> Self {
        if limited.log {
            rate::log_limited(peer, route, host);
        }
        Rescue::status(StatusCode::TOO_MANY_REQUESTS)
            .retry_after(limited.retry_after)
            .counting(Counted::Shed("rate_limit"))
    }

    /// 502 or 504 for an upstream that failed before answering.
    pub(crate) fn upstream(kind: UpstreamErrorKind) -> Self {
        let status = match kind {
            UpstreamErrorKind::ConnectTimeout | UpstreamErrorKind::ResponseTimeout => {
                StatusCode::GATEWAY_TIMEOUT
            }
            UpstreamErrorKind::NoServer => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_GATEWAY,
        };
        Rescue::status(status).counting(Counted::Upstream(kind))
    }

    /// 503 at once when every server of a group is out, with when the
    /// first comes back.
    pub(crate) fn no_server(retry_after: u64) -> Self {
        Rescue::upstream(UpstreamErrorKind::NoServer).retry_after(retry_after)
    }

    /// The gRPC status for this answer: by its HTTP status, except that a
    /// shed request or a rate-limited client is RESOURCE_EXHAUSTED (the
    /// gateway's capacity, not the server, said no) and a connect timeout
    /// is UNAVAILABLE (the server could not be reached; the client's
    /// deadline did not pass).
    fn grpc_code(&self) -> GrpcCode {
        match self.counted {
            Counted::Shed(_) => GrpcCode::RESOURCE_EXHAUSTED,
            Counted::Upstream(UpstreamErrorKind::ConnectTimeout) => GrpcCode::UNAVAILABLE,
            _ => GrpcCode::for_status(self.status),
        }
    }

    /// Count, log and render the answer in `shape`. `route` names the
    /// matched route, if routing got that far.
    pub(crate) fn answer(
        self,
        shape: ErrorShape,
        metrics: &Metrics,
        route: Option<&Arc<str>>,
    ) -> Response<Payload> {
        let route_label = route.map_or("-", |r| &**r);
        match self.counted {
            Counted::Request => {}
            // The counter is the operator's signal; the log line is debug
            // only, so a shed storm cannot flood the log.
            Counted::Shed(gate) => {
                metrics.request_shed(gate, route);
                tracing::debug!(gate, route = route_label, "request shed");
            }
            Counted::Upstream(kind) => {
                if let Some(route) = route {
                    metrics.record_upstream_error(route, kind);
                }
                tracing::warn!(route = route_label, ?kind, "upstream request failed");
            }
            Counted::ConnectionClosed(reason) => metrics.connection_closed(reason),
        }
        let mut resp = match shape {
            ErrorShape::Grpc => grpc_response(self.grpc_code(), self.status, self.retry_after),
            _ => render(
                shape,
                self.status,
                self.message.as_deref(),
                self.retry_after,
            ),
        };
        if let Some(challenge) = self.challenge {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, *challenge);
        }
        if let Some(page) = self.page
            && matches!(shape, ErrorShape::Text | ErrorShape::Json)
        {
            resp = super::pages::serve(resp, &page);
        }
        if self.close {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_decides_status_close_retry_and_metric() {
        let metrics = Metrics::new();
        let route: Arc<str> = "r".into();

        let shed = Rescue::shed("route").answer(ErrorShape::Text, &metrics, Some(&route));
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(shed.headers()[header::RETRY_AFTER], "1");
        assert!(shed.headers().get(header::CONNECTION).is_none());

        let timeout = Rescue::upstream(UpstreamErrorKind::ResponseTimeout).answer(
            ErrorShape::Json,
            &metrics,
            Some(&route),
        );
        assert_eq!(timeout.status(), StatusCode::GATEWAY_TIMEOUT);
        assert!(timeout.headers().get(header::RETRY_AFTER).is_none());

        let too_large = Rescue::status(StatusCode::PAYLOAD_TOO_LARGE)
            .closing()
            .answer(ErrorShape::Text, &metrics, None);
        assert_eq!(too_large.headers()[header::CONNECTION], "close");

        let anthropic = Rescue::shed("global").answer(
            ErrorShape::Llm(weir_wire::Protocol::Anthropic),
            &metrics,
            None,
        );
        assert_eq!(anthropic.headers()["x-should-retry"], "true");
        assert_eq!(anthropic.headers()["retry-after-ms"], "1000");
        let grpc = |r: Rescue| r.answer(ErrorShape::Grpc, &metrics, Some(&route));
        for (rescue, code) in [
            (Rescue::shed("global"), "8"),
            (Rescue::no_server(2), "14"),
            (Rescue::upstream(UpstreamErrorKind::Connect), "14"),
            (Rescue::upstream(UpstreamErrorKind::ConnectTimeout), "14"),
            (Rescue::upstream(UpstreamErrorKind::ResponseTimeout), "4"),
            (Rescue::status(StatusCode::UNAUTHORIZED), "16"),
        ] {
            let r = grpc(rescue);
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.headers()["grpc-status"], code);
        }
        let capped = Rescue::status(StatusCode::TOO_MANY_REQUESTS).retry_after(3600);
        assert_eq!(capped.retry_after, Some(MAX_RETRY_AFTER));
        let limited = Rescue::status(StatusCode::TOO_MANY_REQUESTS)
            .retry_after(7)
            .answer(ErrorShape::Text, &metrics, None);
        let values: Vec<_> = limited
            .headers()
            .get_all(header::RETRY_AFTER)
            .iter()
            .collect();
        assert_eq!(values, ["7"], "one Retry-After, the rescue's");

        let text = metrics.encode();
        assert!(
            text.contains("weir_requests_shed_total{reason=\"route\",route=\"r\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kind=\"ResponseTimeout\"") && text.contains("route=\"r\""),
            "{text}"
        );
    }
}
