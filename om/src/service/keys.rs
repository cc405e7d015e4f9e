//! `OmService`'s key calls: each decodes its request ([`crate::convert::keys`]), calls the
//! node ([`crate::node::keys`], where the checks and the leader's pre-execution live) and
//! encodes the answer. Replies carry block tokens ([`crate::tokens`]), signed on the
//! encoded reply: read+write for the blocks of an open key, read for every key described.

use rozone_proto::om as pb;

use crate::convert::keys as conv;
use crate::convert::read::read_options;
use crate::error::OmError;
use crate::node::actor::Actor;
use crate::node::OmNode;

pub async fn open_key(
    n: &OmNode,
    actor: &Actor,
    r: pb::OpenKeyRequest,
) -> Result<pb::OpenKeyReply, OmError> {
    let opened = n.open_key(actor, conv::open_args(r)?).await?;
    let mut reply: pb::OpenKeyReply = (&opened).into();
    n.tokens.sign_allocated(&n.scm, &mut reply.blocks).await?;
    Ok(reply)
}

pub async fn allocate_block(
    n: &OmNode,
    actor: &Actor,
    r: pb::AllocateBlockRequest,
) -> Result<pb::AllocateBlockReply, OmError> {
    let allocated = n.allocate_blocks(actor, conv::allocate_args(r)).await?;
    let mut reply: pb::AllocateBlockReply = (&allocated).into();
    n.tokens.sign_allocated(&n.scm, &mut reply.blocks).await?;
    Ok(reply)
}

pub async fn commit_key(
    n: &OmNode,
    actor: &Actor,
    r: pb::CommitKeyRequest,
) -> Result<pb::CommitKeyReply, OmError> {
    let key = n.commit_key(actor, conv::commit_args(r)?).await?;
    let mut key = [pb::KeyInfo::from(&key)];
    n.tokens.sign_keys(&n.scm, &mut key).await?;
    let [key] = key;
    Ok(pb::CommitKeyReply { key: Some(key) })
}

pub async fn lookup_key(
    n: &OmNode,
    actor: &Actor,
    r: pb::LookupKeyRequest,
) -> Result<pb::LookupKeyReply, OmError> {
    let read = read_options(r.read)?;
    let (key, info) = n
        .lookup_key(actor, read, &r.volume, &r.bucket, &r.key)
        .await?;
    let mut key = [pb::KeyInfo::from(&key)];
    n.tokens.sign_keys(&n.scm, &mut key).await?;
    let [key] = key;
    Ok(pb::LookupKeyReply {
        key: Some(key),
        read_info: Some(info.into()),
    })
}

pub async fn list_keys(
    n: &OmNode,
    actor: &Actor,
    r: pb::ListKeysRequest,
) -> Result<pb::ListKeysReply, OmError> {
    let read = read_options(r.read)?;
    let (page, info) = n.list_keys(actor, read, conv::list_keys_args(&r)).await?;
    let mut keys: Vec<pb::KeyInfo> = page.rows.iter().map(Into::into).collect();
    n.tokens.sign_keys(&n.scm, &mut keys).await?;
    Ok(pb::ListKeysReply {
        keys,
        truncated: page.truncated,
        read_info: Some(info.into()),
    })
}

pub async fn delete_key(
    n: &OmNode,
    actor: &Actor,
    r: pb::DeleteKeyRequest,
) -> Result<pb::DeleteKeyReply, OmError> {
    n.delete_key(actor, r.volume, r.bucket, r.key).await?;
    Ok(pb::DeleteKeyReply {})
}

pub async fn rename_key(
    n: &OmNode,
    actor: &Actor,
    r: pb::RenameKeyRequest,
) -> Result<pb::RenameKeyReply, OmError> {
    n.rename_key(actor, r.volume, r.bucket, r.from_key, r.to_key)
        .await?;
    Ok(pb::RenameKeyReply {})
}
