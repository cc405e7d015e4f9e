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
use tonic::{Request, Response, Status};

use crate::node::OmNode;

/// `OmService` over one node.
#[derive(Clone)]
pub struct OmServiceImpl {
    pub node: Arc<OmNode>,
}

macro_rules! delegate {
    ($($method:ident($req:ty) -> $reply:ty => $f:path;)*) => {
        #[tonic::async_trait]
        impl OmService for OmServiceImpl {
            $(
                async fn $method(&self, req: Request<$req>) -> Result<Response<$reply>, Status> {
                    $f(&self.node, req.into_inner())
                        .await
                        .map(Response::new)
                        .map_err(Status::from)
                }
            )*
        }
    };
}

delegate! {
    create_volume(pb::CreateVolumeRequest) -> pb::CreateVolumeReply => namespace::create_volume;
    volume_info(pb::VolumeInfoRequest) -> pb::VolumeInfoReply => namespace::volume_info;
    list_volumes(pb::ListVolumesRequest) -> pb::ListVolumesReply => namespace::list_volumes;
    delete_volume(pb::DeleteVolumeRequest) -> pb::DeleteVolumeReply => namespace::delete_volume;
    create_bucket(pb::CreateBucketRequest) -> pb::CreateBucketReply => namespace::create_bucket;
    bucket_info(pb::BucketInfoRequest) -> pb::BucketInfoReply => namespace::bucket_info;
    list_buckets(pb::ListBucketsRequest) -> pb::ListBucketsReply => namespace::list_buckets;
    delete_bucket(pb::DeleteBucketRequest) -> pb::DeleteBucketReply => namespace::delete_bucket;
    open_key(pb::OpenKeyRequest) -> pb::OpenKeyReply => keys::open_key;
    allocate_block(pb::AllocateBlockRequest) -> pb::AllocateBlockReply => keys::allocate_block;
    commit_key(pb::CommitKeyRequest) -> pb::CommitKeyReply => keys::commit_key;
    lookup_key(pb::LookupKeyRequest) -> pb::LookupKeyReply => keys::lookup_key;
    list_keys(pb::ListKeysRequest) -> pb::ListKeysReply => keys::list_keys;
    delete_key(pb::DeleteKeyRequest) -> pb::DeleteKeyReply => keys::delete_key;
    rename_key(pb::RenameKeyRequest) -> pb::RenameKeyReply => keys::rename_key;
}
