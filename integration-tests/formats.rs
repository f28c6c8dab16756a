//! The CSV format reads files as Flink's does: an empty field is an empty string, not NULL;
//! only the `csv.null-literal` is NULL; comments, delimiters and quotes follow the options.
//! Every query of `formats/` gives Apache Flink's rows at parallelism 1 and 4.

use crate::flink_oracle::OracleDir;

#[test]
fn csv_files_read_as_flink_reads_them() {
    OracleDir::new("formats").check_all(&["empty_strings", "null_literal", "dialect"]);
}
