//! One ring layer for every replicated daemon (OM, SCM): what a member reports about its
//! ring ([`view`]), the membership operations with their safety checks ([`ops`]), and the
//! `Ring` gRPC service built from both ([`service`]) with a hook for what differs between
//! daemons (the OM checks a joiner against its `[[peers]]` config). Daemons read their
//! ring through [`RingView`], never through openraft's metrics.

pub mod ops;
pub mod service;
pub mod view;

pub use ops::{check_quorum_after_removal, RingOpError};
pub use service::{ring_info_reply, ring_op_status, ConfiguredPeer, RingHooks, RingService};
pub use view::{MemberRole, MemberView, RingView};
