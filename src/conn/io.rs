//! The client connection's byte stream, observed.
//!
//! [`TrackedIo`] sits between the (decrypted) socket and hyper. It reports
//! to the connection's [`ConnState`]: bytes arriving on an idle HTTP/1.1
//! connection start a new request head (so the head deadline runs from the
//! first byte, not from the end of the previous response), and writes the
//! client does not drain mark the connection as blocked (for the send
//! timeout). On HTTP/2 it meters frames the h2 crate does not limit —
//! PING, SETTINGS, PRIORITY and RST_STREAM floods, and runs of empty DATA,
//! HEADERS or CONTINUATION frames — and on abuse sends GOAWAY with
//! ENHANCE_YOUR_CALM (when the write side is at a frame boundary) and ends
//! the connection.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use bytes::Bytes;

use super::state::{CloseReason, ConnState, Park, Phase};

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Consecutive frames with an empty payload (and no END_STREAM) tolerated.
pub(crate) const MAX_EMPTY_FRAMES: u32 = 10;

/// A streaming HTTP/2 frame-header parser that counts abusive frames. It
/// never buffers payloads: it only skips over them.
#[derive(Debug)]
pub(crate) struct FrameMeter {
    /// Bytes of the client preface still to skip.
    preface_left: usize,
    header: [u8; 9],
    header_len: usize,
    payload_left: usize,
    window_start: Option<Instant>,
    control_in_window: u32,
    max_control_per_second: u32,
    empty_run: u32,
}

impl FrameMeter {
    pub(crate) fn new(max_control_per_second: u32) -> Self {
        FrameMeter {
            preface_left: H2_PREFACE.len(),
            header: [0; 9],
            header_len: 0,
            payload_left: 0,
            window_start: None,
            control_in_window: 0,
            max_control_per_second,
            empty_run: 0,
        }
    }

    /// Feed received bytes; returns true when the client is flooding.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], now: Instant) -> bool {
        let skip = self.preface_left.min(bytes.len());
        self.preface_left -= skip;
        bytes = &bytes[skip..];
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
            self.header_len += n;
            bytes = &bytes[n..];
            if self.header_len == 9 {
                self.header_len = 0;
                let h = self.header;
                let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
                self.payload_left = len;
                if self.frame(h[3], h[4], len, now) {
                    return true;
                }
            }
        }
        false
    }

    fn frame(&mut self, kind: u8, flags: u8, len: usize, now: Instant) -> bool {
        const DATA: u8 = 0;
        const HEADERS: u8 = 1;
        const PRIORITY: u8 = 2;
        const RST_STREAM: u8 = 3;
        const SETTINGS: u8 = 4;
        const PING: u8 = 6;
        const CONTINUATION: u8 = 9;
        const END_STREAM: u8 = 0x1;
        match kind {
            PRIORITY | RST_STREAM | SETTINGS | PING => {
                if self
                    .window_start
                    .is_none_or(|start| now.duration_since(start) >= Duration::from_secs(1))
                {
                    self.window_start = Some(now);
                    self.control_in_window = 0;
                }
                self.control_in_window += 1;
                if self.control_in_window > self.max_control_per_second {
                    return true;
                }
            }
            DATA | HEADERS | CONTINUATION if len == 0 && flags & END_STREAM == 0 => {
                self.empty_run += 1;
                if self.empty_run > MAX_EMPTY_FRAMES {
                    return true;
                }
                return false;
            }
            _ => {}
        }
        if len > 0 {
            self.empty_run = 0;
        }
        false
    }
}

/// GOAWAY, last stream 0x7fffffff (let in-flight streams be), ENHANCE_YOUR_CALM.
const GOAWAY_ENHANCE_YOUR_CALM: [u8; 17] = [
    0, 0, 8, 7, 0, 0, 0, 0, 0, // length 8, type GOAWAY, no flags, stream 0
    0x7f, 0xff, 0xff, 0xff, // last stream id
    0, 0, 0, 0x0b, // ENHANCE_YOUR_CALM
];

/// What TrackedIo knows about the protocol on the wire. Decided once: a
/// connection never goes back to `Sniffing`, and only `Http1` may be
/// answered with raw HTTP/1.1 bytes.
#[derive(Debug)]
enum Wire {
    /// Cleartext, and every byte so far is a prefix of the HTTP/2 client
    /// preface: `matched` bytes of it have arrived. Clients may split the
    /// preface across any number of reads.
    Sniffing {
        matched: usize,
    },
    Http1,
    Http2(FrameMeter),
}

