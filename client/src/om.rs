//! The typed OM client: volumes, buckets, keys (metadata), and OM admin, over a [`Ring`]
//! that finds the OM leader. Replies are converted into [`crate::types`] here.

use rozone_proto::om as pb;
use rozone_proto::om::om_admin_client::OmAdminClient;
use rozone_proto::om::om_service_client::OmServiceClient;
use serde::Serialize;
use tonic::transport::Channel;

use crate::error::{ClientError, Result};
use crate::failover::Ring;
use crate::types::{short_enum, AllocatedBlock, BlockId, Bucket, Key, S3Meta, Volume};

/// How a read may be served (see DESIGN.md, OM read consistency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// The ready leader, from its local state.
    #[default]
    Default,
    /// The leader after a read-index round.
    Linearizable,
    /// Any member after a read index from the leader.
    LinearizableFollower,
    /// A follower within its lease, locally.
    LocalLease,
}

impl ReadMode {
    fn options(self) -> Option<pb::ReadOptions> {
        let consistency = match self {
            ReadMode::Default => return None,
            ReadMode::Linearizable => pb::ReadConsistency::LinearizableLeaderOnly,
            ReadMode::LinearizableFollower => pb::ReadConsistency::LinearizableAllowFollower,
            ReadMode::LocalLease => pb::ReadConsistency::LocalLease,
        };
        Some(pb::ReadOptions {
            consistency: consistency as i32,
            lease_time_ms: None,
            log_limit: None,
        })
    }

    /// Reads any member may serve go to any member; the rest to the leader.
    fn any_member(self) -> bool {
        matches!(self, ReadMode::LinearizableFollower | ReadMode::LocalLease)
    }
}

/// An open key: what `open_key` returned, needed to add blocks and commit.
#[derive(Debug, Clone)]
pub struct OpenKey {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub client_id: u64,
    pub blocks: Vec<AllocatedBlock>,
    /// Opened without a log entry (one block, no `allocate_block`): the commit names the
    /// blocks above and the OM records the open key and the key in one entry.
    pub deferred: bool,
}

/// A compare-and-set at commit (S3 conditional writes), decided by the OM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum S3Condition {
    /// Only if no key has the name (`If-None-Match: *`).
    IfNoneMatchAny,
    /// Only if the key exists with this ETag (`If-Match`).
    IfMatch(String),
}

/// What an S3 gateway commit carries beside the blocks.
#[derive(Debug, Clone, Copy)]
pub struct S3Commit<'a> {
    pub meta: &'a S3Meta,
    pub condition: Option<&'a S3Condition>,
}

/// What to avoid when allocating a block (the writer failed there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclude {
    pub datanodes: Vec<u64>,
    pub pipelines: Vec<u64>,
    pub containers: Vec<u64>,
}

/// One member of the OM ring as `roles` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OmMember {
    pub node_id: u64,
    pub role: String,
    pub client_addr: String,
    pub peer_addr: String,
    pub voter: bool,
    pub leader_ready: bool,
    pub applied_index: Option<u64>,
}

/// The OM ring as one member sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OmRoles {
    pub answered_by: u64,
    pub leader_id: Option<u64>,
    pub term: u64,
    pub members: Vec<OmMember>,
}

/// The typed OM client.
#[derive(Clone)]
pub struct OmClient {
    ring: Ring,
}

