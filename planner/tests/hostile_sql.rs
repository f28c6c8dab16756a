//! Hostile SQL: the golden scripts (`tests/plans/*.sql`), mutated token by token, are
//! planned; the planner never panics, and when it refuses a script its error says where
//! (`line:column`) or names the table or option at fault.
//!
//! Bounded in CI (`PROPTEST_CASES`, 256 by default); longer on demand, e.g.
//! `PROPTEST_CASES=20000 cargo test -p eddy-planner --test hostile_sql`. Each run prints its
//! seed; `PROPTEST_RNG_SEED=<seed>` replays it.

use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;

/// The golden scripts, read once.
fn scripts() -> &'static [String] {
    static SCRIPTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plans");
        let mut scripts: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "sql"))
            .map(|path| std::fs::read_to_string(path).unwrap())
            .collect();
        scripts.sort();
        assert!(scripts.len() >= 10, "the golden scripts are missing");
        scripts
    })
}

/// Pieces of SQL that stress the parser and binder where it matters.
const PIECES: &[&str] = &[
    "(",
    ")",
    ",",
    ";",
    "'",
    "''",
    "\"",
    "`",
    "--",
    "/*",
    "*/",
    "*",
    "-",
    "+",
    "/",
    "%",
    "=",
    "<>",
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "ORDER BY",
    "HAVING",
    "JOIN",
    "ON",
    "AS",
    "OVER (",
    "PARTITION BY",
    "ROWS BETWEEN",
    "UNION ALL",
    "CAST(",
    "NULL",
    "TRUE",
    "INTERVAL '1' SECOND",
    "INTERVAL '-5' DAY",
    "TIMESTAMP '2024-01-01 00:00:00'",
    "TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '0' SECOND)",
    "9223372036854775807",
    "-9223372036854775808",
    "1e309",
    "0.000000000000000000000001",
    "CAST(x AS DECIMAL(38, 38))",
    "ROW_NUMBER()",
    "COUNT(DISTINCT",
    "SUM(",
    "LAG(",
    "SET 'parallelism.default' = '0';",
    "SET 'execution.checkpointing.interval' = 'x';",
    "WITH ('connector' = 'print')",
    "PRIMARY KEY (a) NOT ENFORCED",
    "WATERMARK FOR",
    "PROCTIME()",
    "\u{1F600}",
    "\u{0}",
    "\n",
    "a.b.c.d",
    "SELECT * FROM bid, bid, bid",
    "/ 0",
    "% 0",
];

/// One edit of a script.
#[derive(Debug, Clone)]
enum Edit {
    /// Remove the bytes of a range.
    Delete(prop::sample::Index, u8),
    /// Insert a piece.
    Insert(prop::sample::Index, prop::sample::Index),
    /// Copy a range elsewhere.
    Duplicate(prop::sample::Index, u8, prop::sample::Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(a, p)| Edit::Insert(a, p)),
        (
            any::<prop::sample::Index>(),
            any::<u8>(),
            any::<prop::sample::Index>()
        )
            .prop_map(|(a, n, b)| Edit::Duplicate(a, n, b)),
    ]
}

/// The nearest character boundary at or before `i`.
fn boundary(text: &str, i: usize) -> usize {
    (0..=i.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0)
}

fn apply(mut sql: String, edits: &[Edit]) -> String {
    for edit in edits {
        let at = |index: &prop::sample::Index, sql: &str| boundary(sql, index.index(sql.len() + 1));
        match edit {
            Edit::Delete(start, len) => {
                let from = at(start, &sql);
                let to = boundary(&sql, from + *len as usize % 24);
                sql.replace_range(from..to, "");
            }
            Edit::Insert(position, piece) => {
                let from = at(position, &sql);
                let piece = PIECES[piece.index(PIECES.len())];
                sql.insert_str(from, &format!(" {piece} "));
            }
            Edit::Duplicate(start, len, target) => {
                let from = at(start, &sql);
                let to = boundary(&sql, from + *len as usize % 40);
                let copied = sql[from..to].to_string();
                let into = at(target, &sql);
                sql.insert_str(into, &copied);
            }
        }
    }
    sql
}

/// Errors about a script as a whole, which have no place in it to name.
const WHOLE_SCRIPT_ERRORS: &[&str] = &["the script has no INSERT INTO statement"];

/// Whether an error says where: a `line:column`, the table or option at fault, or that the
/// script as a whole is at fault.
fn says_where(message: &str) -> bool {
    if WHOLE_SCRIPT_ERRORS.iter().any(|e| message.contains(e)) {
        return true;
    }
    let located = message
        .split(|c: char| !c.is_ascii_digit() && c != ':')
        .any(|part| {
            let mut numbers = part.split(':').filter(|p| !p.is_empty());
            matches!((numbers.next(), numbers.next()), (Some(l), Some(c)) if l.parse::<u64>().is_ok() && c.parse::<u64>().is_ok())
        });
    located || message.contains("table '") || message.contains("option '")
}

proptest! {
    #![proptest_config(eddy_common::fuzz::config("planner::hostile_sql"))]

    #[test]
    fn mutated_scripts_plan_or_fail_with_a_location(
        script in any::<prop::sample::Index>(),
        edits in vec(edit(), 1..6),
    ) {
        let original = &scripts()[script.index(scripts().len())];
        let sql = apply(original.clone(), &edits);
        match eddy_planner::plan(&sql, &[]) {
            Ok(graph) => {
                // A plan that comes out is whole: it explains.
                let _ = graph.explain();
            }
            Err(error) => {
                let message = error.to_string();
                prop_assert!(says_where(&message), "an error without a location: {message}\n--- script ---\n{sql}");
            }
        }
    }
}
