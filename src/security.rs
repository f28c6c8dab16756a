//! The command line's security options: TLS files, tokens, what jobs may do, and the rule
//! that only a secured daemon listens beyond loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::Args;
use eddy_jobmanager::policy::{self, SubmitPolicy};
use eddy_proto::auth::{Guard, Tokens};
use eddy_proto::tls::{Tls, TlsFiles};

/// TLS options, shared by the daemons and the client commands.
#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// This node's certificate chain (PEM). Daemons: turns TLS on (with --tls-key and
    /// --tls-ca). Clients: optional, to present a certificate.
    #[arg(long, env = "EDDY_TLS_CERT", value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "EDDY_TLS_KEY", value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// The cluster CA (PEM): peers must present certificates it signed, and servers are
    /// verified against it.
    #[arg(long, env = "EDDY_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// The name servers' certificates must carry, instead of the host dialled (for nodes
    /// reached by names their certificates lack, e.g. containers' hostnames).
    #[arg(long, env = "EDDY_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    fn files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
            server_name: self.tls_server_name.clone(),
        }
    }

    /// A daemon's TLS: certificate, key and CA, or none of them.
    pub fn server(&self) -> Result<Option<Tls>> {
        Ok(self.files().load_server()?)
    }

    /// A client's TLS: a CA, and optionally a certificate and key.
    pub fn client(&self) -> Result<Option<Tls>> {
        Ok(self.files().load_client()?)
    }
}

/// What a JobManager lets submitted jobs do.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Where jobs may read and write (table paths, checkpoint and savepoint directories,
    /// `${file:}` secrets), as comma-separated path or s3://bucket/prefix prefixes (without
    /// it: anywhere).
    #[arg(
        long,
        env = "EDDY_ALLOWED_LOCATIONS",
        value_delimiter = ',',
        value_name = "PREFIX"
    )]
    pub allowed_locations: Vec<String>,
    /// Connectors jobs may not use, comma-separated (e.g. filesystem,postgres).
    #[arg(
        long,
        env = "EDDY_FORBIDDEN_CONNECTORS",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub forbidden_connectors: Vec<String>,
    /// The largest SQL script taken, in bytes.
    #[arg(long, env = "EDDY_MAX_SQL_BYTES", default_value_t = policy::MAX_SQL_BYTES)]
    pub max_sql_bytes: usize,
    /// The largest parallelism of any operator.
    #[arg(long, env = "EDDY_MAX_PARALLELISM", default_value_t = policy::MAX_PARALLELISM)]
    pub max_parallelism: usize,
    /// Unfinished jobs one user (token) may have (without it: unlimited).
    #[arg(long, env = "EDDY_MAX_JOBS_PER_USER")]
    pub max_jobs_per_user: Option<usize>,
    /// The prefix of the TaskManagers' environment variables jobs may name in
    /// `${env:NAME}` ('' for any).
    #[arg(long, env = "EDDY_SECRET_ENV_PREFIX", default_value = policy::SECRET_ENV_PREFIX)]
    pub secret_env_prefix: String,
}

impl LimitArgs {
    /// The policy they make.
    pub fn policy(self) -> Result<SubmitPolicy> {
        if self.allowed_locations.iter().any(|l| l.trim().is_empty()) {
            bail!("--allowed-locations: an empty prefix would allow everything");
        }
        Ok(SubmitPolicy {
            max_sql_bytes: self.max_sql_bytes,
            max_parallelism: self.max_parallelism,
            max_jobs_per_user: self.max_jobs_per_user,
            allowed_locations: (!self.allowed_locations.is_empty())
                .then_some(self.allowed_locations),
            forbidden_connectors: self.forbidden_connectors,
            allow_literal_secrets: false,
            secret_env_prefix: self.secret_env_prefix,
        })
    }
}

/// The guard of a daemon given `token_file`.
pub fn guard(token_file: Option<&Path>) -> Result<Guard> {
    let Some(path) = token_file else {
        return Ok(Guard::new(None));
    };
    let tokens = Tokens::load(path)?;
    if tokens.is_empty() {
        bail!(
            "token file '{}' has no entries: add one with `eddy token NAME --append {0}`",
            path.display()
        );
    }
    Ok(Guard::new(Some(tokens)))
}

/// What a daemon's listening addresses may be, given how it is secured.
pub struct Exposure {
    /// TLS is on.
    pub tls: bool,
    /// Users must present tokens (a JobManager; a TaskManager has no users' API, so this is
    /// true for it).
    pub tokens: bool,
    /// `--insecure`: plain text or token-less on other interfaces, knowingly.
    pub insecure: bool,
}

impl Exposure {
    /// Whether the daemon may listen beyond loopback.
    fn secured(&self) -> bool {
        (self.tls && self.tokens) || self.insecure
    }

    /// The address to listen on: `given`, or `port` on every interface when secured and on
    /// loopback otherwise (saying so). An address beyond loopback is refused unless
    /// secured.
    pub fn bind(&self, what: &str, given: Option<SocketAddr>, port: u16) -> Result<SocketAddr> {
        let address = match given {
            Some(address) => address,
            None if self.secured() => SocketAddr::from(([0, 0, 0, 0], port)),
            None => {
                let address = SocketAddr::from(([127, 0, 0, 1], port));
                tracing::warn!(
                    %address,
                    "{what}: listening on loopback only, since {}; other hosts cannot connect (pass --bind with --insecure to allow them anyway)",
                    self.missing()
                );
                address
            }
        };
        self.check(what, address)?;
        Ok(address)
    }

    /// Refuses `address` beyond loopback unless secured.
    pub fn check(&self, what: &str, address: SocketAddr) -> Result<()> {
        if address.ip().is_loopback() || (self.tls && self.tokens) {
            return Ok(());
        }
        if self.insecure {
            tracing::warn!(%address, "{what}: --insecure: serving other hosts although {}", self.missing());
            return Ok(());
        }
        bail!(
            "{what}: refusing to listen on {address}, beyond loopback, since {}: configure TLS \
             (--tls-cert, --tls-key, --tls-ca) and tokens (--token-file), or pass --insecure",
            self.missing()
        )
    }

    fn missing(&self) -> &'static str {
        match (self.tls, self.tokens) {
            (false, false) => "neither TLS nor tokens are configured",
            (false, true) => "TLS is not configured",
            (true, false) => "no tokens are configured",
            (true, true) => "nothing is missing",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposure(tls: bool, tokens: bool, insecure: bool) -> Exposure {
        Exposure {
            tls,
            tokens,
            insecure,
        }
    }

    #[test]
    fn only_a_secured_daemon_listens_beyond_loopback() {
        let any: SocketAddr = "0.0.0.0:6123".parse().unwrap();
        let loopback: SocketAddr = "127.0.0.1:6123".parse().unwrap();
        assert_eq!(
            exposure(false, false, false)
                .bind("jm", None, 6123)
                .unwrap(),
            loopback
        );
        assert_eq!(
            exposure(true, false, false).bind("jm", None, 6123).unwrap(),
            loopback
        );
        assert_eq!(
            exposure(true, true, false).bind("jm", None, 6123).unwrap(),
            any
        );
        assert_eq!(
            exposure(false, false, true).bind("jm", None, 6123).unwrap(),
            any
        );
        let error = exposure(false, true, false).check("jm", any).unwrap_err();
        assert!(
            error.to_string().contains("TLS is not configured"),
            "{error}"
        );
        assert!(exposure(false, false, false).check("jm", loopback).is_ok());
        assert!(exposure(false, false, true).check("jm", any).is_ok());
    }
}
