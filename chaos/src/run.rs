//! One chaos run: start the cluster, run the workload while the seed's faults are
//! injected, heal, check the end state and the history.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rozone_client::om::{OmClient, ReadMode};
use rozone_client::{Client, ClientConfig};

use crate::checker::lease::LeaseReport;
use crate::checker::{self, Call, Op, Outcome, Report};
use crate::cluster::{Cluster, Kind, Size, FOLLOWER_LEASE, WAIT};
use crate::containers::{self, DeletedLog};
use crate::data::{self, DataLog, DATA_BUCKET};
use crate::faults::{self, Families, Fault, FaultKind, Target};
use crate::workload::{self, Recorder, BUCKET, VOLUME};
use crate::{membership, rings};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    pub duration: Duration,
    pub families: Families,
    pub size: Size,
    pub clients: u32,
    pub keys: usize,
    pub volumes: usize,
    pub bins: PathBuf,
    pub out: Option<PathBuf>,
    pub check_timeout: Duration,
    /// `ROZONE_FAILPOINTS` for every daemon (e.g. `raft-lease-bypass=return` re-creates the
    /// stale read the leader lease fixed, to show the checker finds it).
    pub daemon_failpoints: Option<String>,
    /// Write the history and logs to `out` even when the run passes.
    pub keep: bool,
}

/// What a run found.
pub struct RunReport {
    pub seed: u64,
    pub faults: Vec<String>,
    pub report: Report,
    pub history: Vec<Op>,
    /// The LOCAL_LEASE reads and their check against the lease bound.
    pub lease_reads: Vec<Op>,
    pub lease: LeaseReport,
    pub end_state: Vec<String>,
    pub workload: Duration,
    pub start_took: Duration,
    /// The data workload's counts.
    pub data: String,
    /// The containers' end state (counts by state, how many were checked).
    pub containers: String,
}

impl RunReport {
    pub fn passed(&self) -> bool {
        self.report.ok() && self.lease.ok() && self.end_state.is_empty()
    }

    /// The summary printed for every run.
    pub fn summary(&self) -> String {
        let mut counts: BTreeMap<String, [usize; 3]> = BTreeMap::new();
        for op in &self.history {
            let name = match op.call {
                Call::Put(_) => "put",
                Call::Get => "get",
                Call::Delete => "delete",
                Call::CreateIfAbsent(_) => "create-if-absent",
            };
            let c = counts.entry(name.into()).or_default();
            match op.outcome {
                Outcome::Ok(_) => c[0] += 1,
                Outcome::Fail => c[1] += 1,
                Outcome::Info => c[2] += 1,
            }
        }
        let mut s = format!(
            "seed {}\nfaults injected ({}):\n",
            self.seed,
            self.faults.len()
        );
        for f in &self.faults {
            s.push_str(&format!("  {f}\n"));
        }
        s.push_str(&format!(
            "cluster start {:.1}s, workload {:.1}s\nops (ok/fail/info):\n",
            self.start_took.as_secs_f64(),
            self.workload.as_secs_f64()
        ));
        for (k, [ok, fail, info]) in &counts {
            s.push_str(&format!("  {k}: {ok}/{fail}/{info}\n"));
        }
        let per_min = self.report.checked as f64 / self.workload.as_secs_f64().max(1.0) * 60.0;
        s.push_str(&format!(
            "checked {} ops ({per_min:.0} per minute of run) on {} registers\n",
            self.report.checked,
            self.report.keys.len()
        ));
        let served = self
            .lease_reads
            .iter()
            .filter(|op| matches!(op.outcome, Outcome::Ok(_)))
            .count();
        s.push_str(&format!(
            "LOCAL_LEASE reads: {served} answered of {}, {} checked against the {}ms bound, {} beyond it\n",
            self.lease_reads.len(),
            self.lease.checked,
            FOLLOWER_LEASE.as_millis(),
            self.lease.violations.len()
        ));
        s.push_str(&format!("{}\n{}\n", self.data, self.containers));
        for e in &self.end_state {
            s.push_str(&format!("end state: {e}\n"));
        }
        for (op, why) in self.lease.violations.iter().take(20) {
            s.push_str(&format!("LOCAL_LEASE read beyond the bound: {op}: {why}\n"));
        }
        for (k, window) in self.report.violations() {
            s.push_str(&format!("violation on {k}, minimal window:\n"));
            for op in window {
                s.push_str(&format!("  {op}\n"));
            }
        }
        s.push_str(&format!(
            "verdict: {}{}{}\n",
            self.report.verdict(),
            if self.lease.ok() {
                ""
            } else {
                "; LOCAL_LEASE reads beyond the bound"
            },
            if self.end_state.is_empty() {
                ""
            } else {
                "; end-state checks FAILED"
            }
        ));
        s
    }
}

