//! The snapshot of one task: its source position (if it reads a source), the state of
//! each operator in its chain, data in flight (unaligned checkpoints), and its sink's
//! state (the transactions a two-phase-commit sink prepared). An operator's state is all
//! of it or the changes since an earlier snapshot of the task (see
//! [`crate::state::changes`]).

use bytes::Bytes;

use crate::state::{OperatorState, StateKind, StateReader, StateWriter};
use crate::{EddyError, Result};

const MAGIC: &[u8; 8] = b"EDDYSNAP";
pub(crate) const VERSION: u64 = 5;

/// One task's part of a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSnapshot {
    /// The source reader's position, for a source task.
    pub source: Option<Vec<u8>>,
    /// Each operator's state, in chain order (empty for stateless operators); shared, not
    /// copied, between the subtasks that restore it.
    pub operators: Vec<OperatorState>,
    /// Data that was in flight at an unaligned checkpoint, to replay: encoded chunks, each
    /// with the task input it came from.
    pub in_flight: Vec<(usize, Vec<u8>)>,
    /// The sink's state, for a task that writes a sink.
    pub sink: Option<Vec<u8>>,
}

impl TaskSnapshot {
    /// The snapshot as consecutive pieces of its encoding: the states themselves are
    /// pieces, moved rather than copied (a large snapshot is written as it is).
    pub fn into_parts(self) -> Vec<Bytes> {
        let mut parts = Vec::new();
        let mut head = StateWriter::new();
        head.bytes(MAGIC).u64(VERSION);
        let mut state = |head: &mut StateWriter, value: Bytes| {
            head.u64(value.len() as u64);
            parts.push(Bytes::from(std::mem::take(head).finish()));
            parts.push(value);
        };
        match self.source {
            Some(position) => state(head.u64(1), position.into()),
            None => {
                head.u64(0);
            }
        }
        head.u64(self.operators.len() as u64);
        for operator in self.operators {
            let kind = match operator.kind {
                StateKind::Full => 0,
                StateKind::Changes => 1,
            };
            state(head.u64(kind), operator.bytes);
        }
        head.u64(self.in_flight.len() as u64);
        for (input, chunk) in self.in_flight {
            state(head.u64(input as u64), chunk.into());
        }
        match self.sink {
            Some(value) => state(head.u64(1), value.into()),
            None => {
                head.u64(0);
            }
        }
        parts.push(Bytes::from(head.finish()));
        parts.retain(|part| !part.is_empty());
        parts
    }

    /// Reads a snapshot; `what` names it in errors. Operator states are slices of `bytes`.
    pub fn decode(bytes: &Bytes, what: &str) -> Result<TaskSnapshot> {
        let mut input = StateReader::new(bytes, what);
        if input.bytes()? != MAGIC {
            return Err(EddyError::Snapshot(format!(
                "{what} is not an Eddy task snapshot"
            )));
        }
        let version = input.u64()?;
        if !(1..=VERSION).contains(&version) {
            return Err(EddyError::Snapshot(format!(
                "{what} has snapshot version {version}; this Eddy reads version {VERSION}"
            )));
        }
        let source = match input.u64()? {
            0 => None,
            _ => Some(input.bytes()?.to_vec()),
        };
        let operators = (0..input.count(8)?)
            .map(|_| {
                // Before version 5 every state was a full one.
                let kind = match version {
                    1..=4 => StateKind::Full,
                    _ => match input.u64()? {
                        0 => StateKind::Full,
                        1 => StateKind::Changes,
                        kind => {
                            return Err(EddyError::Snapshot(format!(
                                "{what}: unknown operator state kind {kind}"
                            )));
                        }
                    },
                };
                Ok(OperatorState {
                    kind,
                    bytes: bytes.slice_ref(input.bytes()?),
                    files: Vec::new(),
                })
            })
            .collect::<Result<_>>()?;
        let in_flight = match version {
            1 => Vec::new(),
            // Versions 2 and 3 had no joins: every task had one input.
            2 | 3 => (0..input.count(8)?)
                .map(|_| Ok((0, input.bytes()?.to_vec())))
                .collect::<Result<_>>()?,
            _ => (0..input.count(16)?)
                .map(|_| Ok((input.u64()? as usize, input.bytes()?.to_vec())))
                .collect::<Result<_>>()?,
        };
        let sink = match version {
            1 | 2 => None,
            _ => match input.u64()? {
                0 => None,
                _ => Some(input.bytes()?.to_vec()),
            },
        };
        Ok(TaskSnapshot {
            source,
            operators,
            in_flight,
            sink,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_garbage() {
        let snapshot = TaskSnapshot {
            source: Some(vec![1, 2, 3]),
            operators: vec![
                OperatorState::full(Bytes::new()),
                OperatorState::changes(vec![9; 20]),
            ],
            in_flight: vec![(0, vec![4; 5]), (1, vec![6; 2])],
            sink: Some(vec![7; 3]),
        };
        let bytes = Bytes::from(snapshot.clone().into_parts().concat());
        assert_eq!(TaskSnapshot::decode(&bytes, "t").unwrap(), snapshot);
        assert!(TaskSnapshot::decode(&bytes.slice(..bytes.len() - 3), "t").is_err());
        assert!(TaskSnapshot::decode(&Bytes::from_static(b"not a snapshot at all"), "t").is_err());
    }

    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::fuzz::config("snapshot::corrupt_snapshots"))]

        /// A corrupt task snapshot is refused with an error, never a panic or a huge
        /// allocation.
        #[test]
        fn corrupt_snapshots_never_panic(
            edits in vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
            keep in any::<prop::sample::Index>(),
            garbage in vec(any::<u8>(), 0..256),
        ) {
            let snapshot = TaskSnapshot {
                source: Some(vec![1, 2, 3]),
                operators: vec![OperatorState::full(Bytes::from(vec![5; 30])), OperatorState::changes(vec![9; 20])],
                in_flight: vec![(0, vec![4; 5])],
                sink: Some(vec![7; 3]),
            };
            let mut bytes = snapshot.into_parts().concat();
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            bytes.truncate(keep.index(bytes.len() + 1));
            let _ = TaskSnapshot::decode(&Bytes::from(bytes), "t");
            let _ = TaskSnapshot::decode(&Bytes::from(garbage), "t");
        }
    }
}
