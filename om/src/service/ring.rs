//! The OM's part of the shared `Ring` service (`rozone_raft::ring`): its `[[peers]]` config,
//! which a joiner must be listed in with the addresses it asks for (unless it was started
//! with `--force`), and where joiners download checkpoints (the peer port).

use std::sync::Arc;

use rozone_raft::ring::{ConfiguredPeer, RingHooks};
use rozone_rpc::Role;

use crate::node::OmNode;

pub struct OmRingHooks {
    pub node: Arc<OmNode>,
}

impl RingHooks for OmRingHooks {
    fn service(&self) -> &'static str {
        "OM"
    }

    fn member_role(&self) -> Role {
        Role::Om
    }

    fn checkpoint_addr(&self) -> String {
        self.node.group.node_info().peer_addr.clone()
    }

    fn config_peers(&self) -> Vec<ConfiguredPeer> {
        self.node
            .config
            .peers
            .iter()
            .map(|p| ConfiguredPeer {
                id: p.id,
                peer_addr: p.peer_addr.clone(),
                client_addr: p.client_addr.clone(),
            })
            .collect()
    }

    fn check_joiner(
        &self,
        id: u64,
        peer_addr: &str,
        client_addr: &str,
        force: bool,
    ) -> Result<(), String> {
        match self.node.config.peers.iter().find(|p| p.id == id) {
            Some(p) if p.peer_addr == peer_addr && p.client_addr == client_addr => Ok(()),
            Some(p) if !force => Err(format!(
                "OM {id} asks to join as peer {peer_addr} / client {client_addr}, but this leader's [[peers]] lists it at peer {} / client {}",
                p.peer_addr, p.client_addr
            )),
            None if !force => Err(format!(
                "OM {id} is not in this leader's [[peers]] config: add it to the config of every OM first"
            )),
            _ => {
                tracing::warn!(member = id, "adding OM with --force although this leader's config does not list it as asked");
                Ok(())
            }
        }
    }
}
