//! `'connector' = 'nexmark'`: the Nexmark auction benchmark's person, auction and bid
//! events, generated deterministically from a seed (event `n` is the same on any machine
//! and at any parallelism).
//!
//! With `'nexmark.table'` a table reads one stream's columns. Without it, a table reads
//! every event as the Nexmark suite's own `datagen` table declares them: `event_type`
//! (0 person, 1 auction, 2 bid) and a ROW column per stream, NULL but for the event's own.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringBuilder, StructArray, TimestampMillisecondArray,
    UInt32Array,
};
use arrow::buffer::NullBuffer;
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Fields, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use eddy_common::Result;
use eddy_common::chunk::Chunk;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::progress::StridedProgress;
use super::random::SplitMix64;
use super::{Options, SourceContext, SourceEvent, SourceReader, TableConnector};

const KEYS: &[&str] = &[
    "nexmark.table",
    "events.num",
    "events.rate",
    "nexmark.seed",
    "nexmark.first-event-rate",
    "nexmark.base-time",
];

const PERSON_PROPORTION: u64 = 1;
const AUCTION_PROPORTION: u64 = 3;
const BID_PROPORTION: u64 = 46;
const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;
const FIRST_PERSON_ID: i64 = 1000;
const FIRST_AUCTION_ID: i64 = 1000;
const FIRST_CATEGORY_ID: i64 = 10;
const NUM_CATEGORIES: u64 = 5;
const NUM_ACTIVE_PEOPLE: u64 = 1000;
const NUM_IN_FLIGHT_AUCTIONS: u64 = 100;
const PERSON_ID_LEAD: u64 = 10;
const AUCTION_ID_LEAD: u64 = 10;
const HOT_AUCTION_RATIO: u64 = 2;
const HOT_BIDDER_RATIO: u64 = 4;
const HOT_SELLER_RATIO: u64 = 4;
const HOT_STRIDE: u64 = 100;
const CHANNELS: &[&str] = &["Google", "Facebook", "Baidu", "Apple"];
/// Average sizes of the events in bytes, as the Nexmark specification counts them (8 per
/// number or time, 1 per character): `extra` pads each event to about this size.
const AVERAGE_PERSON_BYTES: usize = 200;
const AVERAGE_AUCTION_BYTES: usize = 500;
const AVERAGE_BID_BYTES: usize = 100;
const FIRST_NAMES: &[&str] = &[
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: &[&str] = &[
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const CITIES: &[&str] = &[
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const STATES: &[&str] = &["AZ", "CA", "ID", "OR", "WA", "WY"];

/// Which of the three Nexmark streams a table reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NexmarkStream {
    /// New people registering.
    Person,
    /// New auctions opening.
    Auction,
    /// Bids on auctions (46 of every 50 events).
    Bid,
}

impl NexmarkStream {
    fn columns(self) -> &'static [(&'static str, ColumnType)] {
        use ColumnType::*;
        match self {
            NexmarkStream::Person => &[
                ("id", Long),
                ("name", Text),
                ("emailaddress", Text),
                ("creditcard", Text),
                ("city", Text),
                ("state", Text),
                ("datetime", Time),
                ("extra", Text),
            ],
            NexmarkStream::Auction => &[
                ("id", Long),
                ("itemname", Text),
                ("description", Text),
                ("initialbid", Long),
                ("reserve", Long),
                ("datetime", Time),
                ("expires", Time),
                ("seller", Long),
                ("category", Long),
                ("extra", Text),
            ],
            NexmarkStream::Bid => &[
                ("auction", Long),
                ("bidder", Long),
                ("price", Long),
                ("channel", Text),
                ("url", Text),
                ("datetime", Time),
                ("extra", Text),
            ],
        }
    }

    /// The stream of event `event`.
    fn of(event: u64) -> Self {
        let offset = event % TOTAL_PROPORTION;
        if offset < PERSON_PROPORTION {
            NexmarkStream::Person
        } else if offset < PERSON_PROPORTION + AUCTION_PROPORTION {
            NexmarkStream::Auction
        } else {
            NexmarkStream::Bid
        }
    }

    /// The stream's columns as the fields of its ROW column.
    fn row_fields(self) -> Fields {
        self.columns()
            .iter()
            .map(|(name, kind)| Field::new(*name, kind.arrow(), true))
            .collect()
    }

    fn matches(self, event: u64) -> bool {
        let offset = event % TOTAL_PROPORTION;
        match self {
            NexmarkStream::Person => offset < PERSON_PROPORTION,
            NexmarkStream::Auction => {
                (PERSON_PROPORTION..PERSON_PROPORTION + AUCTION_PROPORTION).contains(&offset)
            }
            NexmarkStream::Bid => offset >= PERSON_PROPORTION + AUCTION_PROPORTION,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    Long,
    Text,
    Time,
}

impl ColumnType {
    fn arrow(self) -> DataType {
        match self {
            ColumnType::Long => DataType::Int64,
            ColumnType::Text => DataType::Utf8,
            ColumnType::Time => DataType::Timestamp(TimeUnit::Millisecond, None),
        }
    }
}

/// What a nexmark table's rows are.
#[derive(Debug, Clone)]
enum Layout {
    /// One stream: for each declared column, its index in the stream's columns.
    Stream(NexmarkStream, Vec<usize>),
    /// Every event: for each declared column, `event_type` or a stream's ROW.
    Events(Vec<EventColumn>),
}

/// A column of a table of every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventColumn {
    /// `event_type INT`.
    EventType,
    /// `person`, `auction` or `bid`: the stream's columns as a ROW.
    Row(NexmarkStream),
}

/// Configuration of a nexmark table.
#[derive(Debug)]
pub struct NexmarkConnector {
    schema: SchemaRef,
    layout: Layout,
    events: Option<u64>,
    events_per_second: u64,
    seed: u64,
    inter_event_micros: u64,
    base_time: i64,
}

impl NexmarkConnector {
    /// Validates the options and that the declared columns belong to the chosen stream.
    pub fn new(table: &str, values: &BTreeMap<String, String>, schema: &SchemaRef) -> Result<Self> {
        let options = Options::validate(table, "nexmark", values, KEYS, &[])?;
        let layout = match options.get("nexmark.table") {
            None => Layout::Events(event_columns(&options, schema)?),
            Some(name) => {
                let stream = match name.to_ascii_lowercase().as_str() {
                    "person" => NexmarkStream::Person,
                    "auction" => NexmarkStream::Auction,
                    "bid" => NexmarkStream::Bid,
                    other => {
                        return Err(options.error(format!(
                            "option 'nexmark.table' = '{other}': expected person, auction or bid"
                        )));
                    }
                };
                Layout::Stream(stream, stream_columns(&options, schema, stream)?)
            }
        };
        let first_event_rate: u64 = options.parse_or("nexmark.first-event-rate", 10_000)?;
        if first_event_rate == 0 {
            return Err(options.error("'nexmark.first-event-rate' must be positive".into()));
        }
        Ok(NexmarkConnector {
            schema: schema.clone(),
            layout,
            events: options.parse_opt("events.num")?.filter(|n: &u64| *n > 0),
            events_per_second: options.parse_or("events.rate", 0)?,
            seed: options.parse_or("nexmark.seed", 0)?,
            inter_event_micros: (1_000_000 / first_event_rate).max(1),
            base_time: options.parse_or("nexmark.base-time", 1_704_067_200_000)?,
        })
    }
}

/// For each declared column of a one-stream table, its index among the stream's columns.
fn stream_columns(
    options: &Options<'_>,
    schema: &SchemaRef,
    stream: NexmarkStream,
) -> Result<Vec<usize>> {
    let known = stream.columns();
    let mut columns = Vec::new();
    for field in schema.fields() {
        let name = field.name().to_ascii_lowercase();
        let Some(index) = known.iter().position(|(n, _)| *n == name) else {
            return Err(options.error(format!(
                "column '{}' is not a column of the nexmark {:?} stream (columns: {})",
                field.name(),
                stream,
                known.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )));
        };
        let expected = known[index].1.arrow();
        if field.data_type() != &expected {
            return Err(wrong_type(options, field, &expected));
        }
        columns.push(index);
    }
    Ok(columns)
}

fn wrong_type(options: &Options<'_>, field: &Field, expected: &DataType) -> eddy_common::EddyError {
    options.error(format!(
        "column '{}' must be {} for the nexmark connector",
        field.name(),
        eddy_common::schema::sql_name(expected)
    ))
}

/// The declared columns of a table of every event: `event_type INT`, and `person`,
/// `auction`, `bid` as ROWs of exactly their stream's columns.
fn event_columns(options: &Options<'_>, schema: &SchemaRef) -> Result<Vec<EventColumn>> {
    let mut columns = Vec::new();
    for field in schema.fields() {
        let (column, expected) = match field.name().to_ascii_lowercase().as_str() {
            "event_type" => (EventColumn::EventType, DataType::Int32),
            name => {
                let stream = match name {
                    "person" => NexmarkStream::Person,
                    "auction" => NexmarkStream::Auction,
                    "bid" => NexmarkStream::Bid,
                    _ => {
                        return Err(options.error(format!(
                            "column '{}' is not a column of the nexmark events (event_type, \
                             person, auction, bid; or choose one stream with 'nexmark.table')",
                            field.name()
                        )));
                    }
                };
                (
                    EventColumn::Row(stream),
                    DataType::Struct(stream.row_fields()),
                )
            }
        };
        let same = match (field.data_type(), &expected) {
            (DataType::Struct(got), DataType::Struct(want)) => {
                got.len() == want.len()
                    && got.iter().zip(want.iter()).all(|(g, w)| {
                        g.name().eq_ignore_ascii_case(w.name()) && g.data_type() == w.data_type()
                    })
            }
            (got, want) => got == want,
        };
        if !same {
            return Err(wrong_type(options, field, &expected));
        }
        columns.push(column);
    }
    Ok(columns)
}

impl TableConnector for NexmarkConnector {
    fn name(&self) -> &'static str {
        "nexmark"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        let rate = match self.events_per_second {
            0 => None,
            r => Some(r as f64 / context.parallelism as f64),
        };
        let batch_size = match rate {
            Some(r) => (r / 10.0).clamp(1.0, context.batch_size as f64) as usize,
            None => context.batch_size,
        };
        Ok(Box::new(NexmarkReader {
            config: NexmarkGenerator {
                seed: self.seed,
                inter_event_micros: self.inter_event_micros,
                base_time: self.base_time,
            },
            schema: self.schema.clone(),
            layout: Arc::new(self.layout.clone()),
            progress: StridedProgress::new(context.subtask, context.parallelism),
            events: self.events,
            batch_size,
            rate,
            started: Instant::now(),
            generated: 0,
            ended: false,
        }))
    }
}

