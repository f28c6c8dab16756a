//! The README's options tables, generated from the declarations: job options from
//! [`eddy_common::config::options::JOB_OPTIONS`], the daemons' from their clap fields. A
//! test keeps the README equal to them; `EDDY_BLESS=1 cargo test -p eddy options_doc`
//! rewrites the tables after a deliberate change.

use clap::CommandFactory;

use crate::Cli;

/// The README's generated tables: (marker, table).
fn tables() -> Vec<(&'static str, String)> {
    vec![
        ("job", eddy_common::config::options::markdown_table()),
        ("jobmanager", daemon_table("jobmanager")),
        ("taskmanager", daemon_table("taskmanager")),
    ]
}

/// The options of `eddy <name>` as a Markdown table: flag, environment variable, default,
/// meaning.
fn daemon_table(name: &str) -> String {
    let cli = Cli::command();
    let daemon = cli.find_subcommand(name).expect("the daemon's subcommand");
    let mut table = String::from(
        "| flag (and `--config` key) | environment | default | meaning |\n|---|---|---|---|\n",
    );
    for arg in daemon.get_arguments() {
        let Some(long) = arg.get_long().filter(|l| *l != "help") else {
            continue;
        };
        let mut flag = format!("`--{long}`");
        for alias in arg.get_all_aliases().unwrap_or_default() {
            flag.push_str(&format!(" (or `{alias}`)"));
        }
        let env = arg
            .get_env()
            .map_or(String::new(), |e| format!("`{}`", e.to_string_lossy()));
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| format!("`{}`", d.to_string_lossy()))
            .collect();
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map_or(String::new(), |h| h.to_string());
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        table.push_str(&format!(
            "| {flag} | {env} | {} | {help} |\n",
            defaults.join(", ")
        ));
    }
    table
}

/// `readme` with the table between `<!-- options:NAME -->` and `<!-- /options -->`
/// replaced; `None` when the markers are missing.
fn replace_table(readme: &str, name: &str, table: &str) -> Option<String> {
    let start_marker = format!("<!-- options:{name} -->\n");
    let start = readme.find(&start_marker)? + start_marker.len();
    let end = start + readme[start..].find("<!-- /options -->")?;
    Some(format!("{}{table}{}", &readme[..start], &readme[end..]))
}

#[test]
fn the_readme_options_tables_are_the_declarations() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let mut expected = readme.clone();
    for (name, table) in tables() {
        expected = replace_table(&expected, name, &table).unwrap_or_else(|| {
            panic!("README.md lacks <!-- options:{name} --> ... <!-- /options -->")
        });
    }
    if expected != readme && std::env::var_os("EDDY_BLESS").is_some() {
        std::fs::write(path, &expected).unwrap();
        return;
    }
    assert!(
        expected == readme,
        "README.md's options tables differ from the declarations; after a deliberate change \
         run EDDY_BLESS=1 cargo test -p eddy options_doc"
    );
}

#[test]
fn every_daemon_option_has_help_and_an_environment_variable() {
    for name in ["jobmanager", "taskmanager"] {
        let cli = Cli::command();
        let daemon = cli.find_subcommand(name).unwrap();
        for arg in daemon.get_arguments() {
            if arg.get_long() == Some("help") {
                continue;
            }
            assert!(
                arg.get_help().is_some(),
                "{name} {:?}: no help",
                arg.get_id()
            );
            assert!(
                arg.get_env().is_some(),
                "{name} {:?}: no variable",
                arg.get_id()
            );
        }
    }
}
