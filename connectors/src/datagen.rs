//! `'connector' = 'datagen'`: rows of sequences and random values, as Flink's datagen.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Int64Array, StringBuilder,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use eddy_common::Result;
use eddy_common::chunk::Chunk;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::progress::StridedProgress;
use super::random::SplitMix64;
use super::{Options, SourceContext, SourceEvent, SourceReader, TableConnector};

const KEYS: &[&str] = &["rows-per-second", "number-of-rows"];
const PREFIXES: &[&str] = &["fields."];
const FIELD_KEYS: &[&str] = &["kind", "min", "max", "start", "end", "length", "max-past"];

/// How one column is generated.
#[derive(Debug, Clone)]
enum FieldGenerator {
    /// `start, start + 1, ..., end`, split over the subtasks.
    Sequence { start: i64 },
    /// Uniform values in `[min, max]`; strings of `length` characters; times up to
    /// `max_past` milliseconds before now.
    Random {
        min: f64,
        max: f64,
        length: usize,
        max_past: i64,
    },
}

/// Configuration of a datagen table.
#[derive(Debug)]
pub struct DatagenConnector {
    schema: SchemaRef,
    rows_per_second: u64,
    total_rows: Option<u64>,
    fields: Vec<FieldGenerator>,
}

impl DatagenConnector {
    /// Validates the options against the table's columns.
    pub fn new(table: &str, values: &BTreeMap<String, String>, schema: &SchemaRef) -> Result<Self> {
        let options = Options::validate(table, "datagen", values, KEYS, PREFIXES)?;
        for key in values.keys().filter(|k| k.starts_with("fields.")) {
            let rest = &key["fields.".len()..];
            let Some((field, option)) = rest.rsplit_once('.') else {
                return Err(
                    options.error(format!("option '{key}': expected fields.<column>.<option>"))
                );
            };
            if schema.field_with_name(field).is_err() {
                return Err(options.error(format!("option '{key}': no column '{field}'")));
            }
            if !FIELD_KEYS.contains(&option) {
                return Err(options.error(format!(
                    "option '{key}': unknown field option '{option}' (valid: {})",
                    FIELD_KEYS.join(", ")
                )));
            }
        }
        let mut total_rows = options.parse_opt::<u64>("number-of-rows")?;
        let mut fields = Vec::new();
        for field in schema.fields() {
            let name = field.name();
            let key = |o: &str| format!("fields.{name}.{o}");
            let kind = options.get(&key("kind")).unwrap_or("random");
            let generator = match kind {
                "sequence" => {
                    if !is_sequence_type(field.data_type()) {
                        return Err(options.error(format!(
                            "column '{name}': kind 'sequence' needs a numeric or string column"
                        )));
                    }
                    let start: i64 = options.parse_opt(&key("start"))?.ok_or_else(|| {
                        options.error(format!(
                            "column '{name}': a sequence needs '{}'",
                            key("start")
                        ))
                    })?;
                    let end: i64 = options.parse_opt(&key("end"))?.ok_or_else(|| {
                        options.error(format!(
                            "column '{name}': a sequence needs '{}'",
                            key("end")
                        ))
                    })?;
                    if end < start {
                        return Err(options.error(format!(
                            "column '{name}': sequence end {end} is before start {start}"
                        )));
                    }
                    let length = (end - start) as u64 + 1;
                    total_rows = Some(total_rows.map_or(length, |n| n.min(length)));
                    FieldGenerator::Sequence { start }
                }
                "random" => {
                    let (default_min, default_max) = default_range(field.data_type());
                    FieldGenerator::Random {
                        min: options.parse_or(&key("min"), default_min)?,
                        max: options.parse_or(&key("max"), default_max)?,
                        length: options.parse_or(&key("length"), 100usize)?,
                        max_past: options.parse_or(&key("max-past"), 0i64)?,
                    }
                }
                other => {
                    return Err(options.error(format!(
                        "option '{}' = '{other}': expected 'sequence' or 'random'",
                        key("kind")
                    )));
                }
            };
            if let FieldGenerator::Random { min, max, .. } = &generator
                && min > max
            {
                return Err(options.error(format!("column '{name}': min {min} exceeds max {max}")));
            }
            fields.push(generator);
        }
        Ok(DatagenConnector {
            schema: schema.clone(),
            rows_per_second: options.parse_or("rows-per-second", 10_000u64)?,
            total_rows,
            fields,
        })
    }
}

