//! Which turns of a session can still be undone: those recorded with a checkpoint from before
//! them (`checkpoint/recorded` with the label `t{N}`), less those a later restore took back —
//! a `checkpoint/restored` to before turn N takes back N and every turn after it. `/undo` and
//! `agentd sessions undo` both take the last of them (RFC 0020), so each undo goes one turn
//! further back, and a turn made after an undo is the next one undone.

use super::{Event, Record};
use crate::checkpoint;

/// The turns of the top-level agent that can still be undone, in order.
pub fn undoable(records: &[Record]) -> Vec<u64> {
    let mut turns: Vec<u64> = Vec::new();
    for record in records.iter().filter(|r| r.is_top_level()) {
        match &record.event {
            Event::CheckpointRecorded { turn, label, .. }
                if checkpoint::turn_of(label) == Some(*turn) && !turns.contains(turn) =>
            {
                turns.push(*turn);
            }
            Event::CheckpointRestored { turn, .. } => turns.retain(|t| t < turn),
            _ => {}
        }
    }
    turns
}

/// The turn an undo takes back now: the last of [`undoable`] whose checkpoint the store still
/// has (`labels`; a pruned one cannot be restored, so the turn before it is next).
pub fn last_undoable(records: &[Record], labels: &[String]) -> Option<u64> {
    undoable(records)
        .into_iter()
        .rfind(|turn| labels.contains(&checkpoint::before_turn(*turn)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::RestoredBy;
    use crate::test_support::record;

    fn recorded(turn: u64) -> Event {
        Event::CheckpointRecorded {
            turn,
            label: checkpoint::before_turn(turn),
            files: 1,
            bytes: 1,
            left_out: Vec::new(),
            over_cap: false,
        }
    }

    fn restored(turn: u64) -> Event {
        Event::CheckpointRestored {
            turn,
            label: checkpoint::before_turn(turn),
            changes: Vec::new(),
            still_differs: Vec::new(),
            by: RestoredBy::Editor,
        }
    }

    fn undoable_after(events: Vec<Event>) -> Option<u64> {
        let records: Vec<Record> = events
            .into_iter()
            .enumerate()
            .map(|(i, e)| record(i as u64, e))
            .collect();
        undoable(&records).last().copied()
    }

    #[test]
    fn each_undo_goes_one_turn_further_back_and_a_new_turn_is_undone_first() {
        assert_eq!(undoable_after(vec![]), None);
        assert_eq!(undoable_after(vec![recorded(1), recorded(2)]), Some(2));
        assert_eq!(
            undoable_after(vec![recorded(1), recorded(2), restored(2)]),
            Some(1)
        );
        assert_eq!(
            undoable_after(vec![recorded(1), recorded(2), restored(2), restored(1)]),
            None
        );
        // A turn after an undo is the next to undo; the undone one stays undone.
        assert_eq!(
            undoable_after(vec![recorded(1), recorded(2), restored(2), recorded(4)]),
            Some(4)
        );
        assert_eq!(
            undoable_after(vec![
                recorded(1),
                recorded(2),
                restored(2),
                recorded(4),
                restored(4)
            ]),
            Some(1)
        );
        // A restore to an earlier turn (from the command line) takes back every later turn.
        assert_eq!(
            undoable_after(vec![recorded(1), recorded(2), recorded(3), restored(2)]),
            Some(1)
        );
        // The after-turn checkpoint is not a turn to undo.
        let after = Event::CheckpointRecorded {
            turn: 3,
            label: checkpoint::after_turn(3),
            files: 0,
            bytes: 0,
            left_out: Vec::new(),
            over_cap: false,
        };
        assert_eq!(undoable_after(vec![recorded(1), after]), Some(1));
    }
}
