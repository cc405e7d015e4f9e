//! CopyObject: the gateway reads the source key from the datanodes and writes it as the
//! destination (no byte goes back to the S3 client), hashing it for the new ETag.
//! Metadata is copied (`x-amz-metadata-directive: COPY`, the default) or replaced
//! (`REPLACE`, from the request). Blocks are not shared between keys yet: the bytes are
//! copied.

use rozone_client::key_read::KeyReader;
use rozone_client::key_write::KeyWriter;
use rozone_client::om::S3Commit;
use rozone_client::types::S3Meta;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Result};

use crate::body::Upload;
use crate::gateway::{Gateway, Metrics};
use crate::mapping::{bucket_name, etag, hex, metadata_in, s3_error, timestamp};
use crate::objects::{read_conditions, DEFAULT_CONTENT_TYPE};

/// Bytes buffered between the source read and the destination write.
const COPY_BUFFER: usize = 1 << 20;

pub async fn copy_object(
    g: &Gateway,
    req: S3Request<CopyObjectInput>,
) -> S3Result<CopyObjectOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let (src_bucket, src_key) = match &i.copy_source {
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
    bucket_name(&src_bucket)?;
    let k = g
        .client
        .om
        .lookup_key(&g.volume, &src_bucket, &src_key, g.client.read.mode)
        .await
        .map_err(s3_error)?;
    // The copy-source conditions are the read conditions of the source (412 for both).
    read_conditions(
        &k,
        i.copy_source_if_match.as_ref(),
        i.copy_source_if_unmodified_since.as_ref(),
        i.copy_source_if_none_match.as_ref(),
        i.copy_source_if_modified_since.as_ref(),
    )
    .map_err(|e| {
        if *e.code() == s3s::S3ErrorCode::NotModified {
            s3_error!(PreconditionFailed, "a copy-source condition did not hold")
        } else {
            e
        }
    })?;
    if k.size > g.max_object_size {
        return Err(s3_error!(
            EntityTooLarge,
            "the source is larger than s3g.max_object_size"
        ));
    }
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

    let (rd, mut wr) = tokio::io::duplex(COPY_BUFFER);
    let client = g.client.clone();
    let source = k.clone();
    let reading = tokio::spawn(async move {
        let r = KeyReader {
            om: &client.om,
            datanodes: &client.datanodes,
            opts: &client.read,
        };
        r.read_span(&source, 0..source.size, &mut wr, &|_| {}).await
    });
    let mut src = Upload::new(rd, g.max_object_size);
    let writer = KeyWriter {
        om: &g.client.om,
        datanodes: &g.client.datanodes,
        opts: &g.client.write,
    };
    let written = writer
        .write(
            &g.volume,
            &i.bucket,
            &i.key,
            Some(k.size),
            &mut src,
            &|_| {},
        )
        .await;
    let (copied, md5) = (src.read, src.md5());
    // Closes the pipe: a reader still writing (the write failed) stops instead of waiting.
    drop(src);
    let read = reading
        .await
        .map_err(|e| s3_error!(InternalError, "copy reader: {e}"))?;
    let written = written.map_err(s3_error)?;
    read.map_err(s3_error)?;
    if copied != k.size {
        return Err(s3_error!(
            InternalError,
            "copied {copied} of {} bytes",
            k.size
        ));
    }
    Metrics::add(&g.metrics.bytes_in, copied);
    let meta = S3Meta {
        etag: hex(&md5),
        content_type,
        metadata,
    };
    let new = writer
        .commit(
            &written,
            Some(S3Commit {
                meta: &meta,
                condition: None,
            }),
        )
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
