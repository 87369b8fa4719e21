//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on a listener:
//! a balancer in front of weir opens each connection with a header naming
//! the client, and that address becomes the connection's peer.
//!
//! Only sources in the listener's `proxy_protocol_from` may send one, and
//! they must: a trusted source without a header is refused (a balancer
//! configured without `send-proxy` would otherwise make every client look
//! like the balancer), and so is an untrusted source that starts with a
//! header signature (anyone could otherwise claim any address).
//!
//! The header is read with `MSG_PEEK`, and only the header's own bytes are
//! then taken from the socket: whatever follows it — a TLS ClientHello,
//! the HTTP/2 preface, a request — stays in the kernel's buffer for the
//! connection's reader, however the bytes were split into segments. What
//! is peeked is bounded: 107 bytes for v1 (the protocol's maximum), 16 +
//! [`V2_MAX_PAYLOAD`] for v2. How long it may take is not this module's
//! business: the caller races it against the connection's close reason,
//! which the deadline sweeper sets when the handshake or head deadline
//! passes.
//!
//! Framing (where the header ends, and whether the first bytes are one at
//! all) is weir's, in [`frame`] and [`signature`]; the fields are parsed by
//! the `ppp` crate ([`parse`]). Both are pure, and fuzzed together
//! (`fuzz/fuzz_targets/proxy_header.rs`).

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

/// The v2 signature (the protocol's 12 first bytes).
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The v1 signature, with the space that follows `PROXY`.
pub(crate) const V1_SIGNATURE: &[u8; 6] = b"PROXY ";
/// A v1 header is at most 107 bytes, CRLF included (the specification's
/// bound, so a v1 header fits one read on any balancer).
pub const V1_MAX: usize = 107;
/// The fixed part of a v2 header: signature, version and command, family
/// and protocol, length.
pub const V2_FIXED: usize = 16;
/// The longest v2 address block and TLVs weir takes. AWS NLB adds a VPC
/// endpoint id; HAProxy adds ALPN, authority, a unique id and SSL details
/// when asked — a few hundred bytes. 4 KiB leaves room for all of it and
/// bounds what a connection may make weir hold before it is known.
pub const V2_MAX_PAYLOAD: usize = 4096;

/// Whether the first bytes of a connection are a PROXY header's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    /// Not a PROXY header: the bytes differ from both signatures.
    Absent,
    /// A whole v1 or v2 signature.
    Present,
    /// The bytes so far could still be either (or are none).
    Undecided,
}

/// Whether `seen`, the first bytes of a connection, begin with a PROXY
/// header's signature.
pub fn signature(seen: &[u8]) -> Signature {
    let mut undecided = false;
    for sig in [&V1_SIGNATURE[..], &V2_SIGNATURE[..]] {
        let n = seen.len().min(sig.len());
        if seen[..n] == sig[..n] {
            if n == sig.len() {
                return Signature::Present;
            }
            undecided = true;
        }
    }
    if undecided {
        Signature::Undecided
    } else {
        Signature::Absent
    }
}

/// Where a PROXY header ends in what has arrived so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// The header is incomplete; it needs at most this many bytes in all.
    NeedMore(usize),
    /// The first this-many bytes are the whole header.
    Header(usize),
    /// The bytes are not a PROXY header.
    NotProxy,
    /// A PROXY header that cannot be taken.
    Invalid(Invalid),
}

/// Why a PROXY header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// A v1 line with no CRLF within 107 bytes, or a v2 header announcing
    /// more than [`V2_MAX_PAYLOAD`].
    TooLong,
    /// The header's fields do not parse.
    Malformed,
    /// A header for a datagram (UDP) connection, on a TCP listener.
    NotStream,
}

impl Invalid {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Invalid::TooLong => "too_long",
            Invalid::Malformed => "malformed",
            Invalid::NotStream => "not_stream",
        }
    }
}

