//! What the datanode exchanges with the SCM, beyond container descriptors: pipeline
//! members named by a command, pipeline reports, commands and their statuses.

use rozone_proto::scm as spb;

use crate::types::{Command, CommandStatus, Member, PipelineReport, ScmCommand};

/// A pipeline member as the SCM's create-pipeline command names it.
impl From<spb::DatanodeDetails> for Member {
    fn from(d: spb::DatanodeDetails) -> Self {
        Self {
            id: d.id,
            raft_addr: d.raft_addr,
            container_addr: d.container_addr,
        }
    }
}

impl From<&PipelineReport> for spb::PipelineReport {
    fn from(r: &PipelineReport) -> Self {
        Self {
            pipeline_id: r.pipeline_id,
            is_leader: r.is_leader,
            term: r.term,
            healthy: r.healthy,
        }
    }
}

/// A command from the SCM. Nothing in it can be malformed beyond a missing body, which the
/// executor reports as a failure of that command.
impl From<spb::ScmCommand> for ScmCommand {
    fn from(c: spb::ScmCommand) -> Self {
        use spb::scm_command::Command as C;
        let command = c.command.map(|body| match body {
            C::CreatePipeline(p) => Command::CreatePipeline {
                pipeline: p.pipeline_id,
                members: p.members.into_iter().map(Into::into).collect(),
            },
            C::ClosePipeline(p) => Command::ClosePipeline {
                pipeline: p.pipeline_id,
            },
            C::CloseContainer(x) => Command::CloseContainer {
                container: x.container_id,
                pipeline: x.pipeline_id,
                force: x.force,
            },
            C::DeleteContainer(d) => Command::DeleteContainer {
                container: d.container_id,
                force: d.force,
            },
            C::ReplicateContainer(r) => Command::ReplicateContainer {
                container: r.container_id,
                sources: r.sources.into_iter().map(|s| s.replication_addr).collect(),
            },
            C::DeleteBlocks(d) => Command::DeleteBlocks {
                txns: d
                    .txns
                    .into_iter()
                    .map(|t| (t.container_id, t.local_ids))
                    .collect(),
            },
        });
        Self {
            id: c.id,
            term: c.term,
            command,
        }
    }
}

impl From<&CommandStatus> for spb::CommandStatus {
    fn from(s: &CommandStatus) -> Self {
        use spb::command_status::Status as S;
        let (status, message) = match &s.failure {
            None => (S::Executed, String::new()),
            Some(m) => (S::Failed, m.clone()),
        };
        Self {
            command_id: s.command_id,
            status: status as i32,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scm_commands_decode_to_domain_commands_and_statuses_encode_back() {
        use spb::scm_command::Command as C;
        let wire = spb::ScmCommand {
            id: 7,
            term: 3,
            command: Some(C::DeleteBlocks(spb::DeleteBlocksCommand {
                txns: vec![spb::DeletedBlocksTransaction {
                    container_id: 4,
                    local_ids: vec![5, 6],
                    ..Default::default()
                }],
            })),
        };
        let c: ScmCommand = wire.into();
        assert_eq!((c.id, c.term), (7, 3));
        assert_eq!(
            c.command,
            Some(Command::DeleteBlocks {
                txns: vec![(4, vec![5, 6])]
            })
        );
        let bodiless: ScmCommand = spb::ScmCommand {
            id: 8,
            term: 3,
            command: None,
        }
        .into();
        assert_eq!(bodiless.command, None);

        use spb::command_status::Status as S;
        let failed = spb::CommandStatus::from(&CommandStatus {
            command_id: 7,
            failure: Some("no disk".into()),
        });
        assert_eq!(
            (failed.command_id, failed.status, failed.message.as_str()),
            (7, S::Failed as i32, "no disk")
        );
        let done = spb::CommandStatus::from(&CommandStatus {
            command_id: 8,
            failure: None,
        });
        assert_eq!(
            (done.status, done.message.as_str()),
            (S::Executed as i32, "")
        );
    }
}
