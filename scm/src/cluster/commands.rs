//! Per-datanode command queues: commands wait for the datanode's next heartbeat and ride on
//! its reply. Each command gets an id unique within the leader's term and carries that
//! term, so a datanode can ignore commands of a deposed leader. Sent commands are
//! remembered until the datanode reports their status, so the leader can react to the
//! outcome (remove deleted-block transactions, end in-flight replication).

use std::collections::{BTreeMap, VecDeque};

use crate::state::{Datanode, DeletedBlocksTxn};

/// What the leader asks a datanode to do, in domain terms (`convert` gives the wire form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatanodeCommand {
    /// Join the Raft pipeline `pipeline_id` of these members.
    CreatePipeline {
        pipeline_id: u64,
        members: Vec<Datanode>,
    },
    ClosePipeline {
        pipeline_id: u64,
    },
    /// Close a replica; `force` closes without pipeline consensus (QUASI_CLOSED path).
    CloseContainer {
        container_id: u64,
        pipeline_id: u64,
        force: bool,
    },
    /// Delete a replica; `force` deletes it even if it still holds blocks.
    DeleteContainer {
        container_id: u64,
        force: bool,
    },
    /// Copy a container from `sources` (holders of a healthy CLOSED replica, best first).
    ReplicateContainer {
        container_id: u64,
        sources: Vec<Datanode>,
    },
    DeleteBlocks {
        txns: Vec<DeletedBlocksTxn>,
    },
}

/// A command as delivered: its id (unique within the leader's term, echoed in the
/// datanode's status) and the term of the leader that issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedCommand {
    pub id: u64,
    pub term: u64,
    pub command: DatanodeCommand,
}

/// What a sent command was for, to act on its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    DeleteBlocks { txn_ids: Vec<u64> },
    Replicate { container: u64 },
    DeleteContainer { container: u64 },
    Other,
}

impl Sent {
    fn of(c: &DatanodeCommand) -> Self {
        match c {
            DatanodeCommand::DeleteBlocks { txns } => Sent::DeleteBlocks {
                txn_ids: txns.iter().map(|t| t.txn_id).collect(),
            },
            DatanodeCommand::ReplicateContainer { container_id, .. } => Sent::Replicate {
                container: *container_id,
            },
            DatanodeCommand::DeleteContainer { container_id, .. } => Sent::DeleteContainer {
                container: *container_id,
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
    queued: BTreeMap<u64, VecDeque<QueuedCommand>>,
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
    pub fn push(&mut self, dn: u64, command: DatanodeCommand) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let q = self.queued.entry(dn).or_default();
        if q.len() >= MAX_QUEUED {
            q.pop_front();
        }
        q.push_back(QueuedCommand {
            id,
            term: self.term,
            command,
        });
        id
    }

    /// Whether an equal command is already waiting for `dn` (to avoid piling up repeats).
    pub fn has_queued(&self, dn: u64, command: &DatanodeCommand) -> bool {
        self.queued
            .get(&dn)
            .is_some_and(|q| q.iter().any(|c| &c.command == command))
    }

    /// Queues `command` for `dn` unless an equal one is already waiting there.
    pub fn push_once(&mut self, dn: u64, command: DatanodeCommand) {
        if !self.has_queued(dn, &command) {
            self.push(dn, command);
        }
    }

    /// Takes every command waiting for `dn`, remembering them as sent.
    pub fn take(&mut self, dn: u64) -> Vec<QueuedCommand> {
        let out: Vec<QueuedCommand> = self.queued.remove(&dn).unwrap_or_default().into();
        let sent = self.sent.entry(dn).or_default();
        for c in &out {
            sent.insert(c.id, Sent::of(&c.command));
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

    #[test]
    fn commands_get_ids_and_term_and_are_delivered_once() {
        let mut q = CommandQueues::new(7);
        let close = DatanodeCommand::ClosePipeline { pipeline_id: 3 };
        let a = q.push(1, close.clone());
        let b = q.push(
            1,
            DatanodeCommand::ReplicateContainer {
                container_id: 9,
                sources: vec![],
            },
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