pub(crate) struct TrackedIo<T> {
    inner: T,
    state: Arc<ConnState>,
    wire: Wire,
    max_control_per_second: u32,
    /// True when everything hyper wrote has been flushed, i.e. the write
    /// side is between frames and a GOAWAY can be injected cleanly.
    write_aligned: bool,
    ended: bool,
    /// Bytes already read (and observed) that the next reader gets first:
    /// what sniffing the protocol read, or what hyper had buffered when
    /// the connection was parked.
    unread: Bytes,
    /// hyper was told the client left (a park): its shutdown must not
    /// reach the socket.
    parked: bool,
}

impl<T> TrackedIo<T> {
    /// `h2` is known from ALPN on TLS; cleartext connections are sniffed.
    pub(crate) fn new(
        inner: T,
        state: Arc<ConnState>,
        h2: Option<bool>,
        max_control_per_second: u32,
    ) -> Self {
        let wire = match h2 {
            Some(true) => {
                state.set_h2();
                Wire::Http2(FrameMeter::new(max_control_per_second))
            }
            Some(false) => Wire::Http1,
            None => Wire::Sniffing { matched: 0 },
        };
        TrackedIo {
            inner,
            state,
            wire,
            max_control_per_second,
            write_aligned: true,
            ended: false,
            unread: Bytes::new(),
            parked: false,
        }
    }

    /// Give `bytes` (already observed) to the next read, before anything
    /// new from the socket.
    pub(crate) fn unread(&mut self, bytes: Bytes) {
        debug_assert!(self.unread.is_empty());
        self.unread = bytes;
    }

    /// Still deciding between HTTP/1.1 and the HTTP/2 preface.
    pub(crate) fn sniffing(&self) -> bool {
        matches!(self.wire, Wire::Sniffing { .. })
    }

    pub(crate) fn is_h2(&self) -> bool {
        matches!(self.wire, Wire::Http2(_))
    }

    /// Back from hyper after a park: reads and shutdowns reach the
    /// socket again.
    pub(crate) fn resume(&mut self) {
        self.parked = false;
    }

    /// Classify newly received bytes and meter them on HTTP/2; true when
    /// the client is flooding.
    fn observe(&mut self, new: &[u8], now: Instant) -> bool {
        if let Wire::Sniffing { matched } = self.wire {
            let expected = &H2_PREFACE[matched..];
            let n = new.len().min(expected.len());
            if new[..n] != expected[..n] {
                self.wire = Wire::Http1;
            } else if matched + n < H2_PREFACE.len() {
                self.wire = Wire::Sniffing {
                    matched: matched + n,
                };
            } else {
                self.state.set_h2();
                let mut meter = FrameMeter::new(self.max_control_per_second);
                // The preface bytes of earlier reads: skipped, never counted.
                meter.feed(&H2_PREFACE[..matched], now);
                self.wire = Wire::Http2(meter);
            }
        }
        self.state.bytes_received();
        match &mut self.wire {
            Wire::Http2(meter) => meter.feed(new, now),
            _ => false,
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> TrackedIo<T> {
    fn on_flood(&mut self, cx: &mut Context<'_>) -> io::Error {
        self.ended = true;
        if self.write_aligned {
            // Best effort: if the socket cannot take 17 bytes now, just close.
            let _ = Pin::new(&mut self.inner).poll_write(cx, &GOAWAY_ENHANCE_YOUR_CALM);
            let _ = Pin::new(&mut self.inner).poll_flush(cx);
        }
        self.state.close(CloseReason::Flood);
        io::Error::new(io::ErrorKind::ConnectionAborted, "HTTP/2 frame flood")
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> TrackedIo<T> {
    /// The head deadline passed: tell an HTTP/1.1 client with 408 (hyper
    /// itself only closes), when no response is half-written.
    fn on_head_timeout(&mut self, cx: &mut Context<'_>) -> io::Error {
        if matches!(self.wire, Wire::Http1) && self.write_aligned && !self.ended {
            self.ended = true; // answer once; later reads fail
            let _ = Pin::new(&mut self.inner).poll_write(cx, REQUEST_TIMEOUT_408);
            let _ = Pin::new(&mut self.inner).poll_flush(cx);
        }
        io::Error::new(io::ErrorKind::TimedOut, "request head timeout")
    }
}

const REQUEST_TIMEOUT_408: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for TrackedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "HTTP/2 frame flood",
            )));
        }
        if this.state.close_reason() == CloseReason::HeadTimeout {
            // Answer 408, then wait: the connection's task closes the
            // socket once it has counted the close, so a client that sees
            // the close also sees it counted.
            let _ = this.on_head_timeout(cx);
            this.ended = true;
            return Poll::Pending;
        }
        if !this.unread.is_empty() {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread.split_to(n));
            return Poll::Ready(Ok(()));
        }
        if this.parked || this.state.park_state() == Park::Parked {
            // Still idle with everything flushed: end hyper's connection
            // as if the client had left (nothing is read, so nothing is
            // lost), and keep the socket. Otherwise it is busy again.
            if this.parked
                || (matches!(this.wire, Wire::Http1)
                    && this.write_aligned
                    && this.state.phase() == Phase::Idle)
            {
                this.parked = true;
                return Poll::Ready(Ok(()));
            }
            this.state.unpark();
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let new = &buf.filled()[before..];
            if new.is_empty() {
                return polled;
            }
            let ended = this.observe(new, Instant::now());
            if ended {
                return Poll::Ready(Err(this.on_flood(cx)));
            }
        }
        polled
    }
}

