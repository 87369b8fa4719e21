//! The compressing body: the response's body through an [`Encoder`], on
//! the task that serves the connection, a slice at a time.
//!
//! A data frame is fed in slices of [`SLICE`] bytes, and one poll does at
//! most [`BUDGET`] bytes of compression before it yields, so a large
//! frame cannot hold the worker. When the inner body has nothing more for
//! now, the encoder is flushed and what it holds goes out: a chunk the
//! upstream sends after a pause reaches the client without waiting for
//! the next one (a progress page, a streamed log, a slow API).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};

use super::encoder::Encoder;
use crate::respond::BoxError;

/// Input fed to the encoder per call.
const SLICE: usize = 16 * 1024;
/// Input compressed per poll before yielding to the other tasks.
const BUDGET: usize = 64 * 1024;

pub(crate) struct Compressed<B> {
    inner: B,
    /// `None` once the stream is finished.
    encoder: Option<Encoder>,
    /// What is left of the data frame being fed.
    input: Bytes,
    /// Written to the encoder since its last flush.
    unflushed: bool,
    /// The inner body's trailers, sent after the last data.
    trailers: Option<HeaderMap>,
}

impl<B> Compressed<B> {
    pub(crate) fn new(inner: B, encoder: Encoder) -> Self {
        Compressed {
            inner,
            encoder: Some(encoder),
            input: Bytes::new(),
            unflushed: false,
            trailers: None,
        }
    }
}

impl<B> Body for Compressed<B>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let mut spent = 0;
        loop {
            let Some(encoder) = this.encoder.as_mut() else {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            };
            if !this.input.is_empty() {
                if spent >= BUDGET {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                let slice = this.input.split_to(this.input.len().min(SLICE));
                spent += slice.len();
                this.unflushed = true;
                let out = encoder.write(&slice)?;
                if !out.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                continue;
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => {
                    if !this.unflushed {
                        return Poll::Pending;
                    }
                    this.unflushed = false;
                    let out = encoder.flush()?;
                    if out.is_empty() {
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.input = data,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            this.trailers = Some(trailers);
                        }
                    }
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    let Some(encoder) = this.encoder.take() else {
                        continue;
                    };
                    let out = encoder.finish()?;
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.encoder.is_none() && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Coding, Levels};
    use http_body_util::BodyExt;
    use std::io::Read;

    const LEVELS: Levels = Levels {
        gzip: 6,
        brotli: 4,
        zstd: 3,
    };

    type Inner = Pin<Box<dyn Body<Data = Bytes, Error = BoxError> + Send>>;

    /// A body from a channel: the test decides when each frame arrives.
    fn channel() -> (
        http_body_util::channel::Sender<Bytes, BoxError>,
        Compressed<Inner>,
    ) {
        let (tx, rx) = http_body_util::channel::Channel::<Bytes, BoxError>::new(4);
        let boxed: Inner = Box::pin(rx);
        let encoder = Encoder::new(Coding::Gzip, LEVELS).expect("encoder");
        (tx, Compressed::new(boxed, encoder))
    }

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .expect("gzip");
        out
    }

    #[tokio::test]
    async fn a_frame_is_flushed_out_when_the_next_is_not_there_yet() {
        let (mut tx, mut body) = channel();
        tx.send_data(Bytes::from_static(b"first chunk\n"))
            .await
            .expect("send");
        let mut got = Vec::new();
        // Everything sent so far comes out, decodable, while the body is
        // still open: the encoder was flushed when the inner body paused.
        while !String::from_utf8_lossy(&inflate_partial(&got)).contains("first chunk") {
            let frame = body.frame().await.expect("frame").expect("ok");
            got.extend_from_slice(&frame.into_data().expect("data"));
        }
        tx.send_data(Bytes::from_static(b"second\n"))
            .await
            .expect("send");
        drop(tx);
        while let Some(frame) = body.frame().await {
            got.extend_from_slice(&frame.expect("ok").into_data().expect("data"));
        }
        assert_eq!(gunzip(&got), b"first chunk\nsecond\n");
    }

    /// What a gzip stream cut anywhere decodes to so far.
    fn inflate_partial(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = flate2::read::GzDecoder::new(gz).read_to_end(&mut out);
        out
    }

    #[tokio::test]
    async fn a_large_frame_is_compressed_a_budget_per_poll() {
        let (mut tx, mut body) = channel();
        // Zeros: deflate emits nothing for megabytes of them, so only the
        // budget makes the body yield.
        let big = vec![0u8; 1_000_000];
        let sent = big.clone();
        tokio::spawn(async move {
            tx.send_data(Bytes::from(sent)).await.expect("send");
        });
        let mut got = Vec::new();
        let mut polls_pending = 0;
        let out = std::future::poll_fn(|cx| {
            loop {
                match Pin::new(&mut body).poll_frame(cx) {
                    Poll::Ready(Some(f)) => {
                        got.extend_from_slice(&f.expect("ok").into_data().expect("data"))
                    }
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending => {
                        polls_pending += 1;
                        return Poll::Pending;
                    }
                }
            }
        });
        out.await;
        assert_eq!(gunzip(&got), big);
        // 1 MB at most 64 KiB per poll: the body yielded along the way
        // instead of compressing it all at once.
        assert!(polls_pending >= 1_000_000 / BUDGET, "{polls_pending}");
    }
}
