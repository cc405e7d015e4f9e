//! The client's one error type. Callers branch on it (the CLI turns each into one line; the
//! key writer decides whether to exclude a datanode), so it is a `thiserror` enum, and a
//! server's refusal keeps its gRPC code.

use tonic::{Code, Status};

/// What went wrong with a client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No member of a ring (or no replica) answered in time, or every one refused with a
    /// retryable error until the call's deadline.
    #[error("{service} unavailable: {detail}")]
    Unavailable {
        /// "OM", "SCM", "datanode".
        service: String,
        /// The last error seen, and how long the client tried.
        detail: String,
    },
    /// The service answered with a definite error (not found, already exists, invalid...).
    #[error("{service}: {}", status.message())]
    Status {
        /// Which service refused.
        service: String,
        /// Its answer.
        status: Status,
    },
    /// A reply lacked a field the protocol requires, or carried an impossible value.
    #[error("bad reply from {service}: {what}")]
    BadReply {
        /// Which service answered.
        service: String,
        /// What was wrong.
        what: String,
    },
    /// Data read back does not match its checksum on any replica, or is short.
    #[error("{0}")]
    Data(String),
    /// The caller passed something unusable (an address, a path, a size).
    #[error("{0}")]
    Invalid(String),
    /// A local file or stream failed.
    #[error("{what}: {source}")]
    Io {
        /// What the client was doing.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Shorthand for results of client calls.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

impl ClientError {
    /// The gRPC code of a definite refusal, if this is one.
    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Status { status, .. } => Some(status.code()),
            _ => None,
        }
    }

    /// True for "the named thing does not exist".
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(Code::NotFound)
    }

    /// True for "the named thing exists already".
    pub fn is_already_exists(&self) -> bool {
        self.code() == Some(Code::AlreadyExists)
    }

    /// Builds a [`ClientError::Status`] from a service's answer.
    pub fn status(service: &str, status: Status) -> Self {
        ClientError::Status {
            service: service.to_string(),
            status,
        }
    }

    /// Builds a [`ClientError::BadReply`].
    pub fn bad_reply(service: &str, what: impl Into<String>) -> Self {
        ClientError::BadReply {
            service: service.to_string(),
            what: what.into(),
        }
    }

    /// Builds a [`ClientError::Io`].
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        ClientError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Whether a status means "try again elsewhere or later" (one rule for all of rozone).
pub use rozone_rpc::is_retryable;

impl From<rozone_rpc::RpcError> for ClientError {
    fn from(e: rozone_rpc::RpcError) -> Self {
        use rozone_rpc::RpcError as R;
        match e {
            R::Invalid(m) | R::Tls(m) => ClientError::Invalid(m),
            R::Unavailable { service, detail } => ClientError::Unavailable { service, detail },
            R::Status { service, status } => ClientError::Status { service, status },
        }
    }
}
