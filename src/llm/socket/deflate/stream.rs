//! The layer between the upgraded connection and tungstenite that does
//! permessage-deflate: tungstenite reads and writes plain frames, this
//! layer rewrites them on the wire.
//!
//! - Read: a data frame with RSV1, and the continuations of its message,
//!   are unmasked, inflated (bounded by the message limit) and handed on
//!   as plain frames (masked with a zero key, as tungstenite wants a
//!   client's frames masked); every other frame passes as it came, byte
//!   for byte, so tungstenite still refuses what it refuses (RSV1 on a
//!   control frame or a continuation, RSV2/RSV3, unmasked frames).
//! - Write: each whole text or binary frame tungstenite writes is
//!   compressed and sent with RSV1 when that makes it smaller; control
//!   frames never are.
//!
//! Without an agreed extension the layer is a plain pass-through.

use std::io::{self, Cursor};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

use super::Agreed;
use super::codec::{Deflater, Inflater, Refused};

/// The most read from the connection at a time.
const READ: usize = 16 << 10;
/// Past this much waiting to go out, writes wait for the connection.
const HIGH_WATER: usize = 64 << 10;
/// Smaller messages are sent as they are: DEFLATE's framing would not pay.
const MIN_COMPRESSED: usize = 64;

/// The error a refused message becomes (tungstenite passes it on as
/// `Error::Io`): the connection then closes with 1009.
#[derive(Debug, thiserror::Error)]
#[error("a compressed message inflates past the message limit")]
pub(crate) struct TooBig;

/// A connection with permessage-deflate done beneath tungstenite.
pub(crate) struct Deflating<S> {
    inner: S,
    ext: Option<Box<Extension>>,
}

struct Extension {
    // Read side.
    raw: BytesMut,
    ready: BytesMut,
    reading: Reading,
    /// A compressed message is part way through (its continuations are
    /// inflated too).
    in_compressed: bool,
    inflater: Inflater,
    max_frame: usize,
    // Write side.
    pending: BytesMut,
    wire: BytesMut,
    deflater: Deflater,
}

enum Reading {
    /// At a frame's start.
    Header,
    /// Passing this many payload bytes on as they come.
    Passing(u64),
    /// Gathering a compressed frame's payload.
    Gathering(FrameHeader, usize),
}

impl<S> Deflating<S> {
    /// `agreed`: the extension, if the upgrade agreed on one; `limit`: the
    /// most a message (and a frame) may be, inflated or not.
    pub(crate) fn new(inner: S, agreed: Option<Agreed>, limit: usize) -> Self {
        let ext = agreed.map(|a| {
            Box::new(Extension {
                raw: BytesMut::new(),
                ready: BytesMut::new(),
                reading: Reading::Header,
                in_compressed: false,
                inflater: Inflater::new(a.client_no_context_takeover, limit),
                max_frame: limit,
                pending: BytesMut::new(),
                wire: BytesMut::new(),
                deflater: Deflater::new(a.server_no_context_takeover),
            })
        });
        Self { inner, ext }
    }

    /// Between turns: drop the compressor's window (see [`Deflater::rest`]).
    pub(crate) fn rest(&mut self) {
        if let Some(ext) = &mut self.ext {
            ext.deflater.rest();
            // Give back the buffers' room a large turn left (never bytes
            // not yet read).
            for buffer in [
                &mut ext.raw,
                &mut ext.ready,
                &mut ext.pending,
                &mut ext.wire,
            ] {
                if buffer.is_empty() {
                    *buffer = BytesMut::new();
                }
            }
        }
    }
}

