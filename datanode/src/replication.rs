//! Container replication, the pulling side (run for the SCM's replicate command): pull a
//! CLOSED replica from a source datanode's replication service ([`crate::service::replication`])
//! as one stream, stage it, verify every block against its chunk checksums and the
//! container checksum, then import it atomically (rename of the staged directory, one
//! metadata batch). A transfer cut midway leaves nothing but a staging directory, which is
//! removed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use rozone_proto::datanode as pb;
use rozone_proto::datanode::pull_container_reply::Msg;
use rozone_types::checksum::crc32c_append;
use rozone_types::codes::DnCode;

use crate::clients::Clients;
use crate::convert::block_from;
use crate::error::DnError;
use crate::store::{container_checksum, offload, volume, ContainerStore};
use crate::types::{block_range_end, BlockData, Descriptor};

/// Pulls container `cid` from the first source that delivers a verified copy and imports it.
pub async fn replicate(
    store: Arc<ContainerStore>,
    clients: &Clients,
    cid: u64,
    sources: &[String],
) -> Result<(), DnError> {
    if store.live(cid).is_ok() {
        return Ok(());
    }
    if sources.is_empty() {
        return Err(DnError::invalid(format!(
            "replicate container {cid}: no source given"
        )));
    }
    let mut last = DnError::io("replicate", "no source tried");
    for src in sources {
        match pull_from(&store, clients, cid, src).await {
            Ok(()) => {
                tracing::info!(container_id = cid, source = %src, "container replicated");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(container_id = cid, source = %src, error = %e, "replication from source failed");
                last = e;
            }
        }
    }
    Err(last)
}

struct Staged {
    dir: PathBuf,
    done: bool,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            offload(|| volume::remove(&self.dir));
        }
    }
}

fn check_rel(rel: &str, blocks: &[BlockData]) -> Result<(), DnError> {
    let ok = blocks
        .iter()
        .any(|b| rel == format!("chunks/{}.block", b.id.local_id));
    if ok {
        Ok(())
    } else {
        Err(DnError::invalid(format!(
            "source sent an unexpected file {rel:?}"
        )))
    }
}

