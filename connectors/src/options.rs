//! Validated access to a table's `WITH (...)` options.

use std::collections::BTreeMap;
use std::str::FromStr;

use eddy_common::{EddyError, Result};

use super::transaction::DeliveryGuarantee;

/// A table's options, checked against the keys its connector knows.
#[derive(Debug)]
pub struct Options<'a> {
    table: &'a str,
    connector: &'a str,
    values: &'a BTreeMap<String, String>,
}

impl<'a> Options<'a> {
    /// Checks every key is one of `keys` or starts with one of `prefixes`; the error
    /// names the valid ones.
    pub fn validate(
        table: &'a str,
        connector: &'a str,
        values: &'a BTreeMap<String, String>,
        keys: &[&str],
        prefixes: &[&str],
    ) -> Result<Self> {
        for key in values.keys() {
            let known = key == "connector"
                || keys.contains(&key.as_str())
                || prefixes.iter().any(|p| key.starts_with(p));
            if !known {
                let mut valid: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
                valid.extend(prefixes.iter().map(|p| format!("{p}*")));
                return Err(EddyError::Connector {
                    table: table.to_string(),
                    message: format!(
                        "unknown option '{key}' for connector '{connector}' (valid options: {})",
                        valid.join(", ")
                    ),
                });
            }
        }
        Ok(Options {
            table,
            connector,
            values,
        })
    }

    /// The table the options are of.
    pub fn table(&self) -> &'a str {
        self.table
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.values.get(key).map(String::as_str)
    }

    /// The value of a required option.
    pub fn required(&self, key: &str) -> Result<&'a str> {
        self.get(key).ok_or_else(|| {
            self.error(format!(
                "the '{}' connector needs option '{key}'",
                self.connector
            ))
        })
    }

    /// The value of `key` parsed as `T`, or `default` when absent.
    pub fn parse_or<T: FromStr>(&self, key: &str, default: T) -> Result<T> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => self.parse(key, v),
        }
    }

    /// The value of `key` parsed as `T`, if present.
    pub fn parse_opt<T: FromStr>(&self, key: &str) -> Result<Option<T>> {
        self.get(key).map(|v| self.parse(key, v)).transpose()
    }

    /// A boolean option (`'true'` or `'false'`).
    pub fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key).map(|v| v.to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(v) => Err(self.error(format!("option '{key}' = '{v}': expected true or false"))),
        }
    }

    /// `'sink.delivery-guarantee'`, if given.
    pub fn delivery_guarantee(&self) -> Result<Option<DeliveryGuarantee>> {
        let key = "sink.delivery-guarantee";
        self.get(key)
            .map(|v| {
                DeliveryGuarantee::parse(v).ok_or_else(|| {
                    self.error(format!(
                        "option '{key}' = '{v}': expected one of {}",
                        DeliveryGuarantee::VALUES
                    ))
                })
            })
            .transpose()
    }

    /// A duration option (`'500ms'`, `'10 s'`, `'1min'`), if present.
    pub fn duration_opt(&self, key: &str) -> Result<Option<std::time::Duration>> {
        self.get(key)
            .map(|v| {
                eddy_common::config::checkpointing::parse_duration(key, v)
                    .map_err(|e| self.error(e.to_string()))
            })
            .transpose()
    }

    /// A memory size option as Flink writes them (`'134217728'`, `'128mb'`, `'64 KB'`:
    /// units of 1024), or `default`.
    pub fn memory_size_or(&self, key: &str, default: u64) -> Result<u64> {
        let Some(value) = self.get(key) else {
            return Ok(default);
        };
        let text = value.trim().to_ascii_lowercase();
        let digits = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let unit = match text[digits..].trim() {
            "" | "b" | "bytes" => Some(1u64),
            "k" | "kb" | "kibibytes" => Some(1 << 10),
            "m" | "mb" | "mebibytes" => Some(1 << 20),
            "g" | "gb" | "gibibytes" => Some(1 << 30),
            "t" | "tb" | "tebibytes" => Some(1 << 40),
            _ => None,
        };
        let number: Option<u64> = text[..digits].parse().ok();
        match (number, unit) {
            (Some(n), Some(unit)) => n
                .checked_mul(unit)
                .ok_or_else(|| self.error(format!("option '{key}' = '{value}' is too large"))),
            _ => Err(self.error(format!(
                "option '{key}' = '{value}' is not a memory size (such as '128mb' or '1024')"
            ))),
        }
    }

    fn parse<T: FromStr>(&self, key: &str, value: &str) -> Result<T> {
        value.trim().parse().map_err(|_| {
            self.error(format!(
                "option '{key}' = '{value}' is not a valid {}",
                std::any::type_name::<T>()
            ))
        })
    }

    /// An error about this table's options.
    pub fn error(&self, message: String) -> EddyError {
        EddyError::Connector {
            table: self.table.to_string(),
            message,
        }
    }
}
