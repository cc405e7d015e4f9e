//! A cluster of real `rozone-scm`, `rozone-om` and `rozone-datanode` processes in a temp
//! dir, plaintext (the suite looks for consistency defects, not TLS ones; mTLS would only
//! slow the 2-core machine down). Every SCM and OM peer port sits behind a [`LinkProxy`],
//! so single links can be cut; so does every SCM client port (everyone but the harness
//! dials the SCMs through it), so a datanode can be cut from the SCM ring alone while it
//! still serves clients and its pipelines. Every process can be killed, restarted, paused,
//! resumed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rozone_telemetry::testkit;

use crate::procs::Proc;

use crate::proxy::{LinkProxy, Owners};

/// Which daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Scm,
    Om,
    Datanode,
}

impl Kind {
    pub fn binary(self) -> &'static str {
        match self {
            Kind::Scm => "rozone-scm",
            Kind::Om => "rozone-om",
            Kind::Datanode => "rozone-datanode",
        }
    }
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Scm => "scm",
            Kind::Om => "om",
            Kind::Datanode => "dn",
        }
    }
}

/// How big a cluster.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub scms: u64,
    pub oms: u64,
    pub datanodes: u64,
}

/// One daemon: its config, its process while it runs, its peer proxy (SCM, OM).
pub struct Node {
    pub kind: Kind,
    pub id: u64,
    pub name: String,
    pub client_addr: String,
    /// Its HTTP endpoint (health, metrics and, in builds with failpoints, `/failpoints`).
    pub http_addr: String,
    pub config: PathBuf,
    pub proxy: Option<LinkProxy>,
    /// An SCM's client-port proxy: the address OMs, datanodes and leader hints use.
    pub client_proxy: Option<LinkProxy>,
    pub daemon: Option<Proc>,
    pub paused: bool,
    /// A datanode lost for good: killed, never started again, left out of every later
    /// fault and of the heal.
    pub lost: bool,
    /// Its stderr, every incarnation appended.
    pub log: PathBuf,
}

pub struct Cluster {
    pub dir: PathBuf,
    pub bins: PathBuf,
    pub nodes: BTreeMap<String, Node>,
    /// `ROZONE_FAILPOINTS` for every daemon started (`--daemon-failpoints`).
    pub failpoints: Option<String>,
    owners: Owners,
}

/// The OMs' follower lease for LOCAL_LEASE reads (at log limit 0): the bound those reads are
/// checked against (`checker::lease`).
pub const FOLLOWER_LEASE: Duration = Duration::from_secs(1);

/// Raft timing of a loopback cluster on a busy 2-core machine.
const RAFT: &str = "[raft]\nfsync = false\nelection_timeout_min = \"600ms\"\n\
                    election_timeout_max = \"1200ms\"\nheartbeat_interval = \"150ms\"\n";
/// The SCM's judgement of datanodes, shortened so a run sees a datanode lost for good
/// declared DEAD and its replicas copied within the end-state wait: DEAD after 10 s of
/// silence (a killed or paused datanode is back within 4 s plus its start), the
/// ReplicationManager every 5 s, a lost copy command retried after 30 s.
const SCM_TIMING: &str = "datanode_stale_after = \"4s\"\ndatanode_dead_after = \"10s\"\n\
                          replication_interval = \"5s\"\nreplication_inflight_timeout = \"30s\"\n";
/// A bound on anything the harness waits for ("hung", not "slow").
pub const WAIT: Duration = Duration::from_secs(90);

/// Ports for the daemons, from the test port allocator: a range below the kernel's
/// ephemeral ports, reserved per process by lock files, so neither another test nor an
/// outgoing connection takes one in the moment before the daemon binds it (port 0 picks
/// from the ephemeral range: a daemon once found its port taken that way). The proxies
/// bind port 0 and hold their listeners.
fn ports(n: usize) -> anyhow::Result<Vec<u16>> {
    Ok((0..n)
        .map(|_| rozone_telemetry::testkit::free_port())
        .collect())
}