/// Find the end of the PROXY header at the start of `seen`.
pub fn frame(seen: &[u8]) -> Framing {
    match signature(seen) {
        Signature::Absent => return Framing::NotProxy,
        Signature::Undecided => {
            let most = if seen.first() == Some(&b'\r') {
                V2_FIXED
            } else {
                V1_MAX
            };
            return Framing::NeedMore(most);
        }
        Signature::Present => {}
    }
    if seen.starts_with(V2_SIGNATURE) {
        let Some(len) = seen.get(14..V2_FIXED) else {
            return Framing::NeedMore(V2_FIXED);
        };
        let payload = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if payload > V2_MAX_PAYLOAD {
            return Framing::Invalid(Invalid::TooLong);
        }
        let total = V2_FIXED + payload;
        return if seen.len() >= total {
            Framing::Header(total)
        } else {
            Framing::NeedMore(total)
        };
    }
    // v1: a line ending in CRLF, at most 107 bytes in all.
    let line = &seen[..seen.len().min(V1_MAX)];
    match line.iter().position(|&b| b == b'\r') {
        Some(cr) if cr + 2 > V1_MAX => Framing::Invalid(Invalid::TooLong),
        Some(cr) => match seen.get(cr + 1) {
            Some(b'\n') => Framing::Header(cr + 2),
            Some(_) => Framing::Invalid(Invalid::Malformed),
            None => Framing::NeedMore(V1_MAX),
        },
        None if seen.len() >= V1_MAX => Framing::Invalid(Invalid::TooLong),
        None => Framing::NeedMore(V1_MAX),
    }
}

/// The client a whole header (as [`frame`] delimited it) names: `None`
/// for a v2 `LOCAL` header (the balancer's own health check), v1
/// `UNKNOWN`, and v2 `PROXY` with no IP addresses (`UNSPEC`, `AF_UNIX`) —
/// the connection is then the socket's own.
pub fn parse(header: &[u8]) -> Result<Option<SocketAddr>, Invalid> {
    let source = if header.starts_with(V2_SIGNATURE) {
        use ppp::v2;
        let h = v2::Header::try_from(header).map_err(|_| Invalid::Malformed)?;
        if h.len() != header.len() {
            return Err(Invalid::Malformed);
        }
        if h.command == v2::Command::Local {
            return Ok(None);
        }
        let ip = matches!(h.addresses, v2::Addresses::IPv4(_) | v2::Addresses::IPv6(_));
        if ip && h.protocol == v2::Protocol::Datagram {
            return Err(Invalid::NotStream);
        }
        match h.addresses {
            v2::Addresses::IPv4(a) => SocketAddr::from((a.source_address, a.source_port)),
            v2::Addresses::IPv6(a) => SocketAddr::from((a.source_address, a.source_port)),
            v2::Addresses::Unspecified | v2::Addresses::Unix(_) => return Ok(None),
        }
    } else {
        use ppp::v1;
        let h = v1::Header::try_from(header).map_err(|_| Invalid::Malformed)?;
        if h.header.len() != header.len() {
            return Err(Invalid::Malformed);
        }
        match h.addresses {
            v1::Addresses::Tcp4(a) => SocketAddr::from((a.source_address, a.source_port)),
            v1::Addresses::Tcp6(a) => SocketAddr::from((a.source_address, a.source_port)),
            v1::Addresses::Unknown => return Ok(None),
        }
    };
    // An IPv4 client written as an IPv4-mapped IPv6 address is the IPv4
    // client, in every log, header and limit.
    Ok(Some(SocketAddr::new(
        source.ip().to_canonical(),
        source.port(),
    )))
}

/// Why a connection was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A trusted source opened without a PROXY header.
    Missing,
    /// An untrusted source opened with a PROXY header signature.
    Untrusted,
    /// A trusted source sent a header that cannot be taken.
    Invalid(Invalid),
    /// The client left (or the socket failed) before the header was
    /// complete: nothing to refuse.
    Gone,
}

impl Refusal {
    /// For logs and their de-duplication.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Untrusted => "untrusted",
            Refusal::Invalid(i) => i.label(),
            Refusal::Gone => "gone",
        }
    }
}

