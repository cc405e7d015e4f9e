//! `rozone sh volume|bucket|key ...`: the namespace and key data, addressed by paths
//! `/volume`, `/volume/bucket`, `/volume/bucket/key` (a key may contain `/`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Subcommand;
use rozone_client::om::ReadMode;
use rozone_client::types::{Bucket, Key, Volume};
use rozone_client::Client;

use crate::cluster::ClusterArgs;
use crate::output::{fields, json, opt, size, table, time};
use crate::progress::Progress;

#[derive(Debug, Subcommand)]
pub enum ShCommand {
    /// Volumes: /VOLUME.
    #[command(subcommand)]
    Volume(VolumeCommand),
    /// Buckets: /VOLUME/BUCKET.
    #[command(subcommand)]
    Bucket(BucketCommand),
    /// Keys: /VOLUME/BUCKET/KEY.
    #[command(subcommand)]
    Key(KeyCommand),
}

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Create a volume.
    Create {
        path: String,
        /// Owner (default root).
        #[arg(long, default_value = "")]
        owner: String,
        /// Quota in bytes.
        #[arg(long)]
        quota: Option<u64>,
    },
    /// Show a volume.
    Info { path: String },
    /// List volumes.
    List {
        /// Only names starting with this.
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Delete an empty volume.
    Delete { path: String },
}

