//! Benchmark of the Raft layer alone: 3 members over gRPC on loopback, fsync on, fixed-size
//! entries, N concurrent proposers. Prints commits/s and latency percentiles per concurrency.
//!
//! `rozone-raft-bench --concurrency 1,16,64 --duration 10s --entry-size 256`

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rozone_tests::{Cluster, KvRequest};

#[derive(Parser, Debug)]
#[command(about = "Raft-layer benchmark: commits/s and latency over gRPC on loopback")]
struct Args {
    /// Comma-separated proposer counts to run, one after another.
    #[arg(long, default_value = "1,16,64", value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// How long each run lasts.
    #[arg(long, default_value = "10s", value_parser = humantime_parse)]
    duration: Duration,
    /// Size of each entry's value in bytes.
    #[arg(long, default_value_t = 256)]
    entry_size: usize,
    /// Members in the group.
    #[arg(long, default_value_t = 3)]
    members: u64,
    /// Disable fsync of log appends (to see the CPU bound).
    #[arg(long)]
    no_fsync: bool,
    /// Print one JSON object per run instead of a table.
    #[arg(long)]
    json: bool,
}

fn humantime_parse(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("bad duration unit in {s:?} (use ms, s or m)")),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let fsync = !args.no_fsync;
    let c = Cluster::start(
        args.members,
        Arc::new(move |cfg| {
            cfg.fsync = fsync;
            cfg.snapshot_logs_since_last = 100_000;
        }),
    )
    .await?;
    let value = "x".repeat(args.entry_size);
    if !args.json {
        println!(
            "raft bench: {} members, gRPC on 127.0.0.1, fsync {}, {}-byte entries, {:?} per run",
            args.members,
            if fsync { "on" } else { "off" },
            args.entry_size,
            args.duration
        );
        println!(
            "{:>11} {:>10} {:>11} {:>9} {:>9} {:>9} {:>7}",
            "proposers", "commits", "commits/s", "p50 ms", "p99 ms", "p999 ms", "errors"
        );
    }
    for &conc in &args.concurrency {
        let leader = c.leader().await?.clone();
        let start = Instant::now();
        let stop = start + args.duration;
        let mut tasks = Vec::new();
        for w in 0..conc {
            let leader = leader.clone();
            let value = value.clone();
            tasks.push(tokio::spawn(async move {
                let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("histogram bounds");
                let (mut ok, mut err) = (0u64, 0u64);
                let mut i = 0u64;
                while Instant::now() < stop {
                    let t = Instant::now();
                    let r = leader
                        .write(KvRequest::Put {
                            key: format!("w{w}-{i}"),
                            value: value.clone(),
                        })
                        .await;
                    i += 1;
                    match r {
                        Ok(_) => {
                            ok += 1;
                            let _ = h.record(t.elapsed().as_micros() as u64);
                        }
                        Err(_) => err += 1,
                    }
                }
                (h, ok, err)
            }));
        }
        let mut hist = hdrhistogram::Histogram::<u64>::new(3)?;
        let (mut ok, mut err) = (0u64, 0u64);
        for t in tasks {
            let (h, o, e) = t.await?;
            hist.add(h)?;
            ok += o;
            err += e;
        }
        let secs = start.elapsed().as_secs_f64();
        let rate = ok as f64 / secs;
        let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "proposers": conc, "commits": ok, "commits_per_s": rate.round(),
                    "p50_ms": q(0.5), "p99_ms": q(0.99), "p999_ms": q(0.999), "errors": err,
                    "entry_size": args.entry_size, "fsync": fsync,
                })
            );
        } else {
            println!(
                "{:>11} {:>10} {:>11.0} {:>9.2} {:>9.2} {:>9.2} {:>7}",
                conc,
                ok,
                rate,
                q(0.5),
                q(0.99),
                q(0.999),
                err
            );
        }
    }
    Ok(())
}