struct NexmarkReader {
    config: NexmarkGenerator,
    schema: SchemaRef,
    layout: Arc<Layout>,
    progress: StridedProgress,
    events: Option<u64>,
    batch_size: usize,
    rate: Option<f64>,
    started: Instant,
    generated: u64,
    ended: bool,
}

impl NexmarkReader {
    async fn next_rows(&mut self) -> Result<Option<SourceEvent>> {
        if self.ended {
            return Ok(None);
        }
        // Paced before anything is taken, so that a read cancelled while it waits (the
        // task stopping) skips no events.
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(self.generated as f64 / rate);
            let elapsed = self.started.elapsed();
            if due > elapsed {
                tokio::time::sleep(due - elapsed).await;
            }
        }
        let layout = self.layout.clone();
        let (columns, scanned) = match layout.as_ref() {
            Layout::Stream(stream, columns) => self.stream_rows(*stream, columns),
            Layout::Events(columns) => self.event_rows(columns)?,
        };
        if scanned == 0 {
            self.ended = true;
            return Ok(Some(SourceEvent::SplitEnd(0)));
        }
        self.generated += scanned;
        let rows = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns.1,
            &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(columns.0)),
        )?;
        Ok(Some(SourceEvent::Rows {
            split: 0,
            rows: Chunk::inserts(rows),
        }))
    }

    /// The next batch of one stream's rows, as (row count, declared columns), and how
    /// many events were scanned for them.
    fn stream_rows(
        &mut self,
        stream: NexmarkStream,
        columns: &[usize],
    ) -> ((usize, Vec<ArrayRef>), u64) {
        let mut builder = RowsBuilder::new(stream, self.batch_size);
        let mut scanned = 0u64;
        while builder.len < self.batch_size {
            let Some(event) = self.progress.advance(self.events) else {
                break;
            };
            scanned += 1;
            if stream.matches(event) {
                self.config.append(stream, event, &mut builder);
            }
        }
        let all = builder.finish();
        let len = all[0].len();
        (
            (len, columns.iter().map(|i| all[*i].clone()).collect()),
            scanned,
        )
    }

    /// The next batch of every event: `event_type` and a ROW per stream.
    fn event_rows(&mut self, columns: &[EventColumn]) -> Result<((usize, Vec<ArrayRef>), u64)> {
        let streams = [
            NexmarkStream::Person,
            NexmarkStream::Auction,
            NexmarkStream::Bid,
        ];
        let mut builders = streams.map(|s| RowsBuilder::new(s, self.batch_size));
        let mut types = Vec::with_capacity(self.batch_size);
        // For each stream, each event's row among the stream's rows (None: another stream).
        let mut rows: [Vec<Option<u32>>; 3] = Default::default();
        while types.len() < self.batch_size {
            let Some(event) = self.progress.advance(self.events) else {
                break;
            };
            let stream = NexmarkStream::of(event);
            let index = streams.iter().position(|s| *s == stream).expect("a stream");
            for (i, positions) in rows.iter_mut().enumerate() {
                positions.push((i == index).then_some(builders[i].len as u32));
            }
            self.config.append(stream, event, &mut builders[index]);
            types.push(index as i32);
        }
        let scanned = types.len() as u64;
        let mut structs: [Option<ArrayRef>; 3] = Default::default();
        for (i, builder) in builders.into_iter().enumerate() {
            if !columns.contains(&EventColumn::Row(streams[i])) {
                continue;
            }
            let positions = UInt32Array::from(std::mem::take(&mut rows[i]));
            let children = builder
                .finish()
                .iter()
                .map(|column| take(column, &positions, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let valid = NullBuffer::from(positions.iter().map(|p| p.is_some()).collect::<Vec<_>>());
            structs[i] = Some(Arc::new(StructArray::try_new(
                streams[i].row_fields(),
                children,
                Some(valid),
            )?));
        }
        let len = types.len();
        let event_type: ArrayRef = Arc::new(Int32Array::from(types));
        let columns = columns
            .iter()
            .map(|column| match column {
                EventColumn::EventType => event_type.clone(),
                EventColumn::Row(stream) => {
                    let i = streams.iter().position(|s| s == stream).expect("a stream");
                    structs[i].clone().expect("built above")
                }
            })
            .collect();
        Ok(((len, columns), scanned))
    }
}

impl SourceReader for NexmarkReader {
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

/// Column builders of one stream; strings are written straight into the builders.
struct RowsBuilder {
    len: usize,
    longs: Vec<Vec<i64>>,
    texts: Vec<StringBuilder>,
    times: Vec<Vec<i64>>,
    layout: &'static [(&'static str, ColumnType)],
}

