//! `rozone admin ...`: roles of the SCM and OM rings, OM leader transfer and decommission,
//! containers, datanodes, pipelines, safe mode and the ReplicationManager.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Subcommand;
use rozone_client::om::{OmClient, OmRoles};
use rozone_client::scm::{parse_container_state, ScmClient, ScmRoles};

use crate::cluster::ClusterArgs;
use crate::output::{fields, json, opt, size, table, time};

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// The SCM ring.
    #[command(subcommand)]
    Scm(ScmCommand),
    /// The OM ring.
    #[command(subcommand)]
    Om(OmCommand),
    /// Containers.
    #[command(subcommand)]
    Container(ContainerCommand),
    /// Datanodes.
    #[command(subcommand)]
    Datanode(DatanodeCommand),
    /// Pipelines.
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// SCM safe mode.
    #[command(subcommand)]
    Safemode(SafemodeCommand),
    /// The SCM's ReplicationManager.
    #[command(subcommand)]
    Replicationmanager(RmCommand),
    /// The cluster CA (local files).
    #[command(subcommand)]
    Ca(crate::certs::CaCommand),
    /// Certificates of the cluster's processes (local files).
    #[command(subcommand)]
    Cert(crate::certs::CertCommand),
    /// One-time join tokens: certificates for new processes without copying keys.
    #[command(subcommand)]
    JoinToken(crate::certs::JoinTokenCommand),
    /// S3 credentials.
    #[command(subcommand)]
    S3(crate::s3::S3AdminCommand),
}

#[derive(Debug, Subcommand)]
pub enum ScmCommand {
    /// Members of the SCM ring and their roles.
    Roles,
    /// Hand SCM leadership to another member.
    Transfer {
        #[arg(long, short = 'n')]
        node: u64,
    },
    /// Remove an SCM from the ring (e.g. a member whose data was lost, before it joins
    /// again with --bootstrap).
    Remove { node: u64 },
}

#[derive(Debug, Subcommand)]
pub enum OmCommand {
    /// Members of the OM ring and their roles.
    Roles,
    /// Hand OM leadership to another member.
    Transfer {
        #[arg(long, short = 'n')]
        node: u64,
    },
    /// Remove an OM from the ring.
    Decommission {
        #[arg(long, short = 'n')]
        node: u64,
    },
    /// Remove an OM from the ring (as decommission; e.g. a member whose data was lost,
    /// before it joins again with --bootstrap).
    Remove { node: u64 },
}

#[derive(Debug, Subcommand)]
pub enum ContainerCommand {
    /// List containers.
    List {
        /// Only this state: open, closing, quasi_closed, closed, deleting, deleted.
        #[arg(long)]
        state: Option<String>,
        /// At most this many (0: all).
        #[arg(long, default_value_t = 0)]
        count: usize,
    },
    /// A container and its replicas.
    Info { id: u64 },
    /// Close a container.
    Close { id: u64 },
}

#[derive(Debug, Subcommand)]
pub enum DatanodeCommand {
    /// Datanodes with health and usage.
    List,
}

