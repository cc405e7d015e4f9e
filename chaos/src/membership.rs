//! The membership fault "a member lost for good and replaced", done as an operator does it
//! (docs/om.md, docs/scm.md): its process killed, the member removed from the ring, its data
//! dir wiped, the same id started again with `--bootstrap` (a fresh learner that catches up
//! by snapshot, then a voter). A leader is first asked to hand over, as removing the member
//! that leads would only start with an election.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rozone_client::Client;

use crate::cluster::{Cluster, Kind, WAIT};
use crate::rings;

fn lock(c: &Mutex<Cluster>) -> std::sync::MutexGuard<'_, Cluster> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

fn members(c: &Cluster, kind: Kind) -> Vec<(u64, String)> {
    c.nodes
        .values()
        .filter(|n| n.kind == kind)
        .map(|n| (n.id, n.client_addr.clone()))
        .collect()
}

/// Retries `f` until it succeeds or [`WAIT`] has passed (the ring may be re-electing).
async fn retry<F, Fut>(what: &str, mut f: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match f().await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e.context(what.to_string())),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Replaces member `id` of `ring` (the OM or SCM ring); returns what was done.
pub async fn replace(
    cluster: &Arc<Mutex<Cluster>>,
    client: &Client,
    ring: Kind,
    id: u64,
) -> anyhow::Result<String> {
    if ring == Kind::Datanode {
        bail!("replace is for the OM and SCM rings");
    }
    let name = format!("{}{id}", ring.prefix());
    // Hand leadership over first, and wait until another member leads.
    retry("hand leadership over", || async {
        let m = members(&lock(cluster), ring);
        match rings::leader(ring, &m).await {
            Some(l) if l != id => Ok(()),
            Some(_) => {
                let to = m
                    .iter()
                    .map(|(i, _)| *i)
                    .find(|i| *i != id)
                    .context("no other member")?;
                match ring {
                    Kind::Om => client.om.transfer_leader(to).await?,
                    _ => {
                        client.scm()?.transfer_leader(to).await?;
                    }
                }
                bail!("transfer asked")
            }
            None => bail!("no ready leader"),
        }
    })
    .await?;
    lock(cluster).kill(&name)?;
    retry("remove the member", || async {
        match ring {
            Kind::Om => client.om.decommission(id).await?,
            _ => client.scm()?.remove_member(id).await?,
        }
        Ok(())
    })
    .await?;
    lock(cluster).wipe(&name)?;
    let line = match ring {
        Kind::Om => "OM serving",
        _ => "joined the SCM ring",
    };
    let c = Arc::clone(cluster);
    let n = name.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = lock(&c);
        c.spawn(&n, &["--bootstrap"])?;
        c.wait_line(&n, line)
    })
    .await
    .context("join task")??;
    // Back in the ring: it names the leader that says it is ready (a follower answers
    // leader_ready for itself, i.e. false, so the leader's own answer decides readiness).
    retry("the replaced member names the ready leader", || async {
        let (m, addr) = {
            let c = lock(cluster);
            (members(&c, ring), c.node(&name)?.client_addr.clone())
        };
        let leader = rings::leader(ring, &m).await;
        match (leader, rings::view(ring, &addr).await) {
            (Some(l), Some((Some(seen), _))) if seen == l => Ok(()),
            other => bail!("not yet: {other:?}"),
        }
    })
    .await?;
    Ok(format!(
        "Replace {ring:?} member {id}: removed, wiped, rejoined"
    ))
}

/// Loses datanode `name` for good (docs/chaos.md): killed, never started again. Skipped
/// when one is lost already: with four datanodes, a second loss would leave no pipeline.
pub fn lose_datanode(cluster: &Arc<Mutex<Cluster>>, name: &str) -> anyhow::Result<String> {
    let mut c = lock(cluster);
    if !c.lost_datanodes().is_empty() {
        return Ok(format!(
            "Replace Datanode {name}: skipped, a datanode is lost already"
        ));
    }
    if c.names(Kind::Datanode).len() <= 3 {
        return Ok(format!(
            "Replace Datanode {name}: skipped, a pipeline needs the three left"
        ));
    }
    c.lose(name)?;
    Ok(format!("Replace Datanode {name}: lost for good"))
}
