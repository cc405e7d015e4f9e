//! Pipelines: one Raft group per pipeline (its members are datanodes), created and closed
//! on SCM command, reopened from `<data_dir>/pipelines/<id>/` after a restart.
//!
//! A pipeline keeps chunk bytes out of its log: the *write stage* stores them on every
//! member before the entry that commits them is appended — on the leader
//! ([`leader`]: store, push to the followers, propose) and on each follower ([`follower`]:
//! take the leader's push, or pull what it missed before appending). The *apply stage*
//! ([`logic`]) commits the entry's metadata into the container store and never creates a
//! container (the replay guard).

mod dirs;
pub mod follower;
pub mod leader;
pub mod logic;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rozone_config::RaftSection;
use rozone_raft::{GroupConfig, GroupRegistry, NodeInfo, PeerChannels, RaftGroup};
use rozone_types::codes::DnCode;
use serde::{Deserialize, Serialize};

use crate::clients::Clients;
use crate::error::DnError;
use crate::store::ContainerStore;
use crate::types::{Member, PipelineReport};
pub use logic::{PipelineLogic, PipelineRequest, PipelineResponse};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PipelineFile {
    id: u64,
    members: Vec<Member>,
    unhealthy: Option<String>,
    /// This member installed a snapshot that skipped entries since the pipeline started
    /// (absent in files written before the field existed: false).
    #[serde(default)]
    snapshot_gap: bool,
}

/// Health of one pipeline on this node, persisted beside its Raft group.
pub struct PipelineState {
    pub id: u64,
    pub members: Vec<Member>,
    healthy: AtomicBool,
    reason: Mutex<Option<String>>,
    /// See [`PipelineState::mark_snapshot_gap`].
    snapshot_gap: AtomicBool,
    file: PathBuf,
}

impl PipelineState {
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    pub fn unhealthy_reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Marks the pipeline unhealthy (first reason wins); it then refuses writes and asks
    /// SCM to close it in every heartbeat.
    pub fn mark_unhealthy(&self, reason: &str) {
        let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if r.is_none() {
            *r = Some(reason.to_string());
        }
        self.healthy.store(false, Ordering::SeqCst);
        self.persist(&r);
    }

    /// Whether this member ever skipped entries of this pipeline by installing a snapshot:
    /// then it may lack containers the skipped entries created, and "no descriptor here"
    /// no longer proves that no member holds a container.
    pub fn snapshot_gap(&self) -> bool {
        self.snapshot_gap.load(Ordering::SeqCst)
    }

    /// Records (durably: it must survive a restart) that a snapshot install skipped entries.
    pub fn mark_snapshot_gap(&self) {
        let r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if !self.snapshot_gap.swap(true, Ordering::SeqCst) {
            self.persist(&r);
        }
    }

    /// Writes `pipeline.json`; the caller holds the reason lock so writers never interleave.
    fn persist(&self, reason: &Option<String>) {
        let f = PipelineFile {
            id: self.id,
            members: self.members.clone(),
            unhealthy: reason.clone(),
            snapshot_gap: self.snapshot_gap(),
        };
        if let Err(e) = crate::store::offload(|| write_file(&self.file, &f)) {
            tracing::warn!(pipeline_id = self.id, error = %e, "could not persist pipeline state");
        }
    }
}

/// Replaces `pipeline.json` atomically and durably (file, rename, directory).
fn write_file(path: &std::path::Path, f: &PipelineFile) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&serde_json::to_vec_pretty(f).map_err(std::io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    path.parent().map_or(Ok(()), rozone_raft::sync_dir)
}

pub struct Pipeline {
    pub id: u64,
    pub group: Arc<RaftGroup<PipelineLogic>>,
    pub state: Arc<PipelineState>,
    /// This datanode.
    node_id: u64,
    store: Arc<ContainerStore>,
    clients: Arc<Clients>,
}

impl Pipeline {
    /// Refuses a write unless this member is the ready leader of a healthy pipeline.
    pub fn check_writable(&self) -> Result<(), DnError> {
        if !self.state.is_healthy() {
            return Err(DnError::new(
                DnCode::PipelineUnhealthy,
                format!(
                    "pipeline {} is unhealthy ({}); SCM will close it",
                    self.id,
                    self.state.unhealthy_reason().unwrap_or_default()
                ),
            ));
        }
        if !self.group.is_ready_leader() {
            return Err(self.group.not_leader_error().into());
        }
        Ok(())
    }

