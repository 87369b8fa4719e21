//! The DEFLATE of one direction of a connection (RFC 7692 §7.2): raw
//! deflate, each message ended by a sync flush whose `00 00 ff ff` tail is
//! dropped by the sender and put back by the receiver.
//!
//! Inflating is bounded: a message's inflated size counts against the
//! connection's message limit as it grows, so a small frame that would
//! inflate past it is refused after at most one more chunk of output (a
//! decompression bomb costs the limit, never more).

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// What a sync flush ends with (RFC 7692 §7.2.1).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Output grows by this much at a time.
const CHUNK: usize = 16 << 10;

/// Why a message could not be inflated.
#[derive(Debug)]
pub(super) enum Refused {
    /// It inflates past the message limit.
    TooBig,
    /// It is not valid DEFLATE data.
    Corrupt,
}

/// The client's messages, inflated.
pub(super) struct Inflater {
    window: Option<Decompress>,
    /// The client starts each message afresh: no window is kept between
    /// messages.
    no_context: bool,
    /// The most a message may inflate to.
    limit: usize,
    /// What the message being read has inflated to so far.
    message: usize,
}

impl Inflater {
    pub(super) fn new(no_context: bool, limit: usize) -> Self {
        Self {
            window: None,
            no_context,
            limit,
            message: 0,
        }
    }

    /// Inflate one frame's payload; `last` when it ends the message.
    pub(super) fn inflate(&mut self, data: &[u8], last: bool) -> Result<Vec<u8>, Refused> {
        let window = self.window.get_or_insert_with(|| Decompress::new(false));
        let mut out = Vec::new();
        let mut ended = feed(window, data, &mut out, self.limit, self.message)?;
        if last && !ended {
            ended = feed(window, &TAIL, &mut out, self.limit, self.message)?;
        }
        self.message = self.message.saturating_add(out.len());
        if last {
            self.message = 0;
            // A final block (BFINAL) ends the window as well.
            if self.no_context || ended {
                self.window = None;
            }
        }
        Ok(out)
    }
}

/// Inflate `input` onto `out`, refusing past `limit` (with `before`
/// already inflated); whether the stream ended (a final block).
fn feed(
    d: &mut Decompress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
    before: usize,
) -> Result<bool, Refused> {
    loop {
        if before.saturating_add(out.len()) > limit {
            return Err(Refused::TooBig);
        }
        out.reserve(CHUNK);
        let (read, written) = (d.total_in(), d.total_out());
        let status = d
            .decompress_vec(input, out, FlushDecompress::Sync)
            .map_err(|_| Refused::Corrupt)?;
        let consumed = usize::try_from(d.total_in().saturating_sub(read)).unwrap_or(usize::MAX);
        let produced = d.total_out().saturating_sub(written);
        input = input.get(consumed..).unwrap_or_default();
        if status == Status::StreamEnd {
            return if before.saturating_add(out.len()) > limit {
                Err(Refused::TooBig)
            } else {
                Ok(true)
            };
        }
        let room_left = out.len() < out.capacity();
        if (input.is_empty() && room_left) || (consumed == 0 && produced == 0) {
            return if before.saturating_add(out.len()) > limit {
                Err(Refused::TooBig)
            } else {
                Ok(false)
            };
        }
    }
}

/// weir's messages, compressed.
pub(super) struct Deflater {
    window: Option<Compress>,
    /// Each message starts afresh (the client asked for it).
    no_context: bool,
}

impl Deflater {
    pub(super) fn new(no_context: bool) -> Self {
        Self {
            window: None,
            no_context,
        }
    }

    /// The compressed payload of one whole message, or `None` when it is
    /// better sent as it is (then the window is dropped: the client never
    /// sees what it held, so no later message may refer to it).
    pub(super) fn deflate(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        let window = self
            .window
            .get_or_insert_with(|| Compress::new(Compression::fast(), false));
        let compressed = sync_flush(window, payload).filter(|c| c.len() < payload.len());
        if compressed.is_none() || self.no_context {
            self.window = None;
        }
        compressed
    }

    /// Drop the window between turns: starting afresh is always allowed
    /// to the sender, and an idle connection then holds no compressor.
    pub(super) fn rest(&mut self) {
        self.window = None;
    }
}

/// `payload` deflated and sync-flushed, its `00 00 ff ff` tail removed.
fn sync_flush(c: &mut Compress, mut input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    loop {
        out.reserve(CHUNK);
        let (read, written) = (c.total_in(), c.total_out());
        c.compress_vec(input, &mut out, FlushCompress::Sync).ok()?;
        let consumed = usize::try_from(c.total_in().saturating_sub(read)).ok()?;
        let produced = c.total_out().saturating_sub(written);
        input = input.get(consumed..)?;
        if input.is_empty() && out.len() < out.capacity() {
            break;
        }
        if consumed == 0 && produced == 0 {
            return None;
        }
    }
    let body = out.len().checked_sub(TAIL.len())?;
    (out.get(body..) == Some(&TAIL[..])).then(|| {
        out.truncate(body);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_and_without_context() {
        for no_context in [false, true] {
            let mut d = Deflater::new(no_context);
            let mut i = Inflater::new(no_context, 1 << 20);
            for n in 0..5 {
                let text = format!(
                    "{{\"type\":\"response.output_text.delta\",\"delta\":\"{n} words, words, words\"}}"
                );
                let c = d.deflate(text.as_bytes()).expect("compressible");
                assert!(!c.ends_with(&TAIL));
                assert_eq!(i.inflate(&c, true).expect("inflates"), text.as_bytes());
            }
        }
    }

    #[test]
    fn a_message_inflating_past_the_limit_is_refused_early() {
        let mut d = Deflater::new(true);
        let bomb = d.deflate(&vec![b'a'; 8 << 20]).expect("compressible");
        assert!(bomb.len() < 64 << 10);
        let mut i = Inflater::new(true, 1 << 20);
        assert!(matches!(i.inflate(&bomb, true), Err(Refused::TooBig)));
    }

    #[test]
    fn a_message_split_across_frames_is_counted_whole() {
        let mut d = Deflater::new(true);
        let c = d.deflate(&vec![b'a'; 300 << 10]).expect("compressible");
        let (a, b) = c.split_at(c.len() / 2);
        let mut i = Inflater::new(true, 200 << 10);
        let refused = match i.inflate(a, false) {
            Err(Refused::TooBig) => true,
            Ok(_) => matches!(i.inflate(b, true), Err(Refused::TooBig)),
            Err(Refused::Corrupt) => false,
        };
        assert!(refused);
    }

    #[test]
    fn garbage_is_corrupt() {
        let mut i = Inflater::new(true, 1 << 20);
        assert!(matches!(
            i.inflate(&[0xff, 0xff, 0xff, 0xff, 0xff], true),
            Err(Refused::Corrupt)
        ));
    }
}
