//! Multipart upload calls of `OmS3`: each decodes its request ([`crate::convert::keys`]),
//! calls the node ([`crate::node::multipart`]) and encodes the answer.

use rozone_proto::om as pb;

use crate::convert::keys as conv;
use crate::error::OmError;
use crate::node::OmNode;

pub async fn create(
    n: &OmNode,
    r: pb::CreateMultipartUploadRequest,
) -> Result<pb::CreateMultipartUploadReply, OmError> {
    let u = n.create_upload(conv::create_upload_args(r)).await?;
    Ok(pb::CreateMultipartUploadReply {
        upload: Some((&u).into()),
    })
}

pub async fn commit_part(
    n: &OmNode,
    r: pb::CommitMultipartPartRequest,
) -> Result<pb::CommitMultipartPartReply, OmError> {
    let p = n.commit_part(conv::commit_part_args(r)?).await?;
    Ok(pb::CommitMultipartPartReply {
        part: Some((&p).into()),
    })
}

pub async fn complete(
    n: &OmNode,
    r: pb::CompleteMultipartUploadRequest,
) -> Result<pb::CommitKeyReply, OmError> {
    let key = n.complete_upload(conv::complete_args(r)?).await?;
    let mut key = [pb::KeyInfo::from(&key)];
    n.tokens.sign_keys(&n.scm, &mut key).await?;
    let [key] = key;
    Ok(pb::CommitKeyReply { key: Some(key) })
}

pub async fn copy_key(n: &OmNode, r: pb::CopyKeyRequest) -> Result<pb::CommitKeyReply, OmError> {
    let src_blocks = r
        .src_blocks
        .into_iter()
        .enumerate()
        .map(|(i, b)| crate::convert::block_id(Some(b), &format!("src_blocks[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let meta = crate::convert::keys::s3_meta(r.meta.unwrap_or_default());
    let key = n
        .copy_key(crate::state::types::KeyCopy {
            volume: r.volume,
            src_bucket: r.src_bucket,
            src_key: r.src_key,
            dst_bucket: r.dst_bucket,
            dst_key: r.dst_key,
            src_blocks,
            meta,
            now_ms: 0,
        })
        .await?;
    let mut key = [pb::KeyInfo::from(&key)];
    n.tokens.sign_keys(&n.scm, &mut key).await?;
    let [key] = key;
    Ok(pb::CommitKeyReply { key: Some(key) })
}

pub async fn abort(
    n: &OmNode,
    r: pb::AbortMultipartUploadRequest,
) -> Result<pb::AbortMultipartUploadReply, OmError> {
    n.abort_upload(conv::upload_id(r.volume, r.bucket, r.key, r.upload_id))
        .await?;
    Ok(pb::AbortMultipartUploadReply {})
}

pub async fn list_parts(
    n: &OmNode,
    r: pb::ListMultipartPartsRequest,
) -> Result<pb::ListMultipartPartsReply, OmError> {
    let upload = conv::upload_id(r.volume, r.bucket, r.key, r.upload_id);
    let (u, page) = n.list_parts(upload, r.part_number_marker, r.limit).await?;
    Ok(pb::ListMultipartPartsReply {
        upload: Some((&u).into()),
        parts: page.rows.iter().map(Into::into).collect(),
        truncated: page.truncated,
    })
}

pub async fn list_uploads(
    n: &OmNode,
    r: pb::ListMultipartUploadsRequest,
) -> Result<pb::ListMultipartUploadsReply, OmError> {
    let page = n.list_uploads(conv::list_uploads_args(r)).await?;
    Ok(pb::ListMultipartUploadsReply {
        uploads: page.rows.iter().map(Into::into).collect(),
        truncated: page.truncated,
    })
}
