//! RocksDB state-machine base, generic over the application's logic.
//!
//! The state lives in its own database (separate from the log, so a checkpoint carries no
//! log) under `sm/gen-N/`; `sm/CURRENT` names the live generation. Each applied batch of
//! entries is one `WriteBatch` holding the application's effects *and* the applied log id
//! and last membership, so a crash never separates them. Installing a snapshot renames a
//! verified checkpoint into a new generation and flips `CURRENT` atomically.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use openraft::entry::RaftEntry;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend};
use rozone_kv::rocksdb::checkpoint::Checkpoint as RocksCheckpoint;
use rozone_kv::rocksdb::DB;
use rozone_kv::{cf, DbTuning};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::encode;
use crate::retry_cache::{self, RetryCache};
use crate::snapshot::{self, Checkpoint, Manifest, Snap, SnapshotStore};
use crate::txn::Txn;
use crate::types::{AppResponse, LogId, SnapshotMeta, StoredMembership, TypeConfig};
use crate::{envelope, record};

/// Column family of the base's own rows (applied log id, membership).
pub const CF_RAFT_META: &str = "raft_meta";
const KEY_APPLIED: &[u8] = b"applied";
const KEY_MEMBERSHIP: &[u8] = b"membership";

/// What an application plugs into the Raft layer.
pub trait StateMachineLogic: Send + Sync + 'static {
    type Request: Serialize + DeserializeOwned + Send + Sync + 'static;
    type Response: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The application's column families in the state-machine database.
    fn column_families(&self) -> Vec<&'static str>;

    /// Applies one command. Must be deterministic: every member applies the same log.
    /// Application-level failures (a failed compare-and-set, a missing key) are part of the
    /// response; an `Err` means the local storage failed, which stops this Raft node.
    fn apply(
        &mut self,
        txn: &mut Txn<'_>,
        log_id: &LogId,
        req: Self::Request,
    ) -> io::Result<Self::Response>;

    /// Called once the database is open and after a snapshot was installed: rebuild any
    /// in-memory state derived from it.
    fn on_load(&mut self, _db: &Arc<DB>) -> io::Result<()> {
        Ok(())
    }
}

/// The live state-machine database of a group, shared with readers. A snapshot install
/// swaps the database underneath; readers take the current handle per read.
pub struct StateDb {
    root: PathBuf,
    cfs: Vec<String>,
    db: RwLock<Arc<DB>>,
}

impl StateDb {
    fn cf_names(app_cfs: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = app_cfs.iter().map(|s| s.to_string()).collect();
        v.push(CF_RAFT_META.to_string());
        v
    }

    fn open_gen(path: &Path, cfs: &[String]) -> io::Result<Arc<DB>> {
        let names: Vec<&str> = cfs.iter().map(|s| s.as_str()).collect();
        Ok(rozone_kv::open(path, &names, &DbTuning::default())?)
    }

    /// Opens the live generation under `root` (creating generation 0 on first start) and
    /// removes leftovers of interrupted installs.
    pub fn open(root: &Path, app_cfs: &[&str]) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let cfs = Self::cf_names(app_cfs);
        let current = match std::fs::read_to_string(root.join("CURRENT")) {
            Ok(s) => {
                let name = s.trim().to_string();
                snapshot::check_name("generation", &name)?;
                name
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                write_current(root, "gen-0")?;
                "gen-0".to_string()
            }
            Err(e) => return Err(e),
        };
        for e in std::fs::read_dir(root)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name != current && name != "CURRENT" {
                snapshot::remove_path(&e.path());
            }
        }
        let db = Self::open_gen(&root.join(&current), &cfs)?;
        Ok(Self {
            root: root.to_path_buf(),
            cfs,
            db: RwLock::new(db),
        })
    }

    /// The current database handle.
    pub fn db(&self) -> Arc<DB> {
        match self.db.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Column families of this database (application's plus the base's meta).
    pub fn column_families(&self) -> &[String] {
        &self.cfs
    }

    /// A directory on the same filesystem for staging a downloaded checkpoint.
    pub fn staging_dir(&self, id: &str) -> PathBuf {
        self.root.join(format!("staging-{id}"))
    }

    /// Makes the verified checkpoint in `staged_db` the live database.
    fn swap_in(&self, staged_db: &Path) -> io::Result<()> {
        let next = next_generation(&self.root)?;
        let next_path = self.root.join(&next);
        // The staged files were synced one by one; their names are durable only once the
        // staging directory is, before the rename that makes them the live database.
        snapshot::sync_dir(staged_db)?;
        std::fs::rename(staged_db, &next_path)?;
        snapshot::sync_dir(&self.root)?;
        let new_db = Self::open_gen(&next_path, &self.cfs)?;
        let old_path = {
            let mut g = self
                .db
                .write()
                .map_err(|_| io::Error::other("state db lock poisoned"))?;
            let old = std::mem::replace(&mut *g, new_db);
            let p = old.path().to_path_buf();
            drop(old);
            p
        };
        write_current(&self.root, &next)?;
        snapshot::remove_path(&old_path);
        Ok(())
    }
}

