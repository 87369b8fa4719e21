//! The three codecs behind one type: bytes in, compressed bytes out, a
//! flush that makes everything written so far decodable, a finish that
//! ends the stream. Each writes into a `Vec` the caller empties after
//! every call, so what is held is the codec's own state (its window and
//! tables) and the output of one call.

use std::io::{self, Write};

use bytes::Bytes;

use crate::config::{Coding, Levels};

/// log2 of the Brotli and zstd windows: 256 KiB. What a response holds
/// is bounded by it: measured at Brotli 4, about 2.8 MiB per stream in
/// flight with this window against 10.8 MiB with 1 MiB (Brotli's default
/// window is 4 MiB), and zstd 3 about 1.4 MiB against 2.1 MiB, for the
/// same ratio on web text within 1 % (docs/decisions/069).
const WINDOW_LOG: u32 = 18;

/// How much Brotli buffers its output before writing it to the sink.
const BROTLI_BUFFER: usize = 16 * 1024;

pub(crate) enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    pub(crate) fn new(coding: Coding, levels: Levels) -> io::Result<Encoder> {
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(levels.gzip),
            )),
            Coding::Brotli => Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                BROTLI_BUFFER,
                levels.brotli,
                WINDOW_LOG,
            ))),
            Coding::Zstd => {
                let level = i32::try_from(levels.zstd).unwrap_or(3);
                let mut e = zstd::stream::write::Encoder::new(Vec::new(), level)?;
                e.window_log(WINDOW_LOG)?;
                Encoder::Zstd(e)
            }
        })
    }

    /// Compress `input`; what the codec has output so far.
    pub(crate) fn write(&mut self, input: &[u8]) -> io::Result<Bytes> {
        match self {
            Encoder::Gzip(e) => e.write_all(input)?,
            Encoder::Brotli(e) => e.write_all(input)?,
            Encoder::Zstd(e) => e.write_all(input)?,
        }
        Ok(self.take())
    }

    /// Everything written so far, decodable now (a sync flush: the
    /// stream goes on).
    pub(crate) fn flush(&mut self) -> io::Result<Bytes> {
        match self {
            Encoder::Gzip(e) => e.flush()?,
            Encoder::Brotli(e) => e.flush()?,
            Encoder::Zstd(e) => e.flush()?,
        }
        Ok(self.take())
    }

    /// The end of the stream.
    pub(crate) fn finish(self) -> io::Result<Bytes> {
        let out = match self {
            Encoder::Gzip(e) => e.finish()?,
            Encoder::Brotli(e) => e.into_inner(),
            Encoder::Zstd(e) => e.finish()?,
        };
        Ok(Bytes::from(out))
    }

    fn take(&mut self) -> Bytes {
        let sink = match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Brotli(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        };
        Bytes::from(std::mem::take(sink))
    }
}
