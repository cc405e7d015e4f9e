//! The workload: clients of the client library doing register operations on a small key
//! set, each recorded as invoke/ok/fail/info on one monotonic clock.
//!
//! Two families of registers, because the OM has no single call for every operation:
//! - `key/kN`: keys of one bucket. Put = OpenKey + CommitKey of an empty key whose checksum
//!   field carries the value (metadata only, so thousands of operations per minute); get =
//!   LookupKey in DEFAULT or LINEARIZABLE mode; delete = DeleteKey.
//! - `vol/cN`: volumes. Create-if-absent = CreateVolume with the value as owner; get =
//!   VolumeInfo; delete = DeleteVolume.
//!
//! Outcomes are recorded conservatively: an error before the write was sent (the open) is
//! `fail`; any error of a sent write is `info` (the client retries, so a write may have
//! applied even when the last attempt failed); a create refused with ALREADY_EXISTS may
//! have been refused by this call's own earlier attempt (`CreatedOrFound`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rozone_client::om::{OmClient, ReadMode};
use rozone_client::{Client, ClientConfig};

use crate::checker::{Call, Op, Outcome, Output, Value};

pub const VOLUME: &str = "chaos";
pub const BUCKET: &str = "regs";

/// The register names: `keys` keys and `vols` volumes.
pub fn registers(keys: usize, vols: usize) -> Vec<String> {
    (0..keys)
        .map(|i| format!("key/k{i}"))
        .chain((0..vols).map(|i| format!("vol/c{i}")))
        .collect()
}

/// Shared by the clients: the clock, the next unique value, the history, and apart from it
/// the LOCAL_LEASE reads (checked against the lease bound, not for linearizability).
pub struct Recorder {
    pub start: Instant,
    next: AtomicU64,
    pub history: Mutex<Vec<Op>>,
    pub lease_reads: Mutex<Vec<Op>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            next: AtomicU64::new(1),
            history: Mutex::new(Vec::new()),
            lease_reads: Mutex::new(Vec::new()),
        }
    }
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    pub fn value(&self) -> Value {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
    /// Records `op`, made in `mode`: a LOCAL_LEASE get apart from the history.
    fn record(&self, op: Op, mode: ReadMode) {
        let list = if op.call == Call::Get && mode == ReadMode::LocalLease {
            &self.lease_reads
        } else {
            &self.history
        };
        list.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }
    pub fn ops(&self) -> Vec<Op> {
        snapshot(&self.history)
    }
    pub fn lease_ops(&self) -> Vec<Op> {
        snapshot(&self.lease_reads)
    }
}

