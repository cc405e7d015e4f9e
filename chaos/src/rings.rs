//! What the harness asks the rings directly (plaintext, each call bounded): who leads, as
//! every member sees it.

use std::time::Duration;

use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::ring::RingInfoRequest;
use tonic::transport::Channel;

use crate::cluster::Kind;

const CALL: Duration = Duration::from_secs(2);

async fn channel(addr: &str) -> Option<Channel> {
    Channel::from_shared(format!("http://{addr}"))
        .ok()?
        .connect_timeout(CALL)
        .timeout(CALL)
        .connect()
        .await
        .ok()
}

/// Member `addr`'s view: (leader id, whether that leader is ready).
pub async fn view(kind: Kind, addr: &str) -> Option<(Option<u64>, bool)> {
    let ch = channel(addr).await?;
    if kind == Kind::Datanode {
        return None;
    }
    // Both rings serve the shared `Ring` service.
    RingClient::new(ch)
        .ring_info(RingInfoRequest {})
        .await
        .ok()
        .map(|r| {
            let r = r.into_inner();
            (r.leader_id, r.leader_ready)
        })
}

/// The ready leader a member names that also names itself leader, if any.
pub async fn leader(kind: Kind, members: &[(u64, String)]) -> Option<u64> {
    for (id, addr) in members {
        if let Some((Some(l), true)) = view(kind, addr).await {
            if l == *id {
                return Some(l);
            }
        }
    }
    None
}
