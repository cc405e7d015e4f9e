//! What the gateway reports on `/ready` and `/metrics`. Ready once a probe of the OM ring
//! found a leader (the gateway has no state of its own; without the OM it can serve
//! nothing), probed again every few seconds.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rozone_client::om::OmClient;
use rozone_telemetry::health::{metric, HealthSource};
use tokio_util::sync::CancellationToken;

use crate::core::Metrics;

/// How often the OM ring is probed.
const PROBE_EVERY: Duration = Duration::from_secs(2);

pub struct S3gHealth {
    pub metrics: Arc<Metrics>,
    /// `Ok` after a probe found an OM leader; the last failure otherwise.
    pub om: Arc<Mutex<Result<(), String>>>,
}

impl HealthSource for S3gHealth {
    fn ready(&self) -> Result<(), String> {
        self.om.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        let m = &self.metrics;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        metric(
            &mut out,
            "rozone_s3g_requests_total",
            "counter",
            "S3 requests answered",
            get(&m.requests),
        );
        metric(
            &mut out,
            "rozone_s3g_errors_total",
            "counter",
            "S3 requests answered with an error",
            get(&m.errors),
        );
        metric(
            &mut out,
            "rozone_s3g_bytes_in_total",
            "counter",
            "Object bytes received by PutObject",
            get(&m.bytes_in),
        );
        metric(
            &mut out,
            "rozone_s3g_bytes_out_total",
            "counter",
            "Object bytes sent by GetObject",
            get(&m.bytes_out),
        );
        out
    }
}

/// Probes the OM ring until `stop`, recording the outcome in `state`.
pub async fn probe(om: OmClient, state: Arc<Mutex<Result<(), String>>>, stop: CancellationToken) {
    loop {
        let r = match om.roles().await {
            Ok(r) if r.leader_id.is_some() => Ok(()),
            Ok(_) => Err("the OM ring has no leader".to_string()),
            Err(e) => Err(format!("OM: {e}")),
        };
        *state.lock().unwrap_or_else(|p| p.into_inner()) = r;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}
