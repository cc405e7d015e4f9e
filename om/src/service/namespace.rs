//! Volume and bucket requests: validated here, replicated by the leader, read through
//! the read-consistency gate.

use rozone_proto::om as pb;

use crate::convert;
use crate::error::OmError;
use crate::names::check_resource_name;
use crate::node::{now_ms, OmNode};
use crate::state::{read, OmRequest, OmResponse, Refusal};

/// Page size of a list with `limit = 0`, and the largest page.
pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

pub fn page(limit: u32) -> usize {
    match limit {
        0 => DEFAULT_PAGE,
        n => (n as usize).min(MAX_PAGE),
    }
}

pub fn name(kind: &str, n: &str) -> Result<(), OmError> {
    check_resource_name(kind, n).map_err(OmError::InvalidName)
}

/// A prefix or start_after of a list: bounded, like names.
pub fn list_arg(what: &str, v: &str) -> Result<(), OmError> {
    if v.len() > crate::names::MAX_KEY_NAME {
        return Err(OmError::InvalidArgument(format!(
            "{what} is {} bytes, at most {}",
            v.len(),
            crate::names::MAX_KEY_NAME
        )));
    }
    Ok(())
}

fn unexpected(r: OmResponse) -> OmError {
    OmError::Internal(format!("unexpected state machine response {r:?}"))
}

pub async fn create_volume(
    n: &OmNode,
    r: pb::CreateVolumeRequest,
) -> Result<pb::CreateVolumeReply, OmError> {
    name("volume", &r.name)?;
    if r.owner.len() > 256 {
        return Err(OmError::InvalidArgument(
            "owner is longer than 256 bytes".into(),
        ));
    }
    let owner = if r.owner.is_empty() {
        "root".to_string()
    } else {
        r.owner
    };
    match n
        .propose(OmRequest::CreateVolume {
            name: r.name,
            owner,
            quota_bytes: r.quota_bytes,
            now_ms: now_ms(),
        })
        .await?
    {
        OmResponse::VolumeCreated(v) => Ok(pb::CreateVolumeReply {
            volume: Some((&v).into()),
        }),
        other => Err(unexpected(other)),
    }
}

pub async fn volume_info(
    n: &OmNode,
    r: pb::VolumeInfoRequest,
) -> Result<pb::VolumeInfoReply, OmError> {
    name("volume", &r.name)?;
    let info = n.read_gate(r.read).await?;
    let v =
        read::volume(&n.group.db(), &r.name)?.ok_or(Refusal::VolumeNotFound { volume: r.name })?;
    Ok(pb::VolumeInfoReply {
        volume: Some((&v).into()),
        read_info: Some(info),
    })
}

pub async fn list_volumes(
    n: &OmNode,
    r: pb::ListVolumesRequest,
) -> Result<pb::ListVolumesReply, OmError> {
    list_arg("prefix", &r.prefix)?;
    list_arg("start_after", &r.start_after)?;
    let info = n.read_gate(r.read).await?;
    let (vs, truncated) =
        read::list_volumes(&n.group.db(), &r.prefix, &r.start_after, page(r.limit))?;
    Ok(pb::ListVolumesReply {
        volumes: vs.iter().map(Into::into).collect(),
        truncated,
        read_info: Some(info),
    })
}

pub async fn delete_volume(
    n: &OmNode,
    r: pb::DeleteVolumeRequest,
) -> Result<pb::DeleteVolumeReply, OmError> {
    name("volume", &r.name)?;
    match n.propose(OmRequest::DeleteVolume { name: r.name }).await? {
        OmResponse::VolumeDeleted => Ok(pb::DeleteVolumeReply {}),
        other => Err(unexpected(other)),
    }
}

pub async fn create_bucket(
    n: &OmNode,
    r: pb::CreateBucketRequest,
) -> Result<pb::CreateBucketReply, OmError> {
    name("volume", &r.volume)?;
    name("bucket", &r.name)?;
    let replication = convert::replication(r.replication)?
        .unwrap_or(crate::state::types::Replication::RatisThree);
    match n
        .propose(OmRequest::CreateBucket {
            volume: r.volume,
            name: r.name,
            replication,
            versioning: r.versioning,
            quota_bytes: r.quota_bytes,
            now_ms: now_ms(),
        })
        .await?
    {
        OmResponse::BucketCreated(b) => Ok(pb::CreateBucketReply {
            bucket: Some((&b).into()),
        }),
        other => Err(unexpected(other)),
    }
}

/// The bucket, or the refusal naming what is missing (the volume, or the bucket).
pub fn must_bucket(
    db: &rozone_kv::rocksdb::DB,
    volume: &str,
    bucket: &str,
) -> Result<crate::state::types::Bucket, OmError> {
    if let Some(b) = read::bucket(db, volume, bucket)? {
        return Ok(b);
    }
    if read::volume(db, volume)?.is_none() {
        return Err(Refusal::VolumeNotFound {
            volume: volume.to_string(),
        }
        .into());
    }
    Err(Refusal::BucketNotFound {
        volume: volume.to_string(),
        bucket: bucket.to_string(),
    }
    .into())
}

pub async fn bucket_info(
    n: &OmNode,
    r: pb::BucketInfoRequest,
) -> Result<pb::BucketInfoReply, OmError> {
    name("volume", &r.volume)?;
    name("bucket", &r.name)?;
    let info = n.read_gate(r.read).await?;
    let b = must_bucket(&n.group.db(), &r.volume, &r.name)?;
    Ok(pb::BucketInfoReply {
        bucket: Some((&b).into()),
        read_info: Some(info),
    })
}

pub async fn list_buckets(
    n: &OmNode,
    r: pb::ListBucketsRequest,
) -> Result<pb::ListBucketsReply, OmError> {
    name("volume", &r.volume)?;
    list_arg("prefix", &r.prefix)?;
    list_arg("start_after", &r.start_after)?;
    let info = n.read_gate(r.read).await?;
    let db = n.group.db();
    if read::volume(&db, &r.volume)?.is_none() {
        return Err(Refusal::VolumeNotFound { volume: r.volume }.into());
    }
    let (bs, truncated) =
        read::list_buckets(&db, &r.volume, &r.prefix, &r.start_after, page(r.limit))?;
    Ok(pb::ListBucketsReply {
        buckets: bs.iter().map(Into::into).collect(),
        truncated,
        read_info: Some(info),
    })
}

pub async fn delete_bucket(
    n: &OmNode,
    r: pb::DeleteBucketRequest,
) -> Result<pb::DeleteBucketReply, OmError> {
    name("volume", &r.volume)?;
    name("bucket", &r.name)?;
    match n
        .propose(OmRequest::DeleteBucket {
            volume: r.volume,
            name: r.name,
        })
        .await?
    {
        OmResponse::BucketDeleted => Ok(pb::DeleteBucketReply {}),
        other => Err(unexpected(other)),
    }
}
