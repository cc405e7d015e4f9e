//! CopyObject and UploadPartCopy. CopyObject shares the source's blocks: the OM makes the
//! destination a key with the source's block list (`CopyKey`), counting a reference per
//! shared block, so no byte is read or written and deleting either key leaves the other's
//! data (a block goes when its last key does). It copies the metadata
//! (`x-amz-metadata-directive: COPY`, the default) or replaces it (`REPLACE`, from the
//! request); the ETag is the source's (the bytes are the same). UploadPartCopy reads the
//! source key (or a byte range of it) from the datanodes and writes it as the part (no
//! byte goes back to the S3 client), hashing it for the part's ETag.

use std::ops::Range;

use rozone_client::key_read::KeyReader;
use rozone_client::key_write::{KeyWriter, Written};
use rozone_client::types::{Key, S3Meta};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Result};

use crate::body::Upload;
use crate::core::{Gateway, Metrics};
use crate::mapping::{bucket_name, etag, hex, metadata_in, s3_error, timestamp};
use crate::multipart::part_number;
use crate::objects::{key_etag, read_conditions, DEFAULT_CONTENT_TYPE};

/// Bytes buffered between the source read and the destination write.
const COPY_BUFFER: usize = 1 << 20;

/// The copy-source conditions of a request (`x-amz-copy-source-if-*`).
struct SourceConditions<'a> {
    if_match: Option<&'a ETagCondition>,
    if_unmodified_since: Option<&'a Timestamp>,
    if_none_match: Option<&'a ETagCondition>,
    if_modified_since: Option<&'a Timestamp>,
}

/// The source key of a copy, with its conditions checked (412 when one fails, as S3
/// answers for copy sources, where a GET would answer 304 for some).
async fn source_key(g: &Gateway, src: &CopySource, c: SourceConditions<'_>) -> S3Result<Key> {
    let (bucket, key) = match src {
        CopySource::Bucket {
            bucket,
            key,
            version_id: None,
        } => (bucket.to_string(), key.to_string()),
        CopySource::Bucket { .. } => {
            return Err(s3_error!(
                NotImplemented,
                "copying a version: buckets are not versioned"
            ))
        }
        _ => return Err(s3_error!(NotImplemented, "copy from an access point")),
    };
    bucket_name(&bucket)?;
    let k = g
        .client
        .om
        .lookup_key(&g.volume, &bucket, &key, g.client.read.mode)
        .await
        .map_err(s3_error)?;
    read_conditions(
        &k,
        c.if_match,
        c.if_unmodified_since,
        c.if_none_match,
        c.if_modified_since,
    )
    .map_err(|e| {
        if *e.code() == s3s::S3ErrorCode::NotModified {
            s3_error!(PreconditionFailed, "a copy-source condition did not hold")
        } else {
            e
        }
    })?;
    Ok(k)
}

/// Parses `x-amz-copy-source-range: bytes=FIRST-LAST` (both required, inclusive, within
/// the source) into a span.
pub fn copy_range(range: &str, size: u64) -> S3Result<Range<u64>> {
    let bad = || {
        s3_error!(
            InvalidArgument,
            "x-amz-copy-source-range must be bytes=FIRST-LAST within the source's {size} bytes"
        )
    };
    let (first, last) = range
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .ok_or_else(bad)?;
    let first: u64 = first.parse().map_err(|_| bad())?;
    let last: u64 = last.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(bad());
    }
    Ok(first..last.checked_add(1).ok_or_else(bad)?)
}

/// Streams `span` of `source` into blocks of `bucket/key` (not yet committed): what was
/// written and the MD5 of the bytes.
async fn copy_span(
    g: &Gateway,
    source: &Key,
    span: Range<u64>,
    bucket: &str,
    key: &str,
) -> S3Result<(Written, [u8; 16])> {
    let len = span.end.saturating_sub(span.start);
    if len > g.max_object_size {
        return Err(s3_error!(
            EntityTooLarge,
            "the copy is larger than s3g.max_object_size"
        ));
    }
    let (rd, mut wr) = tokio::io::duplex(COPY_BUFFER);
    let client = g.client.clone();
    let src_key = source.clone();
    let reading = tokio::spawn(async move {
        let r = KeyReader {
            om: &client.om,
            datanodes: &client.datanodes,
            opts: &client.read,
        };
        r.read_span(&src_key, span, &mut wr, &|_| {}).await
    });
    let mut src = Upload::new(rd, g.max_object_size);
    let writer = KeyWriter {
        om: &g.client.om,
        datanodes: &g.client.datanodes,
        opts: &g.client.write,
    };
    let written = writer
        .write(&g.volume, bucket, key, Some(len), &mut src, &|_| {})
        .await;
    let (copied, md5) = (src.read, src.md5());
    // Closes the pipe: a reader still writing (the write failed) stops instead of waiting.
    drop(src);
    let read = reading
        .await
        .map_err(|e| s3_error!(InternalError, "copy reader: {e}"))?;
    let written = written.map_err(s3_error)?;
    read.map_err(s3_error)?;
    if copied != len {
        return Err(s3_error!(InternalError, "copied {copied} of {len} bytes"));
    }
    Metrics::add(&g.metrics.bytes_in, copied);
    Ok((written, md5))
}

