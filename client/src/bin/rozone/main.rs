//! `rozone`: the command-line tool (being built).
fn main() {}
