//! Multipart uploads. Each part is written to blocks like a PutObject body (hashed for
//! its ETag) and handed to the OM as a part of the upload; completion is one OM commit
//! that makes the listed parts the key (atomic: whole or not at all), with the ETag S3
//! defines for multipart objects: the MD5 of the parts' binary MD5s, then `-N`.

use md5::{Digest, Md5};
use rozone_client::key_write::KeyWriter;
use rozone_client::types::S3Meta;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Result};

use crate::body::{self, Upload};
use crate::core::{Gateway, Metrics};
use crate::mapping::{bucket_name, content_md5, etag, hex, metadata_in, s3_error, timestamp};
use crate::objects::{write_condition, DEFAULT_CONTENT_TYPE};

/// S3's most parts per upload and per ListParts page.
const MAX_PARTS: usize = 10_000;
const PAGE: i32 = 1000;

/// The multipart ETag of parts with these (hex MD5) ETags.
pub fn multipart_etag(parts: &[String]) -> S3Result<String> {
    let mut h = Md5::new();
    for e in parts {
        let raw = unhex(e.trim_matches('"'))
            .ok_or_else(|| s3_error!(InvalidPart, "part ETag {e:?} is not an MD5"))?;
        h.update(raw);
    }
    Ok(format!("{}-{}", hex(&h.finalize()[..]), parts.len()))
}

/// A part number from the wire: 1..=10000.
pub fn part_number(n: i32) -> S3Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_PARTS as u32).contains(n))
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "part number must be within 1..={MAX_PARTS}"
            )
        })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 32 {
        return None;
    }
    (0..32)
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub async fn create_multipart_upload(
    g: &Gateway,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<CreateMultipartUploadOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let meta = S3Meta {
        etag: String::new(),
        content_type: i
            .content_type
            .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string()),
        metadata: metadata_in(i.metadata),
    };
    let u = g
        .client
        .om
        .create_multipart_upload(&g.volume, &i.bucket, &i.key, &meta)
        .await
        .map_err(s3_error)?;
    Ok(CreateMultipartUploadOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(u.upload_id),
        ..Default::default()
    })
}

pub async fn upload_part(
    g: &Gateway,
    req: S3Request<UploadPartInput>,
) -> S3Result<UploadPartOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let part = part_number(i.part_number)?;
    let size = match i.content_length {
        Some(n) => Some(
            u64::try_from(n).map_err(|_| s3_error!(InvalidArgument, "negative Content-Length"))?,
        ),
        None => None,
    };
    if size.is_some_and(|n| n > g.max_object_size) {
        return Err(s3_error!(
            EntityTooLarge,
            "a part is at most {} bytes",
            g.max_object_size
        ));
    }
    let want_md5 = i.content_md5.as_deref().map(content_md5).transpose()?;
    let mut src = Upload::new(body::reader(i.body), g.max_object_size);
    let writer = KeyWriter {
        om: &g.client.om,
        datanodes: &g.client.datanodes,
        opts: &g.client.write,
    };
    let written = writer
        .write(&g.volume, &i.bucket, &i.key, size, &mut src, &|_| {})
        .await;
    let written = match (written, &src.failure) {
        (_, Some(f)) => return Err(f.s3_error("the part passes s3g.max_object_size")),
        (Err(e), None) => return Err(s3_error(e)),
        (Ok(w), None) => w,
    };
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
    Metrics::add(&g.metrics.bytes_in, src.read);
    let tag = hex(&md5);
    g.client
        .om
        .commit_multipart_part(&i.upload_id, part, &written, &tag)
        .await
        .map_err(s3_error)?;
    Ok(UploadPartOutput {
        e_tag: Some(etag(&tag)),
        ..Default::default()
    })
}

pub async fn complete_multipart_upload(
    g: &Gateway,
    req: S3Request<CompleteMultipartUploadInput>,
) -> S3Result<CompleteMultipartUploadOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let condition = write_condition(i.if_match, i.if_none_match)?;
    let listed = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
    if listed.is_empty() || listed.len() > MAX_PARTS {
        return Err(s3_error!(
            MalformedXML,
            "a completion lists 1 to {MAX_PARTS} parts"
        ));
    }
    let mut parts = Vec::with_capacity(listed.len());
    for p in listed {
        let n = p
            .part_number
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| s3_error!(InvalidPart, "a part has no valid part number"))?;
        let e = p
            .e_tag
            .map(|e| e.value().to_string())
            .ok_or_else(|| s3_error!(InvalidPart, "part {n} has no ETag"))?;
        parts.push((n, e));
    }
    if parts.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(s3_error!(
            InvalidPartOrder,
            "parts must be in ascending order"
        ));
    }
    let tags: Vec<String> = parts.iter().map(|(_, e)| e.clone()).collect();
    let final_tag = multipart_etag(&tags)?;
    g.client
        .om
        .complete_multipart_upload(
            &g.volume,
            &i.bucket,
            &i.key,
            &i.upload_id,
            &parts,
            &final_tag,
            condition.as_ref(),
        )
        .await
        .map_err(s3_error)?;
    Ok(CompleteMultipartUploadOutput {
        location: Some(format!("/{}/{}", i.bucket, i.key)),
        bucket: Some(i.bucket),
        key: Some(i.key),
        e_tag: Some(etag(&final_tag)),
        ..Default::default()
    })
}

