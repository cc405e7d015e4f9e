//! A closed-loop load driver: N clients each run one operation after another for a
//! duration; latencies go into an HDR histogram (1 µs to 10 min, 3 significant digits),
//! and the report carries the same fields and units as `rozone bench --json`.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// What a run measured (field names and units as in `rozone bench --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub bench: String,
    pub concurrency: usize,
    /// Operations that succeeded.
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

/// Latencies are recorded in microseconds up to ten minutes.
const MAX_MICROS: u64 = 600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("histogram bounds are valid")
}

/// Runs `op(i)` from `clients` tasks until `duration` has passed; `i` counts operations
/// across all clients from 0. An error is counted (the first one kept) and the client goes
/// on with its next operation.
pub async fn drive<F, Fut, E>(
    name: &str,
    clients: usize,
    duration: Duration,
    bytes_per_op: u64,
    op: F,
) -> anyhow::Result<Report>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: std::fmt::Display,
{
    drive_until(name, clients, Until::Elapsed(duration), bytes_per_op, op).await
}

/// When a run ends.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// After this long (an operation running then still finishes).
    Elapsed(Duration),
    /// After this many operations, started across all clients.
    Count(u64),
}

/// [`drive`], ending at `until`.
pub async fn drive_until<F, Fut, E>(
    name: &str,
    clients: usize,
    until: Until,
    bytes_per_op: u64,
    op: F,
) -> anyhow::Result<Report>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: std::fmt::Display,
{
    let clients = clients.max(1);
    let op = Arc::new(op);
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let started = Instant::now();
    let more = move |i: u64| match until {
        Until::Elapsed(d) => started.elapsed() < d,
        Until::Count(n) => i < n,
    };
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (op, next, errors, first_error) = (
            op.clone(),
            next.clone(),
            errors.clone(),
            first_error.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if !more(i) {
                    break;
                }
                let t = Instant::now();
                match op(i).await {
                    Ok(()) => {
                        let micros = u64::try_from(t.elapsed().as_micros()).unwrap_or(MAX_MICROS);
                        h.saturating_record(micros.max(1));
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
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
    let mut all = histogram();
    for t in tasks {
        all.add(t.await?)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let first_error = first_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(report(
        name,
        clients,
        &all,
        errors.load(Ordering::Relaxed),
        seconds,
        bytes_per_op,
        first_error,
    ))
}

/// The report of `hist` (microseconds) over `seconds`.
pub fn report(
    name: &str,
    clients: usize,
    hist: &Histogram<u64>,
    errors: u64,
    seconds: f64,
    bytes_per_op: u64,
    first_error: Option<String>,
) -> Report {
    let count = hist.len();
    let secs = seconds.max(1e-9);
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Report {
        bench: name.to_string(),
        concurrency: clients,
        count,
        errors,
        seconds,
        ops_per_sec: count as f64 / secs,
        mib_per_sec: count.saturating_mul(bytes_per_op) as f64 / secs / (1u64 << 20) as f64,
        bytes_per_op,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: hist.max() as f64 / 1000.0,
        first_error,
    }
}

/// A number that differs from run to run (seconds since the epoch, modulo a million), so
/// the keys or objects of one run never collide with an earlier run's.
pub fn run_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() % 1_000_000)
        .unwrap_or(0)
}

/// Prints the outcome of a run as `tool` (the report as one JSON object with `json`, else
/// a table; an error on stderr) and gives the exit code: failure when the run failed or no
/// operation succeeded.
pub fn finish(tool: &str, outcome: anyhow::Result<Report>, json: bool) -> std::process::ExitCode {
    use std::process::ExitCode;
    let r = match outcome {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{tool}: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    if json {
        match serde_json::to_string_pretty(&r) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("{tool}: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        println!(
            "{:<22} {:>7} {:>9} {:>6} {:>7} {:>10} {:>9} {:>8} {:>8} {:>8}",
            "bench",
            "clients",
            "ops",
            "errors",
            "seconds",
            "ops/s",
            "MiB/s",
            "p50 ms",
            "p99 ms",
            "p999 ms"
        );
        println!(
            "{:<22} {:>7} {:>9} {:>6} {:>7.2} {:>10.1} {:>9.1} {:>8.2} {:>8.2} {:>8.2}",
            r.bench,
            r.concurrency,
            r.count,
            r.errors,
            r.seconds,
            r.ops_per_sec,
            r.mib_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.p999_ms
        );
        if let Some(e) = &r.first_error {
            println!("first error: {e}");
        }
    }
    if r.count == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_gives_rates_and_percentiles_in_milliseconds() {
        let mut h = histogram();
        for _ in 0..99 {
            h.record(1_000).unwrap();
        }
        h.record(50_000).unwrap();
        let r = report("put", 4, &h, 2, 2.0, 1 << 20, Some("boom".into()));
        assert_eq!(r.count, 100);
        assert_eq!(r.errors, 2);
        assert!((r.ops_per_sec - 50.0).abs() < 1e-9);
        assert!((r.mib_per_sec - 50.0).abs() < 1e-9);
        assert!((r.p50_ms - 1.0).abs() < 0.01, "p50 {}", r.p50_ms);
        assert!((r.p999_ms - 50.0).abs() < 0.1, "p999 {}", r.p999_ms);
        assert!((r.max_ms - 50.0).abs() < 0.1);
    }

    #[tokio::test]
    async fn drive_counts_successes_and_errors_separately() {
        let r = drive("t", 2, Duration::from_millis(50), 0, |i| async move {
            tokio::task::yield_now().await;
            if i % 2 == 0 {
                Ok(())
            } else {
                Err("odd")
            }
        })
        .await
        .unwrap();
        assert!(r.count > 0 && r.errors > 0);
        assert_eq!(r.first_error.as_deref(), Some("odd"));
        assert_eq!(r.concurrency, 2);
    }
}
