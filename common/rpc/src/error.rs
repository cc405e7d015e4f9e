//! The errors of this crate. Callers branch on them (the CLI prints each as one line, a
//! daemon refuses to start with a message naming the file), so it is a `thiserror` enum.

use tonic::Status;

/// What went wrong building a channel, loading certificates, or calling a ring.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// An address, role or argument is unusable.
    #[error("{0}")]
    Invalid(String),
    /// A certificate or key file is missing, unreadable, too open, expired, or not signed
    /// by the cluster CA.
    #[error("{0}")]
    Tls(String),
    /// No member of a ring answered in time, or every one refused with a retryable error
    /// until the call's deadline.
    #[error("{service} unavailable: {detail}")]
    Unavailable {
        /// "OM", "SCM".
        service: String,
        /// The last error seen, and how long the caller tried.
        detail: String,
    },
    /// The service answered with a definite error (not found, permission denied...).
    #[error("{service}: {}", status.message())]
    Status {
        /// Which service refused.
        service: String,
        /// Its answer.
        status: Status,
    },
}

impl RpcError {
    /// The gRPC status of a definite refusal, if this is one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            RpcError::Status { status, .. } => Some(status),
            _ => None,
        }
    }
}
