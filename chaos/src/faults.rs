//! The fault schedule: derived from the seed alone (same seed, same schedule), resolved to
//! processes only when injected (a "leader" is whoever leads then). One fault at a time:
//! injected, held, healed, then a pause before the next.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::Kind;

/// Whom a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Leader,
    Follower,
}

/// What happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL, down for the hold, then restarted from its data.
    Kill,
    /// SIGSTOP for the hold (longer than the election timeout), then SIGCONT.
    Pause,
    /// Every link into and out of the target cut (the ring splits 2/1). On a datanode (the
    /// three network kinds alike): its links to the SCM ring cut and no other, for 4× the
    /// drawn hold (6–16 s), long enough for the SCM to find it STALE and often DEAD while
    /// it still serves clients and its pipelines.
    Isolate,
    /// Only the links into the target cut: it still reaches the others, they not it.
    CutInbound,
    /// Only the links out of the target cut: the others reach it, it not them.
    CutOutbound,
    /// Leadership handed to a follower.
    Transfer,
    /// A ring member lost for good: removed, its data wiped, rejoined with `--bootstrap`.
    /// A datanode lost for good is killed and never comes back (at most one a run: a
    /// pipeline needs three of the four): the SCM must declare it dead, close its
    /// pipelines and copy its replicas elsewhere.
    Replace,
    /// A datanode's disk returns EIO (failpoint `dn-disk-fault`) for the hold; then the
    /// datanode restarts, as after a disk swap (a volume that failed stays failed until its
    /// process restarts).
    DiskError,
    /// A datanode's disk returns ENOSPC for the hold; then the failpoint is removed and the
    /// datanode must find its space again by itself.
    DiskFull,
}

/// One scheduled fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// From the start of the workload.
    pub at: Duration,
    pub kind: FaultKind,
    pub ring: Kind,
    pub target: Target,
    pub hold: Duration,
}

/// Which fault families a run uses (`--faults`).
#[derive(Debug, Clone, Copy)]
pub struct Families {
    pub process: bool,
    pub network: bool,
    pub membership: bool,
    /// Needs daemons built with failpoints (the test build is).
    pub disk: bool,
}

impl Families {
    /// Parses "process,network,membership,disk" (or "all" / "none").
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut f = Families {
            process: false,
            network: false,
            membership: false,
            disk: false,
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "all" => {
                    f = Families {
                        process: true,
                        network: true,
                        membership: true,
                        disk: true,
                    }
                }
                "none" => {}
                "process" => f.process = true,
                "network" => f.network = true,
                "membership" => f.membership = true,
                "disk" => f.disk = true,
                other => {
                    return Err(format!(
                    "unknown fault family {other:?}: use process, network, membership, disk, all or none"
                ))
                }
            }
        }
        Ok(f)
    }
}

/// The schedule of `seed` for a workload of `duration`.
pub fn schedule(seed: u64, duration: Duration, families: Families, datanodes: bool) -> Vec<Fault> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut kinds = Vec::new();
    if families.process {
        kinds.extend([FaultKind::Kill, FaultKind::Pause]);
    }
    if families.network {
        kinds.extend([
            FaultKind::Isolate,
            FaultKind::CutInbound,
            FaultKind::CutOutbound,
        ]);
    }
    if families.membership {
        kinds.extend([FaultKind::Transfer, FaultKind::Replace]);
    }
    if families.disk && datanodes {
        kinds.extend([FaultKind::DiskError, FaultKind::DiskFull]);
    }
    let mut out = Vec::new();
    if kinds.is_empty() {
        return out;
    }
    let mut at = Duration::from_millis(rng.random_range(500..1500));
    // Leave the last seconds fault-free, so the run ends on a settled cluster.
    let end = duration.saturating_sub(Duration::from_secs(2));
    while at < end {
        let kind = kinds[rng.random_range(0..kinds.len())];
        // The OM ring first (it serves the workload), then the SCM ring, then datanodes.
        let roll = rng.random_range(0..10);
        let ring = match (kind, roll) {
            (FaultKind::DiskError | FaultKind::DiskFull, _) => Kind::Datanode,
            (_, 0..6) => Kind::Om,
            (
                FaultKind::Kill
                | FaultKind::Pause
                | FaultKind::Replace
                | FaultKind::Isolate
                | FaultKind::CutInbound
                | FaultKind::CutOutbound,
                9,
            ) if datanodes => Kind::Datanode,
            _ => Kind::Scm,
        };
        let target = if rng.random_bool(0.6) {
            Target::Leader
        } else {
            Target::Follower
        };
        let hold = match kind {
            FaultKind::Transfer | FaultKind::Replace => Duration::ZERO,
            _ => Duration::from_millis(rng.random_range(1500..4000)),
        };
        // Scaled, not drawn anew: every seed keeps the schedule it had before this fault.
        let hold = if ring == Kind::Datanode && is_network(kind) {
            hold * 4
        } else {
            hold
        };
        out.push(Fault {
            at,
            kind,
            ring,
            target,
            hold,
        });
        at += hold + Duration::from_millis(rng.random_range(1000..3000));
    }
    out
}

