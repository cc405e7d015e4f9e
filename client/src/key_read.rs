//! Reading a key: look it up on the OM, then read each block in ranges from any replica of
//! its pipeline, a few ranges in flight at once. A replica that fails or returns bytes that
//! do not match their checksums is skipped for the next; the whole key's checksum (written
//! by [`crate::key_write`]) is checked at the end.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};

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
        let mut s = futures::stream::iter(ranges)
            .map(|(i, off, len)| self.read_range(i, &k.blocks[i], off, len))
            .buffered(self.opts.read_ahead.max(1));
        while let Some(bytes) = s.try_next().await? {
            crc.update(&bytes);
            out.write_all(&bytes)
                .await
                .map_err(|e| ClientError::io("write output", e))?;
            done += bytes.len() as u64;
            progress(done);
        }
        out.flush()
            .await
            .map_err(|e| ClientError::io("write output", e))?;
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

    /// One range from the first replica that returns verified bytes. Replicas are tried
    /// starting at one chosen by the block's index, so reads of a key spread over them.
    async fn read_range(&self, index: usize, b: &KeyBlock, off: u64, len: u64) -> Result<Bytes> {
        let members = &b.pipeline.members;
        if members.is_empty() {
            return Err(ClientError::Data(format!(
                "block {} has no replica",
                b.block_id
            )));
        }
        let mut errors = Vec::new();
        for j in 0..members.len() {
            let dn = &members[(index + j) % members.len()];
            match self
                .datanodes
                .read_range(&dn.container_addr, b.block_id, &b.token, off, len)
                .await
            {
                Ok(bytes) if bytes.len() as u64 == len => return Ok(bytes),
                Ok(bytes) => errors.push(format!(
                    "datanode {}: {} of {len} bytes",
                    dn.id,
                    bytes.len()
                )),
                Err(e) => {
                    tracing::warn!(block = %b.block_id, datanode = dn.id, error = %e, "read failed; trying the next replica");
                    errors.push(format!("datanode {}: {e}", dn.id));
                }
            }
        }
        Err(ClientError::Data(format!(
            "block {} bytes {off}..{}: no replica returned them ({})",
            b.block_id,
            off + len,
            errors.join("; ")
        )))
    }
}
