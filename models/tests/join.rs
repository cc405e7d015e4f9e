//! The join protocol, model-checked: the real `rozone_raft::join::decide` keeps one ring and
//! never lets the leader find a reverted log; each defect of cd62657 is found again.

use rozone_models::join::{
    check, Flaw, JoinModel, NO_EMPTY_VOTER, NO_REVERSION, ONE_RING, THREE_VOTERS,
};

/// Deep enough for both joiners to join (6 steps each) after a write, and for a wipe, a
/// refusal, a removal and a rejoin.
const DEPTH: usize = 20;

#[test]
fn real_join_decisions_keep_one_ring_and_never_revert_a_log() {
    let out = check(JoinModel { flaw: Flaw::None }, DEPTH);
    eprintln!("{} states to depth {DEPTH}", out.unique_states);
    if let Some(path) = &out.counterexample {
        panic!("counterexample with the real decisions:\n{path:?}");
    }
    assert!(
        out.discovered.contains(&THREE_VOTERS),
        "never reached: {THREE_VOTERS}"
    );
}

fn counterexample(flaw: Flaw) -> Vec<&'static str> {
    let out = check(JoinModel { flaw }, DEPTH);
    let path = out
        .counterexample
        .unwrap_or_else(|| panic!("{flaw:?}: no counterexample to depth {DEPTH}"));
    eprintln!("{flaw:?}: {:?}", path.into_actions());
    out.discovered
}

#[test]
fn plain_start_that_initialises_makes_a_second_ring() {
    assert!(counterexample(Flaw::PlainStartInitializes).contains(&ONE_RING));
}

#[test]
fn admitting_a_wiped_member_reverts_the_leaders_view_of_its_log() {
    let found = counterexample(Flaw::AdmitAnything);
    assert!(
        found.contains(&NO_REVERSION) || found.contains(&NO_EMPTY_VOTER),
        "{found:?}"
    );
}

#[test]
fn an_open_peer_port_before_admission_reverts_a_log() {
    assert!(counterexample(Flaw::OpenPeerPort).contains(&NO_REVERSION));
}
