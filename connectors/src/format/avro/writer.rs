//! Encodes rows of a table into Avro records: the binary encoding alone (`avro`), or
//! behind the Confluent wire header with the id of the table's schema, registered under
//! the subject on first use (`avro-confluent`).

use arrow::record_batch::RecordBatch;
use arrow_avro::schema::FingerprintStrategy;
use arrow_avro::writer::format::{AvroBinaryFormat, AvroSoeFormat};
use arrow_avro::writer::{Encoder, WriterBuilder};
use eddy_common::{EddyError, Result};

use super::AvroFormat;
use super::schema::EncoderShape;
use crate::format::messages::Messages;

/// Encodes rows of a table into Avro records.
pub struct AvroWriter {
    pub(super) format: AvroFormat,
    /// The table's columns as the encoder takes them.
    pub(super) shape: EncoderShape,
    pub(super) avro_schema: String,
    /// Made on first use (`avro-confluent` registers the schema first).
    pub(super) encoder: Option<Encoder>,
}

impl AvroWriter {
    /// Appends a record for each row of `rows` to `out`.
    pub async fn encode(&mut self, rows: &RecordBatch, out: &mut Messages) -> Result<()> {
        if self.encoder.is_none() {
            self.encoder = Some(self.make_encoder().await?);
        }
        let batch = self.shape.shape(rows)?;
        let encoder = self.encoder.as_mut().expect("encoder");
        encoder
            .encode(&batch)
            .map_err(|e| EddyError::Internal(format!("encoding Avro records: {e}")))?;
        for record in encoder.flush().iter() {
            out.push(&record);
        }
        Ok(())
    }

    async fn make_encoder(&self) -> Result<Encoder> {
        let builder = WriterBuilder::new(self.shape.schema().as_ref().clone());
        let encoder = match (&self.format.registry, &self.format.subject) {
            (Some(registry), Some(subject)) => {
                let id = registry
                    .register(subject, &self.avro_schema)
                    .await
                    .map_err(|e| e.for_table(&self.format.table))?;
                builder
                    .with_fingerprint_strategy(FingerprintStrategy::Id(id))
                    .build_encoder::<AvroSoeFormat>()
            }
            (Some(_), None) => {
                return Err(EddyError::Internal(
                    "an 'avro-confluent' writer without a subject".into(),
                ));
            }
            (None, _) => builder.build_encoder::<AvroBinaryFormat>(),
        };
        encoder.map_err(|e| EddyError::Internal(format!("the Avro writer: {e}")))
    }
}
