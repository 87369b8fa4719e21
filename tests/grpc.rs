//! gRPC through weir with a real gRPC client and server (tonic's, over
//! hyper's HTTP/2 client and server; messages are raw bytes, so no
//! protobuf code is generated): unary and server-streaming calls, a status
//! with details relayed in trailers, and the errors weir generates itself
//! answered as gRPC — UNAVAILABLE when the upstream is down,
//! DEADLINE_EXCEEDED when the client's `grpc-timeout` passes,
//! RESOURCE_EXHAUSTED when the route's gate sheds the call.

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use common::*;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};

/// Messages as they are on the wire: bytes.
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

type Reply<T> = Pin<Box<dyn Future<Output = Result<tonic::Response<T>, Status>> + Send>>;
type Messages = futures_util::stream::Iter<std::vec::IntoIter<Result<Bytes, Status>>>;

/// The test service's methods, each a tower service as tonic's generated
/// code would write them.
#[derive(Clone, Copy)]
enum Method {
    /// Answers "echo:" + the request.
    Echo,
    /// Fails with INVALID_ARGUMENT and binary details.
    Refuse,
    /// Never answers.
    Hang,
    /// Never answers, and says so on [`HELD`].
    Hold,
}

/// Notified when a `Hold` call has reached the server.
static HELD: std::sync::LazyLock<tokio::sync::Notify> =
    std::sync::LazyLock::new(tokio::sync::Notify::new);

impl tower_service::Service<tonic::Request<Bytes>> for Method {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = Reply<Bytes>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let method = *self;
        Box::pin(async move {
            match method {
                Method::Echo => {
                    let mut out = b"echo:".to_vec();
                    out.extend_from_slice(req.get_ref());
                    Ok(tonic::Response::new(Bytes::from(out)))
                }
                Method::Refuse => Err(Status::with_details(
                    Code::InvalidArgument,
                    "no such thing",
                    Bytes::from_static(b"\x08\x2a details"),
                )),
                Method::Hang => std::future::pending().await,
                Method::Hold => {
                    HELD.notify_waiters();
                    std::future::pending().await
                }
            }
        })
    }
}

/// Streams `n` messages, then ends with OK or, with `fail`, with
/// RESOURCE_EXHAUSTED in the trailers after the messages.
#[derive(Clone, Copy)]
struct Count {
    fail: bool,
}

impl tower_service::Service<tonic::Request<Bytes>> for Count {
    type Response = tonic::Response<Messages>;
    type Error = Status;
    type Future = Reply<Messages>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let fail = self.fail;
        Box::pin(async move {
            let n = req.get_ref().first().copied().unwrap_or(0);
            let mut items: Vec<Result<Bytes, Status>> = (0..n)
                .map(|i| Ok(Bytes::from(format!("item {i}"))))
                .collect();
            if fail {
                items.push(Err(Status::resource_exhausted("quota gone")));
            }
            Ok(tonic::Response::new(futures_util::stream::iter(items)))
        })
    }
}

/// A gRPC server on port 0, over cleartext HTTP/2 (h2c), as tonic's
/// generated server code dispatches: by path.
async fn grpc_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(|req: http::Request<Incoming>| async move {
                        let mut grpc = tonic::server::Grpc::new(Raw);
                        let resp = match req.uri().path() {
                            "/test.Svc/Echo" => grpc.unary(Method::Echo, req).await,
                            "/test.Svc/Refuse" => grpc.unary(Method::Refuse, req).await,
                            "/test.Svc/Hang" => grpc.unary(Method::Hang, req).await,
                            "/test.Svc/Hold" => grpc.unary(Method::Hold, req).await,
                            "/test.Svc/Count" => {
                                grpc.server_streaming(Count { fail: false }, req).await
                            }
                            "/test.Svc/CountThenFail" => {
                                grpc.server_streaming(Count { fail: true }, req).await
                            }
                            _ => Status::unimplemented("no such method").into_http(),
                        };
                        Ok::<_, Infallible>(resp)
                    });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    addr
}

type Channel = Client<HttpConnector, tonic::body::Body>;

/// tonic's client over hyper's HTTP/2 client (h2c, as gRPC speaks in
/// cleartext), aimed at weir.
fn grpc_client(weir: SocketAddr) -> tonic::client::Grpc<Channel> {
    let channel: Channel = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(HttpConnector::new());
    let origin = format!("http://{weir}").parse().expect("origin");
    tonic::client::Grpc::with_origin(channel, origin)
}

fn weir_config(upstream: SocketAddr) -> String {
    format!(
        "[log]\naccess_log = false\n[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"grpc\"\nupstream = \"http://{upstream}\"\nhttp_version = \"2\"\n\
         response_timeout = \"60s\"\n"
    )
}