async fn pull_from(
    store: &Arc<ContainerStore>,
    clients: &Clients,
    cid: u64,
    src: &str,
) -> Result<(), DnError> {
    let vi = store.volume_for_import()?;
    let staged = Staged {
        dir: store.volumes()[vi].tmp_path(&format!("import-{cid}")),
        done: false,
    };
    // File work in this loop runs through `offload`: a slow disk must not stall the
    // async worker (heartbeats, Raft, other requests share it).
    offload(|| std::fs::create_dir_all(staged.dir.join("chunks")))
        .map_err(|e| DnError::io("create staging dir", e))?;
    let mut client = clients
        .replication(src)
        .map_err(|e| DnError::io("replicate", e))?;
    let mut stream = client
        .pull_container(pb::PullContainerRequest { container_id: cid })
        .await
        .map_err(|s| DnError::io("replicate", format!("{src}: {}", s.message())))?
        .into_inner();
    let mut desc: Option<Descriptor> = None;
    let mut blocks: Vec<BlockData> = Vec::new();
    let mut open: Option<(String, std::fs::File, u64, u32)> = None;
    let mut files = 0u32;
    let mut trailer = None;
    while let Some(m) = stream.next().await {
        let m = m.map_err(|s| {
            DnError::io(
                "replicate",
                format!("transfer from {src} cut: {}", s.message()),
            )
        })?;
        match m.msg {
            Some(Msg::Descriptor(d)) => {
                let d = Descriptor::from_proto(d)?;
                if d.id != cid {
                    return Err(DnError::invalid(format!(
                        "asked for container {cid}, got {}",
                        d.id
                    )));
                }
                desc = Some(d);
            }
            Some(Msg::Block(b)) => {
                let bcsid = b.bcsid;
                let mut block = block_from(Some(b), "block")?;
                block.bcsid = bcsid;
                blocks.push(block);
            }
            Some(Msg::Piece(p)) => {
                check_rel(&p.path, &blocks)?;
                if open.as_ref().is_none_or(|o| o.0 != p.path) {
                    let f = offload(|| std::fs::File::create(staged.dir.join(&p.path)))
                        .map_err(|e| DnError::io("stage file", e))?;
                    open = Some((p.path.clone(), f, 0, 0));
                }
                let o = open
                    .as_mut()
                    .ok_or_else(|| DnError::io("replicate", "no open file"))?;
                if p.offset != o.2 {
                    return Err(DnError::invalid(format!(
                        "{}: piece at {} but {} bytes received",
                        p.path, p.offset, o.2
                    )));
                }
                // A block file never reaches MAX_BLOCK: a source sending more is refused
                // before the bytes land.
                let end = block_range_end(&p.path, o.2, p.data.len() as u64)?;
                offload(|| o.1.write_all(&p.data)).map_err(|e| DnError::io("stage file", e))?;
                o.2 = end;
                o.3 = crc32c_append(o.3, &p.data);
            }
            Some(Msg::FileEnd(e)) => {
                let o = open.take().filter(|o| o.0 == e.path).ok_or_else(|| {
                    DnError::invalid(format!("end of {} without its data", e.path))
                })?;
                if o.2 != e.size || o.3 != e.crc32c {
                    return Err(DnError::new(
                        DnCode::ChecksumMismatch,
                        format!(
                            "{}: received {} bytes crc {:08x}, source says {} bytes crc {:08x}",
                            e.path, o.2, o.3, e.size, e.crc32c
                        ),
                    ));
                }
                offload(|| o.1.sync_all()).map_err(|e| DnError::io("sync staged file", e))?;
                files += 1;
            }
            Some(Msg::Trailer(t)) => trailer = Some(t),
            None => return Err(DnError::invalid("empty message in container stream")),
        }
    }
    let d = desc.ok_or_else(|| DnError::invalid("container stream without descriptor"))?;
    let t = trailer.ok_or_else(|| {
        DnError::io(
            "replicate",
            format!("transfer from {src} ended before its trailer"),
        )
    })?;
    if t.file_count != files
        || t.block_count != blocks.len() as u64
        || d.block_count != blocks.len() as u64
    {
        return Err(DnError::invalid(format!(
            "container {cid}: {files} files / {} blocks received, trailer says {} / {}, descriptor {} blocks",
            blocks.len(),
            t.file_count,
            t.block_count,
            d.block_count
        )));
    }
    let dir = staged.dir.clone();
    let bl = blocks.clone();
    tokio::task::spawn_blocking(move || verify_staged(&dir, &bl))
        .await
        .map_err(|e| DnError::io("verify", e))??;
    let sum = container_checksum(&blocks);
    if sum != d.checksum || sum != t.checksum {
        return Err(DnError::new(
            DnCode::ChecksumMismatch,
            format!("container {cid}: checksum {sum} != source's {}", d.checksum),
        ));
    }
    let mut staged = staged;
    let (store2, dir) = (store.clone(), staged.dir.clone());
    tokio::task::spawn_blocking(move || store2.import(vi, &dir, d, &blocks))
        .await
        .map_err(|e| DnError::io("import", e))??;
    staged.done = true;
    Ok(())
}

/// Every block's chunks verify against their checksums in the staged files.
fn verify_staged(dir: &Path, blocks: &[BlockData]) -> Result<(), DnError> {
    use std::os::unix::fs::FileExt;
    for b in blocks {
        let p = dir.join(format!("chunks/{}.block", b.id.local_id));
        let f = std::fs::File::open(&p)
            .map_err(|e| DnError::io(&format!("open {}", p.display()), e))?;
        for c in &b.chunks {
            let mut buf = vec![0u8; c.len as usize];
            f.read_exact_at(&mut buf, c.offset).map_err(|e| {
                DnError::new(DnCode::ChecksumMismatch, format!("block {}: {e}", b.id))
            })?;
            crate::store::write::verify(b.id, c, &buf)?;
        }
    }
    Ok(())
}
