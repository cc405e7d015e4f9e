//! The fixture the commands' unit tests share: a fresh OM state database, each request
//! applied in a batch of its own and written (as the state machine does), and shorthands
//! for the rows a test starts from.

use std::io;
use std::sync::Arc;

use rozone_kv::rocksdb::DB;
use rozone_raft::{StateMachineLogic, Txn};
use serde::Serialize;

use crate::state::request::{OmRequest, OmResponse, Refusal};
use crate::state::types::{AllocatedBlock, BlockId, Datanode, OpenKeyId, PipelineRef, Replication};
use crate::state::{OmLogic, COLUMN_FAMILIES};

/// The time every test request carries.
pub const NOW: u64 = 1_700_000_000_000;

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub db: Arc<DB>,
    logic: OmLogic,
    /// Log index of the last applied request.
    index: u64,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
        Self {
            _dir: dir,
            db,
            logic: OmLogic::new(1),
            index: 0,
        }
    }

    /// Applies `req` as the next log entry, in its own batch, and writes it.
    pub fn apply(&mut self, req: OmRequest) -> OmResponse {
        self.apply_at(self.index + 1, req)
    }

    /// Applies `req` as log entry `index` (later entries continue from there).
    pub fn apply_at(&mut self, index: u64, req: OmRequest) -> OmResponse {
        self.index = index;
        let mut txn = Txn::new(&self.db);
        let resp = self
            .logic
            .apply(&mut txn, &rozone_raft::types::log_id(1, 1, index), req)
            .unwrap();
        self.db.write(txn.into_batch().unwrap()).unwrap();
        resp
    }

    /// Applies `req` without writing its batch.
    pub fn try_apply(&mut self, req: OmRequest) -> io::Result<OmResponse> {
        let mut txn = Txn::new(&self.db);
        self.logic.apply(
            &mut txn,
            &rozone_raft::types::log_id(1, 1, self.index + 1),
            req,
        )
    }

    /// Applies `req`, which must be refused, and returns the refusal.
    pub fn refused(&mut self, req: OmRequest) -> Refusal {
        match self.apply(req) {
            OmResponse::Refused(r) => r,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// Writes a row directly (a state the commands would not make, or a corrupt one).
    pub fn put_bytes(&self, cf_name: &str, key: &[u8], value: &[u8]) {
        self.db
            .put_cf(rozone_kv::cf(&self.db, cf_name).unwrap(), key, value)
            .unwrap();
    }

    /// Writes a row directly, encoded as stored.
    pub fn put_row<T: Serialize>(&self, cf_name: &str, key: &[u8], v: &T) {
        self.put_bytes(cf_name, key, &rozone_raft::codec::encode(v).unwrap());
    }

    pub fn delete_row(&self, cf_name: &str, key: &[u8]) {
        self.db
            .delete_cf(rozone_kv::cf(&self.db, cf_name).unwrap(), key)
            .unwrap();
    }

    pub fn volume(&mut self, name: &str) {
        let r = self.apply(OmRequest::CreateVolume {
            name: name.into(),
            owner: "owner".into(),
            quota_bytes: None,
            now_ms: NOW,
        });
        assert!(matches!(r, OmResponse::VolumeCreated(_)), "{r:?}");
    }

    /// A RATIS_THREE bucket without versioning or quota.
    pub fn bucket(&mut self, volume: &str, name: &str) {
        self.bucket_with(volume, name, false, None);
    }

    pub fn bucket_with(&mut self, volume: &str, name: &str, versioning: bool, quota: Option<u64>) {
        let r = self.apply(OmRequest::CreateBucket {
            volume: volume.into(),
            name: name.into(),
            replication: Replication::RatisThree,
            versioning,
            quota_bytes: quota,
            now_ms: NOW,
        });
        assert!(matches!(r, OmResponse::BucketCreated(_)), "{r:?}");
    }

    /// Opens `id` with `blocks`, expiring 100 ms after [`NOW`].
    pub fn open(&mut self, id: &OpenKeyId, blocks: Vec<AllocatedBlock>) {
        let r = self.apply(OmRequest::OpenKey {
            id: id.clone(),
            replication: None,
            blocks,
            now_ms: NOW,
            expires_ms: NOW + 100,
        });
        assert!(matches!(r, OmResponse::KeyOpened(_)), "{r:?}");
    }

    pub fn commit(&mut self, id: &OpenKeyId, blocks: Vec<(BlockId, u64)>, size: u64) {
        let r = self.apply(OmRequest::CommitKey {
            id: id.clone(),
            blocks,
            size,
            checksum: String::new(),
            now_ms: NOW + 1,
        });
        assert!(matches!(r, OmResponse::KeyCommitted(_)), "{r:?}");
    }
}

pub fn bid(container_id: u64, local_id: u64) -> BlockId {
    BlockId {
        container_id,
        local_id,
    }
}

/// Block `container_id/local_id` on a one-member pipeline.
pub fn block(container_id: u64, local_id: u64, max_size: u64) -> AllocatedBlock {
    AllocatedBlock {
        id: bid(container_id, local_id),
        pipeline: PipelineRef {
            id: container_id,
            members: vec![Datanode {
                id: 1,
                hostname: "dn1".into(),
                container_addr: "127.0.0.1:1".into(),
                raft_addr: "127.0.0.1:2".into(),
                replication_addr: "127.0.0.1:3".into(),
            }],
            leader_id: Some(1),
            open: true,
        },
        max_size,
    }
}

/// Open key `v/b/<key>` of `client_id`.
pub fn open_id(key: &str, client_id: u64) -> OpenKeyId {
    OpenKeyId {
        volume: "v".into(),
        bucket: "b".into(),
        key: key.into(),
        client_id,
    }
}
