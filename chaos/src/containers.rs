//! Container end-state checks (issue 14): after healing, every CLOSED container the SCM knows
//! is back to its replication factor (3) of healthy replicas that agree with each other, and
//! no container the SCM deleted comes back.
//!
//! Only existing APIs are asked:
//! - the SCM's admin API through the client library: `ListContainers` (every container and
//!   its state) and `ContainerInfo` (the leader's replica map: per replica its datanode,
//!   state, BCSID, block count, used bytes and whether the SCM counts it healthy), plus
//!   `ListDatanodes` for each datanode's container address;
//! - each datanode's `GetContainer` (the replica's own descriptor: state, BCSID, block
//!   count, used bytes, the container checksum set when it closed, and the content digest
//!   with its rule version). The SCM's replica map does not carry the checksum or digest, so
//!   the replicas are compared on what the datanodes themselves answer.
//!
//! CLOSING and QUASI_CLOSED are passages, not end states: a container whose pipeline closed
//! (a datanode fault) is quasi-closed by its members and then force-closed by the SCM at the
//! highest BCSID a majority reached, so after healing it must be CLOSED (then checked as
//! below). One left CLOSING was RELIABILITY.md's finding 2.
//!
//! Replicas of one CLOSED container must agree on **state (CLOSED), BCSID, block count,
//! container checksum (non-empty) and content digest (same non-zero digest version)**.
//! Used bytes are not compared: an imported copy holds only committed blocks, while a
//! replica that applied a chunk write whose block was never committed still counts its
//! bytes, so equal data may differ there.
//!
//! A datanode lost for good (docs/chaos.md) must be DEAD to the SCM, no OPEN pipeline may
//! hold it, and every OPEN container must sit on an OPEN pipeline without it: its pipelines
//! closed, its containers close and are copied to the datanodes left (then checked as
//! above). Otherwise a run that loses a datanode shortly before its end would pass with
//! containers that only the SCM's next passes would mend.
//!
//! "No container resurrected": a container the SCM records as DELETED (seen so during the
//! run by [`monitor_loop`] or at the end) must stay DELETED, the SCM must list no replica of
//! it, and no datanode may serve it (`GetContainer` answers NOT_FOUND for a tombstone). A
//! container seen DELETING must not go back to an earlier state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rozone_client::scm::{Container, ScmClient};
use rozone_client::Client;
use rozone_proto::datanode as dn;
use tonic::Code;

/// One bounded call to a datanode.
const CALL: Duration = Duration::from_secs(2);
/// Pause between two polls of the end state.
const POLL: Duration = Duration::from_millis(500);
/// Problems shown when the check gives up (the rest are counted).
const SHOWN: usize = 12;

/// Containers seen deleting or deleted while the workload ran.
#[derive(Default)]
pub struct DeletedLog {
    deleting: Mutex<BTreeSet<u64>>,
    deleted: Mutex<BTreeSet<u64>>,
}

