//! Reading a key: look it up on the OM, then read each block in ranges from any replica of
//! its pipeline, a few ranges in flight at once. A replica that fails or returns bytes that
//! do not match their checksums is skipped for the next; the whole key's checksum (written
//! by [`crate::key_write`]) is checked at the end.
//!
//! Block tokens live for `om.block_token_lifetime`: a read that outlasts its tokens (a slow
//! consumer of a large key, a key looked up long before it is read) would be refused by
//! every replica. A range refused for its token alone is retried once with the tokens of a
//! fresh lookup of the same key, provided the key still names the same blocks; a key
//! replaced meanwhile is an error, never a read of two versions.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use rozone_types::codes::{dn_result, DnCode};
use tokio::sync::Mutex;

use crate::datanode::Datanodes;
use crate::error::{ClientError, Result};
use crate::om::{OmClient, ReadMode};
use crate::types::{Key, KeyBlock};

/// How keys are read.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Bytes per ReadChunk.
    pub range: u64,
    /// ReadChunk calls in flight at once.
    pub read_ahead: usize,
    /// How the OM lookup is served.
    pub mode: ReadMode,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            range: 4 << 20,
            read_ahead: 4,
            mode: ReadMode::Default,
        }
    }
}

/// Where [`KeyReader::read_span_to`] puts the bytes it read, in order.
#[allow(async_fn_in_trait)] // Implemented here only; callers use the concrete sinks below.
pub trait SpanSink {
    async fn put(&mut self, bytes: Bytes) -> Result<()>;
}

/// A sink over an `AsyncWrite` (copies each range into the writer).
struct Writer<'w, W>(&'w mut W);

impl<W: AsyncWrite + Unpin> SpanSink for Writer<'_, W> {
    async fn put(&mut self, bytes: Bytes) -> Result<()> {
        self.0
            .write_all(&bytes)
            .await
            .map_err(|e| ClientError::io("write output", e))
    }
}

/// A sink over a channel: each range is sent as it is. A closed channel (the receiver went
/// away, e.g. an S3 client that hung up) ends the read as an output error.
impl SpanSink for tokio::sync::mpsc::Sender<std::io::Result<Bytes>> {
    async fn put(&mut self, bytes: Bytes) -> Result<()> {
        self.send(Ok(bytes)).await.map_err(|_| {
            ClientError::io(
                "write output",
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the reader went away"),
            )
        })
    }
}

/// The reader of keys.
pub struct KeyReader<'a> {
    pub om: &'a OmClient,
    pub datanodes: &'a Datanodes,
    pub opts: &'a ReadOptions,
}

