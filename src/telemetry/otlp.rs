//! One OTLP collector and how to reach it, for every signal weir exports
//! (traces, metrics): weir's own hyper client over hyper-rustls (the one
//! crypto provider, the web PKI roots plus an optional CA file), OTLP/HTTP
//! (a protobuf POST) or OTLP/gRPC (one length-prefixed message over
//! HTTP/2, `grpc-status` read from the head or the trailers). Sending is
//! one attempt: the callers bound it with their export timeout and count
//! what failed (docs/decisions/082).

use std::path::Path;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use crate::config::OtlpProtocol;

/// The most of a collector's answer read (OTLP answers are small).
const MAX_ANSWER: usize = 64 * 1024;

/// Where one signal's exports go, as configured.
pub(crate) struct Target<'a> {
    pub(crate) endpoint: &'a http::Uri,
    pub(crate) protocol: OtlpProtocol,
    pub(crate) headers: &'a [(http::HeaderName, HeaderValue)],
    pub(crate) ca_file: Option<&'a Path>,
    pub(crate) connect_timeout: Duration,
    /// The gRPC call's path (`/…TraceService/Export`).
    pub(crate) grpc_path: &'static str,
    /// The config table, for errors (`telemetry.traces`).
    pub(crate) table: &'static str,
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// A collector's client.
pub(crate) struct Collector {
    client: Client<Https, Full<Bytes>>,
    uri: http::Uri,
    protocol: OtlpProtocol,
    headers: Vec<(http::HeaderName, HeaderValue)>,
}

impl Collector {
    pub(crate) fn new(target: &Target<'_>) -> Result<Self, String> {
        let tls = crate::pki::client_config(target.ca_file)
            .map_err(|e| format!("{}.ca_file: {e}", target.table))?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(target.connect_timeout));
        connector.enforce_http(false);
        let grpc = target.protocol == OtlpProtocol::Grpc;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let https = match grpc {
            true => builder.enable_http2().wrap_connector(connector),
            false => builder.enable_http1().wrap_connector(connector),
        };
        let client = Client::builder(TokioExecutor::new())
            .http2_only(grpc)
            .build(https);
        let uri = match grpc {
            true => grpc_uri(target.endpoint, target.grpc_path)
                .map_err(|e| format!("{}.endpoint: {e}", target.table))?,
            false => target.endpoint.clone(),
        };
        Ok(Collector {
            client,
            uri,
            protocol: target.protocol,
            headers: target.headers.to_vec(),
        })
    }

    /// Send one export request; `Ok` when the collector took it.
    pub(crate) async fn send(&self, message: &impl Message) -> Result<(), String> {
        let (body, content_type) = match self.protocol {
            OtlpProtocol::HttpProtobuf => {
                (message.encode_to_vec().into(), "application/x-protobuf")
            }
            OtlpProtocol::Grpc => (grpc_frame(message), "application/grpc"),
        };
        let mut req = http::Request::post(self.uri.clone())
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        if self.protocol == OtlpProtocol::Grpc {
            *req.version_mut() = http::Version::HTTP_2;
            req.headers_mut()
                .insert(header::TE, HeaderValue::from_static("trailers"));
        }
        let h = req.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        for (name, value) in &self.headers {
            h.insert(name.clone(), value.clone());
        }
        let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let head_grpc = grpc_status(resp.headers());
        let answer = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("the collector answered {status}"));
        }
        if self.protocol == OtlpProtocol::Grpc {
            let code = head_grpc.or_else(|| answer.trailers().and_then(grpc_status));
            if code != Some(0) {
                return Err(format!("the collector answered grpc-status {code:?}"));
            }
        }
        Ok(())
    }
}

/// A gRPC message: uncompressed flag, length, bytes.
fn grpc_frame(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // Encoding into a buffer with room for it cannot fail.
    let _ = message.encode(&mut out);
    out.freeze()
}

fn grpc_status(h: &http::HeaderMap) -> Option<u32> {
    h.get("grpc-status")?.to_str().ok()?.parse().ok()
}

/// The export call's URI at the endpoint's origin.
fn grpc_uri(endpoint: &http::Uri, path: &'static str) -> Result<http::Uri, http::Error> {
    let mut parts = endpoint.clone().into_parts();
    parts.path_and_query = Some(http::uri::PathAndQuery::from_static(path));
    Ok(http::Uri::from_parts(parts)?)
}

/// weir's resource: `service.name` as configured, `service.version`.
pub(crate) fn resource(service: &str) -> Resource {
    let text = |key: &str, value: &str| KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    };
    Resource {
        attributes: vec![
            text("service.name", service),
            text("service.version", env!("CARGO_PKG_VERSION")),
        ],
        ..Default::default()
    }
}

/// The instrumentation scope of everything weir exports: weir itself.
pub(crate) fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "weir".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}
