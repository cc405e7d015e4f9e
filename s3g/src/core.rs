//! The shared core of the gateway: [`Gateway`] (what every S3 operation needs: the
//! cluster client, the S3 volume, limits, counters), [`Metrics`] and the helpers that
//! several operation modules use. The operation modules ([`crate::buckets`],
//! [`crate::objects`], [`crate::copy`], [`crate::multipart`], [`crate::list`]) import this
//! file, and [`crate::gateway`] routes to them, so no operation module imports the router.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rozone_client::Client;
use s3s::S3Result;

use crate::mapping::{om_code, s3_error};

/// Requests and failures, for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

impl Metrics {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// What every operation needs.
pub struct Gateway {
    pub client: Arc<Client>,
    /// The volume the S3 buckets live in.
    pub volume: String,
    pub max_object_size: u64,
    pub metrics: Arc<Metrics>,
    volume_ready: AtomicBool,
}

impl Gateway {
    pub fn new(
        client: Arc<Client>,
        volume: String,
        max_object_size: u64,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            client,
            volume,
            max_object_size,
            metrics,
            volume_ready: AtomicBool::new(false),
        }
    }

    /// Creates the S3 volume the first time a bucket is created.
    pub async fn ensure_volume(&self) -> S3Result<()> {
        if self.volume_ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        match self
            .client
            .om
            .create_volume(&self.volume, "s3g", None)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => {}
            Err(e) => return Err(s3_error(e)),
        }
        self.volume_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Counts a request and, when it failed, the failure.
    pub fn count<T>(&self, r: S3Result<T>) -> S3Result<T> {
        Metrics::add(&self.metrics.requests, 1);
        if r.is_err() {
            Metrics::add(&self.metrics.errors, 1);
        }
        r
    }
}

/// True when `e` says the volume is missing (no bucket was ever created).
pub fn volume_missing(e: &rozone_client::ClientError) -> bool {
    om_code(e) == Some(rozone_types::codes::OmErrorCode::VolumeNotFound)
}
