//! Hostile SQL: the golden scripts (`tests/plans/*.sql`), mutated token by token, are
//! planned; the planner never panics, and when it refuses a script its error says where
//! (`line:column`) or names the table or option at fault.
//!
//! Bounded in CI (`PROPTEST_CASES`, 256 by default); longer on demand, e.g.
//! `PROPTEST_CASES=20000 cargo test -p eddy-planner --test hostile_sql`. Each run prints its
//! seed; `PROPTEST_RNG_SEED=<seed>` replays it.

// A test crate: a failed unwrap is a failed test (clippy.toml allows it in #[test] code).
#![allow(clippy::unwrap_used)]

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
        match eddy_planner::plan(&sql, &[], eddy_planner::PlanningContext::CHECKING) {
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

/// A statement long or deep in one way, past the planner's limits or within them.
#[derive(Debug, Clone)]
enum Shape {
    /// `a op a op … op a` in the `WHERE` (or `SELECT`) clause.
    Chain { op: &'static str, terms: usize },
    /// One kind of nesting, `depth` levels deep.
    Nested { kind: usize, depth: usize },
    /// `SELECT … UNION [ALL] SELECT …`, of one kind or alternating with `EXCEPT`.
    Unions { branches: usize, mixed: bool },
    /// One `FROM` joining the table this many times.
    Joins { count: usize },
    /// Views on views, each using the one below once or twice.
    Views { depth: usize, twice: bool },
    /// `a IN (0, 1, …)`.
    InList { values: usize },
}

const OPERATORS: &[&str] = &["+", "-", "*", "||", "AND", "OR", "=", "<"];

/// Small, middling and huge sizes alike: the limits sit between them.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![1..64usize, 64..3_000usize, 3_000..250_000usize]
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (prop::sample::select(OPERATORS), size())
            .prop_map(|(op, terms)| Shape::Chain { op, terms }),
        (0..5usize, size()).prop_map(|(kind, depth)| Shape::Nested {
            kind,
            depth: depth.min(5_000)
        }),
        (size(), any::<bool>()).prop_map(|(branches, mixed)| Shape::Unions {
            branches: branches.min(3_000),
            mixed
        }),
        size().prop_map(|count| Shape::Joins {
            count: count.min(3_000)
        }),
        (1..400usize, any::<bool>()).prop_map(|(depth, twice)| Shape::Views {
            depth: if twice { depth.min(40) } else { depth },
            twice
        }),
        size().prop_map(|values| Shape::InList { values }),
    ]
}

/// The script of a shape, over one table.
fn shaped_script(shape: &Shape) -> String {
    let term = |op: &str, i: usize| match op {
        "AND" | "OR" => format!("a > {i}"),
        "||" => "b".to_string(),
        _ => "a".to_string(),
    };
    let query = match shape {
        Shape::Chain { op, terms } => {
            let chain = (0..*terms).map(|i| term(op, i)).collect::<Vec<_>>();
            let chain = chain.join(&format!(" {op} "));
            match *op {
                "AND" | "OR" | "=" | "<" => format!("SELECT a FROM s WHERE {chain}"),
                "||" => format!("SELECT CHAR_LENGTH({chain}) FROM s"),
                _ => format!("SELECT {chain} FROM s"),
            }
        }
        Shape::Nested { kind, depth } => {
            let wrap = |inner: String, i: usize| match kind {
                0 => format!("({inner})"),
                1 => format!("CASE WHEN a > {i} THEN {inner} ELSE 0 END"),
                2 => format!("ABS({inner})"),
                3 => format!("- {inner}"),
                _ => inner,
            };
            match kind {
                4 => (0..*depth).fold("SELECT a FROM s".to_string(), |q, _| {
                    format!("SELECT a FROM ({q})")
                }),
                _ => format!("SELECT {} FROM s", (0..*depth).fold("a".into(), wrap)),
            }
        }
        Shape::Unions { branches, mixed } => (0..*branches)
            .map(|i| match (i, mixed, i % 2) {
                (0, _, _) => format!("SELECT a + {i} FROM s"),
                (_, true, 1) => format!("EXCEPT SELECT a + {i} FROM s"),
                _ => format!("UNION ALL SELECT a + {i} FROM s"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Shape::Joins { count } => {
            let joins = (1..=*count)
                .map(|i| format!("JOIN s AS t{i} ON t{i}.a = t0.a"))
                .collect::<Vec<_>>()
                .join(" ");
            format!("SELECT t0.a FROM s AS t0 {joins}")
        }
        Shape::Views { depth, twice } => {
            let mut views = String::from("CREATE VIEW v0 AS SELECT a FROM s;\n");
            for i in 1..*depth {
                let below = format!("SELECT a FROM v{}", i - 1);
                let body = match twice {
                    true => format!("{below} UNION ALL {below}"),
                    false => format!("SELECT a + 1 AS a FROM v{}", i - 1),
                };
                views.push_str(&format!("CREATE VIEW v{i} AS {body};\n"));
            }
            return format!("{TABLES}{views}INSERT INTO o SELECT a FROM v{};", depth - 1);
        }
        Shape::InList { values } => {
            let list = (0..*values).map(|i| i.to_string()).collect::<Vec<_>>();
            format!("SELECT a FROM s WHERE a IN ({})", list.join(", "))
        }
    };
    format!("{TABLES}INSERT INTO o {query};")
}

const TABLES: &str = "CREATE TABLE s (a BIGINT, b VARCHAR) WITH ('connector' = 'datagen');
CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');
";

/// 64 cases in CI (each plans up to a quarter of a million operators), unless
/// `PROPTEST_CASES` asks for more.
fn long_and_deep_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok());
    ProptestConfig {
        cases: cases.unwrap_or(64),
        ..eddy_common::fuzz::config("planner::long_and_deep_sql")
    }
}

proptest! {
    #![proptest_config(long_and_deep_config())]

    /// However long or deep a statement, planning it ends — in a plan or in an error that
    /// says where — and never overflows a stack (which would abort this test).
    #[test]
    fn long_and_deep_statements_plan_or_fail_with_a_location(shape in shape()) {
        let sql = shaped_script(&shape);
        if let Err(error) = eddy_planner::plan(&sql, &[], eddy_planner::PlanningContext::CHECKING) {
            let message = error.to_string();
            prop_assert!(says_where(&message), "an error without a location for {shape:?}: {message}");
        }
    }
}
