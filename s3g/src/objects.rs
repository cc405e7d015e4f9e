//! Object operations. PutObject streams the body into blocks while hashing it (the ETag is
//! its MD5) and commits with the S3 metadata and the condition (`If-None-Match: *`,
//! `If-Match`) for the OM to decide at commit; GetObject and HeadObject evaluate the read
//! conditions and ranges here, and stream the bytes from the datanodes.

use rozone_client::key_read::KeyReader;
use rozone_client::key_write::KeyWriter;
use rozone_client::om::{S3Commit, S3Condition};
use rozone_client::types::{Key, S3Meta};
use rozone_types::codes::OmErrorCode;
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Result};

use crate::body::{self, Upload};
use crate::core::{Gateway, Metrics};
use crate::mapping::{
    bucket_name, content_md5, etag, hex, metadata_in, metadata_out, om_code, s3_error, timestamp,
};

/// Most keys one DeleteObjects may name (S3's limit).
const MAX_DELETE: usize = 1000;
/// What S3 answers for an object stored without a Content-Type.
pub const DEFAULT_CONTENT_TYPE: &str = "binary/octet-stream";
/// Ranges (each up to the client's read range, 4 MiB by default) queued between the
/// datanode reads and the HTTP response, beside the reads the client keeps in flight.
const DOWNLOAD_RANGES: usize = 1;

/// The ETag S3 shows for a key: its MD5 when written through S3; keys written otherwise
/// have none, so their rozone checksum stands in (never equal to an MD5).
pub fn key_etag(k: &Key) -> String {
    match &k.s3 {
        Some(m) if !m.etag.is_empty() => m.etag.clone(),
        _ => k.checksum.replace(':', "-"),
    }
}

/// A write condition of PutObject (decided by the OM at commit).
pub fn write_condition(
    if_match: Option<ETagCondition>,
    if_none_match: Option<ETagCondition>,
) -> S3Result<Option<S3Condition>> {
    match (if_match, if_none_match) {
        (Some(_), Some(_)) => Err(s3_error!(
            InvalidArgument,
            "If-Match and If-None-Match cannot both be given"
        )),
        (None, Some(ETagCondition::Any)) => Ok(Some(S3Condition::IfNoneMatchAny)),
        (None, Some(ETagCondition::ETag(_))) => Err(s3_error!(
            NotImplemented,
            "If-None-Match on PutObject supports only *"
        )),
        (Some(ETagCondition::ETag(e)), None) => {
            Ok(Some(S3Condition::IfMatch(e.value().to_string())))
        }
        (Some(ETagCondition::Any), None) => Err(s3_error!(
            NotImplemented,
            "If-Match on PutObject needs an ETag, not *"
        )),
        (None, None) => Ok(None),
    }
}

pub async fn put_object(g: &Gateway, req: S3Request<PutObjectInput>) -> S3Result<PutObjectOutput> {
    let input = req.input;
    bucket_name(&input.bucket)?;
    let condition = write_condition(input.if_match, input.if_none_match)?;
    let size = match input.content_length {
        Some(n) => Some(
            u64::try_from(n).map_err(|_| s3_error!(InvalidArgument, "negative Content-Length"))?,
        ),
        None => None,
    };
    if size.is_some_and(|n| n > g.max_object_size) {
        return Err(s3_error!(
            EntityTooLarge,
            "objects are at most {} bytes (s3g.max_object_size); use a multipart upload",
            g.max_object_size
        ));
    }
    let want_md5 = input.content_md5.as_deref().map(content_md5).transpose()?;
    let mut src = Upload::new(body::reader(input.body), g.max_object_size);
    let writer = KeyWriter {
        om: &g.client.om,
        datanodes: &g.client.datanodes,
        opts: &g.client.write,
    };
    let written = writer
        .write_object(
            &g.volume,
            &input.bucket,
            &input.key,
            size,
            &mut src,
            &|_| {},
        )
        .await;
    let written = match (written, &src.failure) {
        (_, Some(f)) => return Err(f.s3_error("the body passes s3g.max_object_size")),
        (Err(e), None) => return Err(s3_error(e)),
        (Ok(w), None) => w,
    };
    Metrics::add(&g.metrics.bytes_in, src.read);
    if size.is_some_and(|n| n != src.read) {
        return Err(s3_error!(
            IncompleteBody,
            "the body has {} bytes, Content-Length said {}",
            src.read,
            size.unwrap_or(0)
        ));
    }
    let md5 = src.md5();
    if want_md5.is_some_and(|m| m != md5) {
        return Err(s3_error!(BadDigest, "the body does not match Content-MD5"));
    }
    let meta = S3Meta {
        etag: hex(&md5),
        content_type: input
            .content_type
            .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string()),
        metadata: metadata_in(input.metadata),
    };
    writer
        .commit(
            &written,
            Some(S3Commit {
                meta: &meta,
                condition: condition.as_ref(),
            }),
        )
        .await
        .map_err(s3_error)?;
    Ok(PutObjectOutput {
        e_tag: Some(etag(&meta.etag)),
        size: i64::try_from(src.read).ok(),
        ..Default::default()
    })
}