impl RowsBuilder {
    fn new(stream: NexmarkStream, capacity: usize) -> Self {
        let layout = stream.columns();
        let count = |t: ColumnType| layout.iter().filter(|(_, c)| *c == t).count();
        RowsBuilder {
            len: 0,
            longs: (0..count(ColumnType::Long))
                .map(|_| Vec::with_capacity(capacity))
                .collect(),
            texts: (0..count(ColumnType::Text))
                .map(|_| StringBuilder::with_capacity(capacity, capacity * 16))
                .collect(),
            times: (0..count(ColumnType::Time))
                .map(|_| Vec::with_capacity(capacity))
                .collect(),
            layout,
        }
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        let (mut l, mut t, mut s) = (0, 0, 0);
        let mut out = Vec::with_capacity(self.layout.len());
        for (_, kind) in self.layout {
            let array: ArrayRef = match kind {
                ColumnType::Long => {
                    l += 1;
                    Arc::new(Int64Array::from(std::mem::take(&mut self.longs[l - 1])))
                }
                ColumnType::Time => {
                    t += 1;
                    Arc::new(TimestampMillisecondArray::from(std::mem::take(
                        &mut self.times[t - 1],
                    )))
                }
                ColumnType::Text => {
                    s += 1;
                    Arc::new(self.texts[s - 1].finish())
                }
            };
            out.push(array);
        }
        out
    }
}

