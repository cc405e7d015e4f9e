//! rozone-chaos: looks for the defects nobody listed.
//!
//! - [`checker`]: a per-key linearizability checker for registers (Wing–Gong with
//!   memoisation, Porcupine style) with a timeout and a minimal violating window.

pub mod checker;
