//! The link to the SCM ring: register, then heartbeat to the leader (following leader
//! hints across `datanode.scm_addrs`, re-registering when asked), with node, container and
//! pipeline reports, pipeline actions and command statuses; commands in the replies run in
//! the background ([`crate::commands`]); the block-token keys in the replies go to the
//! [`TokenVerifier`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rozone_proto::scm as spb;
use rozone_proto::scm::scm_datanode_client::ScmDatanodeClient;
use rozone_rpc::Ring;
use tokio_util::sync::CancellationToken;

use crate::commands::Executor;
use crate::pipeline::Pipelines;
use crate::store::ContainerStore;
use crate::tokens::TokenVerifier;

/// Counters and state the health endpoint shows.
#[derive(Default)]
pub struct LinkStatus {
    pub registered: AtomicBool,
    pub heartbeats: AtomicU64,
    pub failures: AtomicU64,
    pub leader: Mutex<Option<String>>,
}

pub struct ScmLink {
    pub addrs: Vec<String>,
    /// Channels to the SCMs, one per address, kept across heartbeats (and leader changes).
    pub ring: Ring,
    /// Takes the block-token keys of every reply.
    pub tokens: Arc<TokenVerifier>,
    pub details: spb::DatanodeDetails,
    pub store: Arc<ContainerStore>,
    pub pipelines: Arc<Pipelines>,
    pub executor: Arc<Executor>,
    pub interval: Duration,
    /// The interval while registered and in no healthy pipeline (capped by `interval`).
    pub interval_without_pipeline: Duration,
    pub full_report_interval: Duration,
    pub status: Arc<LinkStatus>,
}

/// The wait before the next heartbeat, never above `interval`: after `failures` failed
/// calls in a row (no SCM leader yet, a leader change) `fast` times the failures, so a
/// datanode registers and reports within moments of a leader being elected yet backs off
/// while the SCMs stay away; `fast` while registered and in no healthy pipeline; else
/// `interval`.
fn heartbeat_wait(
    registered: bool,
    in_healthy_pipeline: bool,
    failures: u32,
    interval: Duration,
    fast: Duration,
) -> Duration {
    let wait = if failures > 0 {
        fast.saturating_mul(failures)
    } else if registered && !in_healthy_pipeline {
        fast
    } else {
        interval
    };
    wait.min(interval)
}

/// One heartbeat or registration may take at most this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `msg` with the per-call timeout (the SCM drops the call after it too).
fn timed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(CALL_TIMEOUT);
    r
}

impl ScmLink {
    /// Space from the background volume check's last statvfs ([`crate::store::check`]),
    /// so a hung disk cannot hang the heartbeat; through `offload` because a full volume
    /// may probe (write) whether space was freed.
    fn node_report(&self) -> spb::NodeReport {
        crate::store::offload(|| self.node_report_now())
    }

    fn node_report_now(&self) -> spb::NodeReport {
        spb::NodeReport {
            storage: self
                .store
                .volumes()
                .iter()
                .map(|v| {
                    let (capacity, used, remaining) = v.space();
                    spb::StorageReport {
                        path: v.root().display().to_string(),
                        capacity,
                        used,
                        remaining,
                        // Full is `remaining == 0` (store::faults); failed is for good.
                        failed: v.is_failed(),
                    }
                })
                .collect(),
        }
    }

    fn full_report(&self) -> spb::ContainerReport {
        spb::ContainerReport {
            replicas: self
                .store
                .descriptors()
                .iter()
                .map(|d| d.to_replica())
                .collect(),
        }
    }

    fn pipeline_reports(&self) -> Vec<spb::PipelineReport> {
        self.pipelines
            .all()
            .iter()
            .map(|p| (&p.report()).into())
            .collect()
    }

    /// A CLOSE action for every unhealthy pipeline and every pipeline this node could not
    /// open, in every heartbeat until SCM closes it.
    fn pipeline_actions(&self) -> Vec<spb::PipelineAction> {
        let close = |pipeline_id, reason| spb::PipelineAction {
            pipeline_id,
            action: spb::pipeline_action::Action::Close as i32,
            reason,
        };
        self.pipelines
            .all()
            .iter()
            .filter(|p| !p.state.is_healthy())
            .map(|p| close(p.id, p.state.unhealthy_reason().unwrap_or_default()))
            .chain(
                self.pipelines
                    .broken()
                    .into_iter()
                    .map(|(id, why)| close(id, why)),
            )
            .collect()
    }