async fn lookup(g: &Gateway, bucket: &str, key: &str) -> S3Result<Key> {
    bucket_name(bucket)?;
    g.client
        .om
        .lookup_key(&g.volume, bucket, key, g.client.read.mode)
        .await
        .map_err(s3_error)
}

fn seconds(t: &Timestamp) -> i64 {
    time::OffsetDateTime::from(t.clone()).unix_timestamp()
}

/// RFC 9110's order for GET and HEAD: If-Match, else If-Unmodified-Since (412); then
/// If-None-Match, else If-Modified-Since (304).
pub fn read_conditions(
    k: &Key,
    if_match: Option<&ETagCondition>,
    if_unmodified_since: Option<&Timestamp>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let tag = key_etag(k);
    let matches = |c: &ETagCondition| match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value() == tag,
    };
    let modified = (k.modified_ms / 1000) as i64;
    let failed = || {
        s3_error!(
            PreconditionFailed,
            "At least one of the pre-conditions you specified did not hold"
        )
    };
    match (if_match, if_unmodified_since) {
        (Some(c), _) if !matches(c) => return Err(failed()),
        (None, Some(t)) if modified > seconds(t) => return Err(failed()),
        _ => {}
    }
    let not_modified = || S3Error::new(S3ErrorCode::NotModified);
    match (if_none_match, if_modified_since) {
        (Some(c), _) if matches(c) => Err(not_modified()),
        (None, Some(t)) if modified <= seconds(t) => Err(not_modified()),
        _ => Ok(()),
    }
}

pub async fn get_object(g: &Gateway, req: S3Request<GetObjectInput>) -> S3Result<GetObjectOutput> {
    let i = req.input;
    if i.part_number.is_some() {
        return Err(s3_error!(NotImplemented, "GetObject by part number"));
    }
    let k = lookup(g, &i.bucket, &i.key).await?;
    read_conditions(
        &k,
        i.if_match.as_ref(),
        i.if_unmodified_since.as_ref(),
        i.if_none_match.as_ref(),
        i.if_modified_since.as_ref(),
    )?;
    let span = match &i.range {
        Some(r) => r
            .check(k.size)
            .map_err(|_| s3_error!(InvalidRange, "The requested range is not satisfiable"))?,
        None => 0..k.size,
    };
    let content_range = i.range.is_some().then(|| {
        format!(
            "bytes {}-{}/{}",
            span.start,
            span.end.saturating_sub(1),
            k.size
        )
    });
    let len = span.end - span.start;
    let (mut tx, rx) = tokio::sync::mpsc::channel(DOWNLOAD_RANGES);
    let client = g.client.clone();
    let key = k.clone();
    let metrics = g.metrics.clone();
    tokio::spawn(async move {
        let r = KeyReader {
            om: &client.om,
            datanodes: &client.datanodes,
            opts: &client.read,
        };
        match r.read_span_to(&key, span, &mut tx, &|_| {}).await {
            Ok(()) => Metrics::add(&metrics.bytes_out, len),
            Err(e) => {
                tracing::warn!(key = %key.name, bucket = %key.bucket, error = %e, "GetObject read failed");
                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
            }
        }
    });
    let meta = k.s3.clone().unwrap_or_default();
    Ok(GetObjectOutput {
        body: Some(body::download(rx)),
        content_length: i64::try_from(len).ok(),
        content_range,
        accept_ranges: Some("bytes".into()),
        content_type: Some(content_type(&meta)),
        e_tag: Some(etag(&key_etag(&k))),
        last_modified: Some(timestamp(k.modified_ms)),
        metadata: metadata_out(&meta.metadata),
        ..Default::default()
    })
}

fn content_type(m: &S3Meta) -> String {
    if m.content_type.is_empty() {
        DEFAULT_CONTENT_TYPE.to_string()
    } else {
        m.content_type.clone()
    }
}

pub async fn head_object(
    g: &Gateway,
    req: S3Request<HeadObjectInput>,
) -> S3Result<HeadObjectOutput> {
    let i = req.input;
    let k = lookup(g, &i.bucket, &i.key).await?;
    read_conditions(
        &k,
        i.if_match.as_ref(),
        i.if_unmodified_since.as_ref(),
        i.if_none_match.as_ref(),
        i.if_modified_since.as_ref(),
    )?;
    let meta = k.s3.clone().unwrap_or_default();
    Ok(HeadObjectOutput {
        content_length: i64::try_from(k.size).ok(),
        accept_ranges: Some("bytes".into()),
        content_type: Some(content_type(&meta)),
        e_tag: Some(etag(&key_etag(&k))),
        last_modified: Some(timestamp(k.modified_ms)),
        metadata: metadata_out(&meta.metadata),
        ..Default::default()
    })
}

