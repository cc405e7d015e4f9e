//! The gRPC services on the OM client port: `OmService` (namespace and keys), `OmAdmin`
//! (roles, leader transfer, decommission), the OM's hooks of the shared `Ring` service
//! (what a bootstrapping OM asks; `rozone_raft::ring`) and `OmS3` (S3 credentials).
//! Each handler decodes its request at the edge (`crate::convert`), calls the node
//! (`crate::node`, where the logic lives), encodes the answer and maps errors through the
//! one `From<OmError> for Status`.

pub mod admin;
pub mod keys;
pub mod multipart;
pub mod namespace;
pub mod ring;
pub mod s3;

use std::sync::Arc;

use rozone_proto::om as pb;
use rozone_proto::om::om_service_server::OmService;
use rozone_rpc::{Caller, Role};
use tonic::{Request, Response, Status};

use crate::node::actor::Actor;
use crate::node::OmNode;

/// `OmService` over one node.
#[derive(Clone)]
pub struct OmServiceImpl {
    pub node: Arc<OmNode>,
}

/// Whom an `OmService` call acts for: a client certificate's user, or a trusted caller (an
/// admin, the S3 gateway, anyone on an insecure cluster). Other roles (ring members,
/// datanodes) have no business on this service and are refused.
pub fn actor_of<T>(req: &Request<T>) -> Result<Actor, Status> {
    match Caller::of(req)? {
        None => Ok(Actor::Trusted),
        Some(c) => match c.role {
            Role::Admin | Role::S3g => Ok(Actor::Trusted),
            Role::Client => Ok(Actor::User(c.to_string())),
            Role::Scm | Role::Om | Role::Datanode => Err(Status::permission_denied(format!(
                "the namespace and key calls are for client/admin/s3g certificates; the caller is {c}"
            ))),
        },
    }
}

/// Each method: who acts ([`actor_of`]), then the handler, with the actor when it checks
/// owners (`@user`) and without when anyone with access to the service may read it.
macro_rules! delegate {
    ($($method:ident($req:ty) -> $reply:ty => $(@$user:ident)? $f:path;)*) => {
        #[tonic::async_trait]
        impl OmService for OmServiceImpl {
            $(
                async fn $method(&self, req: Request<$req>) -> Result<Response<$reply>, Status> {
                    // Refuses other roles on every method; unused by the open reads.
                    let _actor = actor_of(&req)?;
                    $f(&self.node, $({ let $user = &_actor; $user },)? req.into_inner())
                        .await
                        .map(Response::new)
                        .map_err(Status::from)
                }
            )*
        }
    };
}

delegate! {
    create_volume(pb::CreateVolumeRequest) -> pb::CreateVolumeReply => @user namespace::create_volume;
    volume_info(pb::VolumeInfoRequest) -> pb::VolumeInfoReply => namespace::volume_info;
    list_volumes(pb::ListVolumesRequest) -> pb::ListVolumesReply => namespace::list_volumes;
    delete_volume(pb::DeleteVolumeRequest) -> pb::DeleteVolumeReply => @user namespace::delete_volume;
    create_bucket(pb::CreateBucketRequest) -> pb::CreateBucketReply => @user namespace::create_bucket;
    bucket_info(pb::BucketInfoRequest) -> pb::BucketInfoReply => namespace::bucket_info;
    list_buckets(pb::ListBucketsRequest) -> pb::ListBucketsReply => namespace::list_buckets;
    delete_bucket(pb::DeleteBucketRequest) -> pb::DeleteBucketReply => @user namespace::delete_bucket;
    open_key(pb::OpenKeyRequest) -> pb::OpenKeyReply => @user keys::open_key;
    allocate_block(pb::AllocateBlockRequest) -> pb::AllocateBlockReply => @user keys::allocate_block;
    commit_key(pb::CommitKeyRequest) -> pb::CommitKeyReply => @user keys::commit_key;
    lookup_key(pb::LookupKeyRequest) -> pb::LookupKeyReply => @user keys::lookup_key;
    list_keys(pb::ListKeysRequest) -> pb::ListKeysReply => @user keys::list_keys;
    delete_key(pb::DeleteKeyRequest) -> pb::DeleteKeyReply => @user keys::delete_key;
    rename_key(pb::RenameKeyRequest) -> pb::RenameKeyReply => @user keys::rename_key;
}