impl Extension {
    /// Turn what has been read into frames for tungstenite.
    fn process(&mut self) -> io::Result<()> {
        loop {
            match &mut self.reading {
                Reading::Header => {
                    let mut cursor = Cursor::new(&self.raw[..]);
                    let Some((header, len)) = FrameHeader::parse(&mut cursor)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
                    else {
                        return Ok(());
                    };
                    let header_len = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
                    let compressed = match header.opcode {
                        OpCode::Data(Data::Text | Data::Binary) => header.rsv1,
                        OpCode::Data(Data::Continue) => !header.rsv1 && self.in_compressed,
                        _ => false,
                    };
                    if compressed {
                        let len = usize::try_from(len)
                            .ok()
                            .filter(|l| *l <= self.max_frame)
                            .ok_or_else(too_big)?;
                        self.raw.advance(header_len);
                        self.reading = Reading::Gathering(header, len);
                    } else {
                        self.ready.extend_from_slice(&self.raw.split_to(header_len));
                        self.reading = Reading::Passing(len);
                    }
                }
                Reading::Passing(left) => {
                    let n = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(self.raw.len());
                    self.ready.extend_from_slice(&self.raw.split_to(n));
                    *left = left.saturating_sub(n as u64);
                    if *left > 0 {
                        return Ok(());
                    }
                    self.reading = Reading::Header;
                }
                Reading::Gathering(header, len) => {
                    if self.raw.len() < *len {
                        return Ok(());
                    }
                    let mut payload = self.raw.split_to(*len);
                    if let Some(mask) = header.mask {
                        for (i, b) in payload.iter_mut().enumerate() {
                            *b ^= mask[i % 4];
                        }
                    }
                    let last = header.is_final;
                    let plain = self.inflater.inflate(&payload, last).map_err(|r| match r {
                        Refused::TooBig => too_big(),
                        Refused::Corrupt => io::Error::new(
                            io::ErrorKind::InvalidData,
                            "a compressed message is not valid DEFLATE data",
                        ),
                    })?;
                    let out = FrameHeader {
                        is_final: last,
                        rsv1: false,
                        rsv2: header.rsv2,
                        rsv3: header.rsv3,
                        opcode: header.opcode,
                        mask: Some([0; 4]),
                    };
                    let mut head = Vec::with_capacity(14);
                    out.format(plain.len() as u64, &mut head)
                        .map_err(io::Error::other)?;
                    self.ready.extend_from_slice(&head);
                    self.ready.extend_from_slice(&plain);
                    self.in_compressed = !last;
                    self.reading = Reading::Header;
                }
            }
        }
    }

    /// Turn the whole frames tungstenite has written into wire bytes.
    fn frame_out(&mut self) {
        loop {
            let mut cursor = Cursor::new(&self.pending[..]);
            let (header, len) = match FrameHeader::parse(&mut cursor) {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                // Not a frame tungstenite would write: sent as it is.
                Err(_) => {
                    self.wire.extend_from_slice(&self.pending.split());
                    return;
                }
            };
            let header_len = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
            let Some(total) = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(header_len))
            else {
                return;
            };
            if self.pending.len() < total {
                return;
            }
            let frame = self.pending.split_to(total);
            let payload = frame.get(header_len..).unwrap_or_default();
            let whole_data = matches!(header.opcode, OpCode::Data(Data::Text | Data::Binary))
                && header.is_final
                && !header.rsv1
                && header.mask.is_none();
            let compressed = (whole_data && payload.len() >= MIN_COMPRESSED)
                .then(|| self.deflater.deflate(payload))
                .flatten();
            match compressed {
                Some(c) => {
                    let out = FrameHeader {
                        rsv1: true,
                        ..header
                    };
                    let mut head = Vec::with_capacity(14);
                    if out.format(c.len() as u64, &mut head).is_ok() {
                        self.wire.extend_from_slice(&head);
                        self.wire.extend_from_slice(&c);
                    }
                }
                None => self.wire.extend_from_slice(&frame),
            }
        }
    }
}

fn too_big() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, TooBig)
}

/// Whether a read error is a message refused for its inflated size.
pub(crate) fn is_too_big(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|e| e.is::<TooBig>())
}

impl<S: AsyncRead + AsyncWrite + Unpin> Deflating<S> {
    /// Write what waits for the wire; `Pending` while some is left.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(ext) = &mut self.ext else {
            return Poll::Ready(Ok(()));
        };
        while !ext.wire.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &ext.wire))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            ext.wire.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Deflating<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(ext) = &mut this.ext else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        loop {
            if !ext.ready.is_empty() {
                let n = ext.ready.len().min(buf.remaining());
                buf.put_slice(&ext.ready.split_to(n));
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; READ];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
            ext.raw.extend_from_slice(read.filled());
            ext.process()?;
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Deflating<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.ext.is_none() {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        if this.ext.as_ref().is_some_and(|e| e.wire.len() > HIGH_WATER) {
            ready!(this.drain(cx))?;
        }
        if let Some(ext) = &mut this.ext {
            ext.pending.extend_from_slice(data);
            ext.frame_out();
        }
        // Sent on as far as the connection takes it now; the rest on the
        // next write or flush.
        if let Poll::Ready(Err(e)) = this.drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
