//! Bodies between S3 and rozone: an upload read with its MD5 (the ETag) and size cap, and
//! a download streamed from the key reader that ends in an error, not a short success,
//! when the read fails.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use md5::{Digest, Md5};
use s3s::dto::StreamingBlob;
use tokio::io::{AsyncRead, ReadBuf};

/// An upload: the request body as an `AsyncRead`, hashed as it is read, refused past
/// `max` bytes.
pub struct Upload<R> {
    inner: R,
    md5: Md5,
    pub read: u64,
    max: u64,
    /// Why reading stopped early: the body's own error, or "too large".
    pub failure: Option<Failure>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    TooLarge,
    Body(String),
}

impl Failure {
    /// The S3 error for a body that stopped early: a chunk of a streaming-signed upload
    /// whose signature does not match is the client's signature error (403), as S3
    /// answers; any other body error is an incomplete body (400).
    pub fn s3_error(&self, max_hint: &str) -> s3s::S3Error {
        match self {
            Failure::TooLarge => s3s::s3_error!(EntityTooLarge, "{max_hint}"),
            Failure::Body(e) if e.contains("SignatureMismatch") => s3s::s3_error!(
                SignatureDoesNotMatch,
                "a chunk's signature does not match its bytes"
            ),
            Failure::Body(e) => s3s::s3_error!(IncompleteBody, "reading the body: {e}"),
        }
    }
}

impl<R> Upload<R> {
    pub fn new(inner: R, max: u64) -> Self {
        Self {
            inner,
            md5: Md5::new(),
            read: 0,
            max,
            failure: None,
        }
    }

    /// The MD5 of every byte read.
    pub fn md5(&self) -> [u8; 16] {
        let out = self.md5.clone().finalize();
        let mut a = [0u8; 16];
        a.copy_from_slice(&out[..]);
        a
    }
}

/// The request body of an S3 call as an `AsyncRead` (empty when there is none).
pub fn reader(body: Option<StreamingBlob>) -> impl AsyncRead + Unpin + Send {
    let s: Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>> = match body {
        Some(b) => Box::pin(b.map_err(io::Error::other)),
        None => Box::pin(futures::stream::empty()),
    };
    tokio_util::io::StreamReader::new(s)
}

impl<R: AsyncRead + Unpin> AsyncRead for Upload<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => {
                this.failure.get_or_insert(Failure::Body(e.to_string()));
                Poll::Ready(Err(e))
            }
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                this.md5.update(new);
                this.read = this.read.saturating_add(new.len() as u64);
                if this.read > this.max {
                    // An error read returns no bytes (the AsyncRead contract).
                    buf.set_filled(before);
                    this.failure = Some(Failure::TooLarge);
                    return Poll::Ready(Err(io::Error::other("object too large")));
                }
                Poll::Ready(Ok(()))
            }
        }
    }
}

/// A download: the verified ranges the read task sends, each as it came from the datanode
/// (no copy on the way to the socket), then the task's error (if it failed) as the stream's
/// last item, so the response is cut with an error, never passed off as complete.
pub fn download(ranges: tokio::sync::mpsc::Receiver<io::Result<Bytes>>) -> StreamingBlob {
    StreamingBlob::wrap(Download(ranges))
}

struct Download(tokio::sync::mpsc::Receiver<io::Result<Bytes>>);

impl Stream for Download {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn upload_hashes_what_it_reads_and_stops_past_the_cap() {
        let mut u = Upload::new(&b"hello"[..], 10);
        let mut out = Vec::new();
        u.read_to_end(&mut out).await.unwrap();
        assert_eq!(
            crate::mapping::hex(&u.md5()),
            "5d41402abc4b2a76b9719d911017c592"
        );
        assert_eq!(u.read, 5);
        let mut small = Upload::new(&b"hello"[..], 4);
        assert!(small.read_to_end(&mut Vec::new()).await.is_err());
        assert_eq!(small.failure, Some(Failure::TooLarge));
    }
}
