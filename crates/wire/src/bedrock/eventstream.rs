//! The `application/vnd.amazon.eventstream` framing: each message is
//!
//! ```text
//! total length (u32) | headers length (u32) | prelude CRC32 (u32)
//! headers | payload | message CRC32 (u32)
//! ```
//!
//! big-endian, the prelude CRC over the first 8 bytes and the message CRC
//! over everything before it. A header is a name (u8 length, bytes), a
//! value type (u8) and a value of that type. Both CRCs are checked and a
//! message is bounded ([`MAX_FRAME`]): a frame that fails either is an
//! error, never a guess.

/// The largest frame taken. Bedrock's chunks are a Messages event each, a
/// few hundred bytes; AWS's own limit is 16 MiB, weir's relay takes no
/// event past 1 MiB.
pub const MAX_FRAME: usize = 1024 * 1024;
/// The prelude: total length, headers length, prelude CRC.
const PRELUDE: usize = 12;
/// The smallest frame: the prelude and the message CRC.
const MIN_FRAME: usize = PRELUDE + 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The prelude's CRC does not match its lengths.
    PreludeCrc,
    /// The message's CRC does not match its bytes.
    MessageCrc,
    /// A total length under the minimum or past [`MAX_FRAME`], or a
    /// headers length past the frame.
    Length,
    /// A header that runs past its block or has an unknown value type.
    Header,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FrameError::PreludeCrc => "an event-stream frame's prelude CRC does not match",
            FrameError::MessageCrc => "an event-stream frame's message CRC does not match",
            FrameError::Length => "an event-stream frame's length is out of bounds",
            FrameError::Header => "an event-stream frame's headers are malformed",
        })
    }
}

/// One frame: its string headers (other value types are read past) and
/// its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub headers: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The string value of the header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The frame's bytes, CRCs included (string headers only). A header
    /// name past 255 bytes or value past 65,535 is cut there, and the
    /// payload is the caller's: weir encodes only its own small headers
    /// and one Messages event per frame (bounded by the relay).
    pub fn encode(&self) -> Vec<u8> {
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            let name = &name.as_bytes()[..name.len().min(usize::from(u8::MAX))];
            let value = &value.as_bytes()[..value.len().min(usize::from(u16::MAX))];
            headers.push(name.len() as u8);
            headers.extend_from_slice(name);
            headers.push(7);
            headers.extend_from_slice(&(value.len() as u16).to_be_bytes());
            headers.extend_from_slice(value);
        }
        let total = MIN_FRAME + headers.len() + self.payload.len();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        let prelude_crc = crc32fast::hash(&out);
        out.extend_from_slice(&prelude_crc.to_be_bytes());
        out.extend_from_slice(&headers);
        out.extend_from_slice(&self.payload);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }
}

/// Frames from bytes as they arrive.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

impl Decoder {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes held of a frame not yet complete.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, None until one is; Err for a broken one
    /// (the stream is not read past it).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let (Some(total), Some(headers_len), Some(prelude_crc)) =
            (be32(&self.buf, 0), be32(&self.buf, 4), be32(&self.buf, 8))
        else {
            return Ok(None);
        };
        if crc32fast::hash(&self.buf[..8]) != prelude_crc {
            return Err(FrameError::PreludeCrc);
        }
        let (total, headers_len) = (total as usize, headers_len as usize);
        if !(MIN_FRAME..=MAX_FRAME).contains(&total) || headers_len > total - MIN_FRAME {
            return Err(FrameError::Length);
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        let crc_at = total - 4;
        let crc = be32(&self.buf, crc_at).ok_or(FrameError::Length)?;
        if crc32fast::hash(&self.buf[..crc_at]) != crc {
            return Err(FrameError::MessageCrc);
        }
        let headers_end = PRELUDE + headers_len;
        let headers = parse_headers(&self.buf[PRELUDE..headers_end])?;
        let payload = self.buf[headers_end..crc_at].to_vec();
        self.buf.drain(..total);
        Ok(Some(Frame { headers, payload }))
    }
}

/// The string headers of a header block; values of the other types are
/// read past.
fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, String)>, FrameError> {
    let mut out = Vec::new();
    while let Some((&name_len, rest)) = b.split_first() {
        let name_len = usize::from(name_len);
        let name = rest.get(..name_len).ok_or(FrameError::Header)?;
        let name = String::from_utf8(name.to_vec()).map_err(|_| FrameError::Header)?;
        let (&kind, rest) = rest[name_len..].split_first().ok_or(FrameError::Header)?;
        let fixed = match kind {
            0 | 1 => Some(0),
            2 => Some(1),
            3 => Some(2),
            4 => Some(4),
            5 | 8 => Some(8),
            9 => Some(16),
            6 | 7 => None,
            _ => return Err(FrameError::Header),
        };
        b = match fixed {
            Some(n) => rest.get(n..).ok_or(FrameError::Header)?,
            None => {
                let len = rest.get(..2).ok_or(FrameError::Header)?;
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                let value = rest.get(2..2 + len).ok_or(FrameError::Header)?;
                if kind == 7 {
                    let value =
                        String::from_utf8(value.to_vec()).map_err(|_| FrameError::Header)?;
                    out.push((name, value));
                }
                &rest[2 + len..]
            }
        };
    }
    Ok(out)
}