impl<T> TrackedIo<T> {
    /// Note what a write says about the client: blocked, or taking bytes
    /// (and the write side is now mid-frame until the next flush).
    fn after_write(&mut self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match &polled {
            Poll::Pending => self.state.write_blocked(true),
            Poll::Ready(Ok(n)) => {
                self.state.write_blocked(false);
                if *n > 0 {
                    self.write_aligned = false;
                }
            }
            Poll::Ready(Err(_)) => {}
        }
        polled
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        self.after_write(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        match &polled {
            Poll::Pending => self.state.write_blocked(true),
            Poll::Ready(Ok(())) => {
                self.state.write_blocked(false);
                self.write_aligned = true;
            }
            Poll::Ready(Err(_)) => {}
        }
        polled
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.parked {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            flags,
            0,
            0,
            0,
            1,
        ];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn ping_flood_is_detected_across_split_reads() {
        let now = Instant::now();
        let mut m = FrameMeter::new(5);
        let mut bytes = H2_PREFACE.to_vec();
        for _ in 0..6 {
            bytes.extend(frame(6, 0, &[0; 8]));
        }
        // Feed one byte at a time: the parser must not depend on read sizes.
        let ended = bytes.iter().any(|b| m.feed(std::slice::from_ref(b), now));
        assert!(ended);
    }

    #[test]
    fn control_frames_within_the_rate_are_fine() {
        let start = Instant::now();
        let mut m = FrameMeter::new(5);
        assert!(!m.feed(H2_PREFACE, start));
        for second in 0..3 {
            let t = start + Duration::from_secs(second);
            for _ in 0..5 {
                assert!(!m.feed(&frame(6, 0, &[0; 8]), t));
            }
        }
    }

    #[test]
    fn runs_of_empty_frames_are_detected_but_data_resets_the_run() {
        let now = Instant::now();
        let mut m = FrameMeter::new(1000);
        m.feed(H2_PREFACE, now);
        for _ in 0..MAX_EMPTY_FRAMES {
            assert!(!m.feed(&frame(0, 0, &[]), now));
        }
        assert!(
            !m.feed(&frame(0, 0, b"real data"), now),
            "payload resets the run"
        );
        for _ in 0..MAX_EMPTY_FRAMES {
            assert!(!m.feed(&frame(0, 0, &[]), now));
        }
        assert!(m.feed(&frame(0, 0, &[]), now));
    }

    #[test]
    fn large_payloads_are_skipped_not_parsed() {
        let now = Instant::now();
        let mut m = FrameMeter::new(1);
        m.feed(H2_PREFACE, now);
        // A DATA frame whose payload looks like PING frames must not count.
        let fake_pings: Vec<u8> = (0..10).flat_map(|_| frame(6, 0, &[0; 8])).collect();
        assert!(!m.feed(&frame(0, 0, &fake_pings), now));
    }
}
