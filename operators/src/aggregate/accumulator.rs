//! Per-group aggregate state stored column-wise (one vector per aggregate, indexed by
//! group), updated a chunk at a time. Every accumulator takes retractions, so aggregates
//! over updating inputs stay exact; MIN and MAX keep a multiset of values for that.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, PrimitiveArray};
use arrow::compute::cast;
use arrow::datatypes::{
    ArrowNativeTypeOp, ArrowPrimitiveType, DataType, Decimal128Type, Float64Type, Int64Type,
    UInt64Type,
};
use arrow::row::{RowConverter, SortField};
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use hashbrown::HashMap;

/// The aggregate functions Eddy evaluates incrementally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AggregateKind {
    /// `COUNT(x)` (and `COUNT(*)`).
    Count,
    /// `COUNT(DISTINCT x)`.
    CountDistinct,
    /// `SUM(x)`.
    Sum,
    /// `AVG(x)`.
    Avg,
    /// `MIN(x)`.
    Min,
    /// `MAX(x)`.
    Max,
    /// A user-defined aggregate function (`CREATE AGGREGATE FUNCTION`).
    User(UserAggregate),
}

/// A user-defined aggregate function: it makes the accumulators of its calls. Functions are
/// the same if their names are.
#[derive(Clone)]
pub struct UserAggregate {
    /// The function's name, as queries call it.
    pub name: String,
    /// Makes an accumulator for all groups of one call.
    pub accumulator: Arc<dyn Fn() -> Box<dyn GroupAccumulator> + Send + Sync>,
}

impl std::fmt::Debug for UserAggregate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserAggregate({})", self.name)
    }
}

impl PartialEq for UserAggregate {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for UserAggregate {}

impl AggregateKind {
    /// The kind for a DataFusion aggregate function name, if Eddy supports it.
    pub fn from_name(name: &str, distinct: bool) -> Option<AggregateKind> {
        let kind = match (name.to_ascii_lowercase().as_str(), distinct) {
            ("count", false) => AggregateKind::Count,
            ("count", true) => AggregateKind::CountDistinct,
            ("sum", false) => AggregateKind::Sum,
            ("avg" | "mean", false) => AggregateKind::Avg,
            ("min", _) => AggregateKind::Min,
            ("max", _) => AggregateKind::Max,
            _ => return None,
        };
        Some(kind)
    }

    /// A fresh accumulator for arguments of `input` type producing `output` type. With an
    /// append-only input nothing is ever retracted, so MIN and MAX keep only the extreme.
    pub fn accumulator(
        &self,
        input: &DataType,
        output: &DataType,
        append_only: bool,
    ) -> Result<Box<dyn GroupAccumulator>> {
        let acc: Box<dyn GroupAccumulator> = match self {
            AggregateKind::Count => Box::new(CountAccumulator::default()),
            AggregateKind::CountDistinct => Box::new(DistinctCountAccumulator::new(input)?),
            AggregateKind::Sum => match output {
                DataType::Int64 => Box::new(SumAccumulator::<Int64Type>::new(output)),
                DataType::UInt64 => Box::new(SumAccumulator::<UInt64Type>::new(output)),
                DataType::Float64 => Box::new(SumAccumulator::<Float64Type>::new(output)),
                DataType::Decimal128(_, _) => {
                    Box::new(SumAccumulator::<Decimal128Type>::new(output))
                }
                other => {
                    return Err(EddyError::Unsupported(format!("SUM producing {other}")));
                }
            },
            AggregateKind::Avg if output.is_integer() => {
                Box::new(AvgAccumulator::<i128>::new(output))
            }
            AggregateKind::Avg => Box::new(AvgAccumulator::<f64>::new(output)),
            AggregateKind::Min if append_only => Box::new(RunningExtreme::new(input, false)?),
            AggregateKind::Max if append_only => Box::new(RunningExtreme::new(input, true)?),
            AggregateKind::Min => Box::new(ExtremeAccumulator::new(input, false)?),
            AggregateKind::Max => Box::new(ExtremeAccumulator::new(input, true)?),
            AggregateKind::User(function) => (function.accumulator)(),
        };
        Ok(acc)
    }
}

/// The state of one aggregate for all groups of an operator.
pub trait GroupAccumulator: Send + std::fmt::Debug {
    /// Makes room for groups `0..groups`.
    fn resize(&mut self, groups: usize);