    /// Runs until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let mut at = 0usize;
        let mut current = self.addrs.first().cloned().unwrap_or_default();
        let mut last_full: Option<Instant> = None;
        // The first heartbeat (a registration) goes at once.
        let mut wait = Duration::ZERO;
        let mut failures = 0u32;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                // A pipeline's leader changed: report it now.
                _ = self.pipelines.report_now.notified() => {}
            }
            let r = self.beat(&current, &mut last_full).await;
            match r {
                Ok(()) => {
                    failures = 0;
                    self.status.heartbeats.fetch_add(1, Ordering::Relaxed);
                    *self.status.leader.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(current.clone());
                }
                Err(s) => {
                    self.status.failures.fetch_add(1, Ordering::Relaxed);
                    match rozone_rpc::leader_hint(&s) {
                        // An SCM answered and named the leader: retry there soon.
                        Some(h) if h != current => {
                            current = h;
                            failures = 1;
                        }
                        _ => {
                            failures = failures.saturating_add(1);
                            at = (at + 1) % self.addrs.len().max(1);
                            current = self.addrs.get(at).cloned().unwrap_or_default();
                        }
                    }
                    tracing::debug!(scm = %current, error = %s.message(), "SCM heartbeat failed");
                }
            }
            wait = self.next_wait(failures);
        }
    }

    /// Until the next heartbeat: sooner while registered and in no healthy pipeline, as
    /// the SCM delivers a new pipeline only in a heartbeat reply.
    fn next_wait(&self, failures: u32) -> Duration {
        heartbeat_wait(
            self.status.registered.load(Ordering::SeqCst),
            self.pipelines.all().iter().any(|p| p.state.is_healthy()),
            failures,
            self.interval,
            self.interval_without_pipeline,
        )
    }

    async fn beat(&self, addr: &str, last_full: &mut Option<Instant>) -> Result<(), tonic::Status> {
        // The ring's cached channel: no new connection per heartbeat.
        let ch = self
            .ring
            .channel_to(addr)
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let mut c = ScmDatanodeClient::new(ch);
        if !self.status.registered.load(Ordering::SeqCst) {
            let req = spb::RegisterRequest {
                datanode: Some(self.details.clone()),
                node_report: Some(self.node_report()),
                container_report: Some(self.full_report()),
                pipeline_reports: self.pipeline_reports(),
            };
            let reply = within(c.register(timed(req))).await?.into_inner();
            tracing::info!(scm = %addr, cluster_id = %reply.cluster_id, "registered with SCM");
            self.tokens.set_keys(reply.secret_keys);
            self.status.registered.store(true, Ordering::SeqCst);
            *last_full = Some(Instant::now());
            // Everything was just reported in full.
            let _ = self.store.take_changed();
            return Ok(());
        }
        let full_due = last_full.is_none_or(|t| t.elapsed() >= self.full_report_interval);
        let changed = self.store.take_changed();
        let statuses = self.executor.take_statuses();
        let req = spb::HeartbeatRequest {
            datanode_id: self.details.id,
            node_report: Some(self.node_report()),
            full_container_report: full_due.then(|| self.full_report()),
            incremental_container_report: changed.iter().map(|d| d.to_replica()).collect(),
            pipeline_reports: self.pipeline_reports(),
            pipeline_actions: self.pipeline_actions(),
            command_status: statuses.iter().map(Into::into).collect(),
        };
        match within(c.heartbeat(timed(req))).await {
            Ok(r) => {
                if full_due {
                    *last_full = Some(Instant::now());
                }
                let r = r.into_inner();
                self.tokens.set_keys(r.secret_keys);
                if r.reregister {
                    tracing::info!(scm = %addr, "SCM asked to register again");
                    self.status.registered.store(false, Ordering::SeqCst);
                }
                for cmd in r.commands {
                    self.executor.submit(cmd.into());
                }
                Ok(())
            }
            Err(s) => {
                self.store.requeue_changed(changed.iter().map(|d| d.id));
                self.executor.requeue_statuses(statuses);
                Err(s)
            }
        }
    }
}

/// `call`, failed with DEADLINE_EXCEEDED when the SCM does not answer within the timeout.
async fn within<T>(
    call: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<T, tonic::Status> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            Err(tonic::Status::deadline_exceeded(format!(
                "no answer from the SCM within {CALL_TIMEOUT:?}"
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::heartbeat_wait;
    use std::time::Duration;

    #[test]
    fn heartbeats_come_sooner_while_registered_without_a_healthy_pipeline() {
        let (i, fast) = (Duration::from_secs(10), Duration::from_millis(250));
        assert_eq!(heartbeat_wait(true, false, 0, i, fast), fast);
        assert_eq!(heartbeat_wait(true, true, 0, i, fast), i);
        assert_eq!(heartbeat_wait(false, false, 0, i, fast), i);
        // Never slower than the configured interval.
        assert_eq!(heartbeat_wait(true, false, 0, fast, i), fast);
    }

    #[test]
    fn failed_heartbeats_retry_soon_then_slow_down_to_the_interval() {
        let (i, fast) = (Duration::from_secs(10), Duration::from_millis(250));
        let waits: Vec<u128> = [1, 2, 3, 39, 40, 41]
            .into_iter()
            .map(|f| heartbeat_wait(false, false, f, i, fast).as_millis())
            .collect();
        assert_eq!(waits, [250, 500, 750, 9750, 10000, 10000]);
        assert_eq!(heartbeat_wait(true, true, u32::MAX, i, fast), i);
    }
}
