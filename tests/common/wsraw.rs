//! A WebSocket client written out frame by frame, with permessage-deflate
//! (RFC 7692) of its own over flate2: what tokio-tungstenite cannot be (it
//! refuses RSV1 frames), and independent of weir's implementation. It
//! sees each frame's bits, so tests can check what is compressed.

use std::net::SocketAddr;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

pub struct RawWs {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The 101's `Sec-WebSocket-Extensions`, if any.
    pub extensions: Option<String>,
    inflate: Decompress,
    /// The server resets its window per message.
    server_no_context: bool,
}

/// One frame as it came.
#[derive(Debug)]
pub struct Frame {
    pub fin: bool,
    pub rsv1: bool,
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// One message: its text and whether it came compressed, or a close.
#[derive(Debug)]
pub enum Received {
    Text { text: String, compressed: bool },
    Close(u16),
}

impl RawWs {
    /// Upgrade `path` with `headers`, offering `offer` if given; the 101
    /// read (any other status panics).
    pub async fn open(
        addr: SocketAddr,
        path: &str,
        offer: Option<&str>,
        headers: &[(&str, &str)],
    ) -> RawWs {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let mut head = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        );
        if let Some(offer) = offer {
            head.push_str(&format!("Sec-WebSocket-Extensions: {offer}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut buf = Vec::new();
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed before the 101");
            buf.extend_from_slice(&chunk[..n]);
        };
        let response = String::from_utf8_lossy(&buf[..end]).to_string();
        assert!(response.starts_with("HTTP/1.1 101"), "{response}");
        assert!(
            response.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            "the accept key: {response}"
        );
        let extensions = response.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("sec-websocket-extensions")
                .then(|| v.trim().to_string())
        });
        let server_no_context = extensions
            .as_deref()
            .is_some_and(|e| e.contains("server_no_context_takeover"));
        buf.drain(..end);
        RawWs {
            stream,
            buf,
            extensions,
            inflate: Decompress::new(false),
            server_no_context,
        }
    }

    /// Send one frame, masked.
    pub async fn send_frame(&mut self, fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) {
        let mut frame = vec![(u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode];
        let len = payload.len();
        if len < 126 {
            frame.push(0x80 | len as u8);
        } else if len <= 0xffff {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
        let mask: [u8; 4] = rand_mask();
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.expect("send");
    }

    /// The next frame.
    pub async fn frame(&mut self) -> Option<Frame> {
        loop {
            if let Some((frame, used)) = parse(&self.buf) {
                self.buf.drain(..used);
                return Some(frame);
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next text message (inflated if it came compressed) or close;
    /// pings and pongs skipped.
    pub async fn message(&mut self) -> Option<Received> {
        let mut data = Vec::new();
        let mut compressed = false;
        loop {
            let frame = tokio::time::timeout(std::time::Duration::from_secs(10), self.frame())
                .await
                .expect("a frame within 10 s")?;
            match frame.opcode {
                0x8 => {
                    let code = frame
                        .payload
                        .get(..2)
                        .map_or(1005, |c| u16::from_be_bytes([c[0], c[1]]));
                    return Some(Received::Close(code));
                }
                0x9 | 0xA => continue,
                0x1 => {
                    compressed = frame.rsv1;
                    data = frame.payload;
                }
                0x0 => {
                    assert!(!frame.rsv1, "RSV1 on a continuation");
                    data.extend_from_slice(&frame.payload);
                }
                other => panic!("unexpected opcode {other}"),
            }
            if frame.fin {
                break;
            }
        }
        if compressed {
            data = self.inflate(&data);
        }
        let text = String::from_utf8(data).expect("UTF-8 text");
        Some(Received::Text { text, compressed })
    }

    fn inflate(&mut self, data: &[u8]) -> Vec<u8> {
        if self.server_no_context {
            self.inflate = Decompress::new(false);
        }
        let mut input = data.to_vec();
        input.extend_from_slice(&TAIL);
        let mut out = Vec::with_capacity(input.len() * 4 + 1024);
        let mut offset = 0;
        loop {
            out.reserve(16384);
            let before = self.inflate.total_in();
            self.inflate
                .decompress_vec(&input[offset..], &mut out, FlushDecompress::Sync)
                .expect("valid DEFLATE from weir");
            offset += (self.inflate.total_in() - before) as usize;
            if offset == input.len() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

/// `data` compressed as one message (raw deflate, sync flush, tail off).
pub fn deflate(data: &[u8]) -> Vec<u8> {
    let mut c = Compress::new(Compression::default(), false);
    let mut out = Vec::with_capacity(data.len() + 1024);
    loop {
        out.reserve(16384);
        let offset = c.total_in() as usize;
        c.compress_vec(&data[offset..], &mut out, FlushCompress::Sync)
            .expect("compress");
        if c.total_in() as usize == data.len() && out.len() < out.capacity() {
            break;
        }
    }
    assert!(out.ends_with(&TAIL));
    out.truncate(out.len() - TAIL.len());
    out
}

fn parse(buf: &[u8]) -> Option<(Frame, usize)> {
    let (b0, b1) = (*buf.first()?, *buf.get(1)?);
    assert_eq!(b1 & 0x80, 0, "a server frame is never masked");
    let (len, at) = match b1 & 0x7f {
        126 => (u16::from_be_bytes([*buf.get(2)?, *buf.get(3)?]) as usize, 4),
        127 => (
            u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let payload = buf.get(at..at + len)?.to_vec();
    let frame = Frame {
        fin: b0 & 0x80 != 0,
        rsv1: b0 & 0x40 != 0,
        opcode: b0 & 0x0f,
        payload,
    };
    Some((frame, at + len))
}

fn rand_mask() -> [u8; 4] {
    fastrand::u32(..).to_be_bytes()
}