impl KeyReader<'_> {
    /// Writes the key's bytes to `out`; `progress` gets the bytes done so far.
    pub async fn get<W: AsyncWrite + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        out: &mut W,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Key> {
        let k = self
            .om
            .lookup_key(volume, bucket, key, self.opts.mode)
            .await?;
        self.read_into(&k, out, progress).await?;
        Ok(k)
    }

    /// The key's bytes of an already looked-up key.
    pub async fn read_into<W: AsyncWrite + Unpin>(
        &self,
        k: &Key,
        out: &mut W,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        self.read_span(k, 0..k.size, out, progress).await
    }

    /// Bytes `span` of an already looked-up key (a ranged GET). Each range is verified by
    /// the datanode's chunk checksums; the whole key's checksum only when `span` is all of
    /// it.
    pub async fn read_span<W: AsyncWrite + Unpin>(
        &self,
        k: &Key,
        span: std::ops::Range<u64>,
        out: &mut W,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let mut w = Writer(out);
        self.read_span_to(k, span, &mut w, progress).await?;
        w.0.flush()
            .await
            .map_err(|e| ClientError::io("write output", e))
    }

    /// [`Self::read_span`] handing each verified range to `sink` as it is (no copy): the
    /// S3 gateway streams them into a response body. `sink` sees every byte before the
    /// whole-key checksum is compared at the end, so a failure after it returns still means
    /// the bytes it took must not be trusted (the gateway then fails the body).
    pub async fn read_span_to<S: SpanSink>(
        &self,
        k: &Key,
        span: std::ops::Range<u64>,
        sink: &mut S,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        if span.start > span.end || span.end > k.size {
            return Err(ClientError::Invalid(format!(
                "bytes {}..{} are not within key {} of {} bytes",
                span.start, span.end, k.name, k.size
            )));
        }
        let whole = span.start == 0 && span.end == k.size;
        let mut ranges = Vec::new();
        for (i, b) in k.blocks.iter().enumerate() {
            // This block's part of the span, in block offsets.
            let from = span.start.max(b.offset).saturating_sub(b.offset);
            let to = span.end.min(b.offset + b.length).saturating_sub(b.offset);
            let mut off = from;
            while off < to {
                let len = self.opts.range.min(to - off);
                ranges.push((i, off, len));
                off += len;
            }
        }
        let mut crc = crc32fast::Hasher::new();
        let mut done = 0u64;
        let fresh = Mutex::new(None);
        let mut s = futures::stream::iter(ranges)
            .map(|(i, off, len)| self.read_fresh(k, &fresh, i, off, len))
            .buffered(self.opts.read_ahead.max(1));
        while let Some(pieces) = s.try_next().await? {
            for bytes in pieces {
                crc.update(&bytes);
                let n = bytes.len() as u64;
                sink.put(bytes).await?;
                done += n;
            }
            progress(done);
        }
        let want_len = span.end - span.start;
        if done != want_len {
            return Err(ClientError::Data(format!(
                "read {done} bytes of key {} where {want_len} were asked for (size {})",
                k.name, k.size
            )));
        }
        if !whole {
            return Ok(());
        }
        if let Some(want) = k.checksum.strip_prefix("crc32:") {
            let got = format!("{:08x}", crc.finalize());
            if got != want {
                return Err(ClientError::Data(format!(
                    "key {} checksum mismatch: read crc32:{got}, committed crc32:{want}",
                    k.name
                )));
            }
        }
        Ok(())
    }

    /// One range of block `i` of `k`; refused for its token alone, once more with the
    /// block's token from a fresh lookup (kept in `fresh` for the ranges after it).
    async fn read_fresh(
        &self,
        k: &Key,
        fresh: &Mutex<Option<Key>>,
        i: usize,
        off: u64,
        len: u64,
    ) -> Result<Vec<Bytes>> {
        let b = &k.blocks[i];
        let current = fresh
            .lock()
            .await
            .as_ref()
            .map(|f| f.blocks[i].token.clone());
        let token = current.unwrap_or_else(|| b.token.clone());
        match self.read_range(i, b, &token, off, len).await {
            Err(ReadError::Tokens(why)) => {
                let token = self.refresh(k, fresh, i, &token).await.map_err(|e| {
                    ClientError::Data(format!(
                        "block {} bytes {off}..{}: its token was refused ({why}) and no fresh one was had: {e}",
                        b.block_id,
                        off + len
                    ))
                })?;
                self.read_range(i, b, &token, off, len)
                    .await
                    .map_err(ReadError::into_client)
            }
            r => r.map_err(ReadError::into_client),
        }
    }

    /// Block `i`'s token from a lookup of `k` newer than `failed`: the one another range
    /// already fetched, or a new lookup. Refused when the key no longer names `k`'s blocks.
    async fn refresh(
        &self,
        k: &Key,
        fresh: &Mutex<Option<Key>>,
        i: usize,
        failed: &[u8],
    ) -> Result<Vec<u8>> {
        let mut g = fresh.lock().await;
        if let Some(f) = g.as_ref() {
            if f.blocks[i].token != failed {
                return Ok(f.blocks[i].token.clone());
            }
        }
        let f = self
            .om
            .lookup_key(&k.volume, &k.bucket, &k.name, self.opts.mode)
            .await?;
        let same = f.blocks.len() == k.blocks.len()
            && f.blocks
                .iter()
                .zip(&k.blocks)
                .all(|(a, b)| (a.block_id, a.offset, a.length) == (b.block_id, b.offset, b.length));
        if !same {
            return Err(ClientError::Data(format!(
                "key {}/{}/{} was replaced while it was read; read it again",
                k.volume, k.bucket, k.name
            )));
        }
        tracing::info!(key = %k.name, "block tokens refreshed for a read that outlasted them");
        let token = f.blocks[i].token.clone();
        *g = Some(f);
        Ok(token)
    }

    /// One range from the first replica that returns verified bytes (in the pieces it sent).
    /// Replicas are tried starting at one chosen by the block's index, so reads of a key
    /// spread over them.
    async fn read_range(
        &self,
        index: usize,
        b: &KeyBlock,
        token: &[u8],
        off: u64,
        len: u64,
    ) -> Result<Vec<Bytes>, ReadError> {
        let members = &b.pipeline.members;
        if members.is_empty() {
            return Err(ReadError::Other(ClientError::Data(format!(
                "block {} has no replica",
                b.block_id
            ))));
        }
        let mut errors = Vec::new();
        let mut refused_token = 0;
        for j in 0..members.len() {
            let dn = &members[(index + j) % members.len()];
            match self
                .datanodes
                .read_range(&dn.container_addr, b.block_id, token, off, len)
                .await
            {
                Ok(pieces) => {
                    let got: u64 = pieces.iter().map(|p| p.len() as u64).sum();
                    if got == len {
                        return Ok(pieces);
                    }
                    errors.push(format!("datanode {}: {got} of {len} bytes", dn.id));
                }
                Err(e) => {
                    if token_refused(&e) {
                        refused_token += 1;
                    }
                    tracing::warn!(block = %b.block_id, datanode = dn.id, error = %e, "read failed; trying the next replica");
                    errors.push(format!("datanode {}: {e}", dn.id));
                }
            }
        }
        if refused_token == members.len() {
            return Err(ReadError::Tokens(errors.join("; ")));
        }
        Err(ReadError::Other(ClientError::Data(format!(
            "block {} bytes {off}..{}: no replica returned them ({})",
            b.block_id,
            off + len,
            errors.join("; ")
        ))))
    }
}

/// Why a range was not read: every replica refused its token (a fresh one may do), or
/// anything else.
enum ReadError {
    Tokens(String),
    Other(ClientError),
}

impl ReadError {
    fn into_client(self) -> ClientError {
        match self {
            ReadError::Tokens(why) => {
                ClientError::Data(format!("every replica refused the block token: {why}"))
            }
            ReadError::Other(e) => e,
        }
    }
}

/// A datanode's refusal of the block token (expired, or otherwise not good).
fn token_refused(e: &ClientError) -> bool {
    matches!(e, ClientError::Status { status, .. }
        if dn_result(status) == Some(DnCode::BlockTokenVerificationFailed))
}
