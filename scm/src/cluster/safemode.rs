//! The safe-mode rule, pure: the SCM leader stays in safe mode (no block allocation, no
//! ReplicationManager) until enough datanodes registered and a configured share of the
//! finished containers has a healthy reported replica. A cluster without such containers
//! (a brand-new one) needs only the datanodes.

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