fn snapshot(ops: &Mutex<Vec<Op>>) -> Vec<Op> {
    ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

fn value_of(text: &str) -> Option<Value> {
    text.strip_prefix('v').and_then(|v| v.parse().ok())
}

/// Runs one operation on register `reg` and records it (a LOCAL_LEASE get apart from the
/// rest: it is checked against the lease bound).
pub async fn run_op(
    om: &OmClient,
    rec: &Recorder,
    client: u32,
    reg: &str,
    call: Call,
    mode: ReadMode,
) {
    let invoke_ns = rec.now();
    let outcome = if let Some(key) = reg.strip_prefix("key/") {
        key_op(om, key, call, mode).await
    } else if let Some(vol) = reg.strip_prefix("vol/") {
        vol_op(om, vol, call, mode).await
    } else {
        Outcome::Fail
    };
    rec.record(
        Op {
            client,
            key: reg.to_string(),
            call,
            invoke_ns,
            return_ns: rec.now(),
            outcome,
        },
        mode,
    );
}

async fn key_op(om: &OmClient, key: &str, call: Call, mode: ReadMode) -> Outcome {
    match call {
        Call::Put(v) => {
            // A one-block open: deferred (no log entry until the commit) unless the OM's
            // om.deferred_open is off, so the faults hit the one-write key path.
            let Ok(open) = om.open_key_single_block(VOLUME, BUCKET, key, 0).await else {
                return Outcome::Fail;
            };
            match om.commit_key(&open, &[], &format!("v{v}")).await {
                Ok(_) => Outcome::Ok(Output::Done),
                Err(_) => Outcome::Info,
            }
        }
        Call::Get => match om.lookup_key(VOLUME, BUCKET, key, mode).await {
            Ok(k) => match value_of(&k.checksum) {
                Some(v) => Outcome::Ok(Output::Read(Some(v))),
                // Not a value this run wrote: report it as one no write produced.
                None => Outcome::Ok(Output::Read(Some(u64::MAX))),
            },
            Err(e) if e.is_not_found() => Outcome::Ok(Output::Read(None)),
            Err(_) => Outcome::Info,
        },
        Call::Delete => match om.delete_key(VOLUME, BUCKET, key).await {
            Ok(()) => Outcome::Ok(Output::Done),
            Err(e) if e.is_not_found() => Outcome::Ok(Output::Done),
            Err(_) => Outcome::Info,
        },
        Call::CreateIfAbsent(_) => Outcome::Fail,
    }
}

async fn vol_op(om: &OmClient, vol: &str, call: Call, mode: ReadMode) -> Outcome {
    let name = format!("{VOLUME}-{vol}");
    match call {
        Call::CreateIfAbsent(v) => match om.create_volume(&name, &format!("v{v}"), None).await {
            Ok(_) => Outcome::Ok(Output::Created(true)),
            Err(e) if e.is_already_exists() => Outcome::Ok(Output::CreatedOrFound),
            Err(_) => Outcome::Info,
        },
        Call::Get => match om.volume_info(&name, mode).await {
            Ok(info) => Outcome::Ok(Output::Read(Some(
                value_of(&info.owner).unwrap_or(u64::MAX),
            ))),
            Err(e) if e.is_not_found() => Outcome::Ok(Output::Read(None)),
            Err(_) => Outcome::Info,
        },
        Call::Delete => match om.delete_volume(&name).await {
            Ok(()) => Outcome::Ok(Output::Done),
            Err(e) if e.is_not_found() => Outcome::Ok(Output::Done),
            Err(_) => Outcome::Info,
        },
        Call::Put(_) => Outcome::Fail,
    }
}

/// One client: random operations on random registers until `stop`; reads are DEFAULT or
/// LINEARIZABLE, half and half.
pub async fn client_loop(
    om: OmClient,
    rec: Arc<Recorder>,
    regs: Arc<Vec<String>>,
    client: u32,
    seed: u64,
    stop: Arc<AtomicBool>,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(client) << 32));
    while !stop.load(Ordering::Relaxed) {
        let reg = &regs[rng.random_range(0..regs.len())];
        let roll = rng.random_range(0..100);
        let mode = if rng.random_bool(0.5) {
            ReadMode::Default
        } else {
            ReadMode::Linearizable
        };
        let call = match (reg.starts_with("key/"), roll) {
            (_, 0..50) => Call::Get,
            (true, 50..90) => Call::Put(rec.value()),
            (false, 50..90) => Call::CreateIfAbsent(rec.value()),
            _ => Call::Delete,
        };
        run_op(&om, &rec, client, reg, call, mode).await;
    }
}

/// A reader pinned to one OM (`addr`): gets of random registers until `stop`, half of them
/// DEFAULT (recorded like every other client's operations), half LOCAL_LEASE (which a
/// follower answers from its own state, checked against the lease bound).
///
/// DEFAULT is the mode a cut-off old leader can answer from its own state (LINEARIZABLE asks
/// a quorum first, which it cannot reach), so these are the reads that meet the stale read
/// the leader lease prevents. Each read dials a **fresh client** (`Client::new` with this
/// one address), as a client that has just arrived on the old leader's side of a partition:
/// a long-lived client is not pinned at all, since its ring learns the other members from
/// `NotLeader` hints and keeps asking whichever member last led. A fresh client starts at
/// `addr` and only moves on within its one call (a follower's hint, an unanswered attempt).
pub async fn pinned_reader_loop(
    config: ClientConfig,
    rec: Arc<Recorder>,
    regs: Arc<Vec<String>>,
    client: u32,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(client) << 32));
    while !stop.load(Ordering::Relaxed) {
        let reg = &regs[rng.random_range(0..regs.len())];
        let mode = if rng.random_bool(0.5) {
            ReadMode::Default
        } else {
            ReadMode::LocalLease
        };
        let fresh = Client::new(&config)?;
        run_op(&fresh.om, &rec, client, reg, Call::Get, mode).await;
    }
    Ok(())
}
