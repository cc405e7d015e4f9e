//! Pipeline management on the leader: create Raft pipelines of three healthy datanodes
//! (replicate `CreatePipeline`, then queue a `CreatePipelineCommand` to each member), and
//! close pipelines that lost a member or that a datanode asked to close (replicate
//! `ClosePipeline`, close commands to members, finalize its OPEN containers).

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::commands::DatanodeCommand;
use crate::cluster::nodes::NodeHealth;
use crate::error::ScmError;
use crate::node::{Counters, ScmNode};
use crate::state::types::PIPELINE_MEMBERS;
use crate::state::{
    read, ContainerState, PipelineInfo, PipelineState, ScmRequest, ScmResponse, SEQ_PIPELINE_ID,
};

/// New pipelines to create from `load` (healthy datanode → its open pipelines), at most
/// `max_per_node` per datanode, never two open pipelines of the same members. Least loaded
/// datanodes first, ties by id, so the choice is stable.
pub fn plan_pipelines(
    load: &BTreeMap<u64, usize>,
    existing: &BTreeSet<Vec<u64>>,
    max_per_node: usize,
) -> Vec<Vec<u64>> {
    let mut load = load.clone();
    let mut existing = existing.clone();
    let mut out = Vec::new();
    loop {
        let mut free: Vec<(usize, u64)> = load
            .iter()
            .filter(|(_, n)| **n < max_per_node)
            .map(|(id, n)| (*n, *id))
            .collect();
        free.sort_unstable();
        // The first combination (by load) that is not an existing pipeline.
        let ids: Vec<u64> = free.iter().map(|(_, id)| *id).collect();
        let mut chosen = None;
        'search: for a in 0..ids.len() {
            for b in a + 1..ids.len() {
                for c in b + 1..ids.len() {
                    let mut set = vec![ids[a], ids[b], ids[c]];
                    set.sort_unstable();
                    if !existing.contains(&set) {
                        chosen = Some(set);
                        break 'search;
                    }
                }
            }
        }
        let Some(set) = chosen else {
            return out;
        };
        for id in &set {
            *load.entry(*id).or_default() += 1;
        }
        existing.insert(set.clone());
        out.push(set);
    }
}

impl ScmNode {
    /// Opens as many pipelines as the healthy datanodes allow; with fewer than
    /// [`PIPELINE_MEMBERS`] healthy, none, without reading the pipelines.
    pub async fn create_pipelines(&self) -> Result<Vec<u64>, ScmError> {
        if self.lead()?.nodes.healthy_ids().len() < PIPELINE_MEMBERS {
            return Ok(Vec::new());
        }
        let _alloc = self.alloc.lock().await;
        let pipelines = read::pipelines(&self.group.db())?;
        let plan = {
            let m = self.lead()?;
            // Only pipelines that can take blocks count against their members' limit: one
            // with a full member takes none, and counting it left no room for a pipeline
            // without that member, so writes stopped until the member had room again. The
            // limit is a placement target: once the member has room, its members are in
            // one pipeline more than it for a while.
            let open: Vec<&PipelineInfo> = pipelines
                .iter()
                .filter(|p| p.state == PipelineState::Open)
                .filter(|p| p.members.iter().all(|d| m.nodes.accepts_data(*d)))
                .collect();
            let mut load: BTreeMap<u64, usize> = m
                .nodes
                .placeable_ids()
                .into_iter()
                .map(|id| (id, 0))
                .collect();
            for p in &open {
                for id in &p.members {
                    if let Some(n) = load.get_mut(id) {
                        *n += 1;
                    }
                }
            }
            let existing: BTreeSet<Vec<u64>> = open
                .iter()
                .map(|p| {
                    let mut s = p.members.clone();
                    s.sort_unstable();
                    s
                })
                .collect();
            plan_pipelines(
                &load,
                &existing,
                self.cfg.max_pipelines_per_datanode as usize,
            )
        };
        let mut created = Vec::new();
        for members in plan {
            debug_assert_eq!(members.len(), PIPELINE_MEMBERS);
            let id = self.ids.next_id(SEQ_PIPELINE_ID).await?;
            let r = self
                .write(ScmRequest::CreatePipeline(PipelineInfo {
                    id,
                    members: members.clone(),
                    leader: None,
                    state: PipelineState::Open,
                }))
                .await?;
            if r != (ScmResponse::PipelineCreated { id }) {
                return Err(ScmError::refused("create pipeline", r));
            }
            let mut m = self.lead()?;
            let details = m.nodes.details_of(&members);
            for dn in &members {
                m.commands.push(
                    *dn,
                    DatanodeCommand::CreatePipeline {
                        pipeline_id: id,
                        members: details.clone(),
                    },
                );
            }
            tracing::info!(pipeline = id, ?members, "pipeline created");
            Counters::add(&self.counters.pipelines_created, 1);
            created.push(id);
        }
        Ok(created)
    }

