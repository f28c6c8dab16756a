//! The replication stream's messages applied: transactions tracked, the table's relation
//! followed, and each insert, update and delete turned into changelog rows.

use eddy_common::chunk::Op;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};

use super::{CdcReader, OpenTransaction, StreamRelation};
use crate::postgres_cdc::ChangelogMode;
use crate::postgres_cdc::metadata;
use crate::postgres_cdc::pgoutput::{Message, OldImage, Relation, Value};
use crate::postgres_cdc::snapshot::Key;
use crate::postgres_cdc::values::SourceColumn;

impl CdcReader {
    /// Applies one decoded message of the stream.
    pub(super) fn apply(&mut self, message: Message) -> Result<()> {
        match message {
            Message::Begin { xid, committed_at } => {
                self.transaction = Some(OpenTransaction {
                    xid,
                    committed_at: metadata::epoch_millis(committed_at),
                    changes: 0,
                });
            }
            Message::Commit { end } => {
                self.transaction = None;
                self.skip_left = 0;
                self.progress.skip = 0;
                self.progress.resume = self.progress.resume.max(end);
                self.progress.marks.passed(end);
            }
            Message::Relation(relation) => self.relation_changed(relation)?,
            Message::Insert { relation, new } => {
                if self.counts(relation) {
                    self.insert(new)?;
                }
            }
            Message::Update { relation, old, new } => {
                if self.counts(relation) {
                    self.update(old, new)?;
                }
            }
            Message::Delete { relation, old } => {
                if self.counts(relation) {
                    self.delete(old)?;
                }
            }
            Message::Truncate { relations } => {
                if self
                    .relation
                    .as_ref()
                    .is_some_and(|r| relations.contains(&r.id))
                {
                    return Err(self.error(
                        "the table was truncated: a TRUNCATE carries no rows, so the \
                         changelog cannot retract them; start the job without its state to \
                         read the table afresh"
                            .into(),
                    ));
                }
            }
            Message::Other => {}
        }
        Ok(())
    }

