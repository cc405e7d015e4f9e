//! rozone-client: typed clients of the rozone services and the `rozone` CLI built on them.
//!
//! - [`Ring`] (from `rozone-rpc`, the one failover client of rozone): calls to a replicated
//!   ring (SCM, OM) that find the leader, follow `NotLeader` hints, wait out
//!   `LeaderNotReady`, skip unreachable members, with a bounded backoff and a deadline per
//!   call, over channels from one [`ChannelFactory`] (mutual TLS unless insecure).
//! - [`om::OmClient`], [`scm::ScmClient`], [`datanode::Datanodes`]: typed clients; replies
//!   become the domain types of [`types`] at this edge.
//! - [`key_write`] / [`key_read`]: key put (open → blocks to pipelines → commit, moving to
//!   a new block when a pipeline fails) and get (any replica, checksums verified).
//! - [`s3`]: S3 credentials kept by the OM.
//! - [`ClientConfig`]: where the cluster is (`client.toml`).
//!
//! Light on purpose: only gRPC (`rozone-proto`, `rozone-rpc`) and the shared
//! `rozone-types`, never `rozone-raft` or
//! RocksDB, so the CLI builds and starts fast.

pub mod config;
pub mod datanode;
pub mod error;
pub mod key_read;
pub mod key_write;
pub mod om;
pub mod s3;
pub mod scm;
pub mod types;

pub use config::ClientConfig;
pub use error::{ClientError, Result};
pub use rozone_rpc::{ChannelFactory, RetryPolicy, Ring, Role, Security};

/// The failover ring, under the name it had when it lived here.
pub use rozone_rpc::ring as failover;

use tokio::io::{AsyncRead, AsyncWrite};

/// Everything a user of the cluster needs: the OM and SCM rings and the datanodes.
pub struct Client {
    pub om: om::OmClient,
    /// Absent when no SCM address was given (only `admin` needs it).
    pub scm: Option<scm::ScmClient>,
    pub datanodes: datanode::Datanodes,
    pub write: key_write::WriteOptions,
    pub read: key_read::ReadOptions,
}

impl Client {
    /// A client of the cluster `config` describes. Connects lazily: nothing is dialled
    /// until the first call. Must be called inside a tokio runtime.
    pub fn new(config: &ClientConfig) -> Result<Self> {
        config.check()?;
        let policy = config.policy();
        let channels = config.security()?.channels();
        let om = if config.om_addrs.is_empty() {
            Err(ClientError::Invalid(
                "no OM address: give --om HOST:PORT, --config FILE or ROZONE_CONFIG".into(),
            ))
        } else {
            Ok(Ring::new(
                "OM",
                &config.om_addrs,
                policy.clone(),
                channels.clone(),
            )?)
        };
        let scm = if config.scm_addrs.is_empty() {
            None
        } else {
            Some(scm::ScmClient::new(Ring::new(
                "SCM",
                &config.scm_addrs,
                policy.clone(),
                channels.clone(),
            )?))
        };
        Ok(Self {
            om: om::OmClient::new(om?),
            scm,
            datanodes: datanode::Datanodes::new(channels),
            write: key_write::WriteOptions::default(),
            read: key_read::ReadOptions::default(),
        })
    }

    /// The SCM client, or an error saying how to name the SCMs.
    pub fn scm(&self) -> Result<&scm::ScmClient> {
        self.scm.as_ref().ok_or_else(|| {
            ClientError::Invalid(
                "no SCM address: give --scm HOST:PORT, --config FILE or ROZONE_CONFIG".into(),
            )
        })
    }

    /// Writes `src` as a key (see [`key_write::KeyWriter::put`]).
    pub async fn put_key<R: AsyncRead + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: Option<u64>,
        src: R,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<types::Key> {
        let w = key_write::KeyWriter {
            om: &self.om,
            datanodes: &self.datanodes,
            opts: &self.write,
        };
        w.put(volume, bucket, key, size, src, progress).await
    }

    /// Writes a key held in memory.
    pub async fn put_bytes(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        data: &[u8],
    ) -> Result<types::Key> {
        self.put_key(volume, bucket, key, Some(data.len() as u64), data, &|_| {})
            .await
    }

    /// Reads a key into `out` (see [`key_read::KeyReader::get`]).
    pub async fn get_key<W: AsyncWrite + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        out: &mut W,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<types::Key> {
        let r = key_read::KeyReader {
            om: &self.om,
            datanodes: &self.datanodes,
            opts: &self.read,
        };
        r.get(volume, bucket, key, out, progress).await
    }

    /// Reads a whole key into memory.
    pub async fn get_bytes(&self, volume: &str, bucket: &str, key: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.get_key(volume, bucket, key, &mut out, &|_| {}).await?;
        Ok(out)
    }
}
