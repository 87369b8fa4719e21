//! Raw HTTP/2 frames, for tests that must send exactly what they name.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const CONTINUATION: u8 = 9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const NO_ERROR: u32 = 0;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// GET / with authority "a", HPACK-encoded with the static table.
pub const REQUEST_BLOCK: &[u8] = &[0x82, 0x84, 0x86, 0x41, 0x01, b'a'];

pub async fn h2_connect(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    s.write_all(&hello).await.expect("preface");
    s
}

/// Frames the server sent, as (type, flags, payload), read until it closes.
pub async fn server_frames(s: &mut TcpStream, within: Duration) -> (Vec<(u8, u8, Vec<u8>)>, bool) {
    let (bytes, closed) = read_bytes_until_close(s, within).await;
    (parse_frames(&bytes), closed)
}

/// Split bytes from the server into (type, flags, payload) frames.
pub fn parse_frames(bytes: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = (usize::from(rest[0]) << 16) | (usize::from(rest[1]) << 8) | usize::from(rest[2]);
        if rest.len() < 9 + len {
            break;
        }
        frames.push((rest[3], rest[4], rest[9..9 + len].to_vec()));
        rest = &rest[9 + len..];
    }
    frames
}

pub async fn read_bytes_until_close(s: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

pub fn goaway_code(frames: &[(u8, u8, Vec<u8>)]) -> Option<u32> {
    frames
        .iter()
        .find(|(kind, _, p)| *kind == GOAWAY && p.len() >= 8)
        .map(|(_, _, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
}