    /// Whether a change of `relation` is the table's and still to be emitted (not one of
    /// the first transaction's changes handled before the restore); counts it.
    fn counts(&mut self, relation: u32) -> bool {
        if self.relation.as_ref().is_none_or(|r| r.id != relation) {
            return false;
        }
        if let Some(transaction) = self.transaction.as_mut() {
            transaction.changes += 1;
            self.progress.skip = transaction.changes;
        }
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return false;
        }
        OperatorMetrics::add(&self.context.metrics.records_in, 1);
        true
    }

    /// A relation description: the table's (checked against the columns read) or
    /// another's (ignored).
    fn relation_changed(&mut self, relation: Relation) -> Result<()> {
        let connector = self.connector.clone();
        if relation.namespace != connector.schema_name || relation.name != connector.table_name {
            return Ok(());
        }
        let name = format!("{}.{}", relation.namespace, relation.name);
        let description = self
            .description
            .as_ref()
            .ok_or_else(|| EddyError::Internal("no table description".into()))?;
        let mut columns = Vec::new();
        for field in self.physical.fields() {
            let Some(index) = relation
                .columns
                .iter()
                .position(|c| &c.name == field.name())
            else {
                return Err(self.error(format!(
                    "{name} changed: column '{}' was dropped or renamed",
                    field.name()
                )));
            };
            let column = &relation.columns[index];
            let known: Option<&SourceColumn> = description.column(field.name());
            if known.is_some_and(|k| k.type_oid != column.type_oid) {
                return Err(self.error(format!(
                    "{name} changed: column '{}' changed its type (type oid {} to {})",
                    field.name(),
                    known.map_or(0, |k| k.type_oid),
                    column.type_oid
                )));
            }
            columns.push(index);
        }
        self.check_identity(&name, relation.replica_identity as char)?;
        self.relation = Some(StreamRelation {
            id: relation.id,
            columns,
        });
        Ok(())
    }

    fn insert(&mut self, new: Vec<Value>) -> Result<()> {
        self.emit(Op::Insert, &new, None)
    }

    fn update(&mut self, old: Option<(OldImage, Vec<Value>)>, new: Vec<Value>) -> Result<()> {
        let full_old = match &old {
            Some((OldImage::Full, old)) => Some(old),
            _ => None,
        };
        match self.connector.changelog {
            ChangelogMode::All => {
                let Some(old) = full_old else {
                    return Err(self.error(
                        "an update without its whole before-image: the table's REPLICA \
                         IDENTITY is no longer FULL"
                            .into(),
                    ));
                };
                // A changed key is a delete and an insert, as Debezium reports it.
                let (before, after) = match self.same_key(old, &new) {
                    true => (Op::UpdateBefore, Op::UpdateAfter),
                    false => (Op::Delete, Op::Insert),
                };
                self.emit(before, old, None)?;
                self.emit(after, &new, Some(old))
            }
            ChangelogMode::Upsert => {
                // A changed key: the old key's row is deleted.
                if let Some((_, old)) = &old
                    && !self.same_key(old, &new)
                {
                    self.emit(Op::Delete, old, None)?;
                }
                self.emit(Op::UpdateAfter, &new, full_old)
            }
        }
    }

    fn delete(&mut self, (image, old): (OldImage, Vec<Value>)) -> Result<()> {
        if image == OldImage::Key && self.connector.changelog == ChangelogMode::All {
            return Err(self.error(
                "a delete with only its key: the table's REPLICA IDENTITY is no longer FULL".into(),
            ));
        }
        self.emit(Op::Delete, &old, None)
    }

    /// Whether two tuples of the table have the same key (compared in place).
    fn same_key(&self, a: &[Value], b: &[Value]) -> bool {
        let relation = self
            .relation
            .as_ref()
            .expect("a change follows its relation");
        self.connector.key_columns.iter().all(|k| {
            let column = relation.columns[*k];
            a.get(column) == b.get(column)
        })
    }

    /// The key columns' texts of a tuple.
    fn key_of(&self, tuple: &[Value]) -> Key {
        let relation = self
            .relation
            .as_ref()
            .expect("a change follows its relation");
        self.connector
            .key_columns
            .iter()
            .map(|k| match tuple.get(relation.columns[*k]) {
                Some(Value::Text(text)) => text.to_vec(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// Emits a row image unless the snapshot's chunk of its key already saw its
    /// transaction. Unchanged TOASTed values are taken from `old`, the whole before-image.
    fn emit(&mut self, op: Op, tuple: &[Value], old: Option<&Vec<Value>>) -> Result<()> {
        if !self.progress.marks.is_empty()
            && let Some(transaction) = &self.transaction
        {
            let key = self.key_of(tuple);
            if self
                .progress
                .marks
                .saw(&self.key_orders, &key, transaction.xid)
            {
                return Ok(());
            }
        }
        let relation = self
            .relation
            .as_ref()
            .expect("a change follows its relation");
        let mut values = Vec::with_capacity(relation.columns.len());
        for (field, index) in self.physical.fields().iter().zip(&relation.columns) {
            let value = match tuple.get(*index) {
                // Not sent: the whole before-image has it, if there is one.
                Some(Value::UnchangedToast) => old
                    .and_then(|old| old.get(*index))
                    .or(Some(&Value::UnchangedToast)),
                value => value,
            };
            values.push(match value {
                Some(Value::Text(text)) => Some(text.as_ref()),
                Some(Value::Null) | None => None,
                Some(Value::UnchangedToast) => {
                    return Err(self.error(format!(
                        "an update left column '{}' (a large, TOASTed value) unchanged and \
                         PostgreSQL did not send it; with REPLICA IDENTITY FULL it sends the \
                         whole before-image, from which Eddy takes it",
                        field.name()
                    )));
                }
            });
        }
        self.rows.push(op, values);
        let committed_at = self.transaction.as_ref().map_or(0, |t| t.committed_at);
        self.times.push(committed_at);
        Ok(())
    }
}