/// The event generator, after the Nexmark reference generator: ids grow with the event
/// number, bids favour hot auctions and hot bidders, event time grows monotonically.
#[derive(Debug, Clone, Copy)]
struct NexmarkGenerator {
    seed: u64,
    inter_event_micros: u64,
    base_time: i64,
}

impl NexmarkGenerator {
    fn timestamp(&self, event: u64) -> i64 {
        self.base_time + (event * self.inter_event_micros / 1000) as i64
    }

    /// Appends event number `event` to `rows`, which hold `stream`'s rows.
    fn append(&self, stream: NexmarkStream, event: u64, rows: &mut RowsBuilder) {
        let mut rng = SplitMix64::for_item(self.seed, event);
        let ts = self.timestamp(event);
        rows.len += 1;
        match stream {
            NexmarkStream::Person => append_person(event, ts, &mut rng, rows),
            NexmarkStream::Auction => append_auction(event, ts, &mut rng, rows),
            NexmarkStream::Bid => append_bid(event, ts, &mut rng, rows),
        }
    }
}

/// Appends the person of event number `event`, made at `ts`.
fn append_person(event: u64, ts: i64, rng: &mut SplitMix64, rows: &mut RowsBuilder) {
    let id = last_person(event) as i64 + FIRST_PERSON_ID;
    rows.longs[0].push(id);
    let first = FIRST_NAMES[rng.below(FIRST_NAMES.len() as u64) as usize];
    let last = LAST_NAMES[rng.below(LAST_NAMES.len() as u64) as usize];
    let t = &mut rows.texts;
    let _ = write!(t[0], "{first} {last}");
    t[0].append_value("");
    let _ = write!(
        t[1],
        "{}@{}.com",
        first.to_ascii_lowercase(),
        last.to_ascii_lowercase()
    );
    t[1].append_value("");
    let _ = write!(
        t[2],
        "{:04} {:04} {:04} {:04}",
        rng.below(10_000),
        rng.below(10_000),
        rng.below(10_000),
        rng.below(10_000)
    );
    t[2].append_value("");
    let city = CITIES[rng.below(CITIES.len() as u64) as usize];
    let state = STATES[rng.below(STATES.len() as u64) as usize];
    t[3].append_value(city);
    t[4].append_value(state);
    let size = 8
        + [&t[0], &t[1], &t[2]]
            .iter()
            .map(|b| last_len(b))
            .sum::<usize>()
        + city.len()
        + state.len();
    append_extra(rng, size, AVERAGE_PERSON_BYTES, &mut t[5]);
    rows.times[0].push(ts);
}