/// A network fault (on a datanode: cut from the SCM ring).
pub fn is_network(kind: FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::Isolate | FaultKind::CutInbound | FaultKind::CutOutbound
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_schedule_and_families_are_honoured() {
        let all = Families::parse("all").unwrap();
        let d = Duration::from_secs(60);
        assert_eq!(schedule(7, d, all, true), schedule(7, d, all, true));
        assert_ne!(schedule(7, d, all, true), schedule(8, d, all, true));
        assert!(!schedule(7, d, all, true).is_empty());
        let net = Families::parse("network").unwrap();
        assert!(schedule(7, d, net, true).iter().all(|f| matches!(
            f.kind,
            FaultKind::Isolate | FaultKind::CutInbound | FaultKind::CutOutbound
        )));
        assert!(schedule(7, d, Families::parse("none").unwrap(), true).is_empty());
        let disk = schedule(7, d, Families::parse("disk").unwrap(), true);
        assert!(!disk.is_empty());
        assert!(disk.iter().all(|f| f.ring == Kind::Datanode
            && matches!(f.kind, FaultKind::DiskError | FaultKind::DiskFull)));
        assert!(schedule(7, d, Families::parse("disk").unwrap(), false).is_empty());
        assert!(Families::parse("clock").is_err());
    }

    /// Some seeds lose a datanode for good (a membership fault on roll 9); none does
    /// without datanodes.
    #[test]
    fn some_seeds_lose_a_datanode() {
        let all = Families::parse("all").unwrap();
        let d = Duration::from_secs(30);
        let loses = |seed, dns| {
            schedule(seed, d, all, dns)
                .iter()
                .any(|f| f.kind == FaultKind::Replace && f.ring == Kind::Datanode)
        };
        let seeds: Vec<u64> = (0..100).filter(|s| loses(*s, true)).collect();
        eprintln!("seeds 0..100 that lose a datanode in 30 s: {seeds:?}");
        assert!(!seeds.is_empty());
        assert!((0..100).all(|s| !loses(s, false)));
    }

    /// Some seeds cut a datanode from the SCM ring, for longer than the harness's 4 s
    /// STALE bound; none does without datanodes.
    #[test]
    fn some_seeds_cut_a_datanode_from_the_scm() {
        let all = Families::parse("all").unwrap();
        let d = Duration::from_secs(30);
        let cuts = |seed, dns| {
            schedule(seed, d, all, dns)
                .iter()
                .filter(|f| f.ring == Kind::Datanode && is_network(f.kind))
                .map(|f| f.hold)
                .collect::<Vec<_>>()
        };
        let seeds: Vec<u64> = (0..100).filter(|s| !cuts(*s, true).is_empty()).collect();
        eprintln!("seeds 0..100 that cut a datanode from the SCM in 30 s: {seeds:?}");
        assert!(!seeds.is_empty());
        for s in &seeds {
            assert!(cuts(*s, true).iter().all(|h| *h >= Duration::from_secs(6)));
        }
        assert!((0..100).all(|s| cuts(s, false).is_empty()));
    }
}