fn toml_list(v: &[String]) -> String {
    let q: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", q.join(", "))
}

impl Cluster {
    /// Writes every config (starts nothing).
    pub fn configure(dir: &Path, bins: &Path, size: Size) -> anyhow::Result<Self> {
        let owners: Owners = Arc::new(Mutex::new(Vec::new()));
        let mut nodes = BTreeMap::new();
        let mut p = ports(((size.scms + size.oms + size.datanodes) * 4) as usize)?.into_iter();
        let mut next = || p.next().context("ports");
        // (kind, id, client, peer listen, extra, http)
        let mut plan = Vec::new();
        for (kind, n) in [
            (Kind::Scm, size.scms),
            (Kind::Om, size.oms),
            (Kind::Datanode, size.datanodes),
        ] {
            for id in 1..=n {
                plan.push((kind, id, next()?, next()?, next()?, next()?));
            }
        }
        let mut proxies = BTreeMap::new();
        let mut client_proxies = BTreeMap::new();
        let mut peers: BTreeMap<Kind, String> = BTreeMap::new();
        let mut scm_addrs = Vec::new();
        for (kind, id, client, peer, _, _) in &plan {
            if *kind == Kind::Datanode {
                continue;
            }
            let target: SocketAddr = format!("127.0.0.1:{peer}").parse()?;
            let proxy = LinkProxy::start(target, Arc::clone(&owners))?;
            let mut client_addr = format!("127.0.0.1:{client}");
            if *kind == Kind::Scm {
                let target: SocketAddr = client_addr.parse()?;
                let p = LinkProxy::start(target, Arc::clone(&owners))?;
                client_addr = p.addr().to_string();
                scm_addrs.push(client_addr.clone());
                client_proxies.insert((*kind, *id), p);
            }
            peers.entry(*kind).or_default().push_str(&format!(
                "[[peers]]\nid = {id}\npeer_addr = \"{}\"\nclient_addr = \"{client_addr}\"\n",
                proxy.addr()
            ));
            proxies.insert((*kind, *id), proxy);
        }
        for (kind, id, client, peer, extra, http) in plan {
            let name = format!("{}{id}", kind.prefix());
            let data = dir.join(&name);
            let head = format!(
                "[node]\nid = {id}\ndata_dir = {:?}\n[http]\naddr = \"127.0.0.1:{http}\"\n{RAFT}",
                data.display().to_string()
            );
            let text = match kind {
                Kind::Scm => format!(
                    "{head}[scm]\nclient_addr = \"127.0.0.1:{client}\"\npeer_addr = \"127.0.0.1:{peer}\"\n\
                     checkpoint_addr = \"127.0.0.1:0\"\nbootstrap_retry_pause = \"200ms\"\n{SCM_TIMING}{}",
                    peers[&kind]
                ),
                Kind::Om => format!(
                    "{head}[om]\nclient_addr = \"127.0.0.1:{client}\"\npeer_addr = \"127.0.0.1:{peer}\"\n\
                     scm_addrs = {}\nlocal_lease_enabled = true\nlocal_lease_time = \"{}ms\"\n\
                     local_lease_log_limit = 0\n{}",
                    toml_list(&scm_addrs),
                    FOLLOWER_LEASE.as_millis(),
                    peers[&kind]
                ),
                Kind::Datanode => format!(
                    "{head}[datanode]\ncontainer_addr = \"127.0.0.1:{client}\"\nraft_addr = \"127.0.0.1:{peer}\"\n\
                     replication_addr = \"127.0.0.1:{extra}\"\nscm_addrs = {}\nheartbeat_interval = \"1s\"\n",
                    toml_list(&scm_addrs)
                ),
            };
            let config = dir.join(format!("{name}.toml"));
            std::fs::write(&config, text).with_context(|| format!("write {}", config.display()))?;
            let log = dir.join(format!("{name}.log"));
            nodes.insert(
                name.clone(),
                Node {
                    kind,
                    id,
                    name,
                    client_addr: format!("127.0.0.1:{client}"),
                    http_addr: format!("127.0.0.1:{http}"),
                    config,
                    proxy: proxies.remove(&(kind, id)),
                    client_proxy: client_proxies.remove(&(kind, id)),
                    daemon: None,
                    paused: false,
                    lost: false,
                    log,
                },
            );
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            bins: bins.to_path_buf(),
            nodes,
            failpoints: None,
            owners,
        })
    }

    /// The members of `kind` that are not lost.
    pub fn names(&self, kind: Kind) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| n.kind == kind && !n.lost)
            .map(|n| n.name.clone())
            .collect()
    }

    /// Kills `name` for good: never started again.
    pub fn lose(&mut self, name: &str) -> anyhow::Result<()> {
        self.kill(name)?;
        self.node_mut(name)?.lost = true;
        Ok(())
    }

    /// The datanodes lost for good, by id.
    pub fn lost_datanodes(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.kind == Kind::Datanode && n.lost)
            .map(|n| n.id)
            .collect()
    }

    pub fn client_addrs(&self, kind: Kind) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| n.kind == kind)
            .map(|n| n.client_addr.clone())
            .collect()
    }

    pub fn node(&self, name: &str) -> anyhow::Result<&Node> {
        self.nodes
            .get(name)
            .with_context(|| format!("no node {name}"))
    }

    fn node_mut(&mut self, name: &str) -> anyhow::Result<&mut Node> {
        self.nodes
            .get_mut(name)
            .with_context(|| format!("no node {name}"))
    }

    /// Starts `name` with startup flags (waits for nothing).
    pub fn spawn(&mut self, name: &str, flags: &[&str]) -> anyhow::Result<()> {
        let bin = self.bins.join(self.node(name)?.kind.binary());
        let failpoints = self.failpoints.clone();
        let n = self.node_mut(name)?;
        if n.daemon.is_some() {
            bail!("{name} is running already");
        }
        let mut cmd = testkit::insecure_command(&bin);
        cmd.arg("--config").arg(&n.config).args(flags);
        if let Some(spec) = &failpoints {
            cmd.env(rozone_telemetry::failpoints::ENV, spec);
        }
        let d = Proc::spawn(cmd, &n.log)?;
        let pid = d.pid();
        n.daemon = Some(d);
        n.paused = false;
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|(o, _)| o != name);
        owners.push((name.to_string(), pid));
        Ok(())
    }

    /// Sets (`Some(actions)`, the `fail` crate's syntax) or removes (`None`) a failpoint in
    /// `name`'s running process through its HTTP endpoint.
    pub fn failpoint(&self, name: &str, fp: &str, actions: Option<&str>) -> anyhow::Result<()> {
        use std::io::{Read, Write};
        let addr = &self.node(name)?.http_addr;
        let (method, body) = match actions {
            Some(a) => ("PUT", a),
            None => ("DELETE", ""),
        };
        let mut s = std::net::TcpStream::connect(addr)
            .with_context(|| format!("{name}: connect to {addr}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_write_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "{method} /failpoints/{fp} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut resp = String::new();
        s.read_to_string(&mut resp)
            .with_context(|| format!("{name}: read the reply of {method} /failpoints/{fp}"))?;
        match resp.split_whitespace().nth(1) {
            Some("200") => Ok(()),
            Some("404") | Some("405") => {
                bail!("{name} has no failpoints: a build without the `failpoints` feature")
            }
            _ => bail!(
                "{name}: {method} /failpoints/{fp}: {}",
                resp.lines().last().unwrap_or("no reply")
            ),
        }
    }

    /// Waits for a line on `name`'s stderr.
    pub fn wait_line(&mut self, name: &str, line: &str) -> anyhow::Result<()> {
        let n = self.node_mut(name)?;
        let d = n
            .daemon
            .as_mut()
            .with_context(|| format!("{name} is not running"))?;
        d.wait_line(line, WAIT).with_context(|| name.to_string())
    }

    /// Sends a signal ("KILL", "STOP", "CONT").
    pub fn signal(&mut self, name: &str, sig: &str) -> anyhow::Result<()> {
        let n = self.node_mut(name)?;
        let d = n
            .daemon
            .as_ref()
            .with_context(|| format!("{name} is not running"))?;
        d.signal(sig)
            .with_context(|| format!("signal {sig} to {name}"))?;
        match sig {
            "STOP" => n.paused = true,
            "CONT" => n.paused = false,
            _ => {}
        }
        Ok(())
    }

    /// SIGKILL, and wait until the process is gone; its log is kept.
    pub fn kill(&mut self, name: &str) -> anyhow::Result<()> {
        let n = self.node_mut(name)?;
        if let Some(d) = n.daemon.take() {
            d.kill().with_context(|| name.to_string())?;
        }
        n.paused = false;
        Ok(())
    }

    /// Deletes `name`'s data dir (it must be stopped): its disk lost for good.
    pub fn wipe(&mut self, name: &str) -> anyhow::Result<()> {
        if self.running(name) {
            bail!("{name} is running: stop it before wiping its data");
        }
        let data = self.dir.join(name);
        match std::fs::remove_dir_all(&data) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("wipe {}", data.display())),
        }
    }

    /// Whether `name` runs (started, not exited).
    pub fn running(&mut self, name: &str) -> bool {
        self.nodes
            .get_mut(name)
            .and_then(|n| n.daemon.as_mut())
            .is_some_and(|d| d.running())
    }

    /// Cuts the link `from → to` (`from` = "*": every link into `to`).
    pub fn block(&self, from: &str, to: &str) -> anyhow::Result<()> {
        let p = self
            .node(to)?
            .proxy
            .as_ref()
            .with_context(|| format!("{to} has no proxy"))?;
        p.block(from);
        Ok(())
    }

    /// Cuts `datanode` from every SCM (its heartbeats, reports and commands) and from
    /// nothing else: clients, pipeline peers and replication still reach it.
    pub fn cut_from_scm(&self, datanode: &str) -> anyhow::Result<()> {
        self.node(datanode)?;
        for n in self.nodes.values() {
            if let Some(p) = &n.client_proxy {
                p.block(datanode);
            }
        }
        Ok(())
    }

    /// Heals every link and resumes every paused process.
    pub fn heal_all(&mut self) -> anyhow::Result<()> {
        for n in self.nodes.values() {
            for p in [&n.proxy, &n.client_proxy].into_iter().flatten() {
                p.heal();
            }
        }
        let paused: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.paused)
            .map(|n| n.name.clone())
            .collect();
        for name in paused {
            self.signal(&name, "CONT")?;
        }
        Ok(())
    }

    /// Starts the cluster: SCM ring (first `--init`, then one `--bootstrap` at a time), OM
    /// ring likewise, then the datanodes.
    pub fn start(&mut self) -> anyhow::Result<Duration> {
        let t = Instant::now();
        for (i, name) in self.names(Kind::Scm).iter().enumerate() {
            let (flag, line) = if i == 0 {
                ("--init", "cluster created")
            } else {
                ("--bootstrap", "joined the SCM ring")
            };
            self.spawn(name, &[flag])?;
            self.wait_line(name, line)?;
        }
        for (i, name) in self.names(Kind::Om).iter().enumerate() {
            self.spawn(name, &[if i == 0 { "--init" } else { "--bootstrap" }])?;
            self.wait_line(name, "OM serving")?;
        }
        for name in self.names(Kind::Datanode) {
            self.spawn(&name, &[])?;
        }
        Ok(t.elapsed())
    }
}
