//! This member's ring id, shared by its group (for the leader's join decisions), its
//! network (every peer RPC carries it) and the peer service (which refuses another ring's
//! RPCs): a node that holds another ring's data, e.g. a wiped member re-created with
//! `--init`, never answers this ring's appends.

use std::sync::RwLock;

use super::record::RingId;

#[derive(Debug, Default)]
pub struct RingSlot {
    /// The ring id, and whether peer RPCs carry and check it (not for data of an older
    /// version, whose members stamped their ids independently).
    inner: RwLock<Option<(RingId, bool)>>,
}

impl RingSlot {
    pub fn set(&self, id: RingId, on_wire: bool) {
        if let Ok(mut g) = self.inner.write() {
            *g = Some((id, on_wire));
        }
    }

    pub fn get(&self) -> Option<RingId> {
        self.inner.read().ok().and_then(|g| g.map(|(id, _)| id))
    }

    /// The tag peer RPCs carry (empty when not checked).
    pub fn wire(&self) -> String {
        match self.inner.read().ok().and_then(|g| *g) {
            Some((id, true)) => id.to_string(),
            _ => String::new(),
        }
    }

    /// Checks the tag of a received peer RPC: refused only when both sides know their ring
    /// and the rings differ.
    pub fn check(&self, tag: &str) -> Result<(), String> {
        let mine = self.wire();
        if tag.is_empty() || mine.is_empty() || tag == mine {
            Ok(())
        } else {
            Err(format!(
                "ring mismatch: this node is in ring {mine}, the RPC comes from ring {tag}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_known_different_rings_are_refused() {
        let s = RingSlot::default();
        assert_eq!(s.check("abc"), Ok(()));
        s.set(RingId(1), true);
        assert_eq!(s.check(""), Ok(()));
        assert_eq!(s.check(&RingId(1).to_string()), Ok(()));
        assert!(s
            .check(&RingId(2).to_string())
            .unwrap_err()
            .contains("ring mismatch"));
        s.set(RingId(1), false);
        assert_eq!(s.wire(), "");
        assert_eq!(s.check(&RingId(2).to_string()), Ok(()));
    }
}