/// Deletes a key; a key that is not there is deleted already (S3 answers 204 either way).
async fn delete_key(g: &Gateway, bucket: &str, key: &str) -> S3Result<()> {
    match g.client.om.delete_key(&g.volume, bucket, key).await {
        Ok(()) => Ok(()),
        Err(e) if om_code(&e) == Some(OmErrorCode::KeyNotFound) => Ok(()),
        Err(e) => Err(s3_error(e)),
    }
}

pub async fn delete_object(
    g: &Gateway,
    req: S3Request<DeleteObjectInput>,
) -> S3Result<DeleteObjectOutput> {
    bucket_name(&req.input.bucket)?;
    if req.input.if_match.is_some() {
        return Err(s3_error!(NotImplemented, "conditional DeleteObject"));
    }
    delete_key(g, &req.input.bucket, &req.input.key).await?;
    Ok(DeleteObjectOutput::default())
}

pub async fn delete_objects(
    g: &Gateway,
    req: S3Request<DeleteObjectsInput>,
) -> S3Result<DeleteObjectsOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    if i.delete.objects.len() > MAX_DELETE {
        return Err(s3_error!(
            MalformedXML,
            "at most {MAX_DELETE} keys per DeleteObjects"
        ));
    }
    let quiet = i.delete.quiet.unwrap_or(false);
    let (mut deleted, mut errors) = (Vec::new(), Vec::new());
    for o in i.delete.objects {
        match delete_key(g, &i.bucket, &o.key).await {
            Ok(()) if quiet => {}
            Ok(()) => deleted.push(DeletedObject {
                key: Some(o.key),
                ..Default::default()
            }),
            Err(e) => errors.push(Error {
                code: Some(e.code().as_str().to_string()),
                key: Some(o.key),
                message: e.message().map(str::to_string),
                version_id: None,
            }),
        }
    }
    Ok(DeleteObjectsOutput {
        deleted: Some(deleted),
        errors: Some(errors),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(etag: &str, modified_s: u64) -> Key {
        Key {
            volume: "v".into(),
            bucket: "b".into(),
            name: "k".into(),
            size: 1,
            checksum: "crc32:0".into(),
            replication: String::new(),
            version: 0,
            created_ms: 0,
            modified_ms: modified_s * 1000 + 500,
            blocks: Vec::new(),
            s3: Some(S3Meta {
                etag: etag.into(),
                ..Default::default()
            }),
        }
    }

    fn tag(v: &str) -> ETagCondition {
        ETagCondition::ETag(ETag::Strong(v.into()))
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from(time::OffsetDateTime::from_unix_timestamp(s).unwrap())
    }

    fn code(r: S3Result<()>) -> Option<S3ErrorCode> {
        r.err().map(|e| e.code().clone())
    }

    #[test]
    fn read_conditions_follow_rfc_9110() {
        let k = key("e1", 100);
        assert_eq!(
            code(read_conditions(&k, Some(&tag("e1")), None, None, None)),
            None
        );
        assert_eq!(
            code(read_conditions(&k, Some(&tag("e2")), None, None, None)),
            Some(S3ErrorCode::PreconditionFailed)
        );
        assert_eq!(
            code(read_conditions(&k, None, None, Some(&tag("e1")), None)),
            Some(S3ErrorCode::NotModified)
        );
        assert_eq!(
            code(read_conditions(
                &k,
                None,
                None,
                Some(&ETagCondition::Any),
                None
            )),
            Some(S3ErrorCode::NotModified)
        );
        assert_eq!(
            code(read_conditions(&k, None, None, None, Some(&at(99)))),
            None
        );
        assert_eq!(
            code(read_conditions(&k, None, None, None, Some(&at(100)))),
            Some(S3ErrorCode::NotModified)
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            code(read_conditions(
                &k,
                None,
                None,
                Some(&tag("zz")),
                Some(&at(200))
            )),
            None
        );
        assert_eq!(
            code(read_conditions(&k, None, Some(&at(99)), None, None)),
            Some(S3ErrorCode::PreconditionFailed)
        );
    }

    #[test]
    fn write_conditions_map_to_the_oms_compare_and_set() {
        assert_eq!(
            write_condition(None, Some(ETagCondition::Any)).unwrap(),
            Some(S3Condition::IfNoneMatchAny)
        );
        assert_eq!(
            write_condition(Some(tag("e")), None).unwrap(),
            Some(S3Condition::IfMatch("e".into()))
        );
        assert!(write_condition(Some(tag("e")), Some(ETagCondition::Any)).is_err());
        assert_eq!(write_condition(None, None).unwrap(), None);
    }
}
