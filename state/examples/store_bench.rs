//! Measures a store: random writes (with overwrites) through a memtable into runs, then
//! random point reads, then narrow scans beside a full memtable. `bench/state-store.sh`
//! runs it; figures go to `bench/RESULTS.md`.
//!
//! Usage: `store_bench DIR WRITES KEYS [MEMTABLE_MIB]`

use std::time::Instant;

use eddy_state::{Store, StoreOptions};

/// A small fast generator (SplitMix64): the same keys on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A state key: key group (2 bytes), then an 8-byte key.
fn key(k: u64) -> [u8; 10] {
    let mut out = [0u8; 10];
    out[..2].copy_from_slice(&((k % 128) as u16).to_be_bytes());
    out[2..].copy_from_slice(&k.to_be_bytes());
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: store_bench DIR WRITES KEYS [MEMTABLE_MIB]".into());
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let writes: u64 = args[2].parse()?;
    let keys: u64 = args[3].parse()?;
    let memtable_mib: usize = args.get(4).map_or(Ok(64), |m| m.parse())?;
    let _ = std::fs::remove_dir_all(&dir);
    let options = StoreOptions {
        memtable_bytes: memtable_mib << 20,
        ..StoreOptions::default()
    };
    let mut store = Store::create(&dir, options)?;
    let value = [0x42u8; 32];
    let mut random = SplitMix(7);
    let started = Instant::now();
    for _ in 0..writes {
        store.put(&key(random.next() % keys), &value)?;
    }
    store.flush()?;
    let write_secs = started.elapsed().as_secs_f64();
    let stats = store.stats();
    let on_disk: u64 = store.runs().iter().map(|r| r.meta().bytes).sum();
    let user_bytes = writes * (10 + 32);
    println!("writes: {writes} over {keys} keys, memtable {memtable_mib} MiB");
    println!(
        "  {:.2} M writes/s ({write_secs:.1} s)",
        writes as f64 / write_secs / 1e6
    );
    println!(
        "  runs {}, on disk {:.1} MiB, merges {}, write amplification {:.2}",
        store.runs().len(),
        on_disk as f64 / 1048576.0,
        stats.merges,
        (stats.flushed_bytes + stats.merged_bytes) as f64 / user_bytes as f64
    );
    let reads = writes.min(1_000_000);
    let started = Instant::now();
    let mut found = 0u64;
    for _ in 0..reads {
        found += u64::from(store.get(&key(random.next() % keys))?.is_some());
    }
    let read_secs = started.elapsed().as_secs_f64();
    println!(
        "reads: {reads}, {:.2} M reads/s, {:.1} % found, block cache {:.1} MiB",
        reads as f64 / read_secs / 1e6,
        found as f64 * 100.0 / reads as f64,
        store.block_cache_bytes() as f64 / 1048576.0
    );
    scans(&mut store, &mut random, keys)
}

/// Narrow scans (the first 16 keys of a key group from a random key on, as a timer scan
/// reads) beside a memtable holding half a million writes.
fn scans(
    store: &mut Store,
    random: &mut SplitMix,
    keys: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let value = [0x24u8; 32];
    for _ in 0..500_000 {
        store.put(&key(random.next() % keys), &value)?;
    }
    let scans = 20_000;
    let started = Instant::now();
    let mut read = 0;
    for _ in 0..scans {
        let start = key(random.next() % keys);
        let end = [start[0], start[1] + 1];
        read += store.entries_between(&start, Some(&end))?.take(16).count();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "scans: {scans} of up to 16 keys beside {:.1} MiB of memtable, {:.0} scans/s, {:.1} keys a scan",
        store.memtable_bytes() as f64 / 1048576.0,
        scans as f64 / secs,
        read as f64 / scans as f64
    );
    Ok(())
}
