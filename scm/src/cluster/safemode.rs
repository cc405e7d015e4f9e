//! The safe-mode rules, pure.
//!
//! *When* ([`start`]): safe mode is for a cold start of the whole ring, not for a
//! failover. A new leader starts in safe mode unless this process, since it started, heard
//! from a leader (or led) in a term no later than the latest term whose leader recorded
//! that it served outside safe mode. That record is replicated (`RecordSafeModeLeft`) and
//! every leader out of safe mode writes its own term at once, so the chain continues
//! through failovers; "heard from a leader" is this process's own observation (an append it
//! accepted, or a lease it earned), never restored from disk, so after a restart of the
//! whole ring no member has it and the first leader starts in safe mode.
//!
//! *Until* ([`evaluate`]): the leader stays in safe mode (no block allocation, no
//! ReplicationManager) until enough datanodes registered and a configured share of the
//! finished containers has a healthy reported replica. A cluster without such containers
//! (a brand-new one) needs only the datanodes.

/// How a new leader's term starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The ring starts cold: safe mode until datanodes report, registry from scratch.
    Cold,
    /// A leader change in a running ring: no safe mode, the registry taken over from the
    /// ring's records.
    Failover,
}

/// The start rule. `first_leader_term`: the term of the first leader this process heard
/// from or was since it started (`None`: none yet). `left_term`: the highest term recorded
/// as out of safe mode.
pub fn start(first_leader_term: Option<u64>, left_term: Option<u64>) -> Start {
    match (first_leader_term, left_term) {
        (Some(first), Some(left)) if left >= first => Start::Failover,
        _ => Start::Cold,
    }
}

/// The counts safe mode is judged on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SafeModeInput {
    /// CLOSED and QUASI_CLOSED containers.
    pub containers_total: u64,
    /// Of those, with at least one healthy reported replica.
    pub containers_reported: u64,
    pub healthy_datanodes: u32,
    pub threshold: f64,
    pub min_datanodes: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: &'static str,
    pub satisfied: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SafeModeEval {
    pub reported_share: f64,
    pub rules: Vec<Rule>,
}

impl SafeModeEval {
    pub fn satisfied(&self) -> bool {
        self.rules.iter().all(|r| r.satisfied)
    }
}

pub fn evaluate(i: &SafeModeInput) -> SafeModeEval {
    let share = if i.containers_total == 0 {
        1.0
    } else {
        i.containers_reported as f64 / i.containers_total as f64
    };
    SafeModeEval {
        reported_share: share,
        rules: vec![
            Rule {
                name: "container_replicas",
                satisfied: share >= i.threshold,
                detail: format!(
                    "{} of {} containers ({:.1}%) have a healthy replica, need {:.1}%",
                    i.containers_reported,
                    i.containers_total,
                    share * 100.0,
                    i.threshold * 100.0
                ),
            },
            Rule {
                name: "datanodes",
                satisfied: i.healthy_datanodes >= i.min_datanodes,
                detail: format!(
                    "{} healthy datanodes registered, need {}",
                    i.healthy_datanodes, i.min_datanodes
                ),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(total: u64, reported: u64, dns: u32) -> SafeModeInput {
        SafeModeInput {
            containers_total: total,
            containers_reported: reported,
            healthy_datanodes: dns,
            threshold: 0.9,
            min_datanodes: 3,
        }
    }

    /// Cold: nobody led since this process started (whole ring started), or the ring has
    /// not left safe mode since this process first saw a leader (the record is from before
    /// a restart of the whole ring, or the leader died in safe mode). Otherwise a failover.
    #[test]
    fn safe_mode_is_for_a_cold_ring_start_not_a_failover() {
        assert_eq!(start(None, None), Start::Cold, "brand-new ring");
        assert_eq!(start(None, Some(9)), Start::Cold, "whole ring restarted");
        assert_eq!(start(Some(5), None), Start::Cold, "never left safe mode");
        assert_eq!(
            start(Some(5), Some(4)),
            Start::Cold,
            "left before this process saw the ring running: a record from before a restart"
        );
        assert_eq!(start(Some(5), Some(5)), Start::Failover);
        assert_eq!(start(Some(5), Some(7)), Start::Failover);
    }

    #[test]
    fn new_cluster_leaves_safe_mode_once_enough_datanodes_registered() {
        assert!(!evaluate(&input(0, 0, 2)).satisfied());
        let e = evaluate(&input(0, 0, 3));
        assert!(e.satisfied());
        assert_eq!(e.reported_share, 1.0);
    }

    #[test]
    fn containers_need_the_threshold_share() {
        let e = evaluate(&input(10, 8, 5));
        assert!(!e.satisfied());
        assert!(!e.rules[0].satisfied && e.rules[1].satisfied);
        assert_eq!(
            e.rules[0].detail,
            "8 of 10 containers (80.0%) have a healthy replica, need 90.0%"
        );
        assert!(evaluate(&input(10, 9, 5)).satisfied());
    }
}
