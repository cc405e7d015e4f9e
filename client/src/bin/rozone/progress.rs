//! Progress on stderr: a bar for large transfers (`rozone sh key put/get`), drawn only when
//! stderr is a terminal, at most ten times a second; and the line `rozone bench` shows
//! while it runs (terminal, or `--progress`). Scripts and pipes see nothing by default.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::output::size;

/// Transfers smaller than this finish too fast for a bar to help.
const MIN_BYTES: u64 = 8 << 20;

struct State {
    last_draw: Option<Instant>,
    drawn: bool,
}

/// A bar for a transfer of `total` bytes (None: unknown).
pub struct Progress {
    label: String,
    total: Option<u64>,
    started: Instant,
    enabled: bool,
    state: Mutex<State>,
}

impl Progress {
    pub fn new(label: &str, total: Option<u64>) -> Self {
        let big = total.is_none_or(|t| t >= MIN_BYTES);
        Self {
            label: label.to_string(),
            total,
            started: Instant::now(),
            enabled: big && std::io::stderr().is_terminal(),
            state: Mutex::new(State {
                last_draw: None,
                drawn: false,
            }),
        }
    }

    /// Called with the bytes done so far.
    pub fn update(&self, done: u64) {
        if !self.enabled {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if st
            .last_draw
            .is_some_and(|t| now - t < Duration::from_millis(100))
            && Some(done) != self.total
        {
            return;
        }
        st.last_draw = Some(now);
        st.drawn = true;
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = format!("{}/s", size((done as f64 / secs) as u64));
        let line = match self.total {
            Some(t) if t > 0 => {
                let frac = (done as f64 / t as f64).min(1.0);
                let width = 30;
                let fill = (frac * width as f64) as usize;
                format!(
                    "{} [{}{}] {:>5.1}% {} / {} {}",
                    self.label,
                    "#".repeat(fill),
                    "-".repeat(width - fill),
                    frac * 100.0,
                    size(done),
                    size(t),
                    rate
                )
            }
            _ => format!("{} {} {}", self.label, size(done), rate),
        };
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[2K{line}");
        let _ = e.flush();
    }

    /// Ends the bar's line (if one was drawn).
    pub fn finish(&self) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.drawn {
            eprintln!();
        }
    }
}

/// The counters a running `rozone bench` updates and its progress line reads.
#[derive(Debug, Default)]
pub struct BenchCounters {
    pub ops: AtomicU64,
    pub errors: AtomicU64,
}

/// A progress line for `rozone bench` on stderr: operations so far, the rate over the last
/// interval and errors, about twice a second. Redrawn in place on a terminal; with
/// `--progress` and stderr not a terminal (a log file), one line per update instead.
pub struct BenchProgress {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// How often the progress line is updated.
const BENCH_TICK: Duration = Duration::from_millis(500);

impl BenchProgress {
    /// Starts the line for bench `name` when stderr is a terminal or `forced`; otherwise
    /// does nothing.
    pub fn start(name: &str, counters: Arc<BenchCounters>, forced: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        if !tty && !forced {
            return Self {
                stop: None,
                task: None,
            };
        }
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let name = name.to_string();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut tick = tokio::time::interval(BENCH_TICK);
            tick.tick().await;
            let (mut last_ops, mut last_at) = (0u64, started);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = &mut stopped => break,
                }
                let now = Instant::now();
                let ops = counters.ops.load(Ordering::Relaxed);
                let errors = counters.errors.load(Ordering::Relaxed);
                let rate = rate(ops.saturating_sub(last_ops), now - last_at);
                (last_ops, last_at) = (ops, now);
                let line = bench_line(&name, (now - started).as_secs_f64(), ops, rate, errors);
                let mut e = std::io::stderr().lock();
                let _ = if tty {
                    write!(e, "\r\x1b[2K{line}")
                } else {
                    writeln!(e, "{line}")
                };
                let _ = e.flush();
            }
            if tty {
                // Clear the line: the table that follows goes to stdout.
                let mut e = std::io::stderr().lock();
                let _ = write!(e, "\r\x1b[2K");
                let _ = e.flush();
            }
        });
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the line (and clears it on a terminal) before the report is printed.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

fn rate(ops: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs > 0.0 {
        ops as f64 / secs
    } else {
        0.0
    }
}

/// One progress line: `om-keys  12.5 s  31,234 ops  2,498 ops/s  0 errors`.
fn bench_line(name: &str, secs: f64, ops: u64, ops_per_sec: f64, errors: u64) -> String {
    format!(
        "{name}  {secs:.1} s  {} ops  {} ops/s  {} errors",
        thousands(ops),
        thousands(ops_per_sec.round() as u64),
        thousands(errors)
    )
}

/// 1234567 → "1,234,567".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_line_reads_like_a_sentence() {
        assert_eq!(
            bench_line("om-keys", 12.46, 1_234_567, 2497.6, 3),
            "om-keys  12.5 s  1,234,567 ops  2,498 ops/s  3 errors"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(rate(10, Duration::ZERO), 0.0);
        assert_eq!(rate(10, Duration::from_millis(500)), 20.0);
    }
}