#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Pipelines and their members.
    List {
        /// Only OPEN pipelines.
        #[arg(long)]
        open: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SafemodeCommand {
    /// Whether the SCM is in safe mode, and why.
    Status,
    /// Leave safe mode now.
    Exit,
    /// Wait until the SCM has left safe mode.
    Wait {
        /// Give up after this long.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        wait_timeout: Duration,
    },
}

#[derive(Debug, Subcommand)]
pub enum RmCommand {
    /// The last run's counts and in-flight commands.
    Status,
}

pub async fn run(
    cluster: &ClusterArgs,
    as_json: bool,
    cmd: AdminCommand,
) -> anyhow::Result<ExitCode> {
    match cmd {
        AdminCommand::Ca(c) => {
            crate::certs::ca(c)?;
            return Ok(ExitCode::SUCCESS);
        }
        AdminCommand::Cert(c) => {
            crate::certs::cert(c).await?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let client = cluster.client()?;
    match cmd {
        AdminCommand::Om(c) => om(&client.om, as_json, c).await?,
        AdminCommand::S3(c) => crate::s3::admin(&client, c).await?,
        AdminCommand::Scm(c) => scm_ring(client.scm()?, as_json, c).await?,
        AdminCommand::Container(c) => container(client.scm()?, as_json, c).await?,
        AdminCommand::Datanode(DatanodeCommand::List) => {
            let ds = client.scm()?.list_datanodes().await?;
            if as_json {
                json(&ds)?
            } else {
                let rows = ds
                    .iter()
                    .map(|d| {
                        vec![
                            d.datanode.id.to_string(),
                            d.health.clone(),
                            d.datanode.container_addr.clone(),
                            format!("{:.1}s", d.last_heartbeat_age_ms as f64 / 1000.0),
                            size(d.used_bytes),
                            size(d.remaining_bytes),
                            d.replica_count.to_string(),
                            d.pipeline_count.to_string(),
                        ]
                    })
                    .collect::<Vec<_>>();
                table(
                    &[
                        "ID",
                        "HEALTH",
                        "ADDRESS",
                        "LAST HEARTBEAT",
                        "USED",
                        "FREE",
                        "REPLICAS",
                        "PIPELINES",
                    ],
                    &rows,
                );
            }
        }
        AdminCommand::Pipeline(PipelineCommand::List { open }) => {
            let ps = client.scm()?.list_pipelines(open).await?;
            if as_json {
                json(&ps)?
            } else {
                let rows = ps
                    .iter()
                    .map(|p| {
                        let members = p
                            .pipeline
                            .members
                            .iter()
                            .map(|m| m.id.to_string())
                            .collect::<Vec<_>>()
                            .join(",");
                        vec![
                            p.pipeline.id.to_string(),
                            p.pipeline.state.clone(),
                            opt(p.pipeline.leader_id),
                            members,
                            p.open_containers.to_string(),
                        ]
                    })
                    .collect::<Vec<_>>();
                table(
                    &["ID", "STATE", "LEADER", "DATANODES", "OPEN CONTAINERS"],
                    &rows,
                );
            }
        }
        AdminCommand::Safemode(c) => safemode(client.scm()?, as_json, c).await?,
        AdminCommand::JoinToken(crate::certs::JoinTokenCommand::Create { role, id, ttl }) => {
            let (token, expires) = client
                .scm()?
                .create_join_token(role.as_str(), id, ttl)
                .await?;
            if as_json {
                json(&serde_json::json!({ "token": token, "expires_unix_ms": expires }))?
            } else {
                println!("{token}");
                eprintln!(
                    "one-time token for {role}-{id}, redeemable until {}",
                    time(expires)
                );
            }
        }
        // Local files, handled above without a client.
        AdminCommand::Ca(_) | AdminCommand::Cert(_) => {}
        AdminCommand::Replicationmanager(RmCommand::Status) => {
            let r = client.scm()?.replication_manager().await?;
            if as_json {
                json(&r)?
            } else {
                let ids = |v: &[u64]| {
                    if v.is_empty() {
                        "-".to_string()
                    } else {
                        v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                    }
                };
                fields(&[
                    ("runs", r.runs.to_string()),
                    (
                        "last run",
                        opt(r.last_run_age_ms.map(|a| {
                            format!(
                                "{:.1}s ago ({} ms)",
                                a as f64 / 1000.0,
                                r.last_run_duration_ms
                            )
                        })),
                    ),
                    ("healthy", r.healthy.to_string()),
                    (
                        "under-replicated",
                        format!(
                            "{} {}",
                            r.under_replicated,
                            ids(&r.under_replicated_containers)
                        ),
                    ),
                    (
                        "over-replicated",
                        format!(
                            "{} {}",
                            r.over_replicated,
                            ids(&r.over_replicated_containers)
                        ),
                    ),
                    (
                        "missing",
                        format!("{} {}", r.missing, ids(&r.missing_containers)),
                    ),
                    ("in-flight adds", r.inflight_adds.to_string()),
                    ("in-flight deletes", r.inflight_deletes.to_string()),
                    ("replicate commands", r.replicate_commands_sent.to_string()),
                    ("delete commands", r.delete_commands_sent.to_string()),
                    ("in-flight timeouts", r.inflight_timeouts.to_string()),
                ]);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The leader's view when the first answer came from a member that knows a leader but
/// is not it (a follower may not know the others' roles).
async fn om_roles(om: &OmClient) -> anyhow::Result<OmRoles> {
    let r = om.roles().await?;
    if let Some(l) = r.leader_id.filter(|l| *l != r.answered_by) {
        if let Some(m) = r.members.iter().find(|m| m.node_id == l) {
            if let Ok(lr) = om.roles_of(&m.client_addr).await {
                return Ok(lr);
            }
        }
    }
    Ok(r)
}

async fn scm_roles(scm: &ScmClient) -> anyhow::Result<ScmRoles> {
    let r = scm.roles().await?;
    if let Some(l) = r.leader_id.filter(|l| *l != r.answered_by) {
        if let Some(m) = r.members.iter().find(|m| m.id == l) {
            if let Ok(lr) = scm.roles_of(&m.client_addr).await {
                return Ok(lr);
            }
        }
    }
    Ok(r)
}

async fn om(om: &OmClient, as_json: bool, cmd: OmCommand) -> anyhow::Result<()> {
    match cmd {
        OmCommand::Roles => {
            let r = om_roles(om).await?;
            if as_json {
                return json(&r);
            }
            let rows = r
                .members
                .iter()
                .map(|m| {
                    vec![
                        m.node_id.to_string(),
                        m.role.clone(),
                        m.voter.to_string(),
                        m.client_addr.clone(),
                        m.peer_addr.clone(),
                        opt(m.applied_index),
                    ]
                })
                .collect::<Vec<_>>();
            table(
                &["ID", "ROLE", "VOTER", "CLIENT ADDR", "PEER ADDR", "APPLIED"],
                &rows,
            );
        }
        OmCommand::Transfer { node } => {
            om.transfer_leader(node).await?;
            if as_json {
                json(&serde_json::json!({"leader_id": node}))?
            } else {
                println!("OM leadership transferred to {node}")
            }
        }
        OmCommand::Decommission { node } | OmCommand::Remove { node } => {
            om.decommission(node).await?;
            if as_json {
                json(&serde_json::json!({"decommissioned": node}))?
            } else {
                println!("OM {node} decommissioned")
            }
        }
    }
    Ok(())
}

async fn scm_ring(scm: &ScmClient, as_json: bool, cmd: ScmCommand) -> anyhow::Result<()> {
    match cmd {
        ScmCommand::Roles => {
            let r = scm_roles(scm).await?;
            if as_json {
                return json(&r);
            }
            let rows = r
                .members
                .iter()
                .map(|m| {
                    vec![
                        m.id.to_string(),
                        m.role.clone(),
                        m.voter.to_string(),
                        m.client_addr.clone(),
                        m.peer_addr.clone(),
                    ]
                })
                .collect::<Vec<_>>();
            table(&["ID", "ROLE", "VOTER", "CLIENT ADDR", "PEER ADDR"], &rows);
        }
        ScmCommand::Transfer { node } => {
            let l = scm.transfer_leader(node).await?;
            if as_json {
                json(&serde_json::json!({"leader_id": l}))?
            } else {
                println!("SCM leader is now {l}")
            }
        }
        ScmCommand::Remove { node } => {
            scm.remove_member(node).await?;
            if as_json {
                json(&serde_json::json!({"removed": node}))?
            } else {
                println!("SCM {node} removed from the ring")
            }
        }
    }
    Ok(())
}

async fn container(scm: &ScmClient, as_json: bool, cmd: ContainerCommand) -> anyhow::Result<()> {
    match cmd {
        ContainerCommand::List { state, count } => {
            let st = state.as_deref().map(parse_container_state).transpose()?;
            let cs = scm.list_containers(st, count).await?;
            if as_json {
                return json(&cs);
            }
            let rows = cs
                .iter()
                .map(|c| {
                    vec![
                        c.id.to_string(),
                        c.state.clone(),
                        c.pipeline_id.to_string(),
                        c.replication_factor.to_string(),
                        c.block_count.to_string(),
                        size(c.used_bytes),
                        c.bcsid.to_string(),
                        c.owner.clone(),
                    ]
                })
                .collect::<Vec<_>>();
            table(
                &[
                    "ID", "STATE", "PIPELINE", "REPLICAS", "BLOCKS", "USED", "BCSID", "OWNER",
                ],
                &rows,
            );
        }
        ContainerCommand::Info { id } => {
            let d = scm.container_info(id).await?;
            if as_json {
                return json(&d);
            }
            let c = &d.container;
            fields(&[
                ("id", c.id.to_string()),
                ("state", c.state.clone()),
                ("pipeline", c.pipeline_id.to_string()),
                ("replication", c.replication_factor.to_string()),
                ("owner", c.owner.clone()),
                ("blocks", c.block_count.to_string()),
                ("used", size(c.used_bytes)),
                ("bcsid", c.bcsid.to_string()),
                ("created", time(c.created_ms)),
                (
                    "health",
                    format!(
                        "{} ({} healthy replicas)",
                        d.replication_health, d.healthy_replicas
                    ),
                ),
            ]);
            println!();
            let rows = d
                .replicas
                .iter()
                .map(|r| {
                    vec![
                        r.datanode_id.to_string(),
                        r.hostname.clone(),
                        r.state.clone(),
                        r.bcsid.to_string(),
                        r.block_count.to_string(),
                        size(r.used_bytes),
                        r.healthy.to_string(),
                    ]
                })
                .collect::<Vec<_>>();
            table(
                &[
                    "DATANODE", "HOST", "STATE", "BCSID", "BLOCKS", "USED", "HEALTHY",
                ],
                &rows,
            );
        }
        ContainerCommand::Close { id } => {
            let st = scm.close_container(id).await?;
            if as_json {
                json(&serde_json::json!({"id": id, "state": st}))?
            } else {
                println!("container {id} is {st}")
            }
        }
    }
    Ok(())
}

async fn safemode(scm: &ScmClient, as_json: bool, cmd: SafemodeCommand) -> anyhow::Result<()> {
    match cmd {
        SafemodeCommand::Status => {
            let s = scm.safe_mode().await?;
            if as_json {
                return json(&s);
            }
            println!(
                "SCM is {}",
                if s.in_safe_mode {
                    "in safe mode"
                } else {
                    "out of safe mode"
                }
            );
            for r in &s.rules {
                println!(
                    "  {} {}: {}",
                    if r.satisfied { "[x]" } else { "[ ]" },
                    r.name,
                    r.detail
                );
            }
        }
        SafemodeCommand::Exit => {
            let was = scm.exit_safe_mode().await?;
            if as_json {
                json(&serde_json::json!({"was_in_safe_mode": was}))?
            } else if was {
                println!("SCM left safe mode")
            } else {
                println!("SCM was not in safe mode")
            }
        }
        SafemodeCommand::Wait { wait_timeout } => {
            let deadline = Instant::now() + wait_timeout;
            loop {
                let s = scm.safe_mode().await?;
                if !s.in_safe_mode {
                    if as_json {
                        json(&s)?
                    } else {
                        println!("SCM is out of safe mode")
                    }
                    return Ok(());
                }
                if Instant::now() >= deadline {
                    let why = s
                        .rules
                        .iter()
                        .filter(|r| !r.satisfied)
                        .map(|r| r.detail.clone())
                        .collect::<Vec<_>>()
                        .join("; ");
                    bail!("SCM still in safe mode after {wait_timeout:?}: {why}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    Ok(())
}