/// Runs one seed.
pub async fn run(o: &Options) -> anyhow::Result<RunReport> {
    for k in [Kind::Scm, Kind::Om, Kind::Datanode] {
        let b = o.bins.join(k.binary());
        if !b.is_file() {
            bail!(
                "{} not found: build the daemons first (cargo build --bins) or give --bin-dir",
                b.display()
            );
        }
    }
    let tmp = tempfile::tempdir().context("temp dir")?;
    let mut cluster = Cluster::configure(tmp.path(), &o.bins, o.size)?;
    cluster.failpoints = o.daemon_failpoints.clone();
    let cluster = Arc::new(Mutex::new(cluster));
    let result = run_in(o, &cluster).await;
    let keep = match &result {
        Ok(r) => o.keep || !r.passed(),
        Err(_) => true,
    };
    if let (true, Some(out)) = (keep, &o.out) {
        save(out, tmp.path(), result.as_ref().ok())?;
        eprintln!("rozone-chaos: history and daemon logs in {}", out.display());
    }
    result
}

fn lock(c: &Mutex<Cluster>) -> std::sync::MutexGuard<'_, Cluster> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

async fn run_in(o: &Options, cluster: &Arc<Mutex<Cluster>>) -> anyhow::Result<RunReport> {
    let c2 = Arc::clone(cluster);
    let start_took = tokio::task::spawn_blocking(move || lock(&c2).start()).await??;
    let (om_addrs, scm_addrs) = {
        let c = lock(cluster);
        (c.client_addrs(Kind::Om), c.client_addrs(Kind::Scm))
    };
    let client = Arc::new(Client::new(&ClientConfig {
        om_addrs: om_addrs.clone(),
        scm_addrs,
        // Several attempts per call: the client library resends a write whose attempt timed
        // out or was refused, and the servers' retry cache must apply it at most once
        // (RELIABILITY.md, violation 1, fixed). Short attempts make such resends common.
        call_deadline: Duration::from_secs(4),
        attempt_timeout: Duration::from_secs(1),
        insecure: true,
        ..ClientConfig::default()
    })?);
    setup(&client.om).await?;

    let rec = Arc::new(Recorder::new());
    let regs = Arc::new(workload::registers(o.keys, o.volumes));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers: Vec<_> = (0..o.clients)
        .map(|i| {
            tokio::spawn(workload::client_loop(
                client.om.clone(),
                Arc::clone(&rec),
                Arc::clone(&regs),
                i,
                o.seed,
                Arc::clone(&stop),
            ))
        })
        .collect();
    // One reader pinned to each OM, as a client on one side of a partition that reaches
    // only that member: the shared clients follow the leader together, so without these
    // nobody would ask a cut-off old leader anything once a new one answers. Each read
    // dials a fresh client, in DEFAULT or LOCAL_LEASE mode (see
    // `workload::pinned_reader_loop`).
    for (i, addr) in om_addrs.iter().enumerate() {
        let pinned = ClientConfig {
            om_addrs: vec![addr.clone()],
            call_deadline: Duration::from_secs(2),
            attempt_timeout: Duration::from_secs(1),
            insecure: true,
            ..ClientConfig::default()
        };
        // A config the client library refuses fails here, not in the loop.
        Client::new(&pinned)?;
        let (rec, regs, stop) = (Arc::clone(&rec), Arc::clone(&regs), Arc::clone(&stop));
        let (id, seed) = (o.clients + i as u32, o.seed);
        workers.push(tokio::spawn(async move {
            if let Err(e) = workload::pinned_reader_loop(pinned, rec, regs, id, seed, stop).await {
                eprintln!("rozone-chaos: pinned reader {id}: {e:#}");
            }
        }));
    }
    let data_log = Arc::new(DataLog::default());
    let writer = tokio::spawn(data::writer_loop(
        Arc::clone(&client),
        Arc::clone(&data_log),
        o.seed,
        Arc::clone(&stop),
    ));
    let deleted_log = Arc::new(DeletedLog::default());
    let monitor = tokio::spawn(containers::monitor_loop(
        Arc::clone(&client),
        Arc::clone(&deleted_log),
        Arc::clone(&stop),
    ));
    let schedule = faults::schedule(o.seed, o.duration, o.families, o.size.datanodes > 0);
    let mut injected = Vec::new();
    let began = Instant::now();
    for f in schedule {
        tokio::time::sleep_until((began + f.at).into()).await;
        let line = match inject(cluster, &client, &f).await {
            Ok(l) => l,
            Err(e) => format!("{:?} {:?} {:?}: error {e:#}", f.kind, f.ring, f.target),
        };
        injected.push(format!("{:>6.1}s {line}", f.at.as_secs_f64()));
    }
    tokio::time::sleep_until((began + o.duration).into()).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.context("client task")?;
    }
    writer.await.context("data writer task")?;
    monitor.await.context("container monitor task")?;
    let workload = began.elapsed();

    let mut end_state = Vec::new();
    match heal(cluster).await {
        Ok(exited) => end_state.extend(exited),
        Err(e) => end_state.push(format!("heal: {e:#}")),
    }
    for kind in [Kind::Om, Kind::Scm] {
        if let Err(e) = one_leader(cluster, kind).await {
            end_state.push(format!("{kind:?} ring: {e:#}"));
        }
    }
    if let Err(e) = caught_up(&client.om).await {
        end_state.push(format!("OM ring: {e:#}"));
    }
    // Every register read once more, linearizably, after healing: an acknowledged write
    // that was lost shows up here as a violation of the last read.
    for reg in regs.iter() {
        if let Err(e) = final_read(&client.om, &rec, reg).await {
            end_state.push(format!("final read of {reg}: {e:#}"));
        }
    }
    end_state.extend(data::verify_all(&client, &data_log, WAIT).await);
    // Every CLOSED container back to its healthy replicas, equal on every datanode; no
    // deleted container back (see `containers`).
    let lost = lock(cluster).lost_datanodes();
    let (containers, problems) = containers::verify(&client, &deleted_log, &lost, WAIT).await;
    end_state.extend(problems);
    let history = rec.ops();
    let h2 = history.clone();
    let timeout = o.check_timeout;
    let report = tokio::task::spawn_blocking(move || checker::check(&h2, timeout)).await?;
    let lease_reads = rec.lease_ops();
    let lease = checker::lease::check(&history, &lease_reads, FOLLOWER_LEASE);
    Ok(RunReport {
        seed: o.seed,
        faults: injected,
        report,
        history,
        lease_reads,
        lease,
        end_state,
        workload,
        start_took,
        data: data_log.summary(),
        containers,
    })
}

