//! The SCM's part of the shared `Ring` service (`rozone_raft::ring`): joiners download
//! checkpoints from the SCM's checkpoint port. An SCM joiner is not checked against a
//! `[[peers]]` list: the join checks of the ring layer (ring id, wiped members) apply.

use rozone_raft::ring::RingHooks;
use rozone_rpc::Role;

use crate::error::SERVICE_NAME;

pub struct ScmRingHooks {
    /// Advertised address of this node's checkpoint download service.
    pub checkpoint_addr: String,
}

impl RingHooks for ScmRingHooks {
    fn service(&self) -> &'static str {
        SERVICE_NAME
    }

    fn member_role(&self) -> Role {
        Role::Scm
    }

    fn checkpoint_addr(&self) -> String {
        self.checkpoint_addr.clone()
    }
}