impl DeletedLog {
    fn note(&self, containers: &[Container]) {
        for c in containers {
            let set = match c.state.as_str() {
                "DELETING" => &self.deleting,
                "DELETED" => &self.deleted,
                _ => continue,
            };
            set.lock().unwrap_or_else(|p| p.into_inner()).insert(c.id);
        }
    }
    fn get(&self) -> (BTreeSet<u64>, BTreeSet<u64>) {
        (
            self.deleting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            self.deleted
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

/// While the workload runs: every second, the SCM's containers (errors during faults are
/// expected and skipped), so a container deleted during the run is known at the end even
/// if the SCM's record of it were lost.
pub async fn monitor_loop(client: Arc<Client>, log: Arc<DeletedLog>, stop: Arc<AtomicBool>) {
    let Ok(scm) = client.scm() else { return };
    while !stop.load(Ordering::Relaxed) {
        if let Ok(Ok(list)) = tokio::time::timeout(CALL, scm.list_containers(None, 0)).await {
            log.note(&list);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A datanode's answer for one container.
enum Served {
    Replica(dn::ContainerDescriptor),
    Absent,
    /// No answer (unreachable, failed volume, timeout): unknown.
    Unknown(String),
}

async fn get_container(client: &Client, addr: &str, id: u64) -> Served {
    let mut c = match client.datanodes.client(addr) {
        Ok(c) => c,
        Err(e) => return Served::Unknown(e.to_string()),
    };
    let req = dn::GetContainerRequest { container_id: id };
    match tokio::time::timeout(CALL, c.get_container(req)).await {
        Ok(Ok(r)) => match r.into_inner().container {
            Some(d) => Served::Replica(d),
            None => Served::Unknown("a reply without a descriptor".into()),
        },
        Ok(Err(s)) if s.code() == Code::NotFound => Served::Absent,
        Ok(Err(s)) => Served::Unknown(format!("{:?}: {}", s.code(), s.message())),
        Err(_) => Served::Unknown(format!("no answer within {CALL:?}")),
    }
}

/// What one poll found.
#[derive(Default)]
struct Poll {
    /// Not (yet) as it must be; may still converge.
    pending: Vec<String>,
    /// A container that came back: a finding whenever it is seen.
    resurrected: Vec<String>,
    counts: BTreeMap<String, usize>,
    closed_checked: usize,
}

/// The comparable part of a replica's descriptor.
fn comparable(d: &dn::ContainerDescriptor) -> (i32, u64, u64, &str, u64, u32) {
    (
        d.state,
        d.bcsid,
        d.block_count,
        d.checksum.as_str(),
        d.content_digest,
        d.digest_version,
    )
}

fn describe(dn_id: u64, d: &dn::ContainerDescriptor) -> String {
    format!(
        "dn {dn_id}: state {:?} bcsid {} blocks {} used {} checksum {:?} digest {:#x} (v{})",
        d.state(),
        d.bcsid,
        d.block_count,
        d.used_bytes,
        d.checksum,
        d.content_digest,
        d.digest_version
    )
}

/// One CLOSED container: `factor` replicas, all healthy, whose descriptors agree.
async fn check_closed(
    client: &Client,
    scm: &ScmClient,
    addrs: &BTreeMap<u64, String>,
    c: &Container,
    p: &mut Poll,
) {
    let info = match scm.container_info(c.id).await {
        Ok(i) => i,
        Err(e) => {
            p.pending
                .push(format!("container {}: container info: {e}", c.id));
            return;
        }
    };
    let factor = c.replication_factor as usize;
    let healthy = info.replicas.iter().filter(|r| r.healthy).count();
    if info.replicas.len() != factor || healthy != factor {
        let replicas: Vec<String> = info
            .replicas
            .iter()
            .map(|r| {
                format!(
                    "dn {} {} bcsid {} healthy {}",
                    r.datanode_id, r.state, r.bcsid, r.healthy
                )
            })
            .collect();
        p.pending.push(format!(
            "container {} (CLOSED, factor {factor}, bcsid {}): {healthy} healthy of {} replicas ({}), replication {}",
            c.id,
            c.bcsid,
            info.replicas.len(),
            replicas.join("; "),
            info.replication_health
        ));
        return;
    }
    let mut seen: Vec<(u64, dn::ContainerDescriptor)> = Vec::new();
    for r in &info.replicas {
        let Some(addr) = addrs.get(&r.datanode_id) else {
            p.pending.push(format!(
                "container {}: replica on dn {}, which the SCM does not list",
                c.id, r.datanode_id
            ));
            return;
        };
        match get_container(client, addr, c.id).await {
            Served::Replica(d) => seen.push((r.datanode_id, d)),
            Served::Absent => {
                p.pending.push(format!(
                    "container {}: the SCM counts a healthy replica on dn {}, which does not serve it",
                    c.id, r.datanode_id
                ));
                return;
            }
            Served::Unknown(e) => {
                p.pending
                    .push(format!("container {}: dn {}: {e}", c.id, r.datanode_id));
                return;
            }
        }
    }
    let first = comparable(&seen[0].1);
    let agree = seen.iter().all(|(_, d)| comparable(d) == first);
    let closed = seen
        .iter()
        .all(|(_, d)| d.state() == dn::ContainerState::Closed);
    let digests = seen
        .iter()
        .all(|(_, d)| !d.checksum.is_empty() && d.digest_version > 0);
    if !(agree && closed && digests) {
        let what: Vec<String> = seen.iter().map(|(i, d)| describe(*i, d)).collect();
        p.pending.push(format!(
            "container {} (CLOSED): replicas disagree or lack a checksum/digest: {}",
            c.id,
            what.join("; ")
        ));
        return;
    }
    p.closed_checked += 1;
}

/// A container recorded DELETED: still DELETED, no replica in the SCM's map, none served.
async fn check_deleted(
    client: &Client,
    scm: &ScmClient,
    addrs: &BTreeMap<u64, String>,
    now: Option<&Container>,
    id: u64,
    p: &mut Poll,
) {
    match now {
        None => p.resurrected.push(format!(
            "container {id} was DELETED and the SCM no longer lists it"
        )),
        Some(c) if c.state != "DELETED" => p.resurrected.push(format!(
            "container {id} was DELETED and is {} again",
            c.state
        )),
        Some(_) => {}
    }
    match scm.container_info(id).await {
        Ok(info) => {
            for r in &info.replicas {
                p.resurrected.push(format!(
                    "container {id} is DELETED but the SCM has a {} replica on dn {} (bcsid {}, {} blocks, reported {} ms ago)",
                    r.state, r.datanode_id, r.bcsid, r.block_count, r.last_report_age_ms
                ));
            }
        }
        Err(e) => p
            .pending
            .push(format!("container {id} (DELETED): container info: {e}")),
    }
    for (dn_id, addr) in addrs {
        match get_container(client, addr, id).await {
            Served::Absent => {}
            Served::Replica(d) => p.resurrected.push(format!(
                "container {id} is DELETED but {}",
                describe(*dn_id, &d)
            )),
            Served::Unknown(e) => p
                .pending
                .push(format!("container {id} (DELETED): dn {dn_id}: {e}")),
        }
    }
}

async fn poll(client: &Client, log: &DeletedLog, lost: &[u64]) -> Poll {
    let mut p = Poll::default();
    let scm = match client.scm() {
        Ok(s) => s,
        Err(e) => {
            p.pending.push(e.to_string());
            return p;
        }
    };
    let list = match scm.list_containers(None, 0).await {
        Ok(l) => l,
        Err(e) => {
            p.pending.push(format!("list containers: {e}"));
            return p;
        }
    };
    // A DEAD datanode (one lost for good) is not asked: the SCM dropped its replicas, and
    // it answers nothing.
    let datanodes = match scm.list_datanodes().await {
        Ok(d) => d,
        Err(e) => {
            p.pending.push(format!("list datanodes: {e}"));
            return p;
        }
    };
    for d in datanodes.iter().filter(|d| lost.contains(&d.datanode.id)) {
        if d.health != "DEAD" {
            p.pending.push(format!(
                "datanode {} lost for good is {} to the SCM, not DEAD",
                d.datanode.id, d.health
            ));
        }
    }
    let addrs: BTreeMap<u64, String> = datanodes
        .into_iter()
        .filter(|s| s.health != "DEAD")
        .map(|s| (s.datanode.id, s.datanode.container_addr))
        .collect();
    let pipelines = match scm.list_pipelines(true).await {
        Ok(l) => l,
        Err(e) => {
            p.pending.push(format!("list pipelines: {e}"));
            return p;
        }
    };
    // OPEN pipelines without a lost member: where OPEN containers may stay.
    let mut usable = BTreeSet::new();
    for s in &pipelines {
        match s.pipeline.members.iter().find(|m| lost.contains(&m.id)) {
            Some(m) => p.pending.push(format!(
                "pipeline {} still OPEN with datanode {} lost for good",
                s.pipeline.id, m.id
            )),
            None => {
                usable.insert(s.pipeline.id);
            }
        }
    }
    log.note(&list);
    let (deleting, deleted) = log.get();
    let by_id: BTreeMap<u64, &Container> = list.iter().map(|c| (c.id, c)).collect();
    for c in &list {
        *p.counts.entry(c.state.clone()).or_default() += 1;
        match c.state.as_str() {
            "CLOSED" => check_closed(client, scm, &addrs, c, &mut p).await,
            // A passage (its pipeline closed: a datanode fault), not an end state.
            "CLOSING" | "QUASI_CLOSED" => p
                .pending
                .push(format!("container {} still {}", c.id, c.state)),
            "OPEN" if !lost.is_empty() && !usable.contains(&c.pipeline_id) => {
                p.pending.push(format!(
                    "container {} OPEN on pipeline {}, which is not OPEN without the lost datanode",
                    c.id, c.pipeline_id
                ))
            }
            _ => {}
        }
    }
    for id in &deleting {
        if let Some(c) = by_id.get(id) {
            if !matches!(c.state.as_str(), "DELETING" | "DELETED") {
                p.resurrected.push(format!(
                    "container {id} was DELETING and is {} again",
                    c.state
                ));
            }
        }
    }
    for id in &deleted {
        check_deleted(client, scm, &addrs, by_id.get(id).copied(), *id, &mut p).await;
    }
    p
}

/// Polls until every CLOSED container has its factor of healthy, agreeing replicas, no
/// deleted container is back and the datanodes in `lost` are DEAD with nothing left open
/// on them, or `wait` has passed. Returns the summary line and the
/// problems (empty: passed). A resurrection seen at any poll is a problem even if a later
/// poll no longer sees it.
pub async fn verify(
    client: &Client,
    log: &DeletedLog,
    lost: &[u64],
    wait: Duration,
) -> (String, Vec<String>) {
    let deadline = Instant::now() + wait;
    let started = Instant::now();
    let mut resurrected: Vec<String> = Vec::new();
    loop {
        let p = poll(client, log, lost).await;
        for r in p.resurrected {
            if !resurrected.contains(&r) {
                resurrected.push(r);
            }
        }
        let counts: Vec<String> = p.counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let line = format!(
            "containers: {} ({} CLOSED with every replica healthy and equal, {} deleted during the run or before the end, after {:.1}s)",
            if counts.is_empty() {
                "none".to_string()
            } else {
                counts.join(", ")
            },
            p.closed_checked,
            log.get().1.len(),
            started.elapsed().as_secs_f64()
        );
        if p.pending.is_empty() || Instant::now() >= deadline {
            let mut problems: Vec<String> = resurrected
                .into_iter()
                .map(|r| format!("resurrected: {r}"))
                .collect();
            let n = p.pending.len();
            problems.extend(
                p.pending
                    .into_iter()
                    .take(SHOWN)
                    .map(|e| format!("containers after {wait:?}: {e}")),
            );
            if n > SHOWN {
                problems.push(format!("containers: {} more problems", n - SHOWN));
            }
            return (line, problems);
        }
        tokio::time::sleep(POLL).await;
    }
}
