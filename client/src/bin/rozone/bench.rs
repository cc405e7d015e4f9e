//! `rozone bench ...`: load generators in the spirit of Ozone's freon. Each runs N
//! concurrent clients for a count of operations or a duration and prints count, errors,
//! ops/s, MB/s and latency percentiles as a table (`--json`: one object, stable field
//! names). While it runs, a progress line on stderr (terminal, or `--progress`).

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use rozone_client::om::ReadMode;
use rozone_client::Client;
use serde::Serialize;

use crate::cluster::ClusterArgs;
use crate::output::table;
use crate::progress::{BenchCounters, BenchProgress};

#[derive(Debug, Args, Clone)]
pub struct Load {
    /// Concurrent clients.
    #[arg(long, short = 'c', default_value_t = 16)]
    concurrency: usize,
    /// Operations in all (default: run for --duration).
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// How long to run when no --count is given.
    #[arg(long, short = 'd', default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Volume to use (created if missing).
    #[arg(long, default_value = "bench")]
    volume: String,
    /// Bucket to use (created if missing).
    #[arg(long, default_value = "bench")]
    bucket: String,
    /// Key names are PREFIX-<run>-<n>.
    #[arg(long, default_value = "k")]
    prefix: String,
    /// Show the progress line on stderr even when it is not a terminal (one line per
    /// update, about twice a second).
    #[arg(long)]
    progress: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Open + commit keys without data: the OM's write path (and one SCM block allocation per key).
    OmKeys {
        #[command(flatten)]
        load: Load,
    },
    /// Put objects of --size bytes: the whole data path.
    Put {
        #[command(flatten)]
        load: Load,
        /// Object size, e.g. 1MiB, 64MiB.
        #[arg(long, default_value = "1MiB", value_parser = parse_size)]
        size: u64,
    },
    /// Get the objects a `bench put` left under --prefix, round robin.
    Get {
        #[command(flatten)]
        load: Load,
    },
    /// Key lookups with a read consistency (default: LOCAL_LEASE, served by followers).
    LeaseRead {
        #[command(flatten)]
        load: Load,
        /// lease, default, linearizable or follower.
        #[arg(long, default_value = "lease")]
        mode: String,
    },
}

/// "64MiB", "1m", "4096" → bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?}: want e.g. 4096, 1MiB, 64MiB"))?;
    let mul = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("bad size unit in {s:?}: use B, KiB, MiB or GiB")),
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("size {s:?} too large"))
}

/// What a run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub bench: String,
    pub concurrency: usize,
    pub count: u64,
    pub errors: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub mib_per_sec: f64,
    pub bytes_per_op: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub first_error: Option<String>,
}

/// Runs `op(i)` from `concurrency` tasks until `count` ops or `duration` passed.
async fn drive<F, Fut>(name: &str, load: &Load, bytes_per_op: u64, op: F) -> anyhow::Result<Report>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = rozone_client::Result<()>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicU64::new(0));
    let counters = Arc::new(BenchCounters::default());
    let first_error = Arc::new(Mutex::new(None::<String>));
    let progress = BenchProgress::start(name, counters.clone(), load.progress);
    let started = Instant::now();
    let end = started + load.duration;
    let mut tasks = Vec::new();
    for _ in 0..load.concurrency.max(1) {
        let (op, next, counters, first_error, count) = (
            op.clone(),
            next.clone(),
            counters.clone(),
            first_error.clone(),
            load.count,
        );
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)
                .expect("histogram bounds are valid");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if count.is_some_and(|c| i >= c) || (count.is_none() && Instant::now() >= end) {
                    break;
                }
                let t = Instant::now();
                match op(i).await {
                    Ok(()) => {
                        let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                        counters.ops.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        first_error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert_with(|| e.to_string());
                    }
                }
            }
            h
        }));
    }
    let mut all = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    for t in tasks {
        all.add(t.await?)?;
    }
    let secs = started.elapsed().as_secs_f64();
    progress.finish().await;
    let ok = all.len();
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
    let first_error = first_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Report {
        bench: name.to_string(),
        concurrency: load.concurrency,
        count: ok,
        errors: counters.errors.load(Ordering::Relaxed),
        seconds: secs,
        ops_per_sec: ok as f64 / secs,
        mib_per_sec: (ok * bytes_per_op) as f64 / secs / (1 << 20) as f64,
        bytes_per_op,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: all.max() as f64 / 1000.0,
        first_error,
    })
}

async fn ensure_bucket(c: &Client, load: &Load) -> anyhow::Result<()> {
    if let Err(e) = c.om.create_volume(&load.volume, "", None).await {
        if !e.is_already_exists() {
            return Err(e.into());
        }
    }
    if let Err(e) = c.om.create_bucket(&load.volume, &load.bucket, None).await {
        if !e.is_already_exists() {
            return Err(e.into());
        }
    }
    Ok(())
}

/// A run id so repeated runs do not overwrite each other's keys.
fn run_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() % 1_000_000)
        .unwrap_or(0)
}