fn write_current(root: &Path, name: &str) -> io::Result<()> {
    let tmp = root.join("CURRENT.tmp");
    std::fs::write(&tmp, name)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, root.join("CURRENT"))?;
    snapshot::sync_dir(root)
}

fn next_generation(root: &Path) -> io::Result<String> {
    let mut max = 0u64;
    for e in std::fs::read_dir(root)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_prefix("gen-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            max = max.max(n);
        }
    }
    Ok(format!("gen-{}", max + 1))
}

/// Reads the applied log id and membership recorded in a state database (an application's
/// [`StateMachineLogic::on_load`] uses it to see how far an installed snapshot reaches).
pub fn read_applied(db: &DB) -> io::Result<(Option<LogId>, StoredMembership)> {
    let h = cf(db, CF_RAFT_META)?;
    let applied = match db.get_cf(h, KEY_APPLIED).map_err(io::Error::other)? {
        Some(b) => record::decode_log_id(&b)?,
        None => None,
    };
    let membership = match db.get_cf(h, KEY_MEMBERSHIP).map_err(io::Error::other)? {
        Some(b) => record::decode_membership(&b)?,
        None => StoredMembership::default(),
    };
    Ok((applied, membership))
}

/// Makes a verified, staged checkpoint the live state: keeps a copy as this node's own
/// snapshot (hard links), swaps it in as the next generation, publishes the copy.
pub(crate) fn install_checkpoint(
    state: &StateDb,
    snapshots: &SnapshotStore,
    cp: &Checkpoint,
) -> io::Result<Manifest> {
    let manifest = snapshot::read_manifest(&cp.dir)?;
    let keep = snapshots.tmp_dir(&cp.id);
    snapshot::remove_path(&keep);
    snapshot::link_dir(&cp.db_dir(), &keep.join(snapshot::DB_DIR))?;
    snapshot::write_manifest(&keep, &manifest)?;
    state.swap_in(&cp.db_dir())?;
    snapshot::remove_path(&cp.dir);
    snapshots.publish(&keep, manifest.clone())?;
    Ok(manifest)
}

/// The openraft state machine: the base plus the application's logic.
pub struct RocksStateMachine<L: StateMachineLogic> {
    state: Arc<StateDb>,
    snapshots: Arc<SnapshotStore>,
    logic: L,
    applied: Option<LogId>,
    membership: StoredMembership,
    retry: RetryCache,
    retry_stats: Arc<retry_cache::Stats>,
}

impl<L: StateMachineLogic> RocksStateMachine<L> {
    /// Opens the state database under `sm_root` and the snapshot store under
    /// `snapshot_root`.
    pub fn open(sm_root: &Path, snapshot_root: &Path, mut logic: L) -> io::Result<Self> {
        let state = Arc::new(StateDb::open(sm_root, &logic.column_families())?);
        let snapshots = Arc::new(SnapshotStore::open(snapshot_root)?);
        let db = state.db();
        let (applied, membership) = read_applied(&db)?;
        logic.on_load(&db)?;
        let retry = RetryCache::load(&db)?;
        let retry_stats = Arc::new(retry_cache::Stats::default());
        retry_stats.set_entries(retry.len());
        Ok(Self {
            state,
            snapshots,
            logic,
            applied,
            membership,
            retry,
            retry_stats,
        })
    }

    /// What the retry cache did (shared with the group's `/metrics`).
    pub fn retry_stats(&self) -> Arc<retry_cache::Stats> {
        self.retry_stats.clone()
    }

    /// Applies one client request: once per call (see [`retry_cache`]).
    fn apply_request(
        &mut self,
        txn: &mut Txn<'_>,
        log_id: &LogId,
        sealed: &[u8],
    ) -> io::Result<Vec<u8>> {
        let (tag, req): (_, L::Request) = envelope::open_request(sealed)?;
        let Some(tag) = tag else {
            return encode(&self.logic.apply(txn, log_id, req)?);
        };
        let kind = envelope::request_kind(sealed);
        if let Some(reply) = self.retry.lookup(txn, &tag, kind)? {
            self.retry_stats.hit();
            tracing::info!(
                client = tag.client,
                seq = tag.seq,
                sub = tag.sub,
                "a retried write was answered from the retry cache"
            );
            return Ok(reply);
        }
        let reply = encode(&self.logic.apply(txn, log_id, req)?)?;
        self.retry.remember(txn, &tag, kind, reply.clone())?;
        Ok(reply)
    }

    pub fn state(&self) -> Arc<StateDb> {
        self.state.clone()
    }

    pub fn snapshots(&self) -> Arc<SnapshotStore> {
        self.snapshots.clone()
    }
}

/// Builds a snapshot: the checkpoint itself was taken on the state-machine worker (so it
/// matches `meta` exactly); here the files are checksummed and published.
pub struct CheckpointBuilder {
    snapshots: Arc<SnapshotStore>,
    tmp: PathBuf,
    id: String,
    meta: SnapshotMeta,
}

impl RaftSnapshotBuilder<TypeConfig> for CheckpointBuilder {
    type SnapshotData = Checkpoint;