/// Read a connection's PROXY header, if it has one and may.
///
/// From a `trusted` source: the header is required; returns the client it
/// names (`None`: the socket's own peer — `LOCAL`, `UNKNOWN`). From
/// anyone else: returns `None` as soon as the first bytes differ from both
/// signatures (usually the first byte), and refuses a signature.
///
/// Takes exactly the header's bytes from the socket and nothing after it.
pub(crate) async fn read_header(
    stream: &mut TcpStream,
    trusted: bool,
) -> Result<Option<SocketAddr>, Refusal> {
    // Grown to what the header can need, never past the bounds above.
    let mut buf = vec![0u8; V2_FIXED];
    let mut have = 0;
    loop {
        have = peek_more(stream, &mut buf, have).await?;
        let seen = &buf[..have];
        if !trusted {
            match signature(seen) {
                Signature::Absent => return Ok(None),
                Signature::Present => return Err(Refusal::Untrusted),
                Signature::Undecided => continue,
            }
        }
        match frame(seen) {
            Framing::NotProxy => return Err(Refusal::Missing),
            Framing::Invalid(why) => return Err(Refusal::Invalid(why)),
            Framing::NeedMore(most) => {
                if most > buf.len() {
                    buf.resize(most, 0);
                }
            }
            Framing::Header(len) => {
                // The bytes are in the socket's buffer: this only takes them.
                stream
                    .read_exact(&mut buf[..len])
                    .await
                    .map_err(|_| Refusal::Gone)?;
                return parse(&buf[..len]).map_err(Refusal::Invalid);
            }
        }
    }
}

