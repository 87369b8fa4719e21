//! A file's bytes as a response body: read in chunks of at most 64 KiB,
//! each on tokio's blocking pool with `pread` at its offset, the next read
//! started only when hyper asks for more — so a response holds one chunk
//! at a time, however large the file and however slow the client. The
//! file slot is held until the body ends or is dropped (the client gone).

use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;

use crate::respond::BoxError;

/// The largest read, and so the most a response holds of its file.
pub(super) const CHUNK: u64 = 64 * 1024;

/// `len` bytes of `file` from `offset`.
pub(super) struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    reading: Option<JoinHandle<std::io::Result<Vec<u8>>>>,
    _slot: OwnedSemaphorePermit,
}

impl FileBody {
    pub(super) fn new(file: File, offset: u64, len: u64, slot: OwnedSemaphorePermit) -> Self {
        FileBody {
            file: Arc::new(file),
            offset,
            remaining: len,
            reading: None,
            _slot: slot,
        }
    }
}

/// Fill a buffer of `n` bytes from `offset`, short only at the file's end.
fn read_chunk(file: &File, offset: u64, n: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0; usize::try_from(n).unwrap_or(0)];
    let mut filled = 0;
    while filled < buf.len() {
        let at = offset.saturating_add(filled as u64);
        match file.read_at(buf.get_mut(filled..).unwrap_or_default(), at) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.reading.is_none() {
            if this.remaining == 0 {
                return Poll::Ready(None);
            }
            let (file, offset, n) = (this.file.clone(), this.offset, this.remaining.min(CHUNK));
            this.reading = Some(tokio::task::spawn_blocking(move || {
                read_chunk(&file, offset, n)
            }));
        }
        let Some(reading) = this.reading.as_mut() else {
            return Poll::Ready(None);
        };
        let read = ready!(Pin::new(reading).poll(cx));
        this.reading = None;
        let chunk = match read {
            Ok(Ok(chunk)) => chunk,
            Ok(Err(e)) => return Poll::Ready(Some(Err(Box::new(e)))),
            Err(e) => return Poll::Ready(Some(Err(Box::new(e)))),
        };
        if chunk.is_empty() {
            // The file shrank under the response: its length was promised.
            let e = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "file shrank");
            return Poll::Ready(Some(Err(Box::new(e))));
        }
        let n = chunk.len() as u64;
        this.offset = this.offset.saturating_add(n);
        this.remaining = this.remaining.saturating_sub(n);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0 && self.reading.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_range_is_read_in_chunks_and_the_slot_freed_at_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let slot = slots.clone().try_acquire_owned().expect("slot");
        let mut body = FileBody::new(File::open(&path).expect("open"), 10, 150_000, slot);
        let mut got = Vec::new();
        let mut largest = 0;
        while let Some(frame) = body.frame().await {
            let data = frame.expect("frame").into_data().expect("data");
            largest = largest.max(data.len());
            got.extend_from_slice(&data);
        }
        assert_eq!(got, data[10..150_010]);
        assert_eq!(largest as u64, CHUNK);
        assert_eq!(slots.available_permits(), 0, "held while the body lives");
        drop(body);
        assert_eq!(slots.available_permits(), 1);
    }
}