#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Create a bucket.
    Create {
        path: String,
        /// RATIS_THREE (default) or RATIS_ONE.
        #[arg(long)]
        replication: Option<String>,
    },
    /// Show a bucket.
    Info { path: String },
    /// List the buckets of a volume.
    List {
        path: String,
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Delete an empty bucket.
    Delete { path: String },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Write FILE (`-`: stdin) as a key.
    Put { path: String, file: PathBuf },
    /// Read a key into OUT (`-`: stdout).
    Get {
        path: String,
        out: PathBuf,
        /// Replace OUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Show a key and its blocks.
    Info { path: String },
    /// List the keys of a bucket.
    List {
        path: String,
        #[arg(long, default_value = "")]
        prefix: String,
        /// Only keys sorting after this.
        #[arg(long, default_value = "")]
        start_after: String,
        /// At most this many (0: all).
        #[arg(long, default_value_t = 0)]
        limit: usize,
    },
    /// Delete a key.
    Delete { path: String },
    /// Rename a key within its bucket.
    Rename {
        path: String,
        /// New key name (or /VOLUME/BUCKET/NEWKEY in the same bucket).
        to: String,
    },
}

/// `/vol/bucket/key` split into its parts; `want` is how many parts the command needs
/// (1: volume, 2: bucket, 3: key).
pub fn parse_path(path: &str, want: usize) -> anyhow::Result<Vec<String>> {
    let what = ["volume", "bucket", "key"][want - 1];
    let example = ["/VOLUME", "/VOLUME/BUCKET", "/VOLUME/BUCKET/KEY"][want - 1];
    let p = path.strip_prefix('/').unwrap_or(path);
    let mut parts: Vec<String> = if want == 3 {
        p.splitn(3, '/').map(str::to_string).collect()
    } else {
        p.split('/').map(str::to_string).collect()
    };
    if parts.last().is_some_and(|s| s.is_empty()) && want < 3 {
        parts.pop();
    }
    if parts.len() != want || parts.iter().any(String::is_empty) {
        bail!("bad {what} path {path:?}: want {example}");
    }
    Ok(parts)
}

pub async fn run(cluster: &ClusterArgs, as_json: bool, cmd: ShCommand) -> anyhow::Result<ExitCode> {
    let client = cluster.client()?;
    match cmd {
        ShCommand::Volume(c) => volume(&client, as_json, c).await?,
        ShCommand::Bucket(c) => bucket(&client, as_json, c).await?,
        ShCommand::Key(c) => key(&client, as_json, c).await?,
    }
    Ok(ExitCode::SUCCESS)
}

fn show_volume(v: &Volume) {
    fields(&[
        ("name", v.name.clone()),
        ("owner", v.owner.clone()),
        ("quota", opt(v.quota_bytes.map(size))),
        ("used", size(v.used_bytes)),
        ("buckets", v.bucket_count.to_string()),
        ("created", time(v.created_ms)),
        ("modified", time(v.modified_ms)),
    ]);
}

fn show_bucket(b: &Bucket) {
    fields(&[
        ("volume", b.volume.clone()),
        ("name", b.name.clone()),
        ("owner", b.owner.clone()),
        ("replication", b.replication.clone()),
        ("quota", opt(b.quota_bytes.map(size))),
        ("used", size(b.used_bytes)),
        ("keys", b.key_count.to_string()),
        ("created", time(b.created_ms)),
        ("modified", time(b.modified_ms)),
    ]);
}

async fn volume(c: &Client, as_json: bool, cmd: VolumeCommand) -> anyhow::Result<()> {
    match cmd {
        VolumeCommand::Create { path, owner, quota } => {
            let p = parse_path(&path, 1)?;
            let v = c.om.create_volume(&p[0], &owner, quota).await?;
            if as_json {
                json(&v)?
            } else {
                println!("created volume /{}", v.name)
            }
        }
        VolumeCommand::Info { path } => {
            let p = parse_path(&path, 1)?;
            let v = c.om.volume_info(&p[0], ReadMode::Default).await?;
            if as_json {
                json(&v)?
            } else {
                show_volume(&v)
            }
        }
        VolumeCommand::List { prefix } => {
            let vs = c.om.list_volumes(&prefix).await?;
            if as_json {
                json(&vs)?
            } else {
                let rows = vs
                    .iter()
                    .map(|v| {
                        vec![
                            v.name.clone(),
                            v.owner.clone(),
                            v.bucket_count.to_string(),
                            size(v.used_bytes),
                            time(v.created_ms),
                        ]
                    })
                    .collect::<Vec<_>>();
                table(&["VOLUME", "OWNER", "BUCKETS", "USED", "CREATED"], &rows);
            }
        }
        VolumeCommand::Delete { path } => {
            let p = parse_path(&path, 1)?;
            c.om.delete_volume(&p[0]).await?;
            if as_json {
                json(&serde_json::json!({"deleted": format!("/{}", p[0])}))?
            } else {
                println!("deleted volume /{}", p[0])
            }
        }
    }
    Ok(())
}

async fn bucket(c: &Client, as_json: bool, cmd: BucketCommand) -> anyhow::Result<()> {
    match cmd {
        BucketCommand::Create { path, replication } => {
            let p = parse_path(&path, 2)?;
            let b =
                c.om.create_bucket(&p[0], &p[1], replication.as_deref())
                    .await?;
            if as_json {
                json(&b)?
            } else {
                println!("created bucket /{}/{}", b.volume, b.name)
            }
        }
        BucketCommand::Info { path } => {
            let p = parse_path(&path, 2)?;
            let b = c.om.bucket_info(&p[0], &p[1], ReadMode::Default).await?;
            if as_json {
                json(&b)?
            } else {
                show_bucket(&b)
            }
        }
        BucketCommand::List { path, prefix } => {
            let p = parse_path(&path, 1)?;
            let bs = c.om.list_buckets(&p[0], &prefix).await?;
            if as_json {
                json(&bs)?
            } else {
                let rows = bs
                    .iter()
                    .map(|b| {
                        vec![
                            b.name.clone(),
                            b.replication.clone(),
                            b.key_count.to_string(),
                            size(b.used_bytes),
                            time(b.created_ms),
                        ]
                    })
                    .collect::<Vec<_>>();
                table(&["BUCKET", "REPLICATION", "KEYS", "USED", "CREATED"], &rows);
            }
        }
        BucketCommand::Delete { path } => {
            let p = parse_path(&path, 2)?;
            c.om.delete_bucket(&p[0], &p[1]).await?;
            if as_json {
                json(&serde_json::json!({"deleted": format!("/{}/{}", p[0], p[1])}))?
            } else {
                println!("deleted bucket /{}/{}", p[0], p[1])
            }
        }
    }
    Ok(())
}

fn show_key(k: &Key) {
    fields(&[
        ("volume", k.volume.clone()),
        ("bucket", k.bucket.clone()),
        ("name", k.name.clone()),
        ("size", format!("{} ({})", k.size, size(k.size))),
        ("replication", k.replication.clone()),
        ("checksum", k.checksum.clone()),
        ("version", k.version.to_string()),
        ("created", time(k.created_ms)),
        ("modified", time(k.modified_ms)),
        ("blocks", k.blocks.len().to_string()),
    ]);
    if !k.blocks.is_empty() {
        println!();
        let rows = k
            .blocks
            .iter()
            .map(|b| {
                let dns = b
                    .pipeline
                    .members
                    .iter()
                    .map(|m| m.id.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                vec![
                    b.block_id.to_string(),
                    b.offset.to_string(),
                    b.length.to_string(),
                    b.pipeline.id.to_string(),
                    dns,
                ]
            })
            .collect::<Vec<_>>();
        table(
            &["BLOCK", "OFFSET", "LENGTH", "PIPELINE", "DATANODES"],
            &rows,
        );
    }
}

/// Output goes to a temporary file next to OUT, renamed over it only when the whole key
/// was read and verified, so a failed get never leaves a truncated OUT.
fn partial_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!(".{name}.rozone-partial"))
}