pub async fn copy_object(
    g: &Gateway,
    req: S3Request<CopyObjectInput>,
) -> S3Result<CopyObjectOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let k = source_key(
        g,
        &i.copy_source,
        SourceConditions {
            if_match: i.copy_source_if_match.as_ref(),
            if_unmodified_since: i.copy_source_if_unmodified_since.as_ref(),
            if_none_match: i.copy_source_if_none_match.as_ref(),
            if_modified_since: i.copy_source_if_modified_since.as_ref(),
        },
    )
    .await?;
    let replace = i
        .metadata_directive
        .as_ref()
        .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
    let old = k.s3.clone().unwrap_or_default();
    let (content_type, metadata) = if replace {
        (
            i.content_type
                .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string()),
            metadata_in(i.metadata),
        )
    } else {
        (old.content_type.clone(), old.metadata.clone())
    };

    if (k.bucket.as_str(), k.name.as_str()) == (i.bucket.as_str(), i.key.as_str()) && !replace {
        return Err(s3_error!(
            InvalidRequest,
            "copying an object to itself changes nothing: set x-amz-metadata-directive: REPLACE"
        ));
    }
    let meta = S3Meta {
        etag: key_etag(&k),
        content_type,
        metadata,
    };
    let new = g
        .client
        .om
        .copy_key(&k, &i.bucket, &i.key, &meta)
        .await
        .map_err(s3_error)?;
    Ok(CopyObjectOutput {
        copy_object_result: Some(CopyObjectResult {
            e_tag: Some(etag(&meta.etag)),
            last_modified: Some(timestamp(new.modified_ms)),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// UploadPartCopy: a part made of the source key or of `x-amz-copy-source-range` of it.
pub async fn upload_part_copy(
    g: &Gateway,
    req: S3Request<UploadPartCopyInput>,
) -> S3Result<UploadPartCopyOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let part = part_number(i.part_number)?;
    let k = source_key(
        g,
        &i.copy_source,
        SourceConditions {
            if_match: i.copy_source_if_match.as_ref(),
            if_unmodified_since: i.copy_source_if_unmodified_since.as_ref(),
            if_none_match: i.copy_source_if_none_match.as_ref(),
            if_modified_since: i.copy_source_if_modified_since.as_ref(),
        },
    )
    .await?;
    let span = match &i.copy_source_range {
        Some(r) => copy_range(r, k.size)?,
        None => 0..k.size,
    };
    let (written, md5) = copy_span(g, &k, span, &i.bucket, &i.key).await?;
    let tag = hex(&md5);
    let part = g
        .client
        .om
        .commit_multipart_part(&i.upload_id, part, &written, &tag)
        .await
        .map_err(s3_error)?;
    Ok(UploadPartCopyOutput {
        copy_part_result: Some(CopyPartResult {
            e_tag: Some(etag(&tag)),
            last_modified: Some(timestamp(part.modified_ms)),
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::copy_range;

    #[test]
    fn copy_range_is_an_inclusive_span_within_the_source() {
        assert_eq!(copy_range("bytes=0-9", 10).unwrap(), 0..10);
        assert_eq!(copy_range("bytes=5-5", 10).unwrap(), 5..6);
        for bad in [
            "bytes=0-10",
            "bytes=6-5",
            "bytes=-5",
            "bytes=5-",
            "0-5",
            "bytes=a-b",
            "bytes=0-18446744073709551615",
        ] {
            assert!(copy_range(bad, 10).is_err(), "{bad} accepted");
        }
        assert!(copy_range("bytes=0-18446744073709551615", u64::MAX).is_err());
    }
}