/// Appends the auction of event number `event`, opened at `ts`.
fn append_auction(event: u64, ts: i64, rng: &mut SplitMix64, rows: &mut RowsBuilder) {
    let id = last_auction(event) as i64 + FIRST_AUCTION_ID;
    let initial = next_price(rng);
    let seller = if rng.below(HOT_SELLER_RATIO) > 0 {
        (last_person(event) / HOT_STRIDE) * HOT_STRIDE
    } else {
        next_person(event, rng)
    } as i64
        + FIRST_PERSON_ID;
    let category = FIRST_CATEGORY_ID + rng.below(NUM_CATEGORIES) as i64;
    let length_ms = 1 + rng.below(20_000) as i64;
    let l = &mut rows.longs;
    l[0].push(id);
    l[1].push(initial);
    l[2].push(initial + next_price(rng));
    l[3].push(seller);
    l[4].push(category);
    let t = &mut rows.texts;
    let _ = write!(t[0], "item-{}", rng.below(10_000));
    t[0].append_value("");
    let _ = write!(t[1], "description of auction {id}");
    t[1].append_value("");
    let size = 8 + last_len(&t[0]) + last_len(&t[1]) + 5 * 8;
    append_extra(rng, size, AVERAGE_AUCTION_BYTES, &mut t[2]);
    rows.times[0].push(ts);
    rows.times[1].push(ts + length_ms);
}