async fn key(c: &Client, as_json: bool, cmd: KeyCommand) -> anyhow::Result<()> {
    match cmd {
        KeyCommand::Put { path, file } => {
            let p = parse_path(&path, 3)?;
            let k = if file.as_os_str() == "-" {
                let bar = Progress::new("put", None);
                let k = c
                    .put_key(&p[0], &p[1], &p[2], None, tokio::io::stdin(), &|n| {
                        bar.update(n)
                    })
                    .await;
                bar.finish();
                k?
            } else {
                let f = tokio::fs::File::open(&file)
                    .await
                    .with_context(|| format!("open {}", file.display()))?;
                let meta = f
                    .metadata()
                    .await
                    .with_context(|| format!("stat {}", file.display()))?;
                if meta.is_dir() {
                    bail!("{} is a directory", file.display());
                }
                let bar = Progress::new("put", Some(meta.len()));
                let k = c
                    .put_key(
                        &p[0],
                        &p[1],
                        &p[2],
                        Some(meta.len()),
                        tokio::io::BufReader::with_capacity(1 << 20, f),
                        &|n| bar.update(n),
                    )
                    .await;
                bar.finish();
                k?
            };
            if as_json {
                json(&k)?
            } else {
                println!(
                    "put /{}/{}/{} ({} bytes)",
                    k.volume, k.bucket, k.name, k.size
                )
            }
        }
        KeyCommand::Get { path, out, force } => {
            let p = parse_path(&path, 3)?;
            if out.as_os_str() == "-" {
                let mut stdout = tokio::io::stdout();
                c.get_key(&p[0], &p[1], &p[2], &mut stdout, &|_| {}).await?;
                return Ok(());
            }
            if out.exists() && !force {
                bail!("{} exists (use --force to replace it)", out.display());
            }
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    bail!("directory {} does not exist", dir.display());
                }
            }
            // Look the key up first: an unknown key must not create any file.
            let k = c.om.lookup_key(&p[0], &p[1], &p[2], c.read.mode).await?;
            let tmp = partial_path(&out);
            let f = tokio::fs::File::create(&tmp)
                .await
                .with_context(|| format!("create {}", tmp.display()))?;
            let mut w = tokio::io::BufWriter::with_capacity(1 << 20, f);
            let bar = Progress::new("get", Some(k.size));
            let reader = rozone_client::key_read::KeyReader {
                om: &c.om,
                datanodes: &c.datanodes,
                opts: &c.read,
            };
            let r = reader.read_into(&k, &mut w, &|n| bar.update(n)).await;
            bar.finish();
            if let Err(e) = r {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(e.into());
            }
            let file = w.into_inner();
            file.sync_all()
                .await
                .with_context(|| format!("sync {}", tmp.display()))?;
            tokio::fs::rename(&tmp, &out)
                .await
                .with_context(|| format!("rename to {}", out.display()))?;
            if as_json {
                json(&k)?
            } else {
                eprintln!(
                    "got /{}/{}/{} ({} bytes) into {}",
                    k.volume,
                    k.bucket,
                    k.name,
                    k.size,
                    out.display()
                )
            }
        }
        KeyCommand::Info { path } => {
            let p = parse_path(&path, 3)?;
            let k =
                c.om.lookup_key(&p[0], &p[1], &p[2], ReadMode::Default)
                    .await?;
            if as_json {
                json(&k)?
            } else {
                show_key(&k)
            }
        }
        KeyCommand::List {
            path,
            prefix,
            start_after,
            limit,
        } => {
            let p = parse_path(&path, 2)?;
            let ks =
                c.om.list_keys(&p[0], &p[1], &prefix, &start_after, limit)
                    .await?;
            if as_json {
                json(&ks)?
            } else {
                let rows = ks
                    .iter()
                    .map(|k| {
                        vec![
                            k.name.clone(),
                            k.size.to_string(),
                            k.version.to_string(),
                            time(k.modified_ms),
                        ]
                    })
                    .collect::<Vec<_>>();
                table(&["KEY", "SIZE", "VERSION", "MODIFIED"], &rows);
            }
        }
        KeyCommand::Delete { path } => {
            let p = parse_path(&path, 3)?;
            c.om.delete_key(&p[0], &p[1], &p[2]).await?;
            if as_json {
                json(&serde_json::json!({"deleted": format!("/{}/{}/{}", p[0], p[1], p[2])}))?
            } else {
                println!("deleted /{}/{}/{}", p[0], p[1], p[2])
            }
        }
        KeyCommand::Rename { path, to } => {
            let p = parse_path(&path, 3)?;
            let to_key = if to.starts_with('/') {
                let q = parse_path(&to, 3)?;
                if q[0] != p[0] || q[1] != p[1] {
                    bail!(
                        "rename stays within one bucket: {to} is not in /{}/{}",
                        p[0],
                        p[1]
                    );
                }
                q[2].clone()
            } else {
                to
            };
            c.om.rename_key(&p[0], &p[1], &p[2], &to_key).await?;
            if as_json {
                json(
                    &serde_json::json!({"renamed": format!("/{}/{}/{}", p[0], p[1], p[2]), "to": format!("/{}/{}/{}", p[0], p[1], to_key)}),
                )?
            } else {
                println!(
                    "renamed /{}/{}/{} to /{}/{}/{}",
                    p[0], p[1], p[2], p[0], p[1], to_key
                )
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_path;

    #[test]
    fn paths_need_exactly_their_parts() {
        assert_eq!(parse_path("/v", 1).unwrap(), ["v"]);
        assert_eq!(parse_path("/v/b/", 2).unwrap(), ["v", "b"]);
        assert_eq!(parse_path("/v/b/k/x/y", 3).unwrap(), ["v", "b", "k/x/y"]);
        assert_eq!(
            parse_path("/v", 2).unwrap_err().to_string(),
            "bad bucket path \"/v\": want /VOLUME/BUCKET"
        );
        assert!(parse_path("/v/b", 3).is_err());
        assert!(parse_path("/v//k", 3).is_err());
        assert!(parse_path("/v/b", 1).is_err());
    }
}