pub async fn abort_multipart_upload(
    g: &Gateway,
    req: S3Request<AbortMultipartUploadInput>,
) -> S3Result<AbortMultipartUploadOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    g.client
        .om
        .abort_multipart_upload(&g.volume, &i.bucket, &i.key, &i.upload_id)
        .await
        .map_err(s3_error)?;
    Ok(AbortMultipartUploadOutput::default())
}

pub async fn list_parts(g: &Gateway, req: S3Request<ListPartsInput>) -> S3Result<ListPartsOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let max = i.max_parts.unwrap_or(PAGE).clamp(0, PAGE);
    let marker = u32::try_from(i.part_number_marker.unwrap_or(0))
        .map_err(|_| s3_error!(InvalidArgument, "negative part-number-marker"))?;
    let (_, parts, truncated) = g
        .client
        .om
        .list_multipart_parts(
            &g.volume,
            &i.bucket,
            &i.key,
            &i.upload_id,
            marker,
            max.max(1) as u32,
        )
        .await
        .map_err(s3_error)?;
    let next = parts.last().map(|p| p.part_number as i32);
    Ok(ListPartsOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(i.upload_id),
        max_parts: Some(max),
        part_number_marker: i.part_number_marker,
        next_part_number_marker: if truncated { next } else { None },
        is_truncated: Some(truncated),
        parts: Some(
            parts
                .into_iter()
                .map(|p| Part {
                    part_number: Some(p.part_number as i32),
                    e_tag: Some(etag(&p.etag)),
                    size: i64::try_from(p.size).ok(),
                    last_modified: Some(timestamp(p.modified_ms)),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    })
}

pub async fn list_multipart_uploads(
    g: &Gateway,
    req: S3Request<ListMultipartUploadsInput>,
) -> S3Result<ListMultipartUploadsOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    if i.delimiter.as_deref().is_some_and(|d| !d.is_empty()) {
        return Err(s3_error!(
            NotImplemented,
            "ListMultipartUploads with a delimiter"
        ));
    }
    let max = i.max_uploads.unwrap_or(PAGE).clamp(1, PAGE);
    let (uploads, truncated) = g
        .client
        .om
        .list_multipart_uploads(
            &g.volume,
            &i.bucket,
            i.prefix.as_deref().unwrap_or(""),
            i.key_marker.as_deref().unwrap_or(""),
            i.upload_id_marker.as_deref().unwrap_or(""),
            max as u32,
        )
        .await
        .map_err(s3_error)?;
    let last = uploads.last().map(|u| (u.key.clone(), u.upload_id.clone()));
    Ok(ListMultipartUploadsOutput {
        bucket: Some(i.bucket),
        prefix: i.prefix,
        key_marker: i.key_marker,
        upload_id_marker: i.upload_id_marker,
        max_uploads: Some(max),
        is_truncated: Some(truncated),
        next_key_marker: last.as_ref().filter(|_| truncated).map(|l| l.0.clone()),
        next_upload_id_marker: last.filter(|_| truncated).map(|l| l.1),
        uploads: Some(
            uploads
                .into_iter()
                .map(|u| MultipartUpload {
                    key: Some(u.key),
                    upload_id: Some(u.upload_id),
                    initiated: Some(timestamp(u.created_ms)),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_etag_is_md5_of_part_md5s_and_count() {
        // Two parts "a" and "b": md5("a") = 0cc175b9..., md5("b") = 92eb5ffe...
        let parts = [
            "0cc175b9c0f1b6a831c399e269772661".to_string(),
            "\"92eb5ffee6ae2fec3ad71c777531578f\"".to_string(),
        ];
        let mut h = Md5::new();
        h.update(unhex(&parts[0]).unwrap());
        h.update(unhex("92eb5ffee6ae2fec3ad71c777531578f").unwrap());
        let want = format!("{}-2", hex(&h.finalize()[..]));
        assert_eq!(multipart_etag(&parts).unwrap(), want);
        assert!(multipart_etag(&["xyz".to_string()]).is_err());
    }
}