    /// Closes pipeline `id` (idempotent): replicated close, close commands to its live
    /// members, and its OPEN containers go CLOSING (replicas then report CLOSED or
    /// QUASI_CLOSED). Unknown ids are `NOT_FOUND`.
    pub async fn close_pipeline(&self, id: u64, reason: &str) -> Result<(), ScmError> {
        let db = self.group.db();
        let Some(p) = read::pipeline(&db, id)? else {
            return Err(ScmError::NotFound(format!("pipeline {id} does not exist")));
        };
        drop(db);
        if p.state == PipelineState::Open {
            let r = self.write(ScmRequest::ClosePipeline { id }).await?;
            if r != (ScmResponse::PipelineClosed { id }) {
                return Err(ScmError::refused("close pipeline", r));
            }
            tracing::info!(pipeline = id, reason, "pipeline closed");
            Counters::add(&self.counters.pipelines_closed, 1);
            let mut m = self.lead()?;
            m.pipeline_leaders.remove(&id);
            for dn in &p.members {
                if m.nodes.health(*dn).is_some_and(|h| h != NodeHealth::Dead) {
                    m.commands
                        .push(*dn, DatanodeCommand::ClosePipeline { pipeline_id: id });
                }
            }
        }
        let open = read::containers(&self.group.db(), Some(ContainerState::Open))?;
        for c in open.into_iter().filter(|c| c.pipeline_id == id) {
            self.finalize_container(c.id, "its pipeline closed").await?;
        }
        Ok(())
    }

    /// Closes open pipelines with a STALE or DEAD member, a member whose every volume
    /// failed, or a member this leader has not heard of for `datanode_dead_after` since it
    /// took over.
    pub async fn close_failed_pipelines(&self) -> Result<(), ScmError> {
        let pipelines = read::pipelines(&self.group.db())?;
        let failed: Vec<(u64, u64, &str)> = {
            let m = self.lead()?;
            let grace_over = m.started.elapsed() >= self.cfg.datanode_dead_after;
            pipelines
                .iter()
                .filter(|p| p.state == PipelineState::Open)
                .filter_map(|p| {
                    p.members.iter().find_map(|d| match m.nodes.health(*d) {
                        Some(NodeHealth::Dead) => Some((p.id, *d, "is dead")),
                        // As Ozone's stale-node handler does: a pipeline with a STALE member
                        // takes no blocks, yet while OPEN it counts against its healthy
                        // members' pipeline limit, so no pipeline without the silent member
                        // could be made and writes stopped until it was declared DEAD.
                        Some(NodeHealth::Stale) => Some((p.id, *d, "is stale")),
                        Some(_) if m.nodes.all_volumes_failed(*d) => {
                            Some((p.id, *d, "has no working volume"))
                        }
                        Some(_) => None,
                        None => grace_over.then_some((p.id, *d, "is dead")),
                    })
                })
                .collect()
        };
        for (id, dn, why) in failed {
            self.close_pipeline(id, &format!("member datanode {dn} {why}"))
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_distinct_pipelines_within_the_per_node_limit() {
        let load: BTreeMap<u64, usize> = (1..=3).map(|i| (i, 0)).collect();
        assert_eq!(
            plan_pipelines(&load, &BTreeSet::new(), 2),
            vec![vec![1, 2, 3]]
        );
        // The same three again would be a duplicate.
        let existing = BTreeSet::from([vec![1, 2, 3]]);
        let load: BTreeMap<u64, usize> = (1..=3).map(|i| (i, 1)).collect();
        assert!(plan_pipelines(&load, &existing, 2).is_empty());
        // Two datanodes are not enough.
        let load: BTreeMap<u64, usize> = (1..=2).map(|i| (i, 0)).collect();
        assert!(plan_pipelines(&load, &BTreeSet::new(), 2).is_empty());
        // Six nodes, at most one pipeline each: two disjoint pipelines.
        let load: BTreeMap<u64, usize> = (1..=6).map(|i| (i, 0)).collect();
        assert_eq!(
            plan_pipelines(&load, &BTreeSet::new(), 1),
            vec![vec![1, 2, 3], vec![4, 5, 6]]
        );
    }
}
