//! `OmService`'s volume and bucket calls: each decodes its request, calls the node
//! ([`crate::node::namespace`]) and encodes the answer.

use rozone_proto::om as pb;

use crate::convert::{self, read::read_options};
use crate::error::OmError;
use crate::node::actor::Actor;
use crate::node::namespace::{CreateBucketArgs, ListArgs};
use crate::node::OmNode;
use crate::state::types::Bucket;

/// Buckets as replies show them, with their owners.
fn buckets_pb(n: &OmNode, buckets: &[Bucket]) -> Result<Vec<pb::BucketInfo>, OmError> {
    let owners = n.bucket_owners(buckets)?;
    Ok(buckets
        .iter()
        .zip(owners)
        .map(|(b, owner)| pb::BucketInfo {
            owner,
            ..pb::BucketInfo::from(b)
        })
        .collect())
}

/// One bucket as replies show it, with its owner.
fn bucket_pb(n: &OmNode, b: Bucket) -> Result<pb::BucketInfo, OmError> {
    let mut one = buckets_pb(n, std::slice::from_ref(&b))?;
    Ok(one.remove(0))
}

pub async fn create_volume(
    n: &OmNode,
    actor: &Actor,
    r: pb::CreateVolumeRequest,
) -> Result<pb::CreateVolumeReply, OmError> {
    let v = n
        .create_volume(actor, r.name, r.owner, r.quota_bytes)
        .await?;
    Ok(pb::CreateVolumeReply {
        volume: Some((&v).into()),
    })
}

pub async fn volume_info(
    n: &OmNode,
    r: pb::VolumeInfoRequest,
) -> Result<pb::VolumeInfoReply, OmError> {
    let (v, info) = n.volume_info(read_options(r.read)?, r.name).await?;
    Ok(pb::VolumeInfoReply {
        volume: Some((&v).into()),
        read_info: Some(info.into()),
    })
}

pub async fn list_volumes(
    n: &OmNode,
    r: pb::ListVolumesRequest,
) -> Result<pb::ListVolumesReply, OmError> {
    let list = ListArgs {
        prefix: r.prefix,
        start_after: r.start_after,
        limit: r.limit,
    };
    let (page, info) = n.list_volumes(read_options(r.read)?, list).await?;
    Ok(pb::ListVolumesReply {
        volumes: page.rows.iter().map(Into::into).collect(),
        truncated: page.truncated,
        read_info: Some(info.into()),
    })
}

pub async fn delete_volume(
    n: &OmNode,
    actor: &Actor,
    r: pb::DeleteVolumeRequest,
) -> Result<pb::DeleteVolumeReply, OmError> {
    n.delete_volume(actor, r.name).await?;
    Ok(pb::DeleteVolumeReply {})
}

pub async fn create_bucket(
    n: &OmNode,
    actor: &Actor,
    r: pb::CreateBucketRequest,
) -> Result<pb::CreateBucketReply, OmError> {
    let b = n
        .create_bucket(
            actor,
            CreateBucketArgs {
                replication: convert::replication(r.replication)?,
                volume: r.volume,
                name: r.name,
                versioning: r.versioning,
                quota_bytes: r.quota_bytes,
            },
        )
        .await?;
    Ok(pb::CreateBucketReply {
        bucket: Some(bucket_pb(n, b)?),
    })
}

pub async fn bucket_info(
    n: &OmNode,
    r: pb::BucketInfoRequest,
) -> Result<pb::BucketInfoReply, OmError> {
    let read = read_options(r.read)?;
    let (b, info) = n.bucket_info(read, &r.volume, &r.name).await?;
    Ok(pb::BucketInfoReply {
        bucket: Some(bucket_pb(n, b)?),
        read_info: Some(info.into()),
    })
}

pub async fn list_buckets(
    n: &OmNode,
    r: pb::ListBucketsRequest,
) -> Result<pb::ListBucketsReply, OmError> {
    let list = ListArgs {
        prefix: r.prefix,
        start_after: r.start_after,
        limit: r.limit,
    };
    let (page, info) = n
        .list_buckets(read_options(r.read)?, r.volume, list)
        .await?;
    Ok(pb::ListBucketsReply {
        buckets: buckets_pb(n, &page.rows)?,
        truncated: page.truncated,
        read_info: Some(info.into()),
    })
}

pub async fn delete_bucket(
    n: &OmNode,
    actor: &Actor,
    r: pb::DeleteBucketRequest,
) -> Result<pb::DeleteBucketReply, OmError> {
    n.delete_bucket(actor, r.volume, r.name).await?;
    Ok(pb::DeleteBucketReply {})
}
