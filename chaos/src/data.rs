//! The data workload: one writer of real key data through the datanodes beside the register
//! clients (whose keys are metadata only), so that datanode faults (kills, pauses, disk
//! errors) meet chunk writes and reads. Each object's bytes are derived from its name, so a
//! read is checked without keeping them. Objects get fresh names (no overwrites), so the
//! rule is simple: every acknowledged object reads back intact, during the run (wrong bytes
//! or "not found" is a finding at once) and after healing (an end-state check). A failed
//! write or read during a fault is expected and only counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rozone_client::Client;

use crate::workload::VOLUME;

/// The bucket of the data objects.
pub const DATA_BUCKET: &str = "data";
/// Largest object: a few chunks' worth would only slow the 2-core machine down; one
/// chunk write per object is what meets the faults.
const MAX_LEN: usize = 48 * 1024;

/// What the writer did and found.
#[derive(Default)]
pub struct DataLog {
    acked: Mutex<Vec<(String, usize)>>,
    pub writes_ok: AtomicU64,
    pub writes_failed: AtomicU64,
    pub reads_ok: AtomicU64,
    pub reads_failed: AtomicU64,
    findings: Mutex<Vec<String>>,
}

impl DataLog {
    fn finding(&self, f: String) {
        self.findings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(f);
    }
    pub fn findings(&self) -> Vec<String> {
        self.findings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    fn acked(&self) -> Vec<(String, usize)> {
        self.acked.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// One line for the run's summary.
    pub fn summary(&self) -> String {
        format!(
            "data objects (ok/failed): written {}/{}, read back {}/{}",
            self.writes_ok.load(Ordering::Relaxed),
            self.writes_failed.load(Ordering::Relaxed),
            self.reads_ok.load(Ordering::Relaxed),
            self.reads_failed.load(Ordering::Relaxed),
        )
    }
}

/// The bytes of object `name`: a xorshift stream seeded by the name's FNV-1a hash.
pub fn content(name: &str, len: usize) -> Vec<u8> {
    let mut x = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Checks one read of an acknowledged object; `Ok(false)`: the read failed (retryable).
async fn check(client: &Client, log: &DataLog, name: &str, len: usize) -> bool {
    match client.get_bytes(VOLUME, DATA_BUCKET, name).await {
        Ok(bytes) if bytes == content(name, len) => {
            log.reads_ok.fetch_add(1, Ordering::Relaxed);
            true
        }
        Ok(bytes) => {
            log.finding(format!(
                "acknowledged object {name} read back wrong: {} bytes, expected {len}",
                bytes.len()
            ));
            true
        }
        Err(e) if e.is_not_found() => {
            log.finding(format!("acknowledged object {name} not found"));
            true
        }
        Err(_) => {
            log.reads_failed.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

/// Writes fresh objects and reads back earlier ones until `stop`.
pub async fn writer_loop(client: Arc<Client>, log: Arc<DataLog>, seed: u64, stop: Arc<AtomicBool>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xda7a);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("obj-{n}");
        let len = rng.random_range(1..=MAX_LEN);
        match client
            .put_bytes(VOLUME, DATA_BUCKET, &name, &content(&name, len))
            .await
        {
            Ok(_) => {
                log.writes_ok.fetch_add(1, Ordering::Relaxed);
                log.acked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((name, len));
            }
            Err(_) => {
                log.writes_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        let acked = log.acked();
        if !acked.is_empty() {
            let (name, len) = &acked[rng.random_range(0..acked.len())];
            check(&client, &log, name, *len).await;
        }
    }
}

/// After healing: every acknowledged object reads back intact (each retried until `wait`
/// has passed, as the cluster may still be re-electing or re-replicating).
pub async fn verify_all(client: &Client, log: &DataLog, wait: Duration) -> Vec<String> {
    let deadline = Instant::now() + wait;
    let mut unreadable = Vec::new();
    for (name, len) in log.acked() {
        loop {
            if check(client, log, &name, len).await {
                break;
            }
            if Instant::now() >= deadline {
                unreadable.push(format!(
                    "acknowledged object {name} unreadable after healing"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut out = log.findings();
    out.extend(unreadable);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_a_function_of_the_name() {
        assert_eq!(content("obj-1", 100), content("obj-1", 100));
        assert_ne!(content("obj-1", 100), content("obj-2", 100));
        assert_eq!(content("obj-1", 10), content("obj-1", 100)[..10]);
        assert!(content("obj-1", 0).is_empty());
    }
}