fn is_sequence_type(t: &DataType) -> bool {
    t.is_integer() || t.is_floating() || matches!(t, DataType::Utf8 | DataType::Decimal128(_, _))
}

fn default_range(t: &DataType) -> (f64, f64) {
    match t {
        DataType::Int8 => (i8::MIN as f64, i8::MAX as f64),
        DataType::Int16 => (i16::MIN as f64, i16::MAX as f64),
        DataType::Int32 => (i32::MIN as f64, i32::MAX as f64),
        DataType::Int64 => (i64::MIN as f64, i64::MAX as f64),
        _ => (0.0, 1.0),
    }
}

impl TableConnector for DatagenConnector {
    fn name(&self) -> &'static str {
        "datagen"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        let rate = match self.rows_per_second {
            0 => None,
            r => Some((r as f64 / context.parallelism as f64).max(f64::MIN_POSITIVE)),
        };
        let batch_size = match rate {
            Some(r) => (r / 10.0).clamp(1.0, context.batch_size as f64) as usize,
            None => context.batch_size,
        };
        Ok(Box::new(DatagenReader {
            schema: self.schema.clone(),
            fields: self.fields.clone(),
            progress: StridedProgress::new(context.subtask, context.parallelism),
            total_rows: self.total_rows,
            batch_size,
            rate,
            started: Instant::now(),
            emitted: 0,
            seed: 0x5EED,
            ended: false,
        }))
    }
}

struct DatagenReader {
    schema: SchemaRef,
    fields: Vec<FieldGenerator>,
    progress: StridedProgress,
    total_rows: Option<u64>,
    batch_size: usize,
    rate: Option<f64>,
    started: Instant,
    emitted: u64,
    seed: u64,
    ended: bool,
}

impl DatagenReader {
    async fn next_rows(&mut self) -> Result<Option<SourceEvent>> {
        if self.ended {
            return Ok(None);
        }
        // Paced before anything is taken, so that a read cancelled while it waits (the
        // task stopping) skips no rows.
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(self.emitted as f64 / rate);
            let elapsed = self.started.elapsed();
            if due > elapsed {
                tokio::time::sleep(due - elapsed).await;
            }
        }
        let mut indices = Vec::with_capacity(self.batch_size);
        while indices.len() < self.batch_size {
            match self.progress.advance(self.total_rows) {
                Some(index) => indices.push(index),
                None => break,
            }
        }
        if indices.is_empty() {
            self.ended = true;
            return Ok(Some(SourceEvent::SplitEnd(0)));
        }
        self.emitted += indices.len() as u64;
        let now = eddy_common::event::wall_clock();
        let mut columns = Vec::with_capacity(self.fields.len());
        for (i, (field, generator)) in self.schema.fields().iter().zip(&self.fields).enumerate() {
            let seed = self.seed ^ ((i as u64 + 1) << 48);
            columns.push(generate(field.data_type(), generator, &indices, seed, now)?);
        }
        let rows = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(Some(SourceEvent::Rows {
            split: 0,
            rows: Chunk::inserts(rows),
        }))
    }
}

impl SourceReader for DatagenReader {
    fn open(&mut self) -> BoxFuture<'_, Result<usize>> {
        async { Ok(1) }.boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, Result<Option<SourceEvent>>> {
        self.next_rows().boxed()
    }

    fn position(&mut self, _checkpoint: u64) -> Result<Vec<u8>> {
        Ok(self.progress.position())
    }

    fn restore(&mut self, positions: &[&[u8]]) -> Result<()> {
        self.progress.restore(positions)
    }
}

/// The column of `data_type` that `generator` makes for the rows at `indices`.
fn generate(
    data_type: &DataType,
    generator: &FieldGenerator,
    indices: &[u64],
    seed: u64,
    now: i64,
) -> Result<ArrayRef> {
    match generator {
        FieldGenerator::Sequence { start, .. } => sequence(data_type, *start, indices),
        FieldGenerator::Random {
            min,
            max,
            length,
            max_past,
        } => {
            let random = Random {
                min: *min,
                max: *max,
                seed,
            };
            match data_type {
                DataType::Utf8 => Ok(random.text(indices, *length)),
                DataType::Timestamp(_, _) | DataType::Date32 => {
                    random.times(data_type, indices, *max_past, now)
                }
                other => random.numbers(other, indices),
            }
        }
    }
}

