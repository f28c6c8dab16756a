//! Key groups and hash partitioning. A key hashes into one of `max_parallelism` key
//! groups; subtask `i` of `p` owns a contiguous range of key groups (as in Flink), so
//! state can later be split by key-group range when a job is rescaled.

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use datafusion_common::hash_utils::{RandomState, create_hashes};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::Result;
use eddy_common::chunk::Chunk;

use crate::OrEddy;
use crate::evaluate;

/// The hash seed: fixed, so every process sends a key to the same subtask.
const HASH_STATE: RandomState = RandomState::with_seed(0xEDD1);

/// The key group a key hash falls into.
pub fn key_group(hash: u64, max_parallelism: usize) -> usize {
    // Mix the bits so that structured hashes still spread over the groups.
    let mixed = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (mixed % max_parallelism as u64) as usize
}

/// The subtask (of `parallelism`) that owns `key_group`.
pub fn subtask_of_key_group(key_group: usize, max_parallelism: usize, parallelism: usize) -> usize {
    key_group * parallelism / max_parallelism
}

/// The key groups of the rows of `keys` (the key columns, as the partitioner sees them).
pub fn key_groups(keys: &[ArrayRef], max_parallelism: usize) -> Result<Vec<usize>> {
    let rows = keys.first().map_or(0, |k| k.len());
    let mut hashes = vec![0; rows];
    if !keys.is_empty() {
        create_hashes(keys, &HASH_STATE, &mut hashes).or_eddy()?;
    }
    Ok(hashes
        .into_iter()
        .map(|h| key_group(h, max_parallelism))
        .collect())
}

/// Which key groups one subtask owns: the state it keeps when restoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyScope {
    /// This subtask.
    pub subtask: usize,
    /// Of how many.
    pub parallelism: usize,
    /// Number of key groups.
    pub max_parallelism: usize,
}

impl KeyScope {
    /// The only subtask at parallelism 1 (of 128 key groups): it owns every key group.
    #[cfg(test)]
    pub(crate) fn everything() -> KeyScope {
        KeyScope {
            subtask: 0,
            parallelism: 1,
            max_parallelism: 128,
        }
    }

    /// Whether this subtask owns `key_group`.
    pub fn owns(&self, key_group: usize) -> bool {
        subtask_of_key_group(key_group, self.max_parallelism, self.parallelism) == self.subtask
    }

    /// The key groups this subtask owns: a range, since [`subtask_of_key_group`] never
    /// decreases with the key group.
    pub fn key_groups(&self) -> std::ops::Range<usize> {
        let parallelism = self.parallelism.max(1);
        let first = |subtask: usize| (subtask * self.max_parallelism).div_ceil(parallelism);
        first(self.subtask)..first(self.subtask + 1)
    }
}

/// Splits chunks by the hash of key expressions over the subtasks of the next vertex.
#[derive(Debug)]
pub struct HashPartitioner {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    max_parallelism: usize,
    parallelism: usize,
    hashes: Vec<u64>,
}

impl HashPartitioner {
    /// Partitions by `keys` over `parallelism` subtasks.
    pub fn new(
        keys: Vec<Arc<dyn PhysicalExpr>>,
        max_parallelism: usize,
        parallelism: usize,
    ) -> Self {
        HashPartitioner {
            keys,
            max_parallelism,
            parallelism,
            hashes: Vec::new(),
        }
    }

    /// The part of `chunk` for each subtask (`None` where a subtask gets no rows); rows
    /// keep their order within each part.
    pub fn partition(&mut self, chunk: &Chunk) -> Result<Vec<Option<Chunk>>> {
        if self.parallelism == 1 {
            return Ok(vec![Some(chunk.clone())]);
        }
        let arrays = self
            .keys
            .iter()
            .map(|k| evaluate(k, chunk.rows()))
            .collect::<Result<Vec<_>>>()?;
        self.hashes.clear();
        self.hashes.resize(chunk.num_rows(), 0);
        create_hashes(&arrays, &HASH_STATE, &mut self.hashes).or_eddy()?;
        let mut indices: Vec<Vec<u32>> = vec![Vec::new(); self.parallelism];
        for (row, hash) in self.hashes.iter().enumerate() {
            let group = key_group(*hash, self.max_parallelism);
            let target = subtask_of_key_group(group, self.max_parallelism, self.parallelism);
            indices[target].push(row as u32);
        }
        indices
            .into_iter()
            .map(|rows| match rows.len() {
                0 => Ok(None),
                n if n == chunk.num_rows() => Ok(Some(chunk.clone())),
                _ => chunk.take(&UInt32Array::from(rows)).map(Some),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subtasks_key_groups_are_the_range_it_owns() {
        for (max_parallelism, parallelism) in [(128, 1), (128, 3), (7, 7), (10, 4), (32768, 13)] {
            for subtask in 0..parallelism {
                let scope = KeyScope {
                    subtask,
                    parallelism,
                    max_parallelism,
                };
                let owned: Vec<usize> = (0..max_parallelism).filter(|g| scope.owns(*g)).collect();
                let range: Vec<usize> = scope.key_groups().collect();
                assert_eq!(
                    owned, range,
                    "{subtask} of {parallelism}, {max_parallelism} groups"
                );
            }
        }
    }

    #[test]
    fn key_groups_cover_subtasks_contiguously() {
        let owners: Vec<usize> = (0..128)
            .map(|kg| subtask_of_key_group(kg, 128, 3))
            .collect();
        assert_eq!(owners[0], 0);
        assert_eq!(owners[127], 2);
        assert!(owners.windows(2).all(|w| w[0] <= w[1]));
        let spread: std::collections::HashSet<usize> =
            (0..1000u64).map(|h| key_group(h, 128)).collect();
        assert!(spread.len() > 100);
    }
}
