//! Executes SCM commands from heartbeat replies, in the background; their statuses go back
//! in the next heartbeats. Commands from an older SCM leader term than one already seen are
//! ignored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rozone_types::codes::DnCode;

use crate::clients::Clients;
use crate::error::DnError;
use crate::pipeline::{PipelineRequest, PipelineResponse, Pipelines};
use crate::store::ContainerStore;
use crate::types::{Command, CommandStatus, ScmCommand};

pub struct Executor {
    pub store: Arc<ContainerStore>,
    pub pipelines: Arc<Pipelines>,
    pub clients: Arc<Clients>,
    statuses: Mutex<Vec<CommandStatus>>,
    max_term: AtomicU64,
}

fn status(id: u64, r: &Result<(), DnError>) -> CommandStatus {
    CommandStatus {
        command_id: id,
        failure: r.as_ref().err().map(|e| e.to_string()),
    }
}

impl Executor {
    pub fn new(
        store: Arc<ContainerStore>,
        pipelines: Arc<Pipelines>,
        clients: Arc<Clients>,
    ) -> Self {
        Self {
            store,
            pipelines,
            clients,
            statuses: Mutex::new(Vec::new()),
            max_term: AtomicU64::new(0),
        }
    }

    pub fn take_statuses(&self) -> Vec<CommandStatus> {
        std::mem::take(&mut *self.statuses.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn requeue_statuses(&self, s: Vec<CommandStatus>) {
        self.statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(s);
    }

    /// Starts a command in the background.
    pub fn submit(self: &Arc<Self>, cmd: ScmCommand) {
        let seen = self.max_term.fetch_max(cmd.term, Ordering::SeqCst);
        if cmd.term < seen {
            tracing::info!(
                command_id = cmd.id,
                term = cmd.term,
                seen,
                "ignoring command from an older SCM term"
            );
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let id = cmd.id;
            let r = match cmd.command {
                Some(c) => me.execute(c).await,
                None => Err(DnError::invalid("command without a body")),
            };
            if let Err(e) = &r {
                tracing::warn!(command_id = id, error = %e, "SCM command failed");
            }
            me.requeue_statuses(vec![status(id, &r)]);
        });
    }

    /// Runs one command to its end.
    pub async fn execute(&self, c: Command) -> Result<(), DnError> {
        match c {
            Command::CreatePipeline { pipeline, members } => {
                self.pipelines.create(pipeline, members).await
            }
            Command::ClosePipeline { pipeline } => self.pipelines.close(pipeline).await,
            Command::CloseContainer {
                container,
                pipeline,
                force,
            } => self.close_container(container, pipeline, force).await,
            Command::DeleteContainer { container, force } => {
                let store = self.store.clone();
                blocking(move || store.delete_container(container, force)).await
            }
            Command::ReplicateContainer { container, sources } => {
                crate::replication::replicate(
                    self.store.clone(),
                    &self.clients,
                    container,
                    &sources,
                )
                .await
            }
            Command::DeleteBlocks { txns } => {
                for (container, local_ids) in txns {
                    let store = self.store.clone();
                    match blocking(move || store.delete_blocks(container, &local_ids)).await {
                        Ok(_) => {}
                        // The container is gone: so are its blocks.
                        Err(e) if e.code == DnCode::ContainerNotFound => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
        }
    }

    /// Close through the pipeline when this member leads it (the entry closes every replica
    /// at the same log index); a member that does not lead leaves it to the leader. Without
    /// the pipeline here, the local replica is quasi-closed, and `force` (the SCM chose this
    /// replica) closes a quasi-closed one.
    ///
    /// A container the leader never wrote (SCM opens containers when it hands out blocks,
    /// and a block may never be written) has nothing to close. Only the write stage creates
    /// a container and a leader whose log held every entry ran every write stage, so "no
    /// descriptor and no tombstone here" means no member holds it: no entry is proposed.
    /// A leader that ever caught up by snapshot skipped entries — possibly the container's
    /// creation — while the other members may hold it, so it proposes the close anyway; the
    /// apply closes the container where it exists and is a no-op (never a poisoning
    /// refusal) on members that never held it, so the container reaches CLOSED. A deleted
    /// container keeps its tombstone, so a close for it still goes through the log and is
    /// refused there (the replay guard).
    async fn close_container(&self, cid: u64, pipeline: u64, force: bool) -> Result<(), DnError> {
        match self.pipelines.get(pipeline) {
            Ok(p)
                if p.group.is_ready_leader()
                    && self.store.descriptor(cid).is_none()
                    && !p.state.snapshot_gap() =>
            {
                tracing::info!(
                    container_id = cid,
                    pipeline_id = pipeline,
                    "close of a container never written here: nothing to close"
                );
                Ok(())
            }
            Ok(p) if p.group.is_ready_leader() => match p
                .group
                .write(PipelineRequest::CloseContainer { container_id: cid })
                .await
            {
                Ok(PipelineResponse::Ok { .. }) => Ok(()),
                Ok(PipelineResponse::Refused(e)) => Err(e),
                Err(e) => Err(DnError::io("close container", e)),
            },
            Ok(_) => Ok(()),
            // The pipeline is gone here (closed, or never reopened): no log can close the
            // replica at one index on every member any more. Quasi-close it with the BCSID
            // it has, as Ozone does; the SCM compares the replicas' BCSIDs and force-closes
            // those at the highest one a majority reached. Refusing instead left such
            // containers CLOSING for good (RELIABILITY.md, finding 2).
            Err(_) => {
                let store = self.store.clone();
                match blocking(move || store.close_locally(cid, force)).await {
                    // No replica here (a member the block never reached): nothing to close.
                    Err(e) if e.code == DnCode::ContainerNotFound => Ok(()),
                    r => r,
                }
            }
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DnError> + Send + 'static,
) -> Result<T, DnError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| DnError::io("worker", e))?
}