    async fn build_snapshot(&mut self) -> Result<Snap, io::Error> {
        let snapshots = self.snapshots.clone();
        let tmp = self.tmp.clone();
        let id = self.id.clone();
        let meta = self.meta.clone();
        let cp = tokio::task::spawn_blocking(move || -> io::Result<Checkpoint> {
            let files = snapshot::list_files(&tmp.join(snapshot::DB_DIR))?;
            let m = Manifest {
                snapshot_id: id,
                meta,
                files,
            };
            snapshot::write_manifest(&tmp, &m)?;
            snapshots.publish(&tmp, m)
        })
        .await
        .map_err(io::Error::other)??;
        tracing::info!(snapshot = %cp.id, "snapshot built");
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: cp,
        })
    }
}

fn snapshot_id(meta: &SnapshotMeta) -> String {
    let (term, index) = meta
        .last_log_id
        .as_ref()
        .map(|l| (l.committed_leader_id().term, l.index()))
        .unwrap_or((0, 0));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{term}-{index}-{nanos}")
}

impl<L: StateMachineLogic> RaftStateMachine<TypeConfig> for RocksStateMachine<L> {
    type SnapshotData = Checkpoint;
    type SnapshotBuilder = CheckpointBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: futures::Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>>
            + Unpin
            + OptionalSend,
    {
        let db = self.state.db();
        let mut txn = Txn::new(&db);
        let mut replies = Vec::new();
        let mut applied = self.applied;
        let mut membership = None;
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let log_id = entry.log_id();
            fail::fail_point!("raft-apply", |_| Err(io::Error::other(
                "failpoint raft-apply"
            )));
            let resp = match entry.payload {
                EntryPayload::Blank => AppResponse::default(),
                EntryPayload::Normal(req) => {
                    AppResponse(self.apply_request(&mut txn, &log_id, &req.0)?)
                }
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(log_id), m));
                    AppResponse::default()
                }
            };
            applied = Some(log_id);
            if let Some(r) = responder {
                replies.push((r, resp));
            }
        }
        if applied == self.applied {
            return Ok(());
        }
        txn.put(CF_RAFT_META, KEY_APPLIED, record::encode_log_id(&applied)?);
        if let Some(m) = &membership {
            txn.put(CF_RAFT_META, KEY_MEMBERSHIP, record::encode_membership(m)?);
        }
        // One write per applied batch. Not synced: the log is durable, and entries after
        // the last flushed applied id are applied again after a crash.
        db.write(txn.into_batch()?).map_err(io::Error::other)?;
        self.applied = applied;
        if let Some(m) = membership {
            self.membership = m;
        }
        self.retry_stats.set_entries(self.retry.len());
        for (r, resp) in replies {
            r.send(resp);
        }
        Ok(())
    }

    async fn try_create_snapshot_builder(&mut self, _force: bool) -> Option<CheckpointBuilder> {
        let meta = SnapshotMeta {
            last_log_id: self.applied,
            last_membership: self.membership.clone(),
        };
        let id = snapshot_id(&meta);
        let tmp = self.snapshots.tmp_dir(&id);
        let db = self.state.db();
        // Taken here, on the state-machine worker, so no entry is applied meanwhile and the
        // checkpoint holds exactly `meta.last_log_id`. A failure refuses this snapshot
        // (openraft retries at its next trigger) instead of stopping the node.
        let res = (|| -> io::Result<()> {
            fail::fail_point!("raft-checkpoint-build", |_| Err(io::Error::other(
                "failpoint raft-checkpoint-build"
            )));
            std::fs::create_dir_all(&tmp)?;
            RocksCheckpoint::new(&db)
                .and_then(|c| c.create_checkpoint(tmp.join(snapshot::DB_DIR)))
                .map_err(io::Error::other)
        })();
        match res {
            Ok(()) => Some(CheckpointBuilder {
                snapshots: self.snapshots.clone(),
                tmp,
                id,
                meta,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint for snapshot failed; will retry later");
                snapshot::remove_path(&tmp);
                None
            }
        }
    }

    async fn get_snapshot_builder(&mut self) -> CheckpointBuilder {
        // Only reached through the default `try_create_snapshot_builder`, which we override.
        unreachable!("rozone overrides try_create_snapshot_builder")
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Checkpoint,
    ) -> Result<(), io::Error> {
        // The checkpoint was downloaded and verified by the snapshot RPC handler; what is
        // left is local.
        install_checkpoint(&self.state, &self.snapshots, &snapshot)?;
        let db = self.state.db();
        let (applied, membership) = read_applied(&db)?;
        if applied != meta.last_log_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "installed checkpoint does not hold the snapshot's log id",
            ));
        }
        self.applied = applied;
        self.membership = membership;
        self.logic.on_load(&db)?;
        self.retry = RetryCache::load(&db)?;
        self.retry_stats.set_entries(self.retry.len());
        tracing::info!(snapshot = %snapshot.id, "snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snap>, io::Error> {
        Ok(self.snapshots.current().map(|(m, cp)| Snapshot {
            meta: m.meta,
            snapshot: cp,
        }))
    }
}