/// Peek at the socket into `buf` until more than `have` bytes are there;
/// returns how many. `buf` must be longer than `have`.
///
/// Peeking does not consume, so a socket with bytes waiting stays
/// readable: the peek runs inside `try_io`, which clears the readiness
/// tokio saw when it reports `WouldBlock` — here, when nothing new has
/// arrived — so the task sleeps until the next segment instead of
/// spinning. End of stream (or a reset) with the header incomplete is
/// [`Refusal::Gone`].
async fn peek_more(stream: &TcpStream, buf: &mut [u8], have: usize) -> Result<usize, Refusal> {
    loop {
        let ready = stream
            .ready(Interest::READABLE)
            .await
            .map_err(|_| Refusal::Gone)?;
        let peeked = stream.try_io(Interest::READABLE, || {
            let (n, _) = rustix::net::recv(stream, &mut *buf, rustix::net::RecvFlags::PEEK)?;
            if n > have {
                Ok(n)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            }
        });
        match peeked {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if ready.is_read_closed() {
                    return Err(Refusal::Gone);
                }
            }
            Err(_) => return Err(Refusal::Gone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(0x20 | command);
        h.push(family);
        let len = (addresses.len() + tlvs.len()) as u16;
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(addresses);
        h.extend_from_slice(tlvs);
        h
    }

    fn v2_tcp4(src: [u8; 4], port: u16, tlvs: &[u8]) -> Vec<u8> {
        let mut a = src.to_vec();
        a.extend_from_slice(&[10, 0, 0, 9]);
        a.extend_from_slice(&port.to_be_bytes());
        a.extend_from_slice(&443u16.to_be_bytes());
        v2(1, 0x11, &a, tlvs)
    }

    #[test]
    fn signatures_are_decided_on_the_first_byte_that_differs() {
        assert_eq!(signature(b""), Signature::Undecided);
        assert_eq!(signature(b"G"), Signature::Absent);
        assert_eq!(signature(b"PRI * HTTP/2.0"), Signature::Absent);
        assert_eq!(
            signature(b"\x16\x03\x01"),
            Signature::Absent,
            "a ClientHello"
        );
        assert_eq!(signature(b"PROX"), Signature::Undecided);
        assert_eq!(signature(b"PROXY "), Signature::Present);
        assert_eq!(signature(b"\r\n\r\n\0"), Signature::Undecided);
        assert_eq!(signature(V2_SIGNATURE), Signature::Present);
        assert_eq!(signature(b"\r\n\r\nX"), Signature::Absent);
    }

    #[test]
    fn v1_headers_are_framed_and_parsed() {
        let h = b"PROXY TCP4 192.0.2.1 10.0.0.9 5555 443\r\nGET / HTTP/1.1\r\n";
        assert_eq!(frame(h), Framing::Header(40));
        assert_eq!(
            parse(&h[..40]),
            Ok(Some("192.0.2.1:5555".parse().expect("addr")))
        );
        let h6 = b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n";
        assert_eq!(
            parse(h6),
            Ok(Some("[2001:db8::1]:1".parse().expect("addr")))
        );
        assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Ok(None));
        assert_eq!(
            parse(b"PROXY UNKNOWN 1.2.3.4 garbage\r\n"),
            Ok(None),
            "UNKNOWN may carry anything up to CRLF"
        );
        assert_eq!(
            parse(b"PROXY TCP4 192.0.2.1 10.0.0.9 5555 99999\r\n"),
            Err(Invalid::Malformed)
        );
        assert_eq!(
            parse(b"PROXY TCP4 2001:db8::1 10.0.0.9 1 2\r\n"),
            Err(Invalid::Malformed),
            "an IPv6 address under TCP4"
        );
        assert_eq!(
            frame(b"PROXY TCP4 \rX"),
            Framing::Invalid(Invalid::Malformed)
        );
        assert_eq!(frame(b"PROXY TCP4 1.2"), Framing::NeedMore(V1_MAX));
        assert_eq!(frame(b"PROXY TCP4 1.2\r"), Framing::NeedMore(V1_MAX));
        let long = [b"PROXY ".as_slice(), &[b'1'; 101]].concat();
        assert_eq!(long.len(), V1_MAX);
        assert_eq!(frame(&long), Framing::Invalid(Invalid::TooLong));
        let mut at_limit = [b"PROXY ".as_slice(), &[b'1'; 99]].concat();
        at_limit.extend_from_slice(b"\r\n");
        assert_eq!(
            frame(&at_limit),
            Framing::Header(V1_MAX),
            "107 bytes is allowed"
        );
    }

    #[test]
    fn v2_headers_are_framed_and_parsed() {
        let h = v2_tcp4([192, 0, 2, 1], 5555, &[]);
        assert_eq!(frame(&h[..15]), Framing::NeedMore(V2_FIXED));
        assert_eq!(frame(&h[..16]), Framing::NeedMore(28));
        assert_eq!(frame(&h), Framing::Header(28));
        assert_eq!(parse(&h), Ok(Some("192.0.2.1:5555".parse().expect("addr"))));
        // TLVs (here AWS's VPC endpoint id, type 0xEA) are skipped.
        let tlv = [&[0xEA, 0, 5, 1][..], b"vpce"].concat();
        let with_tlv = v2_tcp4([192, 0, 2, 1], 5555, &tlv);
        assert_eq!(frame(&with_tlv), Framing::Header(28 + tlv.len()));
        assert!(parse(&with_tlv).is_ok());
        // IPv6, and an IPv4-mapped source taken as IPv4.
        let mut a = vec![0u8; 36];
        a[..16].copy_from_slice(
            &"2001:db8::7"
                .parse::<std::net::Ipv6Addr>()
                .expect("v6")
                .octets(),
        );
        a[32..34].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            parse(&v2(1, 0x21, &a, &[])),
            Ok(Some("[2001:db8::7]:7".parse().expect("addr")))
        );
        a[..16].copy_from_slice(
            &"::ffff:192.0.2.8"
                .parse::<std::net::Ipv6Addr>()
                .expect("v6")
                .octets(),
        );
        assert_eq!(
            parse(&v2(1, 0x21, &a, &[])),
            Ok(Some("192.0.2.8:7".parse().expect("addr")))
        );
        // LOCAL (a health check), with or without addresses.
        assert_eq!(parse(&v2(0, 0x00, &[], &[])), Ok(None));
        assert_eq!(parse(&v2(0, 0x11, &[0; 12], &[])), Ok(None));
        assert_eq!(parse(&v2(1, 0x00, &[], &[])), Ok(None), "PROXY with UNSPEC");
        assert_eq!(
            parse(&v2(1, 0x12, &[0; 12], &[])),
            Err(Invalid::NotStream),
            "UDP"
        );
        assert_eq!(parse(&v2(1, 0x11, &[0; 8], &[])), Err(Invalid::Malformed));
        let mut bad_version = h.clone();
        bad_version[12] = 0x11;
        assert_eq!(parse(&bad_version), Err(Invalid::Malformed));
        // The length bound.
        let mut long = V2_SIGNATURE.to_vec();
        long.extend_from_slice(&[0x21, 0x11]);
        long.extend_from_slice(&((V2_MAX_PAYLOAD + 1) as u16).to_be_bytes());
        assert_eq!(frame(&long), Framing::Invalid(Invalid::TooLong));
        long[14..16].copy_from_slice(&(V2_MAX_PAYLOAD as u16).to_be_bytes());
        assert_eq!(frame(&long), Framing::NeedMore(V2_FIXED + V2_MAX_PAYLOAD));
    }

    /// A connected pair over loopback: (weir's side, the client's side).
    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(l.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = l.accept().await.expect("accept");
        (server, client)
    }

    #[tokio::test]
    async fn only_the_header_is_taken_however_it_arrives() {
        let h = v2_tcp4([192, 0, 2, 1], 5555, &[0xEA, 0, 2, 1, 2]);
        let after = b"\x16\x03\x01 a ClientHello";
        // Byte by byte, then the rest in the same write as the header's end.
        let (mut server, mut client) = pair().await;
        let reader = tokio::spawn(async move {
            let got = read_header(&mut server, true).await;
            (got, server)
        });
        for b in &h[..h.len() - 1] {
            client.write_all(&[*b]).await.expect("write");
            client.flush().await.expect("flush");
            tokio::task::yield_now().await;
        }
        let mut last = vec![h[h.len() - 1]];
        last.extend_from_slice(after);
        client.write_all(&last).await.expect("write");
        let (got, mut server) = reader.await.expect("join");
        assert_eq!(got, Ok(Some("192.0.2.1:5555".parse().expect("addr"))));
        let mut rest = vec![0u8; after.len()];
        server
            .read_exact(&mut rest)
            .await
            .expect("the rest is there");
        assert_eq!(&rest, after);

        // v1 and the request in one write.
        let (mut server, mut client) = pair().await;
        client
            .write_all(b"PROXY TCP4 192.0.2.2 10.0.0.9 1 2\r\nGET / HTTP/1.1\r\n\r\n")
            .await
            .expect("write");
        assert_eq!(
            read_header(&mut server, true).await,
            Ok(Some("192.0.2.2:1".parse().expect("addr")))
        );
        let mut rest = [0u8; 18];
        server.read_exact(&mut rest).await.expect("read");
        assert_eq!(&rest, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn trust_decides_whether_a_header_is_required_or_refused() {
        let (mut server, mut client) = pair().await;
        client
            .write_all(b"GET / HTTP/1.1\r\n")
            .await
            .expect("write");
        assert_eq!(read_header(&mut server, true).await, Err(Refusal::Missing));

        let (mut server, mut client) = pair().await;
        client
            .write_all(b"GET / HTTP/1.1\r\n")
            .await
            .expect("write");
        assert_eq!(read_header(&mut server, false).await, Ok(None));
        let mut first = [0u8; 3];
        server.read_exact(&mut first).await.expect("read");
        assert_eq!(
            &first, b"GET",
            "an untrusted client's bytes are left in place"
        );

        let (mut server, mut client) = pair().await;
        client.write_all(b"PROXY TCP4 ").await.expect("write");
        assert_eq!(
            read_header(&mut server, false).await,
            Err(Refusal::Untrusted)
        );

        let (mut server, mut client) = pair().await;
        client.write_all(&V2_SIGNATURE[..7]).await.expect("write");
        client.shutdown().await.expect("shutdown");
        assert_eq!(
            read_header(&mut server, true).await,
            Err(Refusal::Gone),
            "a half header then end of stream does not wait"
        );
    }
}
