//! rozone-chaos: looks for the defects nobody listed (issue 14).
//!
//! - [`checker`]: a per-key linearizability checker for registers (Wing–Gong with
//!   memoisation, Porcupine style) with a timeout and a minimal violating window.
//! - [`cluster`], [`procs`], [`proxy`]: real daemon processes in a temp dir, each SCM and
//!   OM peer port behind a proxy that cuts single links.
//! - [`faults`]: the fault schedule of a seed; [`workload`]: register operations through
//!   the client library, recorded as a history; [`data`]: real key data through the
//!   datanodes, every acknowledged object read back; [`run`]: one seed end to end.
//! - [`membership`]: a ring member lost for good and replaced.
//! - [`containers`]: the containers' end state (healthy, agreeing replicas; none resurrected).
//! - [`fuzz`]: the bounded mutation loop the decoder fuzz tests run.

pub mod checker;
pub mod cluster;
pub mod containers;
pub mod data;
pub mod faults;
pub mod fuzz;
pub mod membership;
pub mod procs;
pub mod proxy;
pub mod rings;
pub mod run;
pub mod workload;
