//! Integration tests: they run the real `eddy` binary as a separate process on SQL
//! scripts over deterministic inputs, and check its output against results the tests
//! compute themselves.

// A test crate: a failed unwrap is a failed test (clippy.toml allows it in #[test] code).
#![allow(clippy::unwrap_used)]

mod arrays;
mod avro;
mod changelog_formats;
mod chaos;
mod cli;
mod clock_step;
mod cluster;
mod disk_full;
mod docker;
mod examples;
mod faults;
mod flink_oracle;
mod formats;
mod functions;
mod golden;
mod group_windows;
mod high_availability;
mod hostile_requests;
mod http;
mod iceberg;
mod interval_joins;
mod joins;
mod kafka;
mod kafka_metadata;
mod kubernetes;
mod lookup_joins;
mod nexmark;
mod observability;
mod outer_joins;
mod over;
mod parquet;
mod partitioned;
mod partitions;
mod postgres;
mod postgres_cdc;
mod processes;
mod processing_time;
mod protobuf;
mod recovery;
mod restarts;
mod s3;
mod security;
mod semi_joins;
mod soak;
mod support;
mod temporal_joins;
mod top_n;
mod udfs;
mod upsert_kafka;
mod window_joins;
