//! The bookkeeping step: row by row, in order, what each row's change does to its
//! partners' match counts and padded rows, and the row held or taken back.

use arrow::array::{Array, Int64Array};
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};

use super::padding::Emitted;
use super::probe::Probe;
use super::{StreamingJoin, TtlNow};
use crate::join::Filtering;

/// An interval join's view of a chunk: each row's event time, and how far past it the
/// watermark may go before the row is out of every other row's reach.
struct RowTimes {
    times: Int64Array,
    reach: i64,
}

/// One chunk's walk: where it came from, what the probe found, what holds for all its rows
/// (worked out once), and what is to be emitted.
struct Walk<'a> {
    input: usize,
    probe: &'a Probe,
    now: TtlNow,
    times: Option<RowTimes>,
    /// The epoch rows are held or retracted in.
    epoch: u32,
    /// Whether this side's held rows count their matches.
    this_counts: bool,
    /// Whether the other side's held rows count their matches.
    other_counts: bool,
    /// An interval join pads a row only when it expires, if it joined nothing.
    deferred_padding: bool,
    /// Pairs are emitted (not a semi or anti join).
    emits_pairs: bool,
    /// The chunk's rows are a semi join's left rows.
    semi_left: bool,
    emitted: Vec<Emitted>,
}

impl StreamingJoin {
    /// Walks `chunk` (from input `input`) row by row after `probe`: counts matches, holds
    /// or retracts each row, and lists what an outer, semi or anti join emits, in order.
    pub(super) fn book(
        &mut self,
        input: usize,
        chunk: &Chunk,
        probe: &Probe,
        now: TtlNow,
    ) -> Result<Vec<Emitted>> {
        let times = match self.retention.interval() {
            Some(interval) => Some(RowTimes {
                times: crate::epoch_millis(chunk.rows().column(interval.time_column(input)))?,
                reach: interval.reach(input),
            }),
            None => None,
        };
        let filtering = self.kind.filtering();
        let mut walk = Walk {
            input,
            probe,
            now,
            deferred_padding: times.is_some(),
            times,
            epoch: self.epochs.current(),
            this_counts: self.kind.counts_matches(input),
            other_counts: self.kind.counts_matches(1 - input),
            emits_pairs: filtering.is_none(),
            semi_left: input == 0 && filtering == Some(Filtering::Semi),
            emitted: Vec::new(),
        };
        let mut pair = 0;
        for i in 0..chunk.num_rows() {
            let op = chunk.op(i);
            let first_pair = pair;
            while pair < probe.these.len() && probe.these[pair] as usize == i {
                pair += 1;
            }
            let joins = self.count_matches(&mut walk, i, op, first_pair..pair);
            self.hold_or_retract(&mut walk, i, op, joins);
        }
        Ok(walk.emitted)
    }

    /// The pairs of row `i` (with change `op`) that satisfy the condition, counted; in an
    /// outer, semi or anti join, the partners' match counts follow and their padded rows
    /// leave with their first match and come back when their last one goes.
    fn count_matches(
        &mut self,
        walk: &mut Walk,
        i: usize,
        op: Op,
        pairs: std::ops::Range<usize>,
    ) -> u32 {
        let (probe, now, emitted) = (walk.probe, walk.now, &mut walk.emitted);
        let other_counts = walk.other_counts;
        let other = &mut self.sides[1 - walk.input];
        let mut joins = 0;
        for pair in pairs.filter(|pair| probe.kept(*pair)) {
            joins += 1;
            if !walk.this_counts && !other_counts {
                continue;
            }
            let id = probe.partners[pair];
            let before = other.match_count(id);
            let after = match op.is_accumulate() {
                true => before + 1,
                false => before.saturating_sub(1),
            };
            if other_counts {
                other.set_match_count(id, after);
                // A new count is a write: it renews the row's TTL.
                if let Some(now) = now.other {
                    other.renew(probe.keys.row(i).data(), id, now);
                }
            }
            if other_counts && before == 0 && after == 1 && !walk.deferred_padding {
                emitted.push(Emitted::PartnerPadded(id, Op::Delete));
            }
            if walk.emits_pairs {
                emitted.push(Emitted::Joined(pair));
            }
            if other_counts && before == 1 && after == 0 {
                emitted.push(Emitted::PartnerPadded(id, Op::Insert));
            }
        }
        joins
    }

    /// Holds row `i` (an insert) or takes it back (a retraction), after it made `joins`
    /// pairs; notes its padded row (a preserved side's row that joined nothing) or, in a
    /// semi join, the row itself.
    fn hold_or_retract(&mut self, walk: &mut Walk, i: usize, op: Op, joins: u32) {
        let (probe, epoch, this_counts) = (walk.probe, walk.epoch, walk.this_counts);
        let emitted = &mut walk.emitted;
        if !probe.is_valid(i) {
            // A NULL key joins nothing: in an outer join its padded row comes and goes.
            if this_counts {
                emitted.push(Emitted::Padded(i, op));
            }
            return;
        }
        let semi_left = walk.semi_left;
        let this = &mut self.sides[walk.input];
        let (key, row) = (probe.keys.row(i), probe.rows.row(i));
        if !op.is_accumulate() {
            // A retraction of a row this side never held takes nothing back.
            match this.retract(key.data(), row.data(), epoch) {
                Some(0) if this_counts => emitted.push(Emitted::Padded(i, op)),
                Some(_) if semi_left => emitted.push(Emitted::Matched(i, op)),
                _ => {}
            }
            return;
        }
        if this_counts && joins == 0 && !walk.deferred_padding {
            emitted.push(Emitted::Padded(i, op));
        } else if semi_left {
            emitted.push(Emitted::Matched(i, op));
        }
        let Some(RowTimes { times, reach }) = walk.times.as_ref() else {
            let (slot, id) = this.insert(key.data(), row.data(), epoch);
            if this_counts {
                this.set_match_count(id, joins);
            }
            if let Some(now) = walk.now.this {
                this.set_time(slot, id, now);
            }
            return;
        };
        // A row no future row of the other side can join is not held.
        if times.is_null(i) {
            if this_counts && joins == 0 {
                emitted.push(Emitted::Padded(i, op));
            }
            return;
        }
        let time = times.value(i);
        if time.saturating_add(*reach) > self.watermark {
            let id = this.insert_expiring(key.data(), row.data(), epoch, time);
            if this_counts {
                this.set_match_count(id, joins);
            }
        } else if this_counts && joins == 0 {
            // Too late to be joined later: padded now.
            emitted.push(Emitted::Padded(i, op));
        }
    }
}