async fn unary(
    client: &mut tonic::client::Grpc<Channel>,
    path: &'static str,
    req: tonic::Request<Bytes>,
) -> Result<Bytes, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    client
        .unary(req, http::uri::PathAndQuery::from_static(path), Raw)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn unary_and_server_streaming_calls_go_through() {
    let weir = Weir::start(&weir_config(grpc_server().await)).await;
    let mut client = grpc_client(weir.addr("web"));
    let answer = unary(
        &mut client,
        "/test.Svc/Echo",
        tonic::Request::new(Bytes::from_static(b"hi")),
    )
    .await
    .expect("unary call");
    assert_eq!(&answer[..], b"echo:hi");

    client.ready().await.expect("ready");
    let mut stream = client
        .server_streaming(
            tonic::Request::new(Bytes::from_static(&[3])),
            http::uri::PathAndQuery::from_static("/test.Svc/Count"),
            Raw,
        )
        .await
        .expect("stream opened")
        .into_inner();
    let mut got = Vec::new();
    while let Some(item) = stream.message().await.expect("message") {
        got.push(String::from_utf8(item.to_vec()).expect("utf8"));
    }
    assert_eq!(got, ["item 0", "item 1", "item 2"]);
    // The OK status came in the trailers, relayed.
    assert!(stream.trailers().await.expect("trailers").is_some());
}

#[tokio::test]
async fn the_servers_status_and_details_are_relayed() {
    let weir = Weir::start(&weir_config(grpc_server().await)).await;
    let mut client = grpc_client(weir.addr("web"));
    let status = unary(
        &mut client,
        "/test.Svc/Refuse",
        tonic::Request::new(Bytes::new()),
    )
    .await
    .expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(status.message(), "no such thing");
    assert_eq!(status.details(), b"\x08\x2a details");

    // A status after messages is in the trailers proper.
    client.ready().await.expect("ready");
    let mut stream = client
        .server_streaming(
            tonic::Request::new(Bytes::from_static(&[2])),
            http::uri::PathAndQuery::from_static("/test.Svc/CountThenFail"),
            Raw,
        )
        .await
        .expect("stream opened")
        .into_inner();
    assert!(stream.message().await.expect("first").is_some());
    assert!(stream.message().await.expect("second").is_some());
    let end = stream.message().await.expect_err("the trailers' status");
    assert_eq!(end.code(), Code::ResourceExhausted, "{end:?}");
    assert_eq!(end.message(), "quota gone");
}

#[tokio::test]
async fn an_upstream_that_is_down_is_unavailable_in_grpc() {
    let weir = Weir::start(&weir_config(closed_port().await)).await;
    let mut client = grpc_client(weir.addr("web"));
    let status = unary(
        &mut client,
        "/test.Svc/Echo",
        tonic::Request::new(Bytes::new()),
    )
    .await
    .expect_err("nothing listens");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    // weir's own words in `grpc-message`, not a client's guess from an
    // HTTP status.
    assert_eq!(status.message(), "upstream unavailable");
}

#[tokio::test]
async fn a_grpc_timeout_that_passes_is_deadline_exceeded() {
    let weir = Weir::start(&weir_config(grpc_server().await)).await;
    let mut client = grpc_client(weir.addr("web"));
    let mut req = tonic::Request::new(Bytes::new());
    // Sent as `grpc-timeout: 300000u`; the route's own timeout is 60 s.
    req.set_timeout(Duration::from_millis(300));
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        unary(&mut client, "/test.Svc/Hang", req),
    )
    .await
    .expect("weir answered at the client's deadline, not the route's")
    .expect_err("the server never answers");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "upstream timed out");
}

#[tokio::test]
async fn a_shed_call_is_resource_exhausted() {
    let config = weir_config(grpc_server().await) + "max_concurrent_requests = 1\n";
    let weir = Weir::start(&config).await;
    let addr = weir.addr("web");
    // One call holds the route's only slot; the server says when it has it.
    let held = HELD.notified();
    let holder = tokio::spawn(async move {
        let mut client = grpc_client(addr);
        unary(
            &mut client,
            "/test.Svc/Hold",
            tonic::Request::new(Bytes::new()),
        )
        .await
    });
    tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the holder reached the server");
    let mut probe = tonic::Request::new(Bytes::new());
    probe.set_timeout(Duration::from_secs(5));
    let status = unary(&mut grpc_client(addr), "/test.Svc/Echo", probe)
        .await
        .expect_err("shed");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "overloaded, retry later");
    holder.abort();
}