    /// Adds (`sign` 1) or retracts (`sign` -1) row `i`'s value to group `groups[i]`; rows
    /// with `sign` 0 are skipped.
    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()>;

    /// The current result of each of `groups`.
    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef>;

    /// Folds group `from` into group `into` (when session windows merge).
    fn merge(&mut self, into: u32, from: u32);

    /// Forgets a group so its slot can be reused.
    fn reset(&mut self, group: u32);

    /// Writes a group's state into a snapshot.
    fn save(&self, group: u32, out: &mut StateWriter);

    /// Reads a group's state from a snapshot into (an empty) `group`.
    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()>;
}

/// `COUNT(x)`: non-null values added minus retracted.
#[derive(Debug, Default)]
struct CountAccumulator {
    counts: Vec<i64>,
}

impl GroupAccumulator for CountAccumulator {
    fn resize(&mut self, groups: usize) {
        self.counts.resize(groups, 0);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()> {
        let nulls = values.logical_nulls();
        for (i, (g, s)) in groups.iter().zip(signs).enumerate() {
            if *s != 0 && nulls.as_ref().is_none_or(|n| n.is_valid(i)) {
                self.counts[*g as usize] += *s as i64;
            }
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter_values(
            groups.iter().map(|g| self.counts[*g as usize]),
        )))
    }

    fn merge(&mut self, into: u32, from: u32) {
        self.counts[into as usize] += self.counts[from as usize];
    }

    fn reset(&mut self, group: u32) {
        self.counts[group as usize] = 0;
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        out.i64(self.counts[group as usize]);
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        self.counts[group as usize] = input.i64()?;
        Ok(())
    }
}

/// `SUM(x)` in the output type, with a count of values so an empty group yields NULL.
struct SumAccumulator<T: ArrowPrimitiveType> {
    output: DataType,
    sums: Vec<T::Native>,
    counts: Vec<i64>,
}

impl<T: ArrowPrimitiveType> std::fmt::Debug for SumAccumulator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sum({}, {} groups)", self.output, self.sums.len())
    }
}

impl<T: ArrowPrimitiveType> SumAccumulator<T> {
    fn new(output: &DataType) -> Self {
        SumAccumulator {
            output: output.clone(),
            sums: Vec::new(),
            counts: Vec::new(),
        }
    }
}

