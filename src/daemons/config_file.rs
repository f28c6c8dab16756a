//! A daemon's `--config` TOML file, layered under its flags and environment variables.
//!
//! The file holds no options of its own: each key is the long name of one of the daemon's
//! flags (`checkpoint-dir = "s3://…"`), or one of its aliases (Flink's
//! `[high-availability] storageDir = …`, nested tables joined by dots). Its values are
//! handed to the same parser as the command line, so types, defaults and errors are the
//! flags' own; a value given on the command line or in the environment wins.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// The id of the option naming the file.
const CONFIG: &str = "config";

/// `matches` (parsed from `argv` by `command`) with the options of the running daemon's
/// `--config` file added where neither a flag nor an environment variable set them.
pub fn layer(command: Command, matches: ArgMatches, mut argv: Vec<OsString>) -> Result<ArgMatches> {
    let Some((name, given)) = matches.subcommand() else {
        return Ok(matches);
    };
    let Ok(Some(path)) = given.try_get_one::<std::path::PathBuf>(CONFIG) else {
        return Ok(matches);
    };
    let daemon = command
        .find_subcommand(name)
        .ok_or_else(|| anyhow!("no subcommand {name}"))?;
    let table = read(path)?;
    let mut file_args = Vec::new();
    for (key, value) in flatten(String::new(), table) {
        let arg = daemon
            .get_arguments()
            .find(|arg| names(arg).any(|n| n == key) && arg.get_id() != CONFIG)
            .ok_or_else(|| unknown_key(path, &key, daemon))?;
        let source = given.value_source(arg.get_id().as_str());
        if matches!(
            source,
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let long = arg.get_long().unwrap_or(&key);
        file_args.extend(arguments(long, arg, &value).with_context(|| at(path, &key))?);
    }
    argv.extend(file_args);
    command.try_get_matches_from(argv).map_err(|error| {
        let rendered = error.render().to_string();
        let message = rendered.trim_start_matches("error: ").trim_end();
        anyhow!("{}: {message}", path.display())
    })
}

/// The names a key of the file may have for `arg`: its long flag and its aliases.
fn names(arg: &clap::Arg) -> impl Iterator<Item = &str> {
    arg.get_long()
        .into_iter()
        .chain(arg.get_all_aliases().unwrap_or_default())
}

fn read(path: &Path) -> Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid configuration in {}", path.display()))
}

/// Every value of `table`, keyed by its dotted path below `prefix`.
fn flatten(prefix: String, table: toml::Table) -> Vec<(String, toml::Value)> {
    let mut flat = Vec::new();
    for (key, value) in table {
        let key = match prefix.is_empty() {
            true => key,
            false => format!("{prefix}.{key}"),
        };
        match value {
            toml::Value::Table(inner) => flat.extend(flatten(key, inner)),
            value => flat.push((key, value)),
        }
    }
    flat
}

/// The command-line arguments saying `value` for `arg`.
fn arguments(long: &str, arg: &clap::Arg, value: &toml::Value) -> Result<Vec<OsString>> {
    let flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
    Ok(match value {
        toml::Value::Boolean(set) if flag => match set {
            true => vec![format!("--{long}").into()],
            false => Vec::new(),
        },
        _ if flag => bail!("expected true or false"),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| Ok(format!("--{long}={}", scalar(item)?).into()))
            .collect::<Result<_>>()?,
        value => vec![format!("--{long}={}", scalar(value)?).into()],
    })
}

fn scalar(value: &toml::Value) -> Result<String> {
    Ok(match value {
        toml::Value::String(text) => text.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(t) => t.to_string(),
        toml::Value::Array(_) | toml::Value::Table(_) => bail!("expected a single value"),
    })
}

fn at(path: &Path, key: &str) -> String {
    format!("{}: '{key}'", path.display())
}

fn unknown_key(path: &Path, key: &str, daemon: &Command) -> anyhow::Error {
    let known: Vec<&str> = daemon
        .get_arguments()
        .filter(|arg| arg.get_id() != CONFIG)
        .filter_map(|arg| arg.get_long())
        .filter(|long| *long != "help")
        .collect();
    anyhow!(
        "{}: unknown option '{key}'; the keys of `eddy {}` are: {}",
        path.display(),
        daemon.get_name(),
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use crate::{Cli, Command};

    /// The command line `args` with a config file holding `toml`.
    fn parse(name: &str, toml: &str, args: &[&str]) -> anyhow::Result<Command> {
        let dir = std::env::temp_dir().join(format!("eddy-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, toml)?;
        let mut argv: Vec<std::ffi::OsString> = vec!["eddy".into()];
        argv.extend(args.iter().map(Into::into));
        argv.push(format!("--config={}", path.display()).into());
        let matches = Cli::command().try_get_matches_from(&argv)?;
        let layered = super::layer(Cli::command(), matches, argv);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(Cli::from_arg_matches(&layered?)?.command)
    }

    #[test]
    fn config_files_are_read_and_unknown_keys_rejected() {
        let toml = "slots = 4\njobmanager = \"http://jm:6123\"\nbind = \"0.0.0.0:6124\"\n";
        let Command::Taskmanager(args) = parse("good", toml, &["taskmanager"]).unwrap() else {
            panic!("a taskmanager command");
        };
        assert_eq!(args.slots, 4);
        assert_eq!(args.jobmanager, "http://jm:6123");
        assert_eq!(args.bind, Some("0.0.0.0:6124".parse().unwrap()));
        let error = parse("bad", "slot = 4\n", &["taskmanager"]).unwrap_err();
        let error = format!("{error:#}");
        assert!(
            error.contains("bad.toml") && error.contains("slot"),
            "{error}"
        );
    }

    #[test]
    fn flags_win_and_flink_style_tables_name_the_same_options() {
        let toml = "heartbeat-timeout-ms = 9000\ninsecure = true\n\
                    allowed-locations = [\"s3://a/\", \"/data\"]\n\
                    [high-availability]\ntype = \"object-store\"\nstorageDir = \"s3://ha/\"\n\
                    [high-availability.lease]\nduration = \"30s\"\n";
        let args = ["jobmanager", "--heartbeat-timeout-ms", "4000"];
        let Command::Jobmanager(args) = parse("jm", toml, &args).unwrap() else {
            panic!("a jobmanager command");
        };
        assert_eq!(args.heartbeat_timeout_ms, 4000, "the flag wins");
        assert_eq!(args.heartbeat_interval_ms, 500, "the declared default");
        assert!(args.security.insecure);
        assert_eq!(args.limits.allowed_locations, ["s3://a/", "/data"]);
        let ha = &args.high_availability;
        assert_eq!(ha.kind, "object-store");
        assert_eq!(ha.storage_dir.as_deref(), Some("s3://ha/"));
        assert_eq!(ha.lease_duration.to_string(), "30s");
        assert_eq!(ha.lease_renew_interval.to_string(), "2s");
    }

    #[test]
    fn a_bad_value_in_the_file_names_the_file_and_the_option() {
        let error = parse(
            "value",
            "heartbeat-interval-ms = \"soon\"\n",
            &["jobmanager"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("value.toml") && error.contains("heartbeat-interval-ms"),
            "{error}"
        );
        let error = parse("flag", "insecure = \"yes\"\n", &["jobmanager"]).unwrap_err();
        assert!(format!("{error:#}").contains("insecure"), "{error:#}");
    }
}
