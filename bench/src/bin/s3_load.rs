//! `rozone-s3-load`: closed-loop PUT and GET load on an S3 endpoint (rozone's gateway, or
//! any S3 service) with the AWS SDK, reported like `rozone bench` (`--json`: the same
//! field names), so `scripts/bench-s3.sh` sets the gateway beside the native client.
//!
//! ```sh
//! rozone-s3-load --endpoint http://127.0.0.1:9878 --access-key AK --secret-key SK \
//!     --bucket bench put --size 1MiB -c 16 -d 10s
//! rozone-s3-load ... --bucket bench get -c 16 -d 10s --json
//! ```
//!
//! Clients are what an S3 user runs: path-style requests signed with SigV4 (over plain
//! HTTP the SDK hashes every body for its signature, and the gateway checks it), no
//! optional request checksums. `put` writes distinct objects `PREFIX-<run>-<n>`; `get`
//! reads back the objects a `put` left under `PREFIX-`, round robin, streaming each body
//! to nowhere.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use aws_sdk_s3::config::{Credentials, Region, RequestChecksumCalculation};
use aws_sdk_s3::primitives::ByteStream;
use clap::{Parser, Subcommand};
use rozone_bench::load::{drive_until, finish, run_id, Report, Until};

/// S3 PUT/GET load that reports like `rozone bench`.
#[derive(Debug, Parser)]
#[command(name = "rozone-s3-load", version, about)]
struct Args {
    /// The S3 endpoint (http://HOST:PORT).
    #[arg(long)]
    endpoint: String,
    #[arg(long, env = "AWS_ACCESS_KEY_ID")]
    access_key: String,
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    secret_key: String,
    /// The bucket (created if missing).
    #[arg(long, default_value = "bench")]
    bucket: String,
    /// Object names are PREFIX-<run>-<n>.
    #[arg(long, default_value = "o")]
    prefix: String,
    /// Concurrent clients (each one request at a time).
    #[arg(long, short = 'c', default_value_t = 16, global = true)]
    clients: usize,
    /// Operations in all (default: run for --duration).
    #[arg(long, short = 'n', global = true)]
    count: Option<u64>,
    /// How long to run when no --count is given.
    #[arg(long, short = 'd', default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    duration: Duration,
    /// Print the report as one JSON object.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    op: Op,
}

#[derive(Debug, Subcommand)]
enum Op {
    /// Put new objects of --size bytes.
    Put {
        /// Object size in bytes, or with a unit: 64KiB, 1MiB, 64MiB.
        #[arg(long, default_value = "1MiB", value_parser = parse_size)]
        size: u64,
    },
    /// Get the objects a `put` left under --prefix, round robin.
    Get,
}

/// Objects beyond this are not a benchmark of one request (S3's single PUT limit is 5 GiB;
/// this tool keeps each body in memory).
const MAX_SIZE: u64 = 1 << 30;

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("bad size {s:?}"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("unknown unit {other:?}: use B, KiB, MiB or GiB")),
    };
    let size = n
        .checked_mul(mult)
        .filter(|v| *v <= MAX_SIZE)
        .ok_or_else(|| format!("size {s:?} is above {MAX_SIZE} bytes"))?;
    Ok(size)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    finish("rozone-s3-load", run(&args).await, args.json)
}

fn client(args: &Args) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .endpoint_url(&args.endpoint)
        .credentials_provider(Credentials::new(
            &args.access_key,
            &args.secret_key,
            None,
            None,
            "rozone-s3-load",
        ))
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .timeout_config(
            aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(300))
                .build(),
        )
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

async fn run(args: &Args) -> anyhow::Result<Report> {
    let s3 = client(args);
    let until = match args.count {
        Some(n) => Until::Count(n),
        None => Until::Elapsed(args.duration),
    };
    let bucket = args.bucket.clone();
    match args.op {
        Op::Put { size } => {
            if let Err(e) = s3.create_bucket().bucket(&bucket).send().await {
                let code = aws_sdk_s3::error::ProvideErrorMetadata::code(&e);
                if !matches!(
                    code,
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) {
                    return Err(e).with_context(|| format!("create bucket {bucket}"));
                }
            }
            let len = usize::try_from(size).context("size")?;
            let data = bytes::Bytes::from(
                (0..len)
                    .map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect::<Vec<u8>>(),
            );
            let run_id = run_id();
            let prefix = args.prefix.clone();
            drive_until("s3-put", args.clients, until, size, move |i| {
                let (s3, bucket, data) = (s3.clone(), bucket.clone(), data.clone());
                let key = format!("{prefix}-{run_id}-{i}");
                async move {
                    s3.put_object()
                        .bucket(bucket)
                        .key(key)
                        .body(ByteStream::from(data))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| format!("{e:?}"))
                }
            })
            .await
        }
        Op::Get => {
            let objects = list(&s3, &bucket, &format!("{}-", args.prefix)).await?;
            let Some((_, size)) = objects.first().cloned() else {
                bail!(
                    "no objects under {bucket}/{}-: run rozone-s3-load put first",
                    args.prefix
                );
            };
            let objects = Arc::new(objects);
            drive_until("s3-get", args.clients, until, size, move |i| {
                let (s3, bucket, objects) = (s3.clone(), bucket.clone(), objects.clone());
                async move {
                    let (key, size) = &objects[(i as usize) % objects.len()];
                    let got = s3
                        .get_object()
                        .bucket(bucket)
                        .key(key)
                        .send()
                        .await
                        .map_err(|e| format!("{e:?}"))?;
                    let mut body = got.body;
                    let mut n = 0u64;
                    while let Some(chunk) = body.try_next().await.map_err(|e| e.to_string())? {
                        n += chunk.len() as u64;
                    }
                    if n != *size {
                        return Err(format!("{key}: read {n} bytes of {size}"));
                    }
                    Ok(())
                }
            })
            .await
        }
    }
}

/// Every (key, size) under `prefix`, the objects of the first size seen (a `put` run
/// writes one size; mixing sizes would make MiB/s meaningless).
async fn list(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut token = None;
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token)
            .send()
            .await
            .with_context(|| format!("list {bucket}/{prefix}"))?;
        for o in page.contents() {
            let (Some(k), Some(n)) = (o.key(), o.size()) else {
                continue;
            };
            let n = u64::try_from(n).unwrap_or(0);
            if n > 0 && out.first().is_none_or(|(_, first)| *first == n) {
                out.push((k.to_string(), n));
            }
        }
        token = page.next_continuation_token().map(str::to_string);
        if token.is_none() {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("2GiB").is_err());
        assert!(parse_size("1 PB").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999999999999").is_err());
    }
}
