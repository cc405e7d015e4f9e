//! `rozone dev up|down`: a local HA cluster of the real daemon binaries on 127.0.0.1, data
//! under one directory. The first start initialises the rings (first SCM `--init`, the
//! others `--bootstrap`, one at a time; the same for OMs), later starts reopen them from
//! their data. `up` returns (or, with `--detach`, exits) once the cluster can serve: every
//! daemon `/ready`, ready SCM and OM leaders, an open pipeline, safe mode left. One S3
//! gateway (`rozone-s3g`, when its binary is found) starts with the datanodes; its endpoint
//! goes into `client.toml` as `s3_endpoint`.

mod certs;
mod layout;
mod ports;
mod procs;
mod ready;
mod set;

use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Subcommand;
use rozone_client::ClientConfig;

use layout::{daemon_config, running, write_atomic, Kind, Layout, PidEntry};

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Start a local cluster (initialising it on first start).
    Up {
        /// Where data, configs and logs live.
        #[arg(long, default_value = "rozone-dev")]
        dir: PathBuf,
        /// SCMs (first start only; default 3).
        #[arg(long)]
        scms: Option<u64>,
        /// OMs (first start only; default 3).
        #[arg(long)]
        oms: Option<u64>,
        /// Datanodes (first start only; default 3).
        #[arg(long)]
        datanodes: Option<u64>,
        /// Leave the cluster running and exit once it is ready (stop: rozone dev down).
        #[arg(long)]
        detach: bool,
        /// Where rozone-scm, rozone-om and rozone-datanode are (default: next to rozone, then PATH).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// Give up waiting for readiness after this long.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        ready_timeout: Duration,
        /// A config key of the scm, om, datanode or s3g section for every daemon of that
        /// kind, at this start (repeatable): e.g. --set om.block_token_lifetime=30s; a key of
        /// that kind's [raft] section with --set om.raft.KEY=VALUE.
        #[arg(long = "set", value_name = "SECTION.KEY=VALUE", value_parser = set::parse)]
        set: Vec<set::Setting>,
        /// Plaintext on every port, no certificates and no block tokens, at this start: for
        /// measuring what TLS costs (BENCHMARKS.md), never for data that matters. The
        /// client.toml written says `insecure = true`.
        #[arg(long)]
        insecure: bool,
    },
    /// Stop a cluster started with --detach.
    Down {
        #[arg(long, default_value = "rozone-dev")]
        dir: PathBuf,
    },
}

/// How long daemons get to stop after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(30);

pub async fn run(as_json: bool, cmd: DevCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DevCommand::Up {
            dir,
            scms,
            oms,
            datanodes,
            detach,
            bin_dir,
            ready_timeout,
            set,
            insecure,
        } => {
            let dir = absolute(&dir)?;
            let mut up = Up {
                dir,
                children: Vec::new(),
                pids: Vec::new(),
                settings: set,
                insecure,
            };
            match up
                .start(
                    scms,
                    oms,
                    datanodes,
                    bin_dir.as_deref(),
                    ready_timeout,
                    as_json,
                    detach,
                )
                .await
            {
                Ok(()) if detach => Ok(ExitCode::SUCCESS),
                Ok(()) => up.serve().await,
                Err(e) => {
                    up.stop().await;
                    Err(e)
                }
            }
        }
        DevCommand::Down { dir } => down(&absolute(&dir)?, as_json).await,
    }
}

fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    layout::check_dir(dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    dir.canonicalize()
        .with_context(|| format!("resolve {}", dir.display()))
}

struct Up {
    dir: PathBuf,
    children: Vec<(String, Child)>,
    pids: Vec<PidEntry>,
    /// `--set` keys for the daemons' main sections.
    settings: Vec<set::Setting>,
    /// `--insecure`: plaintext everywhere.
    insecure: bool,
}

impl Up {
    fn record(&mut self, name: String, child: Child) -> anyhow::Result<()> {
        self.pids.push(PidEntry {
            name: name.clone(),
            pid: child.id(),
        });
        self.children.push((name, child));
        write_atomic(
            &layout::pids_path(&self.dir),
            &serde_json::to_string_pretty(&self.pids)?,
        )
    }