/// Appends the bid of event number `event`, made at `ts`.
fn append_bid(event: u64, ts: i64, rng: &mut SplitMix64, rows: &mut RowsBuilder) {
    let auction = if rng.below(HOT_AUCTION_RATIO) > 0 {
        (last_auction(event) / HOT_STRIDE) * HOT_STRIDE
    } else {
        next_auction(event, rng)
    } as i64
        + FIRST_AUCTION_ID;
    let bidder = if rng.below(HOT_BIDDER_RATIO) > 0 {
        (last_person(event) / HOT_STRIDE) * HOT_STRIDE + 1
    } else {
        next_person(event, rng)
    } as i64
        + FIRST_PERSON_ID;
    let l = &mut rows.longs;
    l[0].push(auction);
    l[1].push(bidder);
    l[2].push(next_price(rng));
    let channel = rng.below(CHANNELS.len() as u64) as usize;
    let t = &mut rows.texts;
    t[0].append_value(CHANNELS[channel]);
    let _ = write!(
        t[1],
        "https://www.nexmark.com/{}/item.htm?query=1&channel_id={channel}",
        CHANNELS[channel].to_ascii_lowercase()
    );
    t[1].append_value("");
    append_extra(rng, 4 * 8, AVERAGE_BID_BYTES, &mut t[2]);
    rows.times[0].push(ts);
}

/// The length in bytes of the last value of `builder`.
fn last_len(builder: &StringBuilder) -> usize {
    let offsets = builder.offsets_slice();
    match offsets {
        [.., before, last] => (*last - *before) as usize,
        _ => 0,
    }
}

/// Appends the `extra` field of an event of `size` bytes so far, as the Nexmark
/// specification makes it: random lowercase letters bringing the event to `average` bytes
/// on average, ±20 % (none if the event is that large already).
fn append_extra(rng: &mut SplitMix64, size: usize, average: usize, out: &mut StringBuilder) {
    if size > average {
        out.append_value("");
        return;
    }
    let target = (average - size) as u64;
    let delta = (target as f64 * 0.2).round() as u64;
    let mut length = target - delta + if delta == 0 { 0 } else { rng.below(2 * delta) };
    let mut letters = [0u8; 12];
    while length > 0 {
        // 12 letters from each 64 random bits, 5 bits each scaled to 0..26 (no division).
        let mut bits = rng.next_u64();
        let n = length.min(12) as usize;
        for letter in letters.iter_mut().take(n) {
            *letter = b'a' + (((bits & 31) * 26) >> 5) as u8;
            bits >>= 5;
        }
        out.write_str(std::str::from_utf8(&letters[..n]).expect("ASCII letters"))
            .expect("writing to a string builder");
        length -= n as u64;
    }
    out.append_value("");
}

/// The id (from 0) of the newest person at `event`.
fn last_person(event: u64) -> u64 {
    let epoch = event / TOTAL_PROPORTION;
    let offset = match event % TOTAL_PROPORTION {
        o if o >= PERSON_PROPORTION => PERSON_PROPORTION - 1,
        o => o,
    };
    epoch * PERSON_PROPORTION + offset
}

/// The id (from 0) of the newest auction at `event`.
fn last_auction(event: u64) -> u64 {
    let epoch = event / TOTAL_PROPORTION;
    let offset = event % TOTAL_PROPORTION;
    let (epoch, offset) = if offset < PERSON_PROPORTION {
        (epoch.saturating_sub(1), AUCTION_PROPORTION - 1)
    } else if offset >= PERSON_PROPORTION + AUCTION_PROPORTION {
        (epoch, AUCTION_PROPORTION - 1)
    } else {
        (epoch, offset - PERSON_PROPORTION)
    };
    epoch * AUCTION_PROPORTION + offset
}

