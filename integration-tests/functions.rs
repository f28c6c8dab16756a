//! Flink's built-in functions with Flink's answers: every expression of
//! `functions/cases.sql`, cast to STRING and run by `eddy run`, gives Apache Flink's answer
//! (`functions/flink_answers.tsv`, written by `bench/flink/function_answers.py`), or, if it
//! is listed in [`REFUSED`], is refused with an error. A different answer is the failure
//! this test exists for.

use crate::support::{Scratch, eddy};

/// Expressions Eddy does not evaluate as Flink does yet, and refuses instead of answering
/// differently. One that starts to work must leave this list.
const REFUSED: &[&str] = &[];

/// Expressions Eddy still answers differently, each with why. This list is the record of
/// known differences (the test fails if one starts to answer as Flink: take it off); it
/// must only shrink.
const KNOWN_DIFFERENT: &[(&str, &str)] = &[];

/// Flink's answer to each expression, in the order of the cases.
fn flink_answers() -> Vec<(String, String)> {
    include_str!("functions/flink_answers.tsv")
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (expression, answer) = line.split_once('\t').expect("expression<TAB>answer");
            (expression.to_string(), answer.to_string())
        })
        .collect()
}

/// What `eddy run` makes of `expression`: its value as the print sink shows it (`null` for
/// NULL), or the error it fails with.
fn eddy_answer(scratch: &Scratch, index: usize, expression: &str) -> Result<String, String> {
    let script = format!(
        "CREATE TABLE one (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
         CREATE TABLE answer (v STRING) WITH ('connector' = 'print');
         INSERT INTO answer SELECT CAST(({expression}) AS STRING) FROM one;"
    );
    let file = scratch.write(&format!("case-{index}.sql"), &script);
    let output = eddy().arg("run").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    let line = stdout.lines().next().unwrap_or_default();
    let value = line
        .split_once("+I[")
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("unexpected output for {expression}: {stdout}"));
    Ok(value.to_string())
}

/// Flink's answer as the print sink shows it.
fn printed(answer: &str) -> String {
    match answer {
        "NULL" => "null".to_string(),
        other => other.replace("\\t", "\t").replace("\\n", "\n"),
    }
}

#[test]
fn built_in_functions_give_flinks_answers_or_an_error() {
    let scratch = Scratch::new("functions");
    let answers = flink_answers();
    assert!(answers.len() >= 100, "the cases are missing");
    let mut wrong = Vec::new();
    let mut refused = Vec::new();
    let mut known_different = Vec::new();
    for (index, (expression, flink)) in answers.iter().enumerate() {
        if flink.starts_with("ERROR") {
            continue;
        }
        let expected = printed(flink);
        let known = KNOWN_DIFFERENT.iter().find(|(e, _)| e == expression);
        match (eddy_answer(&scratch, index, expression), known) {
            (Ok(value), Some(_)) if value == expected => {
                wrong.push(format!(
                    "{expression}: now answers as Flink; take it off KNOWN_DIFFERENT"
                ));
            }
            (Ok(value), Some((_, why))) => {
                known_different.push(format!(
                    "{expression}: Flink {expected:?}, Eddy {value:?} ({why})"
                ));
            }
            (answer, _) => match answer {
                Ok(value) if value == expected => {
                    if REFUSED.contains(&expression.as_str()) {
                        wrong.push(format!(
                            "{expression}: now answers as Flink; take it off REFUSED"
                        ));
                    }
                }
                Ok(value) => {
                    wrong.push(format!("{expression}: Flink {expected:?}, Eddy {value:?}"))
                }
                Err(error) if REFUSED.contains(&expression.as_str()) => {
                    refused.push(format!("{expression}: {error}"));
                }
                Err(error) => wrong.push(format!(
                    "{expression}: Flink {expected:?}, Eddy failed: {error}"
                )),
            },
        }
    }
    eprintln!("known to differ:\n  {}", known_different.join("\n  "));
    eprintln!("refused as not supported yet:\n  {}", refused.join("\n  "));
    assert!(
        wrong.is_empty(),
        "{} of {} expressions differ from Flink:\n  {}",
        wrong.len(),
        answers.len(),
        wrong.join("\n  ")
    );
}
