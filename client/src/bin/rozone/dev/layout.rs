//! The on-disk layout of a local cluster under DIR: `cluster.json` (every daemon's ports,
//! fixed at the first start so restarts find each other), one directory per daemon with
//! its `config.toml`, `data/` and `stderr.log`, `pids.json` while it runs, and the
//! `client.toml` the CLI uses.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::ports::Picker;

/// Which daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Scm,
    Om,
    Datanode,
    /// The S3 gateway (stateless; started after the cluster is ready).
    S3g,
}

impl Kind {
    pub fn binary(self) -> &'static str {
        match self {
            Kind::Scm => "rozone-scm",
            Kind::Om => "rozone-om",
            Kind::Datanode => "rozone-datanode",
            Kind::S3g => "rozone-s3g",
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Kind::Scm => "scm",
            Kind::Om => "om",
            Kind::Datanode => "dn",
            Kind::S3g => "s3g",
        }
    }
}

/// One daemon of the cluster and its ports on 127.0.0.1.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    pub kind: Kind,
    pub id: u64,
    /// SCM/OM client port; datanode container port.
    pub client: u16,
    /// SCM/OM Raft port; datanode pipeline Raft port.
    pub peer: u16,
    /// SCM checkpoint port; datanode replication port; unused (0) for OM.
    pub extra: u16,
    pub http: u16,
    /// SCM enrollment port (join tokens); 0 for others, and in layouts written before it.
    #[serde(default)]
    pub enroll: u16,
}

impl Node {
    pub fn name(&self) -> String {
        format!("{}{}", self.kind.prefix(), self.id)
    }
    pub fn client_addr(&self) -> String {
        format!("127.0.0.1:{}", self.client)
    }
    pub fn peer_addr(&self) -> String {
        format!("127.0.0.1:{}", self.peer)
    }
}

/// The whole cluster, as `cluster.json` records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Layout {
    pub nodes: Vec<Node>,
}

impl Layout {
    /// A new layout with free ports for every daemon.
    pub fn fresh(scms: u64, oms: u64, datanodes: u64) -> anyhow::Result<Self> {
        let mut picker = Picker::new()?;
        let mut port = || picker.port();
        let mut nodes = Vec::new();
        for (kind, n) in [
            (Kind::Scm, scms),
            (Kind::Om, oms),
            (Kind::Datanode, datanodes),
        ] {
            for id in 1..=n {
                let extra = if kind == Kind::Om { 0 } else { port()? };
                let enroll = if kind == Kind::Scm { port()? } else { 0 };
                nodes.push(Node {
                    kind,
                    id,
                    client: port()?,
                    peer: port()?,
                    extra,
                    http: port()?,
                    enroll,
                });
            }
        }
        let mut l = Self { nodes };
        l.add_gateway_with(&mut port)?;
        Ok(l)
    }

    /// Adds one S3 gateway (its S3 port as `client`) unless the layout has one: layouts
    /// written before the gateway existed get one on their next start. True if added.
    pub fn add_gateway(&mut self) -> anyhow::Result<bool> {
        let mut picker = Picker::new()?;
        self.add_gateway_with(&mut || picker.port())
    }

    fn add_gateway_with(
        &mut self,
        port: &mut dyn FnMut() -> anyhow::Result<u16>,
    ) -> anyhow::Result<bool> {
        if !self.of(Kind::S3g).is_empty() {
            return Ok(false);
        }
        self.nodes.push(Node {
            kind: Kind::S3g,
            id: 1,
            client: port()?,
            peer: 0,
            extra: 0,
            http: port()?,
            enroll: 0,
        });
        Ok(true)
    }

    /// Gives SCMs of a layout written before join tokens an enrollment port. True if any
    /// was added.
    pub fn add_enroll_ports(&mut self) -> anyhow::Result<bool> {
        let mut picker = Picker::new()?;
        let mut added = false;
        for n in self.nodes.iter_mut() {
            if n.kind == Kind::Scm && n.enroll == 0 {
                n.enroll = picker.port()?;
                added = true;
            }
        }
        Ok(added)
    }

    /// The SCMs' enrollment addresses (for `--enroll-addr`).
    pub fn enroll_addrs(&self) -> Vec<String> {
        self.of(Kind::Scm)
            .iter()
            .filter(|n| n.enroll != 0)
            .map(|n| format!("127.0.0.1:{}", n.enroll))
            .collect()
    }

    pub fn of(&self, kind: Kind) -> Vec<&Node> {
        self.nodes.iter().filter(|n| n.kind == kind).collect()
    }

