//! Waiting for a local cluster to be usable, with one deadline for the whole start: each
//! daemon's `/ready`, a new ring member counted as a voter, then ready SCM and OM leaders,
//! an open pipeline and safe mode left (asked over the admin RPCs).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use rozone_client::scm::ScmClient;
use rozone_client::{ClientConfig, RetryPolicy, Ring};
use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::ring::{RingInfoReply, RingInfoRequest};
use tonic::transport::Channel;
use tonic::Code;

use super::layout::{Kind, Node};
use super::procs;

pub struct Waiter {
    deadline: Instant,
    timeout: Duration,
    scm: Ring,
    om: Ring,
}

const POLL: Duration = Duration::from_millis(50);

/// One member's answer to the shared `Ring.RingInfo`, the same for the SCM and OM rings.
async fn ring_info(ch: Channel) -> Result<tonic::Response<RingInfoReply>, tonic::Status> {
    RingClient::new(ch).ring_info(RingInfoRequest {}).await
}

/// What `check` is waiting for while the `ring_name` ring's leader is not ready, if it is not.
async fn waiting_for_leader(ring_name: &str, ring: &Ring) -> Option<String> {
    match leader_ready(ring).await {
        Ok(true) => None,
        Ok(false) => Some(format!("a ready {ring_name} leader")),
        Err(e) => Some(format!("a ready {ring_name} leader ({e})")),
    }
}

/// Whether the ring's leader says it may serve. The member that answers first may be a
/// follower (after a restart any member can win the election), whose `leader_ready` is about
/// itself: its answer is followed to the leader it names.
async fn leader_ready(ring: &Ring) -> anyhow::Result<bool> {
    let v = ring.call("ring info", ring_info).await?;
    if v.leader_id == Some(v.node_id) {
        return Ok(v.leader_ready);
    }
    if v.leader_id.is_none() || v.leader_client_addr.is_empty() {
        return Ok(false);
    }
    let v = ring_info(ring.channel_to(&v.leader_client_addr)?)
        .await?
        .into_inner();
    Ok(v.leader_id == Some(v.node_id) && v.leader_ready)
}

fn last_log_line(dir: &Path, node: &Node) -> String {
    let text =
        std::fs::read_to_string(dir.join(node.name()).join("stderr.log")).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

impl Waiter {
    pub fn new(client: &ClientConfig, deadline: Instant) -> anyhow::Result<Self> {
        // Short calls: the loops below poll until the one deadline.
        let policy = RetryPolicy {
            deadline: Duration::from_secs(2),
            attempt_timeout: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let channels = client.security()?.channels();
        Ok(Self {
            deadline,
            timeout: deadline.saturating_duration_since(Instant::now()),
            scm: Ring::new("SCM", &client.scm_addrs, policy.clone(), channels.clone())?,
            om: Ring::new("OM", &client.om_addrs, policy, channels)?,
        })
    }

    fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Until the daemon answers 200 on `/ready`; fails at once if its process exited.
    pub async fn daemon_ready(
        &self,
        node: &Node,
        dir: &Path,
        exited: &mut dyn FnMut() -> Option<String>,
    ) -> anyhow::Result<()> {
        loop {
            let r = procs::ready(node).await;
            if r.is_ok() {
                return Ok(());
            }
            if let Some(status) = exited() {
                bail!(
                    "{} exited during start ({status}); its last log line: {}",
                    node.name(),
                    last_log_line(dir, node)
                );
            }
            if self.expired() {
                bail!(
                    "{} not ready after {:.0?}: {}; see {}",
                    node.name(),
                    self.timeout,
                    r.err().unwrap_or_default(),
                    dir.join(node.name()).join("stderr.log").display()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Until the ring's leader lists `node` as a voter (a bootstrapped member joins as a
    /// learner first).
    pub async fn voter(&self, node: &Node) -> anyhow::Result<()> {
        loop {
            let ring = match node.kind {
                Kind::Scm => &self.scm,
                Kind::Om => &self.om,
                Kind::Datanode | Kind::S3g => return Ok(()),
            };
            let voter = ring.call("ring info", ring_info).await.map(|r| {
                r.leader_id == Some(r.node_id)
                    && r.members.iter().any(|m| m.id == node.id && m.voter)
            });
            if let Ok(true) = voter {
                return Ok(());
            }
            if self.expired() {
                bail!(
                    "{} did not become a voter of its ring within {:.0?}",
                    node.name(),
                    self.timeout
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Until the cluster can take writes. Returns notes on checks the daemons cannot answer.
    pub async fn cluster_ready(&self, datanodes: usize) -> anyhow::Result<Vec<String>> {
        let scm = ScmClient::new(self.scm.clone());
        loop {
            let mut notes = Vec::new();
            let waiting = match self.check(&scm, datanodes, &mut notes).await {
                None => return Ok(notes),
                Some(w) => w,
            };
            // RUST_LOG=debug shows where a start spends its time.
            tracing::debug!(%waiting, "cluster not ready yet");
            if self.expired() {
                bail!(
                    "cluster not ready after {:.0?}: waiting for {waiting}",
                    self.timeout
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The first condition not met yet, if any.
    async fn check(
        &self,
        scm: &ScmClient,
        datanodes: usize,
        notes: &mut Vec<String>,
    ) -> Option<String> {
        if let Some(waiting) = waiting_for_leader("SCM", &self.scm).await {
            return Some(waiting);
        }
        if let Some(waiting) = waiting_for_leader("OM", &self.om).await {
            return Some(waiting);
        }
        let width = datanodes.min(3);
        match scm.list_pipelines(true).await {
            // A reported leader means the members created the pipeline's Raft group.
            Ok(ps)
                if ps.iter().any(|p| {
                    p.pipeline.members.len() >= width && p.pipeline.leader_id.is_some()
                }) => {}
            Ok(ps) => {
                return Some(format!(
                    "an open pipeline of {width} datanodes with a leader ({} open)",
                    ps.len()
                ))
            }
            Err(e) if e.code() == Some(Code::Unimplemented) => {
                notes.push("this SCM cannot list pipelines: not checked".into())
            }
            Err(e) => return Some(format!("an open pipeline ({e})")),
        }
        match scm.safe_mode().await {
            Ok(s) if !s.in_safe_mode => {}
            Ok(s) => {
                let why = s
                    .rules
                    .iter()
                    .filter(|r| !r.satisfied)
                    .map(|r| r.detail.clone())
                    .collect::<Vec<_>>()
                    .join("; ");
                return Some(format!("the SCM to leave safe mode ({why})"));
            }
            Err(e) if e.code() == Some(Code::Unimplemented) => {
                notes.push("this SCM cannot report safe mode: not checked".into())
            }
            Err(e) => return Some(format!("safe mode status ({e})")),
        }
        None
    }
}