    /// Whether the child `name` has exited (its status, then).
    fn exited(&mut self, name: &str) -> Option<String> {
        let (_, c) = self.children.iter_mut().find(|(n, _)| n == name)?;
        c.try_wait().ok().flatten().map(|st| st.to_string())
    }

    fn reap(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.try_wait();
        }
    }

    async fn stop(&mut self) {
        let pids: Vec<(String, u32)> = self.pids.iter().map(|p| (p.name.clone(), p.pid)).collect();
        let mut children = std::mem::take(&mut self.children);
        let killed = procs::stop_all(&pids, GRACE, &mut || {
            for (_, c) in &mut children {
                let _ = c.try_wait();
            }
        })
        .await;
        for (name, mut c) in children {
            if let Err(e) = c.wait() {
                eprintln!("rozone dev: wait for {name}: {e}");
            }
        }
        if !killed.is_empty() {
            eprintln!(
                "rozone dev: killed {} after {GRACE:?} without a clean stop",
                killed.join(", ")
            );
        }
        // Only a start that launched daemons owns `pids.json`: a start refused because a
        // cluster already runs there must leave that cluster's record for `dev down`.
        if !self.pids.is_empty() {
            let _ = std::fs::remove_file(layout::pids_path(&self.dir));
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn start(
        &mut self,
        scms: Option<u64>,
        oms: Option<u64>,
        dns: Option<u64>,
        bin_dir: Option<&Path>,
        timeout: Duration,
        as_json: bool,
        detach: bool,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let dir = self.dir.clone();
        let live = running(&dir)?;
        if !live.is_empty() {
            bail!(
                "a cluster is already running in {} ({} daemons); stop it with: rozone dev down --dir {}",
                dir.display(),
                live.len(),
                dir.display()
            );
        }
        let existing = Layout::load(&dir)?;
        let fresh = existing.is_none();
        let mut layout = match existing {
            Some(mut l) => {
                let gateway = l.add_gateway()?;
                if l.add_enroll_ports()? || gateway {
                    l.save(&dir)?;
                }
                for (kind, want) in [(Kind::Scm, scms), (Kind::Om, oms), (Kind::Datanode, dns)] {
                    if let Some(w) = want.filter(|w| *w != l.of(kind).len() as u64) {
                        bail!(
                            "{} holds a cluster with {} {}s, not {w}: use another --dir for a different size",
                            dir.display(),
                            l.of(kind).len(),
                            kind.binary()
                        );
                    }
                }
                l
            }
            None => {
                let (s, o, d) = (scms.unwrap_or(3), oms.unwrap_or(3), dns.unwrap_or(3));
                if s == 0 || o == 0 || d == 0 {
                    bail!("a cluster needs at least one SCM, one OM and one datanode");
                }
                Layout::fresh(s, o, d)?
            }
        };
        let mut bins = [Kind::Scm, Kind::Om, Kind::Datanode]
            .into_iter()
            .map(|k| procs::find_binary(k, bin_dir).map(|b| (k, b)))
            .collect::<anyhow::Result<std::collections::HashMap<_, _>>>()?;
        // The S3 gateway is optional: without its binary the cluster starts without one.
        let mut gateway_note = None;
        match procs::find_binary(Kind::S3g, bin_dir) {
            Ok(b) => {
                bins.insert(Kind::S3g, b);
            }
            Err(e) => {
                if fresh {
                    layout.save(&dir)?;
                }
                layout.nodes.retain(|n| n.kind != Kind::S3g);
                gateway_note = Some(format!("no S3 gateway: {e:#}"));
            }
        }
        let extra: std::collections::HashMap<Kind, String> = bins
            .iter()
            .map(|(k, b)| (*k, set::lines(&optional_keys(*k, b), &self.settings, *k)))
            .collect();
        // Mutual TLS on every port, as in production: a CA and a certificate per daemon
        // (made even for an --insecure start, so the next start may be secure again).
        let tls = certs::DevTls::ensure(&dir, &layout)?;
        if self.insecure {
            eprintln!(
                "rozone dev: --insecure: every port plaintext, no certificates, no block tokens"
            );
        }
        for n in &layout.nodes {
            let nd = dir.join(n.name());
            std::fs::create_dir_all(&nd).with_context(|| format!("create {}", nd.display()))?;
            let mut lines = extra[&n.kind].clone();
            if n.kind == Kind::Scm && n.enroll != 0 && !self.insecure {
                // Every SCM may issue certificates for join tokens (docs/security.md).
                lines.push_str(&tls.scm_enroll_lines(n.enroll));
            }
            let raft = set::raft_section(layout::RAFT, &self.settings, n.kind);
            let config = daemon_config(&layout, n, &nd, &lines, &raft);
            let security = if self.insecure {
                "[security]\ninsecure = true\n".to_string()
            } else {
                tls.section(n)
            };
            write_atomic(&nd.join("config.toml"), &format!("{config}{security}"))?;
        }
        if fresh && gateway_note.is_none() {
            layout.save(&dir)?;
        }
        let client = ClientConfig {
            s3_endpoint: layout
                .of(Kind::S3g)
                .first()
                .map(|n| format!("http://{}", n.client_addr())),
            om_addrs: layout
                .of(Kind::Om)
                .iter()
                .map(|n| n.client_addr())
                .collect(),
            scm_addrs: layout
                .of(Kind::Scm)
                .iter()
                .map(|n| n.client_addr())
                .collect(),
            ..ClientConfig::default()
        };
        let client = if self.insecure {
            ClientConfig {
                insecure: true,
                ..client
            }
        } else {
            tls.client(client)
        };
        let deadline = Instant::now() + timeout;
        let w = ready::Waiter::new(&client, deadline)?;
        if fresh {
            // Rings grow one member at a time: each joins a ring that has a ready leader.
            for kind in [Kind::Scm, Kind::Om] {
                for (i, n) in layout.of(kind).into_iter().enumerate() {
                    let flag = if i == 0 { "--init" } else { "--bootstrap" };
                    let child = procs::spawn(&bins[&kind], &dir.join(n.name()), &[flag])?;
                    self.record(n.name(), child)?;
                    let name = n.name();
                    w.daemon_ready(n, &dir, &mut || self.exited(&name)).await?;
                    w.voter(n).await?;
                }
            }
            for n in layout
                .of(Kind::Datanode)
                .into_iter()
                .chain(layout.of(Kind::S3g))
            {
                let child = procs::spawn(&bins[&n.kind], &dir.join(n.name()), &[])?;
                self.record(n.name(), child)?;
            }
        } else {
            for n in &layout.nodes {
                let child = procs::spawn(&bins[&n.kind], &dir.join(n.name()), &[])?;
                self.record(n.name(), child)?;
            }
        }
        for n in &layout.nodes {
            let name = n.name();
            w.daemon_ready(n, &dir, &mut || self.exited(&name)).await?;
        }
        let mut notes = w.cluster_ready(layout.of(Kind::Datanode).len()).await?;
        notes.extend(gateway_note);
        let client_toml = dir.join("client.toml");
        write_atomic(&client_toml, &client.to_toml())?;
        let took = started.elapsed();
        // Where a process with a join token gets its certificate (none when insecure).
        let (enroll_addrs, ca_cert) = if self.insecure {
            (Vec::new(), None)
        } else {
            (layout.enroll_addrs(), Some(tls.ca_cert()))
        };
        if as_json {
            crate::output::json(&serde_json::json!({
                "dir": dir,
                "client_config": client_toml,
                "ready_after_ms": took.as_millis() as u64,
                "fresh": fresh,
                "om_addrs": client.om_addrs,
                "scm_addrs": client.scm_addrs,
                "s3_endpoint": client.s3_endpoint,
                "enroll_addrs": enroll_addrs,
                "ca_cert": ca_cert,
                "pids": self.pids.iter().map(|p| serde_json::json!({"name": p.name, "pid": p.pid})).collect::<Vec<_>>(),
            }))?;
        } else {
            println!(
                "rozone dev cluster {} in {:.1}s: {} SCM, {} OM, {} datanodes under {}",
                if fresh { "created and ready" } else { "ready" },
                took.as_secs_f64(),
                layout.of(Kind::Scm).len(),
                layout.of(Kind::Om).len(),
                layout.of(Kind::Datanode).len(),
                dir.display()
            );
            for n in notes {
                println!("  note: {n}");
            }
            if let Some(e) = &client.s3_endpoint {
                println!("S3 endpoint: {e} (credentials: rozone s3 getsecret)");
            }
            if let Some(ca) = ca_cert.as_ref().filter(|_| !enroll_addrs.is_empty()) {
                println!(
                    "Join tokens: rozone admin join-token create --role ROLE --id N; redeem with --enroll-addr {} (CA {})",
                    enroll_addrs.join(","),
                    ca.display()
                );
            }
            println!(
                "\nUse it:\n  export ROZONE_CONFIG={}",
                client_toml.display()
            );
            println!("  rozone sh volume create /vol1\n  rozone sh bucket create /vol1/bucket1\n  rozone sh key put /vol1/bucket1/hello ./somefile\n  rozone admin om roles");
            println!("Logs: {}/*/stderr.log", dir.display());
            if detach {
                println!("Stop it: rozone dev down --dir {}", dir.display());
            } else {
                println!("Ctrl-C stops the cluster.");
            }
        }
        Ok(())
    }

    /// Foreground: runs until SIGINT/SIGTERM, reporting daemons that exit meanwhile.
    async fn serve(mut self) -> anyhow::Result<ExitCode> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("install SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("install SIGINT handler")?;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut gone = std::collections::HashSet::new();
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = tick.tick() => {
                    for (name, c) in &mut self.children {
                        if let Ok(Some(st)) = c.try_wait() {
                            if gone.insert(name.clone()) {
                                eprintln!("rozone dev: {name} exited ({st}); see {}", self.dir.join(name.as_str()).join("stderr.log").display());
                            }
                        }
                    }
                }
            }
        }
        eprintln!("rozone dev: stopping the cluster");
        self.reap();
        self.stop().await;
        eprintln!("rozone dev: stopped; data kept in {}", self.dir.display());
        Ok(ExitCode::SUCCESS)
    }
}

