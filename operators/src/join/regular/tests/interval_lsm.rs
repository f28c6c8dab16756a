//! Interval joins on the LSM backend step by step against the same joins in memory, and
//! their restores onto either backend.

use super::*;

/// One step of two interval-join inputs: left rows, right rows, then a watermark.
struct IntervalStep {
    left: Chunk,
    right: Chunk,
    watermark: i64,
}

/// Rows of `keys` keys whose times trail a clock that moves 300 ms a step, up to 3 s
/// behind it (some behind the watermark, 2 s behind the clock: too late to be held).
fn interval_steps(seed: u64, keys: u64, steps: usize) -> Vec<IntervalStep> {
    let mut next = crate::lsm_testing::xorshift(seed);
    let mut rows = |n: usize, clock: i64| -> Vec<(i64, i64)> {
        (0..n)
            .map(|_| {
                (
                    (next() % keys) as i64,
                    clock - 3_000 + (next() % 4_000) as i64,
                )
            })
            .collect()
    };
    (0..steps as i64)
        .map(|step| {
            let clock = 1_000_000 + 300 * step;
            IntervalStep {
                left: timed(&rows(200, clock)),
                right: timed(&rows(100, clock)),
                watermark: clock - 2_000,
            }
        })
        .collect()
}

/// Runs one step; what the join emitted, sorted.
fn interval_step(join: &mut StreamingJoin, step: &IntervalStep) -> Vec<String> {
    let mut out = Vec::new();
    join.process_input(0, step.left.clone(), &mut out).unwrap();
    join.process_input(1, step.right.clone(), &mut out).unwrap();
    join.on_watermark(step.watermark, &mut out).unwrap();
    let mut rows = lines(&out);
    rows.sort();
    rows
}

/// Runs the last watermark, which puts every row out of reach; what the join emitted,
/// sorted.
fn interval_end(join: &mut StreamingJoin) -> Vec<String> {
    let mut out = Vec::new();
    join.on_watermark(i64::MAX, &mut out).unwrap();
    let mut rows = lines(&out);
    rows.sort();
    rows
}

#[test]
fn an_interval_join_with_keys_on_disk_expires_and_pads_rows_as_in_memory() {
    for kind in [
        JoinKind::Inner,
        JoinKind::Left,
        JoinKind::Right,
        JoinKind::Full,
    ] {
        let dir = scratch(&format!("interval-{kind:?}"));
        let with_kind = |mut j: StreamingJoin| {
            j.kind = kind;
            j
        };
        let mut in_memory = with_kind(interval_join());
        let mut lsm = on_disk(with_kind(interval_join()), &dir);
        let mut evicted = false;
        for (i, step) in interval_steps(3, 2_000, 80).iter().enumerate() {
            let expected = interval_step(&mut in_memory, step);
            assert_eq!(
                interval_step(&mut lsm, step),
                expected,
                "{kind:?}, step {i}"
            );
            let held_rows = lsm.state_rows().0 + lsm.state_rows().1;
            let all_rows = in_memory.state_rows().0 + in_memory.state_rows().1;
            evicted |= held_rows < all_rows / 2;
        }
        assert!(evicted, "{kind:?}: the rows never left memory");
        assert!(lsm.stored_rows() > 0, "{kind:?}");
        assert_eq!(
            interval_end(&mut lsm),
            interval_end(&mut in_memory),
            "{kind:?}"
        );
        assert_eq!(in_memory.state_rows(), (0, 0));
        assert_eq!(lsm.state_rows(), (0, 0), "{kind:?}");
        assert_eq!(
            lsm.stored_rows(),
            0,
            "{kind:?}: expired keys stay in the store"
        );
    }
}

#[test]
fn an_interval_join_restores_its_runs_into_either_backend_and_goes_on_as_never_restored() {
    let steps = interval_steps(11, 1_500, 90);
    let (first, rest) = steps.split_at(45);
    let mut reference = interval_join();
    reference.kind = JoinKind::Full;
    let full = |mut j: StreamingJoin| {
        j.kind = JoinKind::Full;
        j
    };
    let dir = scratch("interval-source");
    let mut lsm = on_disk(full(interval_join()), &dir);
    let mut in_memory = full(interval_join());
    for step in first {
        let expected = interval_step(&mut reference, step);
        assert_eq!(interval_step(&mut lsm, step), expected);
        interval_step(&mut in_memory, step);
    }
    let watermark = first.last().unwrap().watermark;
    let runs = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    let inline = in_memory.snapshot(&SnapshotRequest::full(1)).unwrap();
    // The runs onto the LSM backend and into memory, and rows in memory onto the LSM
    // backend (held in memory at first, in slots the store never saw).
    let targets = [
        ("runs-to-lsm", &runs, true),
        ("runs-to-memory", &runs, false),
        ("memory-to-lsm", &inline, true),
    ];
    let mut expected_rest: Vec<Vec<String>> = rest
        .iter()
        .map(|s| interval_step(&mut reference, s))
        .collect();
    expected_rest.push(interval_end(&mut reference));
    for (name, state, onto_lsm) in targets {
        let target = scratch(&format!("interval-{name}"));
        hand_over(state, &target);
        let context = match onto_lsm {
            true => crate::lsm_testing::lsm_context(&target),
            false => crate::lsm_testing::memory_context(&target),
        };
        let mut restored = full(interval_join()).with_state(&context).unwrap();
        restored
            .restore(&[&state.bytes], &KeyScope::everything())
            .unwrap();
        // The task passes the watermark it had again: nothing is due at it.
        assert_eq!(
            interval_step_watermark(&mut restored, watermark),
            Vec::<String>::new()
        );
        for (i, step) in rest.iter().enumerate() {
            assert_eq!(
                interval_step(&mut restored, step),
                expected_rest[i],
                "{name}, step {i}"
            );
        }
        assert_eq!(
            interval_end(&mut restored),
            expected_rest[rest.len()],
            "{name}"
        );
        assert_eq!(restored.state_rows(), (0, 0), "{name}");
        if onto_lsm {
            assert_eq!(restored.stored_rows(), 0, "{name}");
        }
    }
}

/// Passes `watermark` alone; what the join emitted.
fn interval_step_watermark(join: &mut StreamingJoin, watermark: i64) -> Vec<String> {
    let mut out = Vec::new();
    join.on_watermark(watermark, &mut out).unwrap();
    lines(&out)
}