impl<T: ArrowPrimitiveType> GroupAccumulator for SumAccumulator<T>
where
    T::Native: ArrowNativeTypeOp + SnapshotValue,
{
    fn resize(&mut self, groups: usize) {
        self.sums.resize(groups, T::Native::ZERO);
        self.counts.resize(groups, 0);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()> {
        let values = cast(values, &self.output)?;
        let values = values.as_primitive::<T>();
        for (i, (g, s)) in groups.iter().zip(signs).enumerate() {
            if *s == 0 || values.is_null(i) {
                continue;
            }
            let g = *g as usize;
            let v = values.value(i);
            if *s > 0 {
                self.sums[g] = self.sums[g].add_wrapping(v);
            } else {
                self.sums[g] = self.sums[g].sub_wrapping(v);
            }
            self.counts[g] += *s as i64;
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef> {
        let array: PrimitiveArray<T> = groups
            .iter()
            .map(|g| (self.counts[*g as usize] > 0).then(|| self.sums[*g as usize]))
            .collect();
        Ok(Arc::new(array.with_data_type(self.output.clone())))
    }

    fn merge(&mut self, into: u32, from: u32) {
        let (into, from) = (into as usize, from as usize);
        self.sums[into] = self.sums[into].add_wrapping(self.sums[from]);
        self.counts[into] += self.counts[from];
    }

    fn reset(&mut self, group: u32) {
        self.sums[group as usize] = T::Native::ZERO;
        self.counts[group as usize] = 0;
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        self.sums[group as usize].save(out);
        out.i64(self.counts[group as usize]);
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        self.sums[group as usize] = T::Native::load(input)?;
        self.counts[group as usize] = input.i64()?;
        Ok(())
    }
}

/// Native values a sum keeps, as they are written into snapshots.
trait SnapshotValue: Copy {
    fn save(self, out: &mut StateWriter);
    fn load(input: &mut StateReader<'_>) -> Result<Self>;
}

macro_rules! snapshot_value {
    ($($t:ty => $method:ident),*) => {$(
        impl SnapshotValue for $t {
            fn save(self, out: &mut StateWriter) {
                out.$method(self);
            }
            fn load(input: &mut StateReader<'_>) -> Result<Self> {
                input.$method()
            }
        }
    )*};
}

snapshot_value!(i64 => i64, u64 => u64, f64 => f64, i128 => i128);

/// How an average sums its values: in floating point, or, for an integer column, exactly
/// (Flink's `AVG` of integers is the sum divided by the count, truncated toward zero as Java
/// divides, of the column's type).
trait AverageSum: SnapshotValue + Default + std::fmt::Debug + Send {
    /// The type values are taken as and the average is computed in.
    type Value: ArrowPrimitiveType;
    /// Adds (`sign` 1) or takes back (`sign` -1) one value.
    fn add(&mut self, sign: i8, value: <Self::Value as ArrowPrimitiveType>::Native);
    /// Adds another sum.
    fn merge(&mut self, other: Self);
    /// The average of `count` values summing to this.
    fn average(self, count: i64) -> <Self::Value as ArrowPrimitiveType>::Native;
}

impl AverageSum for f64 {
    type Value = Float64Type;

    fn add(&mut self, sign: i8, value: f64) {
        *self += f64::from(sign) * value;
    }

    fn merge(&mut self, other: Self) {
        *self += other;
    }

    fn average(self, count: i64) -> f64 {
        self / count as f64
    }
}

impl AverageSum for i128 {
    type Value = Int64Type;

    fn add(&mut self, sign: i8, value: i64) {
        *self += i128::from(sign) * i128::from(value);
    }

    fn merge(&mut self, other: Self) {
        *self += other;
    }

    fn average(self, count: i64) -> i64 {
        // An average of i64 values lies within i64.
        (self / i128::from(count)) as i64
    }
}

/// `AVG(x)`: a sum and a count per group, the average cast to the output type.
#[derive(Debug)]
struct AvgAccumulator<S> {
    output: DataType,
    sums: Vec<S>,
    counts: Vec<i64>,
}

impl<S: AverageSum> AvgAccumulator<S> {
    fn new(output: &DataType) -> Self {
        AvgAccumulator {
            output: output.clone(),
            sums: Vec::new(),
            counts: Vec::new(),
        }
    }
}

impl<S: AverageSum> GroupAccumulator for AvgAccumulator<S> {
    fn resize(&mut self, groups: usize) {
        self.sums.resize(groups, S::default());
        self.counts.resize(groups, 0);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()> {
        let values = cast(values, &S::Value::DATA_TYPE)?;
        let values = values.as_primitive::<S::Value>();
        for (i, (g, s)) in groups.iter().zip(signs).enumerate() {
            if *s == 0 || values.is_null(i) {
                continue;
            }
            self.sums[*g as usize].add(*s, values.value(i));
            self.counts[*g as usize] += i64::from(*s);
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef> {
        let array: PrimitiveArray<S::Value> = groups
            .iter()
            .map(|g| {
                let (sum, count) = (self.sums[*g as usize], self.counts[*g as usize]);
                (count > 0).then(|| sum.average(count))
            })
            .collect();
        Ok(cast(&array, &self.output)?)
    }

    fn merge(&mut self, into: u32, from: u32) {
        let from_sum = self.sums[from as usize];
        self.sums[into as usize].merge(from_sum);
        self.counts[into as usize] += self.counts[from as usize];
    }

    fn reset(&mut self, group: u32) {
        self.sums[group as usize] = S::default();
        self.counts[group as usize] = 0;
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        self.sums[group as usize].save(out);
        out.i64(self.counts[group as usize]);
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        self.sums[group as usize] = S::load(input)?;
        self.counts[group as usize] = input.i64()?;
        Ok(())
    }
}

/// Values of one column encoded as order-preserving bytes, and back.
#[derive(Debug)]
struct ValueCodec {
    converter: RowConverter,
    null_row: Box<[u8]>,
}

impl ValueCodec {
    fn new(data_type: &DataType) -> Result<Self> {
        let converter = RowConverter::new(vec![SortField::new(data_type.clone())])?;
        let nulls = arrow::array::new_null_array(data_type, 1);
        let null_row = converter.convert_columns(&[nulls])?.row(0).as_ref().into();
        Ok(ValueCodec {
            converter,
            null_row,
        })
    }

    fn decode<'a>(&self, encoded: impl Iterator<Item = Option<&'a [u8]>>) -> Result<ArrayRef> {
        let parser = self.converter.parser();
        let rows: Vec<_> = encoded
            .map(|e| parser.parse(e.unwrap_or(&self.null_row)))
            .collect();
        let mut columns = self.converter.convert_rows(rows)?;
        Ok(columns.remove(0))
    }
}

/// `MIN(x)` / `MAX(x)`: a multiset of the group's values, so retracting the extreme value
/// reveals the next one.
#[derive(Debug)]
struct ExtremeAccumulator {
    codec: ValueCodec,
    is_max: bool,
    values: Vec<BTreeMap<Box<[u8]>, u64>>,
}

impl ExtremeAccumulator {
    fn new(input: &DataType, is_max: bool) -> Result<Self> {
        Ok(ExtremeAccumulator {
            codec: ValueCodec::new(input)?,
            is_max,
            values: Vec::new(),
        })
    }
}

/// Adds or removes one occurrence of `value` in a multiset.
fn count_value<M: MultiSet>(set: &mut M, value: &[u8], sign: i8) {
    if sign > 0 {
        set.add(value);
    } else {
        set.remove_one(value);
    }
}

/// A multiset of encoded values: how often each occurs, so retractions are exact.
trait MultiSet: Default {
    /// Adds one occurrence of `value`.
    fn add(&mut self, value: &[u8]);
    /// Removes one occurrence of `value`, if present.
    fn remove_one(&mut self, value: &[u8]);
    /// Adds every occurrence of `other`.
    fn absorb(&mut self, other: Self);
    /// Writes the multiset into a snapshot.
    fn save(&self, out: &mut StateWriter);
    /// Reads a multiset written by [`MultiSet::save`] into this (empty) one.
    fn load(&mut self, input: &mut StateReader<'_>) -> Result<()>;
}

macro_rules! multiset {
    ($map:ident) => {
        impl MultiSet for $map<Box<[u8]>, u64> {
            fn add(&mut self, value: &[u8]) {
                match self.get_mut(value) {
                    Some(n) => *n += 1,
                    None => {
                        self.insert(value.into(), 1);
                    }
                }
            }

            fn remove_one(&mut self, value: &[u8]) {
                if let Some(n) = self.get_mut(value) {
                    *n -= 1;
                    if *n == 0 {
                        self.remove(value);
                    }
                }
            }

            fn absorb(&mut self, other: Self) {
                for (value, n) in other {
                    *self.entry(value).or_insert(0) += n;
                }
            }

            fn save(&self, out: &mut StateWriter) {
                save_multiset(self.iter(), out);
            }

            fn load(&mut self, input: &mut StateReader<'_>) -> Result<()> {
                load_multiset(input, |value, n| {
                    self.insert(value.into(), n);
                })
            }
        }
    };
}

multiset!(BTreeMap);
multiset!(HashMap);

impl GroupAccumulator for ExtremeAccumulator {
    fn resize(&mut self, groups: usize) {
        self.values.resize_with(groups, BTreeMap::new);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()> {
        let rows = self
            .codec
            .converter
            .convert_columns(std::slice::from_ref(values))?;
        for (i, (g, s)) in groups.iter().zip(signs).enumerate() {
            if *s == 0 || values.is_null(i) {
                continue;
            }
            count_value(&mut self.values[*g as usize], rows.row(i).as_ref(), *s);
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef> {
        self.codec.decode(groups.iter().map(|g| {
            let set = &self.values[*g as usize];
            let entry = if self.is_max {
                set.last_key_value()
            } else {
                set.first_key_value()
            };
            entry.map(|(k, _)| k.as_ref())
        }))
    }

    fn merge(&mut self, into: u32, from: u32) {
        let from = std::mem::take(&mut self.values[from as usize]);
        self.values[into as usize].absorb(from);
    }

    fn reset(&mut self, group: u32) {
        self.values[group as usize] = BTreeMap::new();
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        self.values[group as usize].save(out);
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        self.values[group as usize].load(input)
    }
}

/// Writes a multiset of encoded values with their multiplicities.
fn save_multiset<'a>(
    entries: impl ExactSizeIterator<Item = (&'a Box<[u8]>, &'a u64)>,
    out: &mut StateWriter,
) {
    out.u64(entries.len() as u64);
    for (value, n) in entries {
        out.bytes(value).u64(*n);
    }
}

/// Reads a multiset written by [`save_multiset`].
fn load_multiset(input: &mut StateReader<'_>, mut insert: impl FnMut(&[u8], u64)) -> Result<()> {
    let len = input.count(16)?;
    for _ in 0..len {
        let value = input.bytes()?;
        let n = input.u64()?;
        insert(value, n);
    }
    Ok(())
}

/// `MIN(x)` / `MAX(x)` over an append-only input: only the extreme so far, encoded.
#[derive(Debug)]
struct RunningExtreme {
    codec: ValueCodec,
    is_max: bool,
    extremes: Vec<Option<Box<[u8]>>>,
}

impl RunningExtreme {
    fn new(input: &DataType, is_max: bool) -> Result<Self> {
        Ok(RunningExtreme {
            codec: ValueCodec::new(input)?,
            is_max,
            extremes: Vec::new(),
        })
    }

    fn offer(&mut self, group: u32, value: &[u8]) {
        let slot = &mut self.extremes[group as usize];
        let better = match slot {
            None => true,
            Some(current) if self.is_max => value > current.as_ref(),
            Some(current) => value < current.as_ref(),
        };
        if better {
            match slot {
                // Same width (any fixed-width type): overwrite, no allocation.
                Some(current) if current.len() == value.len() => current.copy_from_slice(value),
                _ => *slot = Some(value.into()),
            }
        }
    }
}

impl GroupAccumulator for RunningExtreme {
    fn resize(&mut self, groups: usize) {
        self.extremes.resize(groups, None);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()> {
        let rows = self
            .codec
            .converter
            .convert_columns(std::slice::from_ref(values))?;
        for (i, (g, s)) in groups.iter().zip(signs).enumerate() {
            if *s < 0 {
                return Err(EddyError::Internal(
                    "a retraction reached MIN/MAX planned for an append-only input".into(),
                ));
            }
            if *s > 0 && !values.is_null(i) {
                self.offer(*g, rows.row(i).as_ref());
            }
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef> {
        self.codec
            .decode(groups.iter().map(|g| self.extremes[*g as usize].as_deref()))
    }

    fn merge(&mut self, into: u32, from: u32) {
        if let Some(value) = self.extremes[from as usize].take() {
            self.offer(into, &value);
        }
    }

    fn reset(&mut self, group: u32) {
        self.extremes[group as usize] = None;
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        // The same format as the multiset: zero or one value, seen once.
        match &self.extremes[group as usize] {
            None => {
                out.u64(0);
            }
            Some(value) => {
                out.u64(1).bytes(value).u64(1);
            }
        }
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        load_multiset(input, |value, _| self.offer(group, value))
    }
}

/// `COUNT(DISTINCT x)`: how often each distinct value occurs, so retractions are exact.
#[derive(Debug)]
struct DistinctCountAccumulator {
    converter: RowConverter,
    values: Vec<HashMap<Box<[u8]>, u64>>,
}

impl DistinctCountAccumulator {
    fn new(input: &DataType) -> Result<Self> {
        Ok(DistinctCountAccumulator {
            converter: RowConverter::new(vec![SortField::new(input.clone())])?,
            values: Vec::new(),
        })
    }
}

impl GroupAccumulator for DistinctCountAccumulator {
    fn resize(&mut self, groups: usize) {
        self.values.resize_with(groups, HashMap::new);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> Result<()> {
        let rows = self
            .converter
            .convert_columns(std::slice::from_ref(values))?;
        for (i, (g, s)) in groups.iter().zip(signs).enumerate() {
            if *s == 0 || values.is_null(i) {
                continue;
            }
            count_value(&mut self.values[*g as usize], rows.row(i).as_ref(), *s);
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter_values(
            groups.iter().map(|g| self.values[*g as usize].len() as i64),
        )))
    }

    fn merge(&mut self, into: u32, from: u32) {
        let from = std::mem::take(&mut self.values[from as usize]);
        self.values[into as usize].absorb(from);
    }

    fn reset(&mut self, group: u32) {
        self.values[group as usize] = HashMap::new();
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        self.values[group as usize].save(out);
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        self.values[group as usize].load(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(v))
    }

    #[test]
    fn max_survives_retraction_of_the_maximum() {
        let mut acc = AggregateKind::Max
            .accumulator(&DataType::Int64, &DataType::Int64, false)
            .unwrap();
        acc.resize(1);
        acc.update(
            &[0, 0, 0],
            &[1, 1, 1],
            &ints(vec![Some(5), Some(9), Some(7)]),
        )
        .unwrap();
        acc.update(&[0], &[-1], &ints(vec![Some(9)])).unwrap();
        let out = acc.evaluate(&[0]).unwrap();
        assert_eq!(out.as_primitive::<Int64Type>().value(0), 7);
        acc.update(&[0, 0], &[-1, -1], &ints(vec![Some(5), Some(7)]))
            .unwrap();
        assert!(acc.evaluate(&[0]).unwrap().is_null(0));
    }

    #[test]
    fn integer_avg_divides_the_exact_sum_as_java_does() {
        let mut acc = AggregateKind::Avg
            .accumulator(&DataType::Int64, &DataType::Int64, false)
            .unwrap();
        acc.resize(2);
        // Group 0: (i64::MAX + i64::MAX + 1) / 3 needs more than 64 bits for the sum.
        // Group 1: -7 / 2 is -3 (toward zero), not -4.
        acc.update(
            &[0, 0, 0, 1, 1],
            &[1, 1, 1, 1, 1],
            &ints(vec![
                Some(i64::MAX),
                Some(i64::MAX),
                Some(1),
                Some(-8),
                Some(1),
            ]),
        )
        .unwrap();
        let avg = |acc: &dyn GroupAccumulator, g: u32| {
            acc.evaluate(&[g])
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(0)
        };
        assert_eq!(avg(acc.as_ref(), 0), (i64::MAX / 3) * 2 + 1);
        assert_eq!(avg(acc.as_ref(), 1), -3);
        acc.update(&[1], &[-1], &ints(vec![Some(-8)])).unwrap();
        assert_eq!(avg(acc.as_ref(), 1), 1, "a retraction takes its value back");
        let mut out = StateWriter::new();
        acc.save(0, &mut out);
        let bytes = out.finish();
        let mut restored = AggregateKind::Avg
            .accumulator(&DataType::Int64, &DataType::Int64, false)
            .unwrap();
        restored.resize(1);
        restored
            .load(0, &mut StateReader::new(&bytes, "test"))
            .unwrap();
        assert_eq!(avg(restored.as_ref(), 0), avg(acc.as_ref(), 0));
    }

    #[test]
    fn append_only_extremes_keep_one_value_and_load_multisets() {
        let values = ints(vec![Some(5), None, Some(9), Some(7)]);
        let mut max = AggregateKind::Max
            .accumulator(&DataType::Int64, &DataType::Int64, true)
            .unwrap();
        let mut min = AggregateKind::Min
            .accumulator(&DataType::Int64, &DataType::Int64, true)
            .unwrap();
        for acc in [&mut max, &mut min] {
            acc.resize(1);
            acc.update(&[0, 0, 0, 0], &[1, 1, 1, 1], &values).unwrap();
            assert!(acc.update(&[0], &[-1], &ints(vec![Some(9)])).is_err());
        }
        assert_eq!(
            max.evaluate(&[0])
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(0),
            9
        );
        assert_eq!(
            min.evaluate(&[0])
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(0),
            5
        );
        // A multiset snapshot (of the retracting kind) loads as its extreme.
        let mut multiset = AggregateKind::Max
            .accumulator(&DataType::Int64, &DataType::Int64, false)
            .unwrap();
        multiset.resize(1);
        multiset
            .update(&[0, 0], &[1, 1], &ints(vec![Some(3), Some(8)]))
            .unwrap();
        let mut out = StateWriter::new();
        multiset.save(0, &mut out);
        let bytes = out.finish();
        let mut running = AggregateKind::Max
            .accumulator(&DataType::Int64, &DataType::Int64, true)
            .unwrap();
        running.resize(1);
        running
            .load(0, &mut StateReader::new(&bytes, "test"))
            .unwrap();
        assert_eq!(
            running
                .evaluate(&[0])
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(0),
            8
        );
    }

    #[test]
    fn every_accumulator_survives_save_and_load() {
        let values = ints(vec![Some(2), Some(4), Some(4), Some(9)]);
        let kinds = [
            AggregateKind::Count,
            AggregateKind::CountDistinct,
            AggregateKind::Sum,
            AggregateKind::Avg,
            AggregateKind::Min,
            AggregateKind::Max,
        ];
        for kind in kinds {
            let output = if kind == AggregateKind::Avg {
                DataType::Float64
            } else {
                DataType::Int64
            };
            let mut acc = kind.accumulator(&DataType::Int64, &output, false).unwrap();
            acc.resize(1);
            acc.update(&[0, 0, 0, 0], &[1, 1, 1, 1], &values).unwrap();
            acc.update(&[0], &[-1], &ints(vec![Some(9)])).unwrap();
            let mut out = StateWriter::new();
            acc.save(0, &mut out);
            let bytes = out.finish();
            let mut restored = kind.accumulator(&DataType::Int64, &output, false).unwrap();
            restored.resize(2);
            restored
                .load(1, &mut StateReader::new(&bytes, "test"))
                .unwrap();
            assert_eq!(
                acc.evaluate(&[0]).unwrap().as_ref(),
                restored.evaluate(&[1]).unwrap().as_ref(),
                "{kind:?}"
            );
            // Retraction keeps working after a restore (MAX falls back from 4 to 2).
            restored
                .update(&[1, 1], &[-1, -1], &ints(vec![Some(4), Some(4)]))
                .unwrap();
            if kind == AggregateKind::Max {
                assert_eq!(
                    restored
                        .evaluate(&[1])
                        .unwrap()
                        .as_primitive::<Int64Type>()
                        .value(0),
                    2
                );
            }
            assert!(
                restored
                    .load(0, &mut StateReader::new(&bytes[..bytes.len() - 1], "test"))
                    .is_err()
            );
        }
    }

    #[test]
    fn sum_count_avg_and_distinct_retract() {
        let values = ints(vec![Some(2), Some(4), None, Some(4)]);
        let groups = [0, 0, 0, 1];
        let signs = [1, 1, 1, 1];
        let mut results = Vec::new();
        for kind in [
            AggregateKind::Sum,
            AggregateKind::Count,
            AggregateKind::Avg,
            AggregateKind::CountDistinct,
        ] {
            let output = if kind == AggregateKind::Avg {
                DataType::Float64
            } else {
                DataType::Int64
            };
            let mut acc = kind.accumulator(&DataType::Int64, &output, false).unwrap();
            acc.resize(2);
            acc.update(&groups, &signs, &values).unwrap();
            acc.update(&[0], &[-1], &ints(vec![Some(2)])).unwrap();
            results.push(cast(&acc.evaluate(&[0, 1]).unwrap(), &DataType::Float64).unwrap());
        }
        let f = |a: &ArrayRef| a.as_primitive::<Float64Type>().values().to_vec();
        assert_eq!(f(&results[0]), vec![4.0, 4.0]);
        assert_eq!(f(&results[1]), vec![1.0, 1.0]);
        assert_eq!(f(&results[2]), vec![4.0, 4.0]);
        assert_eq!(f(&results[3]), vec![1.0, 1.0]);
    }
}