/// Settings of a dev cluster beyond the defaults, as (section, key, value): each is
/// written only when the binary's own sample config has that key, so the CLI works with
/// daemons older or newer than itself.
const OPTIONAL: &[(Kind, &str, &str, &str)] = &[
    // Lease reads on followers (`bench lease-read`).
    (Kind::Om, "om", "local_lease_enabled", "true"),
    // Pipelines open and report their leaders within seconds, not tens of seconds.
    (Kind::Datanode, "datanode", "heartbeat_interval", "\"1s\""),
];

/// The optional lines for `kind`'s main section its binary knows.
fn optional_keys(kind: Kind, bin: &Path) -> String {
    let sample = std::process::Command::new(bin)
        .arg("--print-sample-config")
        .env_remove("ROZONE_CONFIG")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let table: toml::Table = toml::from_str(&sample).unwrap_or_default();
    let mut extra = String::new();
    for (k, section, key, value) in OPTIONAL {
        let known = table.get(*section).and_then(|s| s.get(*key)).is_some();
        if *k == kind && known {
            extra.push_str(&format!("{key} = {value}\n"));
        }
    }
    extra
}

async fn down(dir: &Path, as_json: bool) -> anyhow::Result<ExitCode> {
    if Layout::load(dir)?.is_none() {
        bail!("no rozone dev cluster in {}", dir.display());
    }
    let live = running(dir)?;
    let pids: Vec<(String, u32)> = live.iter().map(|p| (p.name.clone(), p.pid)).collect();
    let killed = procs::stop_all(&pids, GRACE, &mut || {}).await;
    let _ = std::fs::remove_file(layout::pids_path(dir));
    if as_json {
        crate::output::json(&serde_json::json!({"stopped": pids.len(), "killed": killed}))?;
    } else if pids.is_empty() {
        println!("no daemon was running in {}", dir.display());
    } else {
        println!("stopped {} daemons in {}", pids.len(), dir.display());
        if !killed.is_empty() {
            println!(
                "killed after {GRACE:?} without a clean stop: {}",
                killed.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