fn svc(ch: Channel) -> OmServiceClient<Channel> {
    OmServiceClient::new(ch)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

macro_rules! leader_call {
    ($self:ident, $what:expr, $method:ident, $req:expr) => {{
        let req = $req;
        // One id for every attempt of the call: a write the ring resends after an attempt
        // whose answer was lost is applied at most once (rozone_rpc::call).
        let call = $self.ring.call_ids().begin();
        $self
            .ring
            .call($what, |ch| {
                let req = call.request(req.clone());
                async move { svc(ch).$method(req).await }
            })
            .await
    }};
}

impl OmClient {
    /// A client of the OM ring at `ring`.
    pub fn new(ring: Ring) -> Self {
        Self { ring }
    }

    /// The ring this client calls.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    async fn read<Req, T, F, Fut>(&self, what: &str, mode: ReadMode, req: Req, f: F) -> Result<T>
    where
        Req: Clone,
        F: Fn(OmServiceClient<Channel>, Req) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let call = |ch| f(svc(ch), req.clone());
        let r = if mode.any_member() {
            self.ring.call_any(what, call).await
        } else {
            self.ring.call(what, call).await
        };
        Ok(r?)
    }

    pub async fn create_volume(
        &self,
        name: &str,
        owner: &str,
        quota_bytes: Option<u64>,
    ) -> Result<Volume> {
        let r = leader_call!(
            self,
            "create volume",
            create_volume,
            pb::CreateVolumeRequest {
                name: name.into(),
                owner: owner.into(),
                quota_bytes,
            }
        )?;
        r.volume
            .map(Volume::from)
            .ok_or_else(|| ClientError::bad_reply("OM", "no volume in reply"))
    }

    pub async fn volume_info(&self, name: &str, mode: ReadMode) -> Result<Volume> {
        let req = pb::VolumeInfoRequest {
            name: name.into(),
            read: mode.options(),
        };
        let r = self
            .read("volume info", mode, req, |mut c, r| async move {
                c.volume_info(r).await
            })
            .await?;
        r.volume
            .map(Volume::from)
            .ok_or_else(|| ClientError::bad_reply("OM", "no volume in reply"))
    }

    /// Every volume whose name starts with `prefix` (all pages).
    pub async fn list_volumes(&self, prefix: &str) -> Result<Vec<Volume>> {
        let mut out = Vec::new();
        loop {
            let req = pb::ListVolumesRequest {
                prefix: prefix.into(),
                start_after: out
                    .last()
                    .map(|v: &Volume| v.name.clone())
                    .unwrap_or_default(),
                limit: 0,
                read: None,
            };
            let r = leader_call!(self, "list volumes", list_volumes, req)?;
            let n = r.volumes.len();
            out.extend(r.volumes.into_iter().map(Volume::from));
            if !r.truncated || n == 0 {
                return Ok(out);
            }
        }
    }

    pub async fn delete_volume(&self, name: &str) -> Result<()> {
        leader_call!(
            self,
            "delete volume",
            delete_volume,
            pb::DeleteVolumeRequest { name: name.into() }
        )?;
        Ok(())
    }

    pub async fn create_bucket(
        &self,
        volume: &str,
        name: &str,
        replication: Option<&str>,
    ) -> Result<Bucket> {
        let replication = match replication {
            None => pb::Replication::Unspecified,
            Some(r) => {
                pb::Replication::from_str_name(&r.to_ascii_uppercase()).ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "unknown replication {r:?}: use RATIS_ONE or RATIS_THREE"
                    ))
                })?
            }
        };
        let r = leader_call!(
            self,
            "create bucket",
            create_bucket,
            pb::CreateBucketRequest {
                volume: volume.into(),
                name: name.into(),
                replication: replication as i32,
                versioning: false,
                quota_bytes: None,
            }
        )?;
        r.bucket
            .map(Bucket::from)
            .ok_or_else(|| ClientError::bad_reply("OM", "no bucket in reply"))
    }

    pub async fn bucket_info(&self, volume: &str, name: &str, mode: ReadMode) -> Result<Bucket> {
        let req = pb::BucketInfoRequest {
            volume: volume.into(),
            name: name.into(),
            read: mode.options(),
        };
        let r = self
            .read("bucket info", mode, req, |mut c, r| async move {
                c.bucket_info(r).await
            })
            .await?;
        r.bucket
            .map(Bucket::from)
            .ok_or_else(|| ClientError::bad_reply("OM", "no bucket in reply"))
    }

    pub async fn list_buckets(&self, volume: &str, prefix: &str) -> Result<Vec<Bucket>> {
        let mut out = Vec::new();
        loop {
            let req = pb::ListBucketsRequest {
                volume: volume.into(),
                prefix: prefix.into(),
                start_after: out
                    .last()
                    .map(|b: &Bucket| b.name.clone())
                    .unwrap_or_default(),
                limit: 0,
                read: None,
            };
            let r = leader_call!(self, "list buckets", list_buckets, req)?;
            let n = r.buckets.len();
            out.extend(r.buckets.into_iter().map(Bucket::from));
            if !r.truncated || n == 0 {
                return Ok(out);
            }
        }
    }

    pub async fn delete_bucket(&self, volume: &str, name: &str) -> Result<()> {
        leader_call!(
            self,
            "delete bucket",
            delete_bucket,
            pb::DeleteBucketRequest {
                volume: volume.into(),
                name: name.into(),
            }
        )?;
        Ok(())
    }

    /// Starts writing `key`; `size` (0 = unknown) lets the OM allocate enough blocks.
    pub async fn open_key(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: u64,
        exclude: &Exclude,
    ) -> Result<OpenKey> {
        self.open(volume, bucket, key, size, exclude, false).await
    }

    /// Starts writing a key of at most one block of up to 1 MiB (`size`, 0 = unknown),
    /// promising to write only the first block and never to ask for another: the OM may
    /// then open it without a log entry ([`OpenKey::deferred`]), so the key costs one
    /// replicated write (its commit) instead of two. A writer whose block fails opens again
    /// with [`Self::open_key`].
    pub async fn open_key_single_block(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: u64,
    ) -> Result<OpenKey> {
        self.open(volume, bucket, key, size, &Exclude::default(), true)
            .await
    }

    async fn open(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: u64,
        exclude: &Exclude,
        single_block: bool,
    ) -> Result<OpenKey> {
        let r = leader_call!(
            self,
            "open key",
            open_key,
            pb::OpenKeyRequest {
                volume: volume.into(),
                bucket: bucket.into(),
                key: key.into(),
                size,
                replication: pb::Replication::Unspecified as i32,
                exclude_datanodes: exclude.datanodes.clone(),
                exclude_pipelines: exclude.pipelines.clone(),
                single_block,
            }
        )?;
        let blocks = r
            .blocks
            .into_iter()
            .map(AllocatedBlock::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(OpenKey {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
            client_id: r.client_id,
            blocks,
            deferred: r.deferred,
        })
    }

    /// One more block for an open key, avoiding what failed.
    pub async fn allocate_block(
        &self,
        open: &OpenKey,
        exclude: &Exclude,
    ) -> Result<AllocatedBlock> {
        let r = leader_call!(
            self,
            "allocate block",
            allocate_block,
            pb::AllocateBlockRequest {
                volume: open.volume.clone(),
                bucket: open.bucket.clone(),
                key: open.key.clone(),
                client_id: open.client_id,
                count: 1,
                exclude_datanodes: exclude.datanodes.clone(),
                exclude_pipelines: exclude.pipelines.clone(),
                exclude_containers: exclude.containers.clone(),
            }
        )?;
        r.blocks
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::bad_reply("OM", "allocate block returned no block"))
            .and_then(AllocatedBlock::try_from)
    }

    /// Makes the open key visible with these blocks (in key order).
    pub async fn commit_key(
        &self,
        open: &OpenKey,
        blocks: &[(BlockId, u64)],
        checksum: &str,
    ) -> Result<Key> {
        self.commit_key_with(open, blocks, checksum, None).await
    }

    /// [`Self::commit_key`], keeping S3 metadata with the key and, when `s3` has a
    /// condition, only if it holds (refused with `PreconditionFailed` otherwise).
    pub async fn commit_key_with(
        &self,
        open: &OpenKey,
        blocks: &[(BlockId, u64)],
        checksum: &str,
        s3: Option<S3Commit<'_>>,
    ) -> Result<Key> {
        let size = blocks.iter().map(|(_, l)| l).sum();
        let r = leader_call!(
            self,
            "commit key",
            commit_key,
            pb::CommitKeyRequest {
                volume: open.volume.clone(),
                bucket: open.bucket.clone(),
                key: open.key.clone(),
                client_id: open.client_id,
                blocks: blocks
                    .iter()
                    .map(|(id, length)| pb::CommitBlock {
                        block_id: Some((*id).into()),
                        length: *length
                    })
                    .collect(),
                size,
                checksum: checksum.into(),
                s3: s3.map(|c| c.meta.into()),
                deferred: if open.deferred {
                    open.blocks
                        .iter()
                        .map(|b| pb::DeferredBlock {
                            block_id: Some(b.block_id.into()),
                            block_token: b.token.clone(),
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                condition: s3.and_then(|c| c.condition).map(|c| match c {
                    S3Condition::IfNoneMatchAny => pb::S3Condition {
                        if_none_match_any: true,
                        if_match: String::new(),
                    },
                    S3Condition::IfMatch(e) => pb::S3Condition {
                        if_none_match_any: false,
                        if_match: e.clone(),
                    },
                }),
            }
        )?;
        r.key
            .ok_or_else(|| ClientError::bad_reply("OM", "no key in commit reply"))
            .and_then(Key::try_from)
    }

    pub async fn lookup_key(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        mode: ReadMode,
    ) -> Result<Key> {
        let req = pb::LookupKeyRequest {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
            read: mode.options(),
        };
        let r = self
            .read("lookup key", mode, req, |mut c, r| async move {
                c.lookup_key(r).await
            })
            .await?;
        r.key
            .ok_or_else(|| ClientError::bad_reply("OM", "no key in lookup reply"))
            .and_then(Key::try_from)
    }

    /// Keys of a bucket starting with `prefix`, after `start_after`, at most `limit` (0 = all).
    pub async fn list_keys(
        &self,
        volume: &str,
        bucket: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<Vec<Key>> {
        let mut out: Vec<Key> = Vec::new();
        loop {
            let after = out
                .last()
                .map(|k| k.name.clone())
                .unwrap_or_else(|| start_after.to_string());
            let want = if limit == 0 {
                0
            } else {
                (limit - out.len()).min(u32::MAX as usize) as u32
            };
            let req = pb::ListKeysRequest {
                volume: volume.into(),
                bucket: bucket.into(),
                prefix: prefix.into(),
                start_after: after,
                limit: want,
                read: None,
            };
            let r = leader_call!(self, "list keys", list_keys, req)?;
            let n = r.keys.len();
            for k in r.keys {
                out.push(Key::try_from(k)?);
            }
            if !r.truncated || n == 0 || (limit > 0 && out.len() >= limit) {
                out.truncate(if limit == 0 { out.len() } else { limit });
                return Ok(out);
            }
        }
    }

    pub async fn delete_key(&self, volume: &str, bucket: &str, key: &str) -> Result<()> {
        leader_call!(
            self,
            "delete key",
            delete_key,
            pb::DeleteKeyRequest {
                volume: volume.into(),
                bucket: bucket.into(),
                key: key.into(),
            }
        )?;
        Ok(())
    }

    pub async fn rename_key(&self, volume: &str, bucket: &str, from: &str, to: &str) -> Result<()> {
        leader_call!(
            self,
            "rename key",
            rename_key,
            pb::RenameKeyRequest {
                volume: volume.into(),
                bucket: bucket.into(),
                from_key: from.into(),
                to_key: to.into(),
            }
        )?;
        Ok(())
    }

    /// The ring's members and roles, as the first member that answers sees them (the leader
    /// when known: it knows every member's role).
    pub async fn roles(&self) -> Result<OmRoles> {
        let r = self
            .ring
            .call("om roles", |ch| async move {
                OmAdminClient::new(ch).roles(pb::RolesRequest {}).await
            })
            .await?;
        Ok(roles_from(r))
    }

    /// `roles` as answered by the member at `addr`.
    pub async fn roles_of(&self, addr: &str) -> Result<OmRoles> {
        let ch = self.ring.channel_to(addr)?;
        let r = tokio::time::timeout(
            self.ring.policy().attempt_timeout,
            OmAdminClient::new(ch).roles(pb::RolesRequest {}),
        )
        .await
        .map_err(|_| ClientError::Unavailable {
            service: "OM".into(),
            detail: format!("{addr}: no answer"),
        })?
        .map_err(|s| ClientError::Unavailable {
            service: "OM".into(),
            detail: format!("{addr}: {}", s.message()),
        })?;
        Ok(roles_from(r.into_inner()))
    }

    /// Hands leadership to `node_id` (sent to the leader).
    pub async fn transfer_leader(&self, node_id: u64) -> Result<()> {
        self.ring
            .call("om transfer", |ch| async move {
                OmAdminClient::new(ch)
                    .transfer_leader(pb::TransferLeaderRequest { node_id })
                    .await
            })
            .await?;
        Ok(())
    }

    /// Removes `node_id` from the OM ring (sent to the leader).
    pub async fn decommission(&self, node_id: u64) -> Result<()> {
        self.ring
            .call("om decommission", |ch| async move {
                OmAdminClient::new(ch)
                    .decommission(pb::DecommissionRequest { node_id })
                    .await
            })
            .await?;
        Ok(())
    }
}

fn roles_from(r: pb::RolesReply) -> OmRoles {
    OmRoles {
        answered_by: r.node_id,
        leader_id: r.leader_id,
        term: r.term,
        members: r
            .members
            .into_iter()
            .map(|m| OmMember {
                node_id: m.node_id,
                role: short_enum(m.role().as_str_name(), "OM_ROLE_"),
                client_addr: m.client_addr,
                peer_addr: m.peer_addr,
                voter: m.voter,
                leader_ready: m.leader_ready,
                applied_index: m.applied_index,
            })
            .collect(),
    }
}