/// The datanode failpoint of the disk faults (payload `return(<errno>)`).
const DISK_FAILPOINT: &str = "dn-disk-fault";

/// The volume and buckets, then a first put: the cluster serves writes (an open pipeline,
/// safe mode left).
async fn setup(om: &OmClient) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    while Instant::now() < deadline {
        let r = async {
            match om.create_volume(VOLUME, "", None).await {
                Err(e) if !e.is_already_exists() => return Err(e),
                _ => {}
            }
            for bucket in [BUCKET, DATA_BUCKET] {
                match om.create_bucket(VOLUME, bucket, None).await {
                    Err(e) if !e.is_already_exists() => return Err(e),
                    _ => {}
                }
            }
            let open = om
                .open_key(VOLUME, BUCKET, "probe", 0, &Default::default())
                .await?;
            om.commit_key(&open, &[], "probe").await?;
            Ok(())
        }
        .await;
        match r {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the cluster did not accept a first put within {WAIT:?}: {last}")
}

fn members(c: &Cluster, kind: Kind) -> Vec<(u64, String)> {
    c.nodes
        .values()
        .filter(|n| n.kind == kind)
        .map(|n| (n.id, n.client_addr.clone()))
        .collect()
}

/// Applies one fault and heals it; returns what was done.
async fn inject(
    cluster: &Arc<Mutex<Cluster>>,
    client: &Client,
    f: &Fault,
) -> anyhow::Result<String> {
    let (name, leader) = if f.ring == Kind::Datanode {
        let names = lock(cluster).names(Kind::Datanode);
        let i = (f.at.as_millis() as usize) % names.len().max(1);
        let name = names.get(i).context("no datanode")?.clone();
        (name, 0)
    } else {
        let m = members(&lock(cluster), f.ring);
        let Some(leader) = rings::leader(f.ring, &m).await else {
            return Ok(format!(
                "{:?} {:?}: skipped, no ready leader",
                f.kind, f.ring
            ));
        };
        let id = match f.target {
            Target::Leader => leader,
            Target::Follower => m
                .iter()
                .map(|(i, _)| *i)
                .find(|i| *i != leader)
                .unwrap_or(leader),
        };
        (format!("{}{id}", f.ring.prefix()), leader)
    };
    let others: Vec<String> = lock(cluster)
        .names(f.ring)
        .into_iter()
        .filter(|n| *n != name)
        .collect();
    let what = format!(
        "{:?} {name} ({:?}) for {:.1}s",
        f.kind,
        f.target,
        f.hold.as_secs_f64()
    );
    match f.kind {
        FaultKind::Kill => {
            lock(cluster).kill(&name)?;
            tokio::time::sleep(f.hold).await;
            lock(cluster).spawn(&name, &[])?;
        }
        FaultKind::Pause => {
            lock(cluster).signal(&name, "STOP")?;
            tokio::time::sleep(f.hold).await;
            lock(cluster).signal(&name, "CONT")?;
        }
        kind if faults::is_network(kind) && f.ring == Kind::Datanode => {
            lock(cluster).cut_from_scm(&name)?;
            tokio::time::sleep(f.hold).await;
            lock(cluster).heal_all()?;
            return Ok(format!(
                "CutFromScm {name} for {:.1}s",
                f.hold.as_secs_f64()
            ));
        }
        FaultKind::Isolate | FaultKind::CutInbound | FaultKind::CutOutbound => {
            {
                let c = lock(cluster);
                if f.kind != FaultKind::CutOutbound {
                    c.block("*", &name)?;
                }
                if f.kind != FaultKind::CutInbound {
                    for o in &others {
                        c.block(&name, o)?;
                    }
                }
            }
            tokio::time::sleep(f.hold).await;
            lock(cluster).heal_all()?;
        }
        FaultKind::Replace if f.ring == Kind::Datanode => {
            return membership::lose_datanode(cluster, &name);
        }
        FaultKind::Replace => {
            let id = lock(cluster).node(&name)?.id;
            return membership::replace(cluster, client, f.ring, id).await;
        }
        FaultKind::DiskError | FaultKind::DiskFull => {
            let errno = if f.kind == FaultKind::DiskFull {
                "enospc"
            } else {
                "eio"
            };
            lock(cluster).failpoint(&name, DISK_FAILPOINT, Some(&format!("return({errno})")))?;
            tokio::time::sleep(f.hold).await;
            lock(cluster).failpoint(&name, DISK_FAILPOINT, None)?;
            if f.kind == FaultKind::DiskError {
                // The operator's disk swap: a failed volume comes back with a restart.
                let mut c = lock(cluster);
                c.kill(&name)?;
                c.spawn(&name, &[])?;
            }
        }
        FaultKind::Transfer => {
            let to = lock(cluster)
                .nodes
                .values()
                .filter(|n| n.kind == f.ring && n.id != leader)
                .map(|n| n.id)
                .next()
                .context("no other member")?;
            let r = match f.ring {
                Kind::Om => client.om.transfer_leader(to).await.map(|_| ()),
                _ => client.scm()?.transfer_leader(to).await.map(|_| ()),
            };
            return Ok(match r {
                Ok(()) => format!("Transfer {:?} leader {leader} -> {to}", f.ring),
                Err(e) => format!(
                    "Transfer {:?} leader {leader} -> {to}: refused ({e})",
                    f.ring
                ),
            });
        }
    }
    Ok(what)
}

/// Heals every link and resumes every paused process. A process that exited by itself
/// (the harness restarts every one it kills) is a finding: reported, then restarted.
async fn heal(cluster: &Arc<Mutex<Cluster>>) -> anyhow::Result<Vec<String>> {
    let mut c = lock(cluster);
    c.heal_all()?;
    let names: Vec<String> = c
        .nodes
        .values()
        .filter(|n| !n.lost)
        .map(|n| n.name.clone())
        .collect();
    let mut exited = Vec::new();
    for n in names {
        if !c.running(&n) {
            let tail = c
                .node(&n)?
                .daemon
                .as_ref()
                .map(|d| d.output())
                .unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            exited.push(format!("{n} exited by itself; last lines: {:?}", tail));
            let _ = c.kill(&n);
            c.spawn(&n, &[])?;
        }
    }
    Ok(exited)
}

/// Every member of the ring names the same ready leader.
async fn one_leader(cluster: &Arc<Mutex<Cluster>>, kind: Kind) -> anyhow::Result<()> {
    let m = members(&lock(cluster), kind);
    let deadline = Instant::now() + WAIT;
    let mut last = Vec::new();
    while Instant::now() < deadline {
        last.clear();
        for (_, addr) in &m {
            last.push(rings::view(kind, addr).await);
        }
        // Followers answer leader_ready = false (it is the answering node's own
        // readiness): every member names the same leader, and that one says it is ready.
        let ids: Vec<Option<u64>> = last.iter().map(|v| v.and_then(|x| x.0)).collect();
        if let Some(Some(l)) = ids.first().copied() {
            let leader_ready = m
                .iter()
                .zip(&last)
                .any(|((id, _), v)| *id == l && v.is_some_and(|x| x.1));
            if leader_ready && ids.iter().all(|i| *i == Some(l)) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("no single ready leader within {WAIT:?}; views (leader, ready): {last:?}")
}

/// Every OM member has applied as far as the leader.
async fn caught_up(om: &OmClient) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    while Instant::now() < deadline {
        match om.roles().await {
            Ok(r) => {
                let idx: Vec<Option<u64>> = r.members.iter().map(|m| m.applied_index).collect();
                if idx.iter().all(|i| i.is_some() && *i == idx[0]) && !idx.is_empty() {
                    return Ok(());
                }
                last = format!("applied indexes {idx:?}");
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("members not caught up within {WAIT:?}: {last}")
}

async fn final_read(om: &OmClient, rec: &Recorder, reg: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let before = rec.ops().len();
        workload::run_op(om, rec, u32::MAX, reg, Call::Get, ReadMode::Linearizable).await;
        let ops = rec.ops();
        if ops.len() > before && matches!(ops[ops.len() - 1].outcome, Outcome::Ok(_)) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("no answer within {WAIT:?}")
}

/// Writes the history, the summary and the daemon logs to `out`.
/// Writes `ops` to `path`, one JSON object a line.
fn write_jsonl(path: &std::path::Path, ops: &[Op]) -> anyhow::Result<()> {
    let mut h = String::new();
    for op in ops {
        h.push_str(&serde_json::to_string(op)?);
        h.push('\n');
    }
    std::fs::write(path, h)?;
    Ok(())
}

fn save(out: &std::path::Path, dir: &std::path::Path, r: Option<&RunReport>) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    if let Some(r) = r {
        write_jsonl(&out.join("history.jsonl"), &r.history)?;
        write_jsonl(&out.join("lease-reads.jsonl"), &r.lease_reads)?;
        std::fs::write(out.join("summary.txt"), r.summary())?;
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log" || x == "toml") {
            std::fs::copy(&p, out.join(e.file_name()))?;
        }
    }
    Ok(())
}
