//! The datanode's gRPC services, the only code that serves protobuf requests: client chunk
//! and block I/O ([`container`]), chunk bytes between pipeline members ([`peer`]) and
//! container copies for other datanodes ([`replication`]). Each handler converts its
//! request at the edge ([`crate::convert`]), calls the node, and maps errors through the
//! one `From<DnError> for Status`.

pub mod container;
pub mod peer;
pub mod replication;

use std::sync::Arc;

use tonic::Status;

use crate::node::{Node, NodeRef};

/// The node a request works on; refused as `UNAVAILABLE` once the datanode is stopping.
fn node(r: &NodeRef) -> Result<Arc<Node>, Status> {
    r.get()
        .ok_or_else(|| Status::unavailable("datanode is stopping"))
}