    /// Proposes an entry; a refusal at apply comes back as its error.
    pub async fn propose(&self, req: PipelineRequest) -> Result<(u64, u64), DnError> {
        match self.group.write(req).await? {
            PipelineResponse::Ok { bcsid, length } => Ok((bcsid, length)),
            PipelineResponse::Refused(e) => Err(e),
        }
    }

    pub fn report(&self) -> PipelineReport {
        let v = self.group.ring_view();
        PipelineReport {
            pipeline_id: self.id,
            is_leader: v.role == rozone_raft::ring::MemberRole::Leader,
            term: v.term,
            healthy: self.state.is_healthy(),
        }
    }
}

/// Wakes `report_now` whenever `group` learns of a (new) leader, until the group stops.
fn report_leader_changes(
    group: Arc<RaftGroup<PipelineLogic>>,
    report_now: Arc<tokio::sync::Notify>,
) {
    tokio::spawn(async move {
        let mut seen = (None, 0);
        while let Some(view) = group.next_leader_view(seen).await {
            if view.0.is_some() {
                report_now.notify_one();
            }
            seen = view;
        }
    });
}

/// Every pipeline this datanode is a member of.
pub struct Pipelines {
    pub node_id: u64,
    root: PathBuf,
    store: Arc<ContainerStore>,
    registry: GroupRegistry,
    channels: Arc<PeerChannels>,
    clients: Arc<Clients>,
    raft: RaftSection,
    map: Mutex<HashMap<u64, Arc<Pipeline>>>,
    /// Pipelines this node could not open, set aside (see [`dirs`]), with why: reported to
    /// the SCM as pipelines to close until it closes them.
    broken: Mutex<BTreeMap<u64, String>>,
    /// Serialises creation and closing.
    change: tokio::sync::Mutex<()>,
    /// Notified when a pipeline's leader changes: the SCM link reports at once instead of
    /// at its next heartbeat, so clients and the SCM learn a new leader within a round
    /// trip (as Ozone's datanodes trigger a heartbeat on a pipeline event).
    pub report_now: Arc<tokio::sync::Notify>,
}

pub fn group_id(pipeline: u64) -> String {
    format!("pipeline-{pipeline}")
}

impl Pipelines {
    pub fn new(
        node_id: u64,
        root: PathBuf,
        store: Arc<ContainerStore>,
        registry: GroupRegistry,
        clients: Arc<Clients>,
        raft: RaftSection,
    ) -> Self {
        Self {
            node_id,
            root,
            store,
            registry,
            channels: Arc::new(PeerChannels::new(clients.factory().clone())),
            clients,
            raft,
            map: Mutex::new(HashMap::new()),
            broken: Mutex::default(),
            report_now: Arc::default(),
            change: tokio::sync::Mutex::new(()),
        }
    }

    pub fn get(&self, id: u64) -> Result<Arc<Pipeline>, DnError> {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
            .ok_or_else(|| {
                DnError::new(
                    DnCode::PipelineNotFound,
                    format!("this datanode is not a member of pipeline {id}"),
                )
            })
    }

    pub fn all(&self) -> Vec<Arc<Pipeline>> {
        let mut v: Vec<_> = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        v.sort_by_key(|p| p.id);
        v
    }

    /// Group directory of a pipeline (tests copy snapshots in and out of it).
    pub fn dir(&self, id: u64) -> PathBuf {
        self.root.join(id.to_string())
    }

    /// Reopens every pipeline found on disk. One that cannot be opened is set aside and
    /// reported to the SCM for closing; the others start (see [`dirs`]).
    pub async fn reopen_all(&self) -> anyhow::Result<()> {
        let found = crate::store::offload(|| dirs::scan(&self.root))
            .with_context(|| format!("read {}", self.root.display()))?;
        self.broken_list().extend(found.broken);
        for f in found.files {
            let id = f.id;
            if let Err(e) = self.start_group(f, false).await {
                let why =
                    crate::store::offload(|| dirs::set_aside(&self.root, id, &format!("{e:#}")));
                self.broken_list().insert(id, why);
            }
        }
        Ok(())
    }

