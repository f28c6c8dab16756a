//! The block cache: data blocks recently read, up to a byte budget, so that a hot key is
//! found without a read, a checksum and a copy. Evicts by CLOCK (second chance): a block read
//! since the hand last passed it is kept one more round.

use hashbrown::HashMap;
use std::sync::Arc;

/// A block's identity: its run (process-unique id) and its index in the run.
pub(crate) type BlockId = (u64, u32);

struct Slot {
    id: BlockId,
    block: Arc<[u8]>,
    referenced: bool,
}

/// Blocks by id, within a byte budget.
pub(crate) struct BlockCache {
    budget: usize,
    used: usize,
    index: HashMap<BlockId, usize>,
    slots: Vec<Slot>,
    hand: usize,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("budget", &self.budget)
            .field("used", &self.used)
            .field("blocks", &self.slots.len())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most `budget` bytes of blocks (0: none).
    pub fn new(budget: usize) -> Self {
        BlockCache {
            budget,
            used: 0,
            index: HashMap::new(),
            slots: Vec::new(),
            hand: 0,
        }
    }

    /// The block `id`, if cached.
    pub fn get(&mut self, id: BlockId) -> Option<Arc<[u8]>> {
        let slot = &mut self.slots[*self.index.get(&id)?];
        slot.referenced = true;
        Some(Arc::clone(&slot.block))
    }

    /// Caches `block` as `id`, evicting blocks not read lately to make room. A block larger
    /// than the whole budget is not cached.
    pub fn insert(&mut self, id: BlockId, block: Arc<[u8]>) {
        if block.len() > self.budget || self.index.contains_key(&id) {
            return;
        }
        while self.used + block.len() > self.budget {
            self.evict_one();
        }
        self.used += block.len();
        self.index.insert(id, self.slots.len());
        self.slots.push(Slot {
            id,
            block,
            referenced: false,
        });
    }

    /// Bytes of blocks held.
    pub fn bytes(&self) -> usize {
        self.used
    }

    fn evict_one(&mut self) {
        loop {
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
            let slot = &mut self.slots[self.hand];
            if slot.referenced {
                slot.referenced = false;
                self.hand += 1;
                continue;
            }
            let evicted = self.slots.swap_remove(self.hand);
            self.index.remove(&evicted.id);
            self.used -= evicted.block.len();
            if let Some(moved) = self.slots.get(self.hand) {
                self.index.insert(moved.id, self.hand);
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(len: usize) -> Arc<[u8]> {
        vec![0u8; len].into()
    }

    #[test]
    fn stays_within_its_budget_and_keeps_what_is_read() {
        let mut cache = BlockCache::new(1000);
        for i in 0..5 {
            cache.insert((1, i), block(200));
        }
        assert_eq!(cache.bytes(), 1000);
        assert!(cache.get((1, 0)).is_some(), "read: gets a second chance");
        cache.insert((2, 0), block(300));
        assert!(cache.bytes() <= 1000);
        assert!(cache.get((1, 0)).is_some(), "the read block stayed");
        let kept = (1..5).filter(|i| cache.get((1, *i)).is_some()).count();
        assert_eq!(kept, 2, "two unread blocks made room");
        assert!(cache.get((2, 0)).is_some());
        cache.insert((3, 0), block(5000));
        assert!(cache.get((3, 0)).is_none(), "larger than the budget");
        let mut none = BlockCache::new(0);
        none.insert((1, 0), block(1));
        assert_eq!(none.bytes(), 0);
    }
}
