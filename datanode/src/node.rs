//! The core handle the datanode's services share: the container store, the pipelines, the
//! channels to other datanodes and the block-token verifier. Services hold it weakly ([`NodeRef`]), so a connection
//! that outlives the server (a peer's open append stream) does not keep the databases open
//! after the datanode stops.
//!
//! Depends on the store and the pipelines only: never on a service, the process wiring
//! ([`crate::server`]) or the SCM link.

use std::sync::{Arc, Weak};

use crate::clients::Clients;
use crate::pipeline::Pipelines;
use crate::store::ContainerStore;
use crate::tokens::TokenVerifier;

/// What the services work with.
pub struct Node {
    pub store: Arc<ContainerStore>,
    pub pipelines: Arc<Pipelines>,
    pub clients: Arc<Clients>,
    /// Checks the block tokens of container-port calls.
    pub tokens: Arc<TokenVerifier>,
}

/// A weak handle on [`Node`]: empty once the datanode has stopped.
#[derive(Clone)]
pub struct NodeRef(Weak<Node>);

impl NodeRef {
    pub fn new(node: &Arc<Node>) -> Self {
        Self(Arc::downgrade(node))
    }

    /// The node, unless the datanode has stopped.
    pub fn get(&self) -> Option<Arc<Node>> {
        self.0.upgrade()
    }
}
