//! `rozone-etcd-load`: closed-loop load on an etcd v3 cluster, reported like `rozone bench`
//! (ops/s and p50/p99/p999 from an HDR histogram; `--json`: the same field names).
//!
//! ```sh
//! rozone-etcd-load --endpoints http://127.0.0.1:2379 --clients 16 --duration 10s --op put
//! rozone-etcd-load --endpoints ... --clients 16 --op get-serializable --json
//! ```
//!
//! Clients share one HTTP/2 connection per endpoint (as etcd's own `benchmark` tool does
//! with `--conns 1`, and as rozone's client does per OM) and are spread over the endpoints
//! round robin. `put` writes distinct keys; the gets read one key put before the run.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use rozone_bench::etcd::kv_client::KvClient;
use rozone_bench::etcd::{PutRequest, RangeRequest};
use rozone_bench::load::{drive, finish, run_id, Report};
use tonic::transport::{Channel, Endpoint};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Op {
    /// Put a new key of --key-size bytes with a --value-size value.
    Put,
    /// Get one key from the member the client talks to (`serializable = true`).
    GetSerializable,
    /// Get one key with a read index through the leader (etcd's default read).
    GetLinearizable,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Put => "etcd-put",
            Op::GetSerializable => "etcd-get-serializable",
            Op::GetLinearizable => "etcd-get-linearizable",
        }
    }
}

/// An etcd v3 load generator that reports like `rozone bench`.
#[derive(Debug, Parser)]
#[command(name = "rozone-etcd-load", version, about)]
struct Args {
    /// etcd client URLs, comma separated (http://127.0.0.1:2379,...).
    #[arg(long, value_delimiter = ',', required = true)]
    endpoints: Vec<String>,
    /// Concurrent clients (each one request at a time).
    #[arg(long, short = 'c', default_value_t = 16)]
    clients: usize,
    /// How long to run.
    #[arg(long, short = 'd', default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// What each client does.
    #[arg(long, value_enum, default_value = "put")]
    op: Op,
    /// Key length in bytes (keys are "<prefix>-<run>-<n>" padded with '0').
    #[arg(long, default_value_t = 32)]
    key_size: usize,
    /// Value length in bytes.
    #[arg(long, default_value_t = 256)]
    value_size: usize,
    /// Key prefix.
    #[arg(long, default_value = "bench")]
    prefix: String,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Keys and values beyond this are not a benchmark of etcd (its default request limit is
/// 1.5 MiB).
const MAX_SIZE: usize = 1 << 20;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    finish("rozone-etcd-load", run(&args).await, args.json)
}

async fn connect(url: &str) -> anyhow::Result<KvClient<Channel>> {
    let ep = Endpoint::from_shared(url.to_string())
        .with_context(|| format!("bad endpoint {url:?}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30));
    let ch = ep
        .connect()
        .await
        .with_context(|| format!("connect to etcd at {url}"))?;
    Ok(KvClient::new(ch))
}

/// `<prefix>-<run>-<n>` padded with '0' to `size` bytes (longer when it does not fit).
fn key(prefix: &str, run: u64, n: u64, size: usize) -> Vec<u8> {
    let mut k = format!("{prefix}-{run}-{n}-").into_bytes();
    if k.len() < size {
        k.resize(size, b'0');
    }
    k
}

async fn run(args: &Args) -> anyhow::Result<Report> {
    if args.key_size > MAX_SIZE || args.value_size > MAX_SIZE {
        bail!("--key-size and --value-size are limited to {MAX_SIZE} bytes");
    }
    let mut clients = Vec::with_capacity(args.endpoints.len());
    for url in &args.endpoints {
        clients.push(connect(url).await?);
    }
    if clients.is_empty() {
        bail!("no --endpoints given");
    }
    let clients = Arc::new(clients);
    let run_id = run_id();
    let value: Arc<[u8]> = (0..args.value_size)
        .map(|i| (i as u8).wrapping_mul(31))
        .collect();
    let (prefix, key_size, op) = (args.prefix.clone(), args.key_size, args.op);
    // The gets read one key, written (and so committed) before the clock starts.
    let probe = key(&prefix, run_id, u64::MAX, key_size);
    if op != Op::Put {
        clients[0]
            .clone()
            .put(PutRequest {
                key: probe.clone(),
                value: value.to_vec(),
                lease: 0,
            })
            .await
            .context("put the key the gets read")?;
    }
    let bytes = (args.key_size + args.value_size) as u64;
    drive(op.name(), args.clients, args.duration, bytes, move |i| {
        let mut kv = clients[(i as usize) % clients.len()].clone();
        let (prefix, value, probe) = (prefix.clone(), value.clone(), probe.clone());
        async move {
            match op {
                Op::Put => {
                    kv.put(PutRequest {
                        key: key(&prefix, run_id, i, key_size),
                        value: value.to_vec(),
                        lease: 0,
                    })
                    .await?;
                }
                Op::GetSerializable | Op::GetLinearizable => {
                    let r = kv
                        .range(RangeRequest {
                            key: probe,
                            serializable: op == Op::GetSerializable,
                            ..Default::default()
                        })
                        .await?;
                    if r.get_ref().kvs.is_empty() {
                        return Err(tonic::Status::not_found("the probe key is missing"));
                    }
                }
            }
            Ok::<(), tonic::Status>(())
        }
    })
    .await
}