    fn broken_list(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, String>> {
        self.broken.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pipelines set aside because they could not be opened, with why.
    pub fn broken(&self) -> Vec<(u64, String)> {
        self.broken_list()
            .iter()
            .map(|(id, why)| (*id, why.clone()))
            .collect()
    }

    /// Creates (or, if it exists, keeps) a pipeline with these members.
    pub async fn create(&self, id: u64, members: Vec<Member>) -> Result<(), DnError> {
        let _one = self.change.lock().await;
        if self.get(id).is_ok() {
            return Ok(());
        }
        if !members.iter().any(|m| m.id == self.node_id) {
            return Err(DnError::invalid(format!(
                "pipeline {id}: this datanode ({}) is not among its members",
                self.node_id
            )));
        }
        let f = PipelineFile {
            id,
            members,
            unhealthy: None,
            snapshot_gap: false,
        };
        self.start_group(f, true)
            .await
            .map_err(|e| DnError::io(&format!("start pipeline {id}"), format!("{e:#}")))
    }

    async fn start_group(&self, f: PipelineFile, fresh: bool) -> anyhow::Result<()> {
        let dir = self.dir(f.id);
        let file = dir.join(dirs::FILE);
        crate::store::offload(|| {
            std::fs::create_dir_all(&dir)?;
            if fresh {
                write_file(&file, &f)?;
            }
            std::io::Result::Ok(())
        })?;
        let me = f
            .members
            .iter()
            .find(|m| m.id == self.node_id)
            .context("this datanode is not a member")?
            .clone();
        let state = Arc::new(PipelineState {
            id: f.id,
            members: f.members.clone(),
            healthy: AtomicBool::new(f.unhealthy.is_none()),
            reason: Mutex::new(f.unhealthy.clone()),
            snapshot_gap: AtomicBool::new(f.snapshot_gap),
            file,
        });
        let gc = GroupConfig::new(
            &group_id(f.id),
            self.node_id,
            NodeInfo::new(&me.raft_addr, &me.container_addr),
            dir.join("raft"),
        )
        .with_section(&self.raft);
        let logic = PipelineLogic {
            pipeline_id: f.id,
            store: self.store.clone(),
            state: state.clone(),
            applied: None,
        };
        let hook = Arc::new(follower::WriteStageHook {
            pipeline_id: f.id,
            node_id: self.node_id,
            members: f.members.clone(),
            store: self.store.clone(),
            clients: self.clients.clone(),
        });
        let group = RaftGroup::start_with_append_hook(
            gc,
            logic,
            &self.registry,
            self.channels.clone(),
            Some(hook),
        )
        .await?;
        // The lowest id creates the group; the others learn it from its first append.
        let lowest = f.members.iter().map(|m| m.id).min() == Some(self.node_id);
        if lowest {
            let members: BTreeMap<u64, NodeInfo> = f
                .members
                .iter()
                .map(|m| (m.id, NodeInfo::new(&m.raft_addr, &m.container_addr)))
                .collect();
            let init = async {
                if !group.is_initialized().await? {
                    group.initialize(members).await?;
                }
                anyhow::Ok(())
            };
            if let Err(e) = init.await {
                // Not kept: stop it, so a failed start leaves no group running.
                group.shutdown().await;
                return Err(e);
            }
        }
        tracing::info!(
            pipeline_id = f.id,
            members = f.members.len(),
            healthy = state.is_healthy(),
            "pipeline started"
        );
        report_leader_changes(group.clone(), self.report_now.clone());
        let p = Arc::new(Pipeline {
            id: f.id,
            group,
            state,
            node_id: self.node_id,
            store: self.store.clone(),
            clients: self.clients.clone(),
        });
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(f.id, p);
        Ok(())
    }

    /// Closes a pipeline: stops its group and removes its log (containers stay).
    pub async fn close(&self, id: u64) -> Result<(), DnError> {
        let _one = self.change.lock().await;
        let p = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let broken = self.broken_list().remove(&id).is_some();
        if p.is_some() || broken {
            if let Some(p) = p {
                p.group.shutdown().await;
            }
            crate::store::offload(|| dirs::remove_closed(&self.root, id))
                .map_err(|e| DnError::io(&format!("remove closed pipeline {id}"), e.to_string()))?;
            tracing::info!(pipeline_id = id, "pipeline closed");
        }
        Ok(())
    }

    /// Stops every group (the node is stopping).
    pub async fn stop_all(&self) {
        let all: Vec<Arc<Pipeline>> = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in all {
            p.group.shutdown().await;
        }
    }
}
