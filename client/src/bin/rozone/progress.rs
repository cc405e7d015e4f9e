//! A small progress bar on stderr for large transfers, drawn only when stderr is a
//! terminal (scripts and pipes see nothing), at most ten times a second.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
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
