//! The node's volume and bucket calls: checked, replicated by the leader, or read through
//! the read-consistency gate.

use super::actor::Actor;
use super::checks::{list_arg, must_bucket, name, page};
use super::types::{Page, ReadInfo, ReadOptions};
use super::{now_ms, unexpected, OmNode};
use crate::error::OmError;
use crate::state::types::{Bucket, Replication, Volume};
use crate::state::{read, OmRequest, OmResponse, Refusal};

/// Longest volume owner.
const MAX_OWNER: usize = 256;

/// CreateBucket.
#[derive(Clone, Debug)]
pub struct CreateBucketArgs {
    pub volume: String,
    pub name: String,
    /// `None`: RATIS_THREE.
    pub replication: Option<Replication>,
    pub versioning: bool,
    pub quota_bytes: Option<u64>,
}

/// A listing of names after `start_after` that start with `prefix`.
#[derive(Clone, Debug, Default)]
pub struct ListArgs {
    pub prefix: String,
    pub start_after: String,
    /// As asked (0: the default page).
    pub limit: u32,
}

impl ListArgs {
    fn check(&self) -> Result<(), OmError> {
        list_arg("prefix", &self.prefix)?;
        list_arg("start_after", &self.start_after)
    }
}

impl OmNode {
    /// Creates a volume; an empty owner is the user creating it, or "root" for a trusted
    /// caller.
    pub async fn create_volume(
        &self,
        actor: &Actor,
        volume: String,
        owner: String,
        quota_bytes: Option<u64>,
    ) -> Result<Volume, OmError> {
        name("volume", &volume)?;
        if owner.len() > MAX_OWNER {
            return Err(OmError::InvalidArgument(format!(
                "owner is longer than {MAX_OWNER} bytes"
            )));
        }
        let owner = actor.volume_owner(owner);
        let req = OmRequest::CreateVolume {
            name: volume,
            owner,
            quota_bytes,
            now_ms: now_ms(),
        };
        match self.propose_as(actor, req).await? {
            OmResponse::VolumeCreated(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    pub async fn volume_info(
        &self,
        read: ReadOptions,
        volume: String,
    ) -> Result<(Volume, ReadInfo), OmError> {
        name("volume", &volume)?;
        let info = self.read_gate(read).await?;
        let v =
            read::volume(&self.group.db(), &volume)?.ok_or(Refusal::VolumeNotFound { volume })?;
        Ok((v, info))
    }

    pub async fn list_volumes(
        &self,
        read: ReadOptions,
        a: ListArgs,
    ) -> Result<(Page<Volume>, ReadInfo), OmError> {
        a.check()?;
        let info = self.read_gate(read).await?;
        let (rows, truncated) =
            read::list_volumes(&self.group.db(), &a.prefix, &a.start_after, page(a.limit))?;
        Ok((Page { rows, truncated }, info))
    }

    pub async fn delete_volume(&self, actor: &Actor, volume: String) -> Result<(), OmError> {
        name("volume", &volume)?;
        match self
            .propose_as(actor, OmRequest::DeleteVolume { name: volume })
            .await?
        {
            OmResponse::VolumeDeleted => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub async fn create_bucket(
        &self,
        actor: &Actor,
        a: CreateBucketArgs,
    ) -> Result<Bucket, OmError> {
        name("volume", &a.volume)?;
        name("bucket", &a.name)?;
        let req = OmRequest::CreateBucket {
            volume: a.volume,
            name: a.name,
            replication: a.replication.unwrap_or(Replication::RatisThree),
            versioning: a.versioning,
            quota_bytes: a.quota_bytes,
            now_ms: now_ms(),
        };
        match self.propose_as(actor, req).await? {
            OmResponse::BucketCreated(b) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    pub async fn bucket_info(
        &self,
        read: ReadOptions,
        volume: &str,
        bucket: &str,
    ) -> Result<(Bucket, ReadInfo), OmError> {
        name("volume", volume)?;
        name("bucket", bucket)?;
        let info = self.read_gate(read).await?;
        let b = must_bucket(&self.group.db(), volume, bucket)?;
        Ok((b, info))
    }

    pub async fn list_buckets(
        &self,
        read: ReadOptions,
        volume: String,
        a: ListArgs,
    ) -> Result<(Page<Bucket>, ReadInfo), OmError> {
        name("volume", &volume)?;
        a.check()?;
        let info = self.read_gate(read).await?;
        let db = self.group.db();
        if read::volume(&db, &volume)?.is_none() {
            return Err(Refusal::VolumeNotFound { volume }.into());
        }
        let (rows, truncated) =
            read::list_buckets(&db, &volume, &a.prefix, &a.start_after, page(a.limit))?;
        Ok((Page { rows, truncated }, info))
    }

    /// Who owns each of `buckets`: its creator, or its volume's owner.
    pub fn bucket_owners(&self, buckets: &[Bucket]) -> Result<Vec<String>, OmError> {
        Ok(crate::state::owner::shown_owners(
            &*self.group.db(),
            buckets,
        )?)
    }

    pub async fn delete_bucket(
        &self,
        actor: &Actor,
        volume: String,
        bucket: String,
    ) -> Result<(), OmError> {
        name("volume", &volume)?;
        name("bucket", &bucket)?;
        let req = OmRequest::DeleteBucket {
            volume,
            name: bucket,
        };
        match self.propose_as(actor, req).await? {
            OmResponse::BucketDeleted => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