pub async fn run(
    cluster: &ClusterArgs,
    as_json: bool,
    cmd: BenchCommand,
) -> anyhow::Result<ExitCode> {
    let client = Arc::new(cluster.client()?);
    let report = match cmd {
        BenchCommand::OmKeys { load } => {
            ensure_bucket(&client, &load).await?;
            let (c, l, id) = (client.clone(), load.clone(), run_id());
            drive("om-keys", &load, 0, move |i| {
                let (c, l) = (c.clone(), l.clone());
                async move {
                    let key = format!("{}-{id}-{i}", l.prefix);
                    // A key without data is one block at most: a one-block open, which the
                    // OM defers to the commit (om.deferred_open) so the key is one write.
                    let open =
                        c.om.open_key_single_block(&l.volume, &l.bucket, &key, 0)
                            .await?;
                    c.om.commit_key(&open, &[], "").await?;
                    Ok(())
                }
            })
            .await?
        }
        BenchCommand::Put { load, size } => {
            ensure_bucket(&client, &load).await?;
            let data: Arc<Vec<u8>> = Arc::new(
                (0..size)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect(),
            );
            let (c, l, id) = (client.clone(), load.clone(), run_id());
            drive("put", &load, size, move |i| {
                let (c, l, data) = (c.clone(), l.clone(), data.clone());
                async move {
                    let key = format!("{}-{id}-{i}", l.prefix);
                    c.put_bytes(&l.volume, &l.bucket, &key, &data).await?;
                    Ok(())
                }
            })
            .await?
        }
        BenchCommand::Get { load } => {
            let keys = client
                .om
                .list_keys(
                    &load.volume,
                    &load.bucket,
                    &format!("{}-", load.prefix),
                    "",
                    0,
                )
                .await?;
            let keys: Vec<_> = keys.into_iter().filter(|k| k.size > 0).collect();
            if keys.is_empty() {
                bail!(
                    "no keys under /{}/{}/{}-: run rozone bench put first",
                    load.volume,
                    load.bucket,
                    load.prefix
                );
            }
            let size = keys[0].size;
            let keys = Arc::new(keys);
            let c = client.clone();
            drive("get", &load, size, move |i| {
                let (c, keys) = (c.clone(), keys.clone());
                async move {
                    let k = &keys[(i as usize) % keys.len()];
                    let r = rozone_client::key_read::KeyReader {
                        om: &c.om,
                        datanodes: &c.datanodes,
                        opts: &c.read,
                    };
                    let mut sink = tokio::io::sink();
                    r.read_into(k, &mut sink, &|_| {}).await
                }
            })
            .await?
        }
        BenchCommand::LeaseRead { load, mode } => {
            let mode = match mode.as_str() {
                "lease" => ReadMode::LocalLease,
                "default" => ReadMode::Default,
                "linearizable" => ReadMode::Linearizable,
                "follower" => ReadMode::LinearizableFollower,
                other => bail!(
                    "unknown read mode {other:?}: use lease, default, linearizable or follower"
                ),
            };
            ensure_bucket(&client, &load).await?;
            let key = format!("{}-lease-probe", load.prefix);
            client
                .put_bytes(&load.volume, &load.bucket, &key, b"")
                .await?;
            let (c, l) = (client.clone(), load.clone());
            drive("lease-read", &load, 0, move |_| {
                let (c, l, key) = (c.clone(), l.clone(), key.clone());
                async move {
                    c.om.lookup_key(&l.volume, &l.bucket, &key, mode).await?;
                    Ok(())
                }
            })
            .await?
        }
    };
    if as_json {
        crate::output::json(&report)?;
    } else {
        print_table(&report);
    }
    Ok(if report.errors > 0 && report.count == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The end-of-run table on stdout: one row, the same numbers as `--json`.
fn print_table(r: &Report) {
    table(
        &[
            "bench", "clients", "ops", "errors", "seconds", "ops/s", "MiB/s", "p50 ms", "p99 ms",
            "p999 ms", "max ms",
        ],
        &[table_row(r)],
    );
    if let Some(e) = &r.first_error {
        println!("first error: {e}");
    }
}

fn table_row(r: &Report) -> Vec<String> {
    vec![
        r.bench.clone(),
        r.concurrency.to_string(),
        r.count.to_string(),
        r.errors.to_string(),
        format!("{:.2}", r.seconds),
        format!("{:.1}", r.ops_per_sec),
        format!("{:.1}", r.mib_per_sec),
        format!("{:.2}", r.p50_ms),
        format!("{:.2}", r.p99_ms),
        format!("{:.2}", r.p999_ms),
        format!("{:.2}", r.max_ms),
    ]
}

#[cfg(test)]
mod tests {
    use super::{parse_size, table_row, Report};

    /// `--json`'s shape is a contract with scripts (scripts/bench-vs-etcd.sh): these field
    /// names, nothing more or less.
    #[test]
    fn json_report_keeps_its_field_names() {
        let r = Report {
            bench: "om-keys".into(),
            concurrency: 16,
            count: 100,
            errors: 1,
            seconds: 2.0,
            ops_per_sec: 50.0,
            mib_per_sec: 0.0,
            bytes_per_op: 0,
            p50_ms: 1.5,
            p99_ms: 3.0,
            p999_ms: 4.0,
            max_ms: 5.0,
            first_error: Some("x".into()),
        };
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec![
            "bench",
            "concurrency",
            "count",
            "errors",
            "seconds",
            "ops_per_sec",
            "mib_per_sec",
            "bytes_per_op",
            "p50_ms",
            "p99_ms",
            "p999_ms",
            "max_ms",
            "first_error",
        ];
        want.sort_unstable();
        let mut got = keys.clone();
        got.sort_unstable();
        assert_eq!(got, want);
        let row = table_row(&r);
        assert_eq!(row[0], "om-keys");
        assert_eq!(row[5], "50.0");
        assert_eq!(row[7], "1.50");
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
