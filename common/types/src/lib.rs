//! rozone-types: what daemons and clients must agree on, declared once.
//!
//! - [`ids`]: block, container, pipeline and datanode ids, and their one conversion from
//!   the wire (missing or zero ids are refused, naming the field).
//! - [`checksum`]: the chunk checksum rule (CRC32 or CRC32C per window), computed by
//!   writers and verified by every reader, replica and import.
//! - [`codes`]: the error-code metadata every service attaches to a refusal
//!   (`x-rozone-om-error`, `x-rozone-result`) and the enums behind them, so clients branch
//!   on a stable code, never on message text.
//!
//! Must stay light: no RocksDB, no openraft (the client and the CLI depend on it).

pub mod checksum;
pub mod codes;
pub mod ids;

pub use checksum::{ChecksumData, ChecksumType};
pub use ids::{BlockId, ContainerId, DatanodeId, Invalid, PipelineId};

/// Bytes the SCM counts against a container for a block of unknown length (an
/// `AllocateBlock` of `size = 0`). The OM hands such blocks (its pool's) only to keys of at
/// most this size, so no key outgrows what its container was charged; a client's deferred
/// open (one block, no log entry of its own) is for keys up to this size.
pub const UNKNOWN_LENGTH_RESERVATION: u64 = 1 << 20;
