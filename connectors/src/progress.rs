//! Where a generator source is, for checkpoints. Subtask `s` of `p` produces items
//! `s, s + p, s + 2p, ...`; its position is the next item. After a restore at another
//! parallelism, a subtask skips every item an earlier run already produced, so even a
//! rescaled generator emits each item exactly once.

use eddy_common::Result;
use eddy_common::state::{StateReader, StateWriter};

/// One run's progress: its parallelism and each subtask's next item.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Generation {
    stride: u64,
    next: Vec<u64>,
}

impl Generation {
    fn produced(&self, item: u64) -> bool {
        item < self.next[(item % self.stride) as usize]
    }
}

/// A subtask's progress through a strided sequence of items.
#[derive(Debug, Clone)]
pub struct StridedProgress {
    next: u64,
    stride: u64,
    /// Earlier runs (at other parallelisms) whose items are skipped.
    earlier: Vec<Generation>,
}

impl StridedProgress {
    /// Subtask `subtask` of `parallelism`, from the start.
    pub fn new(subtask: usize, parallelism: usize) -> Self {
        StridedProgress {
            next: subtask as u64,
            stride: parallelism as u64,
            earlier: Vec::new(),
        }
    }

    /// The next item not yet produced (by this or an earlier run), below `limit`.
    pub fn advance(&mut self, limit: Option<u64>) -> Option<u64> {
        loop {
            let item = self.next;
            if limit.is_some_and(|l| item >= l) {
                return None;
            }
            self.next += self.stride;
            if !self.earlier.iter().any(|g| g.produced(item)) {
                return Some(item);
            }
        }
    }

    /// The position for a checkpoint.
    pub fn position(&self) -> Vec<u8> {
        let mut out = StateWriter::new();
        out.u64(self.stride)
            .u64(self.next)
            .u64(self.earlier.len() as u64);
        for generation in &self.earlier {
            out.u64(generation.stride).u64(generation.next.len() as u64);
            for n in &generation.next {
                out.u64(*n);
            }
        }
        out.finish()
    }

    /// Continues after the positions of every subtask of the previous run.
    pub fn restore(&mut self, positions: &[&[u8]]) -> Result<()> {
        if positions.is_empty() {
            return Ok(());
        }
        let mut previous = Generation {
            stride: 0,
            next: Vec::new(),
        };
        let mut earlier = Vec::new();
        for position in positions {
            let mut input = StateReader::new(position, "a generator position");
            let stride = input.u64()?;
            let next = input.u64()?;
            if stride == 0 || (previous.stride != 0 && stride != previous.stride) {
                return Err(eddy_common::EddyError::Snapshot(format!(
                    "generator positions disagree on the parallelism ({stride} vs {})",
                    previous.stride
                )));
            }
            if previous.next.is_empty() {
                previous = Generation {
                    stride,
                    next: (0..stride).collect(),
                };
            }
            previous.next[(next % stride) as usize] = next;
            earlier.clear();
            for _ in 0..input.count(16)? {
                let stride = input.u64()?;
                let next = (0..input.count(8)?)
                    .map(|_| input.u64())
                    .collect::<Result<Vec<_>>>()?;
                if stride == 0 || next.len() as u64 != stride {
                    return Err(eddy_common::EddyError::Snapshot(
                        "corrupt generator position".into(),
                    ));
                }
                earlier.push(Generation { stride, next });
            }
        }
        if previous.stride == self.stride {
            // Same parallelism: continue where this subtask stopped.
            self.next = previous.next[(self.next % self.stride) as usize];
            self.earlier = earlier;
        } else {
            earlier.push(previous);
            self.earlier = earlier;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(progress: &mut StridedProgress, count: usize, limit: u64) -> Vec<u64> {
        (0..count)
            .map_while(|_| progress.advance(Some(limit)))
            .collect()
    }

    #[test]
    fn rescaled_generators_produce_every_item_once() {
        let limit = 100;
        // A run at parallelism 3, stopped at uneven points.
        let mut first: Vec<StridedProgress> = (0..3).map(|s| StridedProgress::new(s, 3)).collect();
        let mut produced: Vec<u64> = Vec::new();
        for (s, progress) in first.iter_mut().enumerate() {
            produced.extend(run(progress, 5 + s * 4, limit));
        }
        let positions: Vec<Vec<u8>> = first.iter().map(StridedProgress::position).collect();
        let refs: Vec<&[u8]> = positions.iter().map(Vec::as_slice).collect();
        // Restored at parallelism 2, stopped again, then restored at 4 and run out.
        let mut second: Vec<StridedProgress> = (0..2).map(|s| StridedProgress::new(s, 2)).collect();
        for progress in &mut second {
            progress.restore(&refs).unwrap();
            produced.extend(run(progress, 7, limit));
        }
        let positions: Vec<Vec<u8>> = second.iter().map(StridedProgress::position).collect();
        let refs: Vec<&[u8]> = positions.iter().map(Vec::as_slice).collect();
        for s in 0..4 {
            let mut progress = StridedProgress::new(s, 4);
            progress.restore(&refs).unwrap();
            produced.extend(run(&mut progress, 1000, limit));
        }
        produced.sort();
        assert_eq!(produced, (0..limit).collect::<Vec<_>>());
    }

    #[test]
    fn same_parallelism_continues_where_it_stopped() {
        let mut a = StridedProgress::new(1, 2);
        assert_eq!(run(&mut a, 3, 100), vec![1, 3, 5]);
        let b_position = StridedProgress::new(0, 2).position();
        let a_position = a.position();
        let mut restored = StridedProgress::new(1, 2);
        restored.restore(&[&b_position, &a_position]).unwrap();
        assert_eq!(run(&mut restored, 2, 100), vec![7, 9]);
        assert!(restored.restore(&[b"junk"]).is_err());
    }
}