/// `start + index` for each row, as `data_type`.
fn sequence(data_type: &DataType, start: i64, indices: &[u64]) -> Result<ArrayRef> {
    let values = Int64Array::from_iter_values(indices.iter().map(|i| start + *i as i64));
    Ok(match data_type {
        DataType::Utf8 => {
            let mut builder = StringBuilder::with_capacity(indices.len(), indices.len() * 8);
            for v in values.values() {
                builder.append_value(v.to_string());
            }
            Arc::new(builder.finish())
        }
        other => cast(&values, other)?,
    })
}

/// Random values between `min` and `max`, each row's from its own stream (so a row is the
/// same whichever subtask makes it, and again after a restore).
struct Random {
    min: f64,
    max: f64,
    seed: u64,
}

impl Random {
    fn rng(&self, i: u64) -> SplitMix64 {
        SplitMix64::for_item(self.seed, i)
    }

    /// A whole number from `min` to `max`, both included.
    fn int(&self, i: u64) -> i64 {
        let span = (self.max as i128 - self.min as i128) as u128 + 1;
        let v = ((self.rng(i).next_u64() as u128 * span) >> 64) as i128;
        (self.min as i128 + v) as i64
    }

    /// A number from `min` up to `max`.
    fn real(&self, i: u64) -> f64 {
        self.min + self.rng(i).unit() * (self.max - self.min)
    }

    fn numbers(&self, data_type: &DataType, indices: &[u64]) -> Result<ArrayRef> {
        let rows = indices.iter().copied();
        Ok(match data_type {
            DataType::Int8 => {
                Arc::new(Int8Array::from_iter_values(rows.map(|i| self.int(i) as i8)))
            }
            DataType::Int16 => Arc::new(Int16Array::from_iter_values(
                rows.map(|i| self.int(i) as i16),
            )),
            DataType::Int32 => Arc::new(Int32Array::from_iter_values(
                rows.map(|i| self.int(i) as i32),
            )),
            DataType::Int64 => Arc::new(Int64Array::from_iter_values(rows.map(|i| self.int(i)))),
            DataType::Float32 => Arc::new(Float32Array::from_iter_values(
                rows.map(|i| self.real(i) as f32),
            )),
            DataType::Float64 => {
                Arc::new(Float64Array::from_iter_values(rows.map(|i| self.real(i))))
            }
            DataType::Decimal128(p, s) => {
                let scale = 10f64.powi(*s as i32);
                Arc::new(
                    Decimal128Array::from_iter_values(rows.map(|i| (self.real(i) * scale) as i128))
                        .with_precision_and_scale(*p, *s)?,
                )
            }
            DataType::Boolean => Arc::new(BooleanArray::from_iter(
                rows.map(|i| Some(self.rng(i).next_u64() & 1 == 1)),
            )),
            other => {
                return Err(eddy_common::EddyError::Unsupported(format!(
                    "datagen cannot generate {other} columns"
                )));
            }
        })
    }

    /// Text of `length` letters and digits.
    fn text(&self, indices: &[u64], length: usize) -> ArrayRef {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut builder = StringBuilder::with_capacity(indices.len(), indices.len() * length);
        let mut text = String::with_capacity(length);
        for i in indices {
            let mut g = self.rng(*i);
            text.clear();
            text.extend(
                (0..length).map(|_| ALPHABET[g.below(ALPHABET.len() as u64) as usize] as char),
            );
            builder.append_value(&text);
        }
        Arc::new(builder.finish())
    }

    /// Times up to `max_past` milliseconds before `now`.
    fn times(
        &self,
        data_type: &DataType,
        indices: &[u64],
        max_past: i64,
        now: i64,
    ) -> Result<ArrayRef> {
        let millis = Int64Array::from_iter_values(indices.iter().map(|i| {
            let past = match max_past > 0 {
                true => self.rng(*i).below(max_past as u64) as i64,
                false => 0,
            };
            now - past
        }));
        let ts = cast(&millis, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        Ok(cast(&ts, data_type)?)
    }
}
