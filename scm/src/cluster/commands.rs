//! Per-datanode command queues: commands wait for the datanode's next heartbeat and ride on
//! its reply. Each command gets an id unique within the leader's term and carries that
//! term, so a datanode can ignore commands of a deposed leader. Sent commands are
//! remembered until the datanode reports their status, so the leader can react to the
//! outcome (remove deleted-block transactions, end in-flight replication).

use std::collections::{BTreeMap, VecDeque};

use rozone_proto::scm::{scm_command::Command, ScmCommand};

/// What a sent command was for, to act on its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    DeleteBlocks { txn_ids: Vec<u64> },
    Replicate { container: u64 },
    DeleteContainer { container: u64 },
    Other,
}

impl Sent {
    fn of(c: &Command) -> Self {
        match c {
            Command::DeleteBlocks(d) => Sent::DeleteBlocks {
                txn_ids: d.txns.iter().map(|t| t.txn_id).collect(),
            },
            Command::ReplicateContainer(r) => Sent::Replicate {
                container: r.container_id,
            },
            Command::DeleteContainer(d) => Sent::DeleteContainer {
                container: d.container_id,
            },
            _ => Sent::Other,
        }
    }
}

/// Most commands kept per datanode; beyond it the oldest waiting one is dropped (a datanode
/// that does not heartbeat for that long is going stale; periodic work re-queues).
pub const MAX_QUEUED: usize = 10_000;
/// Most sent-but-unacknowledged commands remembered per datanode.
const MAX_SENT: usize = 10_000;

#[derive(Debug, Default)]
pub struct CommandQueues {
    term: u64,
    next_id: u64,
    queued: BTreeMap<u64, VecDeque<ScmCommand>>,
    sent: BTreeMap<u64, BTreeMap<u64, Sent>>,
    /// Commands handed out in heartbeat replies since this leader started.
    pub delivered: u64,
}

impl CommandQueues {
    pub fn new(term: u64) -> Self {
        Self {
            term,
            next_id: 1,
            ..Default::default()
        }
    }

    /// Queues `command` for `dn`; returns its id.
    pub fn push(&mut self, dn: u64, command: Command) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let q = self.queued.entry(dn).or_default();
        if q.len() >= MAX_QUEUED {
            q.pop_front();
        }
        q.push_back(ScmCommand {
            id,
            term: self.term,
            command: Some(command),
        });
        id
    }

    /// Whether an equal command is already waiting for `dn` (to avoid piling up repeats).
    pub fn has_queued(&self, dn: u64, command: &Command) -> bool {
        self.queued
            .get(&dn)
            .is_some_and(|q| q.iter().any(|c| c.command.as_ref() == Some(command)))
    }

    /// Takes every command waiting for `dn`, remembering them as sent.
    pub fn take(&mut self, dn: u64) -> Vec<ScmCommand> {
        let out: Vec<ScmCommand> = self.queued.remove(&dn).unwrap_or_default().into();
        let sent = self.sent.entry(dn).or_default();
        for c in &out {
            if let Some(cmd) = &c.command {
                sent.insert(c.id, Sent::of(cmd));
            }
        }
        while sent.len() > MAX_SENT {
            sent.pop_first();
        }
        self.delivered += out.len() as u64;
        out
    }

    /// A status arrived for command `id` of `dn`: forget it and say what it was for.
    pub fn finish(&mut self, dn: u64, id: u64) -> Option<Sent> {
        self.sent.get_mut(&dn)?.remove(&id)
    }

    pub fn queued_len(&self, dn: u64) -> usize {
        self.queued.get(&dn).map_or(0, VecDeque::len)
    }

    /// Drops everything of `dn` (it died: it would not run them).
    pub fn clear(&mut self, dn: u64) {
        self.queued.remove(&dn);
        self.sent.remove(&dn);
    }

    pub fn term(&self) -> u64 {
        self.term
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rozone_proto::scm::{ClosePipelineCommand, ReplicateContainerCommand};

    #[test]
    fn commands_get_ids_and_term_and_are_delivered_once() {
        let mut q = CommandQueues::new(7);
        let close = Command::ClosePipeline(ClosePipelineCommand { pipeline_id: 3 });
        let a = q.push(1, close.clone());
        let b = q.push(
            1,
            Command::ReplicateContainer(ReplicateContainerCommand {
                container_id: 9,
                sources: vec![],
            }),
        );
        assert!(a < b);
        assert!(q.has_queued(1, &close));
        assert_eq!(q.queued_len(1), 2);
        let got = q.take(1);
        assert_eq!(
            got.iter().map(|c| (c.id, c.term)).collect::<Vec<_>>(),
            vec![(a, 7), (b, 7)]
        );
        assert!(q.take(1).is_empty());
        assert_eq!(q.finish(1, b), Some(Sent::Replicate { container: 9 }));
        assert_eq!(q.finish(1, b), None);
        assert_eq!(q.finish(2, a), None);
        assert_eq!(q.delivered, 2);
    }
}
