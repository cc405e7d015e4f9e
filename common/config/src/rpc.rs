//! The `[rpc]` section every daemon has: the limits of its gRPC servers, which keep one
//! process's memory and threads bounded however many requests arrive (issue 13, item 2).
//! Applied by rozone-rpc's `Security::server` to every port.

use std::time::Duration;

use crate::Problems;

crate::config_struct! {
    /// Limits of every gRPC server of this process (client, peer, replication ports).
    pub struct RpcSection {
        /// Connections one server (port) holds at once. One more is accepted
        /// and closed at once (the caller sees the connection reset and
        /// retries), so a caller opening connections in a loop cannot run the
        /// process out of memory or file descriptors. Keep it below the
        /// process's open-file limit; a cluster needs about one connection per
        /// peer process and client on each port.
        pub max_connections: usize = 4096,
        /// Requests one connection may have in progress at once. More are
        /// refused at once with RESOURCE_EXHAUSTED instead of queueing, so a
        /// flood from one caller cannot pile up memory; clients retry.
        pub max_requests_per_connection: usize = 128,
        /// HTTP/2 streams one connection may open at once (every call is a
        /// stream; Raft append streams and block uploads stay open).
        pub max_streams_per_connection: u32 = 256,
        /// A call whose handler has not answered within this is cancelled with
        /// DEADLINE_EXCEEDED. Streaming answers (snapshot and container
        /// downloads, Raft appends) are bounded by their own progress limits
        /// instead; a block upload must finish within it.
        #[serde(with = "crate::duration")]
        pub request_timeout: Duration = Duration::from_secs(300),
        /// Ping every connection this often; one whose peer does not answer
        /// within rpc.keepalive_timeout is closed (a hung or vanished caller
        /// frees what it held).
        #[serde(with = "crate::duration")]
        pub keepalive_interval: Duration = Duration::from_secs(30),
        /// How long a keepalive ping may go unanswered.
        #[serde(with = "crate::duration")]
        pub keepalive_timeout: Duration = Duration::from_secs(20),
    }
}

impl RpcSection {
    /// Records what is wrong with `[rpc]`.
    pub fn check(&self, problems: &mut Problems) {
        problems.check(self.max_connections > 0, || {
            "rpc.max_connections must be above 0".into()
        });
        problems.check(self.max_requests_per_connection > 0, || {
            "rpc.max_requests_per_connection must be above 0".into()
        });
        problems.check(self.max_streams_per_connection > 0, || {
            "rpc.max_streams_per_connection must be above 0".into()
        });
        for (name, d) in [
            ("request_timeout", self.request_timeout),
            ("keepalive_interval", self.keepalive_interval),
            ("keepalive_timeout", self.keepalive_timeout),
        ] {
            problems.check(!d.is_zero(), || format!("rpc.{name} must be above 0"));
        }
    }
}