    pub fn load(dir: &Path) -> anyhow::Result<Option<Self>> {
        let p = dir.join("cluster.json");
        if !p.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
        let l: Layout =
            serde_json::from_str(&text).with_context(|| format!("parse {}", p.display()))?;
        Ok(Some(l))
    }

    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        write_atomic(
            &dir.join("cluster.json"),
            &serde_json::to_string_pretty(self)?,
        )
    }
}

/// Writes via a temporary file and rename, so a crash never leaves half a file.
pub fn write_atomic(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("write {}", path.display()))?;
    Ok(())
}

/// Raft timing for a loopback cluster: quicker elections than the defaults (tuned for
/// real networks), still well above a busy 2-core machine's scheduling hiccups.
pub const RAFT: &str = "election_timeout_min = \"600ms\"\nelection_timeout_max = \"1200ms\"\nheartbeat_interval = \"150ms\"\n";

fn peers(nodes: &[&Node]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "[[peers]]\nid = {}\npeer_addr = \"{}\"\nclient_addr = \"{}\"\n",
                n.id,
                n.peer_addr(),
                n.client_addr()
            )
        })
        .collect()
}

fn toml_list(v: &[String]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The TOML config of `node`. `extra` holds optional lines for the main section of the
/// node's kind (`[scm]`, `[om]`, `[datanode]`) that its binary knows; `raft` its `[raft]`
/// section (from [`RAFT`] and `--set`).
pub fn daemon_config(
    layout: &Layout,
    node: &Node,
    node_dir: &Path,
    extra: &str,
    raft: &str,
) -> String {
    let data = node_dir.join("data");
    // The gateway has no [node], data or Raft: its own head.
    let head = || {
        format!(
            "[node]\nid = {}\ndata_dir = {:?}\n[http]\naddr = \"127.0.0.1:{}\"\n",
            node.id,
            data.display().to_string(),
            node.http
        ) + raft
    };
    let scm_addrs: Vec<String> = layout
        .of(Kind::Scm)
        .iter()
        .map(|n| n.client_addr())
        .collect();
    let om_addrs: Vec<String> = layout
        .of(Kind::Om)
        .iter()
        .map(|n| n.client_addr())
        .collect();
    match node.kind {
        Kind::Scm => format!(
            "{}[scm]\nclient_addr = \"{}\"\npeer_addr = \"{}\"\ncheckpoint_addr = \"127.0.0.1:{}\"\nbootstrap_retry_pause = \"200ms\"\n{extra}{}",
            head(),
            node.client_addr(),
            node.peer_addr(),
            node.extra,
            peers(&layout.of(Kind::Scm))
        ),
        Kind::Om => format!(
            "{}[om]\nclient_addr = \"{}\"\npeer_addr = \"{}\"\nscm_addrs = {}\n{extra}{}",
            head(),
            node.client_addr(),
            node.peer_addr(),
            toml_list(&scm_addrs),
            peers(&layout.of(Kind::Om))
        ),
        Kind::Datanode => format!(
            "{}[datanode]\ncontainer_addr = \"{}\"\nraft_addr = \"{}\"\nreplication_addr = \"127.0.0.1:{}\"\nscm_addrs = {}\n{extra}",
            head(),
            node.client_addr(),
            node.peer_addr(),
            node.extra,
            toml_list(&scm_addrs)
        ),
        Kind::S3g => format!(
            "[s3g]\nid = {}\naddr = \"{}\"\nom_addrs = {}\n{extra}[http]\naddr = \"127.0.0.1:{}\"\n",
            node.id,
            node.client_addr(),
            toml_list(&om_addrs),
            node.http
        ),
    }
}

/// A running daemon as `pids.json` records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PidEntry {
    pub name: String,
    pub pid: u32,
}

pub fn pids_path(dir: &Path) -> PathBuf {
    dir.join("pids.json")
}

pub fn load_pids(dir: &Path) -> anyhow::Result<Vec<PidEntry>> {
    let p = pids_path(dir);
    if !p.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", p.display()))
}

/// Whether `pid` is a live rozone process (not a recycled pid of something else). Between
/// fork and exec a just-spawned daemon still shows `rozone`'s own command line.
pub fn alive(pid: u32) -> bool {
    let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie (state Z) has exited; only its parent has not collected it yet.
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    !zombie && String::from_utf8_lossy(&cmd).contains("rozone")
}

/// The running daemons of a cluster in `dir`, if any.
pub fn running(dir: &Path) -> anyhow::Result<Vec<PidEntry>> {
    Ok(load_pids(dir)?
        .into_iter()
        .filter(|p| alive(p.pid))
        .collect())
}

/// Refuses a directory that holds something other than a rozone dev cluster.
pub fn check_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    Ok(())
}