fn next_person(event: u64, rng: &mut SplitMix64) -> u64 {
    let people = last_person(event) + 1;
    let active = people.min(NUM_ACTIVE_PEOPLE);
    let n = rng.below(active + PERSON_ID_LEAD);
    (people - active + n).min(people - 1)
}

fn next_auction(event: u64, rng: &mut SplitMix64) -> u64 {
    let max = last_auction(event);
    let min = max.saturating_sub(NUM_IN_FLIGHT_AUCTIONS);
    (min + rng.below(max - min + 1 + AUCTION_ID_LEAD)).min(max)
}

fn next_price(rng: &mut SplitMix64) -> i64 {
    (10f64.powf(rng.unit() * 6.0) * 100.0).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_mix_is_1_3_46() {
        let count = |s: NexmarkStream| (0..5000).filter(|e| s.matches(*e)).count();
        assert_eq!(count(NexmarkStream::Person), 100);
        assert_eq!(count(NexmarkStream::Auction), 300);
        assert_eq!(count(NexmarkStream::Bid), 4600);
    }

    #[test]
    fn bids_refer_to_existing_auctions_and_people() {
        let generator = NexmarkGenerator {
            seed: 3,
            inter_event_micros: 100,
            base_time: 0,
        };
        let mut rows = RowsBuilder::new(NexmarkStream::Bid, 16);
        for event in (0..20_000).filter(|e| NexmarkStream::Bid.matches(*e)) {
            generator.append(NexmarkStream::Bid, event, &mut rows);
            let auction = *rows.longs[0].last().unwrap();
            let bidder = *rows.longs[1].last().unwrap();
            assert!(
                auction >= FIRST_AUCTION_ID
                    && auction <= last_auction(event) as i64 + FIRST_AUCTION_ID
            );
            assert!(
                bidder >= FIRST_PERSON_ID
                    && bidder <= last_person(event) as i64 + FIRST_PERSON_ID + 1
            );
        }
        assert!(generator.timestamp(10) > generator.timestamp(0));
    }

    /// The average size of the events of `stream` as the specification counts it: `fixed`
    /// bytes for its numbers and times, and the characters of the text columns `counted`;
    /// and the shortest and longest `extra` (the last text column).
    fn sizes(stream: NexmarkStream, fixed: usize, counted: &[usize]) -> (f64, usize, usize) {
        use arrow::array::Array;
        let generator = NexmarkGenerator {
            seed: 11,
            inter_event_micros: 100,
            base_time: 0,
        };
        let mut rows = RowsBuilder::new(stream, 16);
        let events = (0..200_000).filter(|e| stream.matches(*e)).count();
        for event in (0..200_000).filter(|e| stream.matches(*e)) {
            generator.append(stream, event, &mut rows);
        }
        let texts: Vec<_> = rows.texts.iter_mut().map(|t| t.finish()).collect();
        let text: usize = counted.iter().map(|c| texts[*c].value_data().len()).sum();
        let extra = texts.last().unwrap();
        let lengths = (0..extra.len()).map(|i| extra.value(i).len());
        let (min, max) = lengths.fold((usize::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
        ((fixed * events + text) as f64 / events as f64, min, max)
    }

    #[test]
    fn extra_pads_events_to_the_specifications_average_sizes() {
        // A bid: four numbers and its extra (the specification counts no channel or url).
        let (bid, min, max) = sizes(NexmarkStream::Bid, 32, &[2]);
        assert!(min >= 54 && max <= 81, "extra of {min} to {max} letters");
        assert!((bid - 100.0).abs() < 1.0, "bids average {bid} bytes");
        // A person: its id, name, email, credit card, city, state and extra.
        let (person, ..) = sizes(NexmarkStream::Person, 8, &[0, 1, 2, 3, 4, 5]);
        assert!(
            (person - 200.0).abs() < 2.0,
            "people average {person} bytes"
        );
        // An auction: six numbers, name, description and extra.
        let (auction, ..) = sizes(NexmarkStream::Auction, 48, &[0, 1, 2]);
        assert!(
            (auction - 500.0).abs() < 5.0,
            "auctions average {auction} bytes"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_cancelled_while_paced_skips_no_events() {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("auction", arrow::datatypes::DataType::Int64, true),
        ]));
        let options = [("nexmark.table", "bid"), ("events.rate", "1000")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let connector = NexmarkConnector::new("bid", &options, &schema).unwrap();
        let context = SourceContext {
            table: "bid".into(),
            schema,
            subtask: 0,
            parallelism: 1,
            batch_size: 50,
            metrics: Default::default(),
            completed: None,
            metadata: Vec::new(),
            columns_used: None,
            bounds: Vec::new(),
        };
        let mut reader = connector.create_reader(&context).unwrap();
        let mut uncancelled = connector.create_reader(&context).unwrap();
        for _ in 0..2 {
            uncancelled.next().await.unwrap();
        }
        reader.next().await.unwrap();
        let before = reader.position(0).unwrap();
        // The second batch is due later: a stop cancels the read while it waits.
        let cancelled = tokio::time::timeout(Duration::from_millis(1), reader.next()).await;
        assert!(cancelled.is_err(), "the read waits for its pace");
        assert_eq!(reader.position(0).unwrap(), before);
        reader.next().await.unwrap();
        assert_eq!(
            reader.position(0).unwrap(),
            uncancelled.position(0).unwrap()
        );
    }

    #[tokio::test]
    async fn a_table_without_nexmark_table_reads_every_event_with_a_row_per_kind() {
        use arrow::array::{Array, AsArray};
        use arrow::datatypes::Int64Type;
        let field = |name: &str, stream: NexmarkStream| {
            arrow::datatypes::Field::new(name, DataType::Struct(stream.row_fields()), true)
        };
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("event_type", DataType::Int32, true),
            field("bid", NexmarkStream::Bid),
            field("person", NexmarkStream::Person),
        ]));
        let options = [("events.num", "100")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let connector = NexmarkConnector::new("datagen", &options, &schema).unwrap();
        let context = SourceContext {
            table: "datagen".into(),
            schema,
            subtask: 0,
            parallelism: 1,
            batch_size: 100,
            metrics: Default::default(),
            completed: None,
            metadata: Vec::new(),
            columns_used: None,
            bounds: Vec::new(),
        };
        let mut reader = connector.create_reader(&context).unwrap();
        let Some(SourceEvent::Rows { rows, .. }) = reader.next().await.unwrap() else {
            panic!("rows first");
        };
        let rows = rows.rows();
        assert_eq!(rows.num_rows(), 100);
        let types = rows.column(0).as_primitive::<arrow::datatypes::Int32Type>();
        let bids = rows.column(1).as_struct();
        let people = rows.column(2).as_struct();
        for event in 0..100 {
            let kind = NexmarkStream::of(event as u64);
            assert_eq!(
                types.value(event),
                [
                    NexmarkStream::Person,
                    NexmarkStream::Auction,
                    NexmarkStream::Bid
                ]
                .iter()
                .position(|s| *s == kind)
                .unwrap() as i32
            );
            assert_eq!(bids.is_valid(event), kind == NexmarkStream::Bid);
            assert_eq!(people.is_valid(event), kind == NexmarkStream::Person);
        }
        // The bids are the one-stream table's bids.
        let bid_schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("price", DataType::Int64, true),
        ]));
        let options = [("events.num", "100"), ("nexmark.table", "bid")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let flat = NexmarkConnector::new("bid", &options, &bid_schema).unwrap();
        let mut flat = flat
            .create_reader(&SourceContext {
                schema: bid_schema,
                ..context
            })
            .unwrap();
        let Some(SourceEvent::Rows { rows: flat, .. }) = flat.next().await.unwrap() else {
            panic!("rows first");
        };
        let flat = flat.rows();
        let prices = bids.column(2).as_primitive::<Int64Type>();
        let valid: Vec<i64> = (0..100)
            .filter(|i| bids.is_valid(*i))
            .map(|i| prices.value(i))
            .collect();
        assert_eq!(
            valid,
            flat.column(0).as_primitive::<Int64Type>().values().to_vec()
        );
    }
}
