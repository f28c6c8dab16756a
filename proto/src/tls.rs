//! Transport security: a node's TLS material (its certificate and key, the cluster CA it
//! trusts) as tonic's server and client configurations and as an acceptor for the HTTP port.
//!
//! Inside a cluster TLS is mutual: TaskManagers serve only peers presenting a certificate
//! signed by the cluster CA, and the JobManager serves its `ResourceManager` only to such
//! peers (its `JobService` also takes clients without a certificate, who authenticate with
//! a token instead).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

/// How long a peer may take to finish its TLS handshake before its connection is dropped
/// (a peer that connects and says nothing holds no more than a socket for this long).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why TLS material could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} '{}': {source}", path.display())]
    Read {
        /// Which file it is (certificate, key, CA).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind expected.
    #[error("{what} '{}' holds no PEM {expected}: {detail}", path.display())]
    Pem {
        /// Which file it is.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What was looked for.
        expected: &'static str,
        /// What went wrong.
        detail: String,
    },
    /// rustls refused the combination (e.g. a key that does not match the certificate).
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// Options that only make sense together were given alone.
    #[error("{0}")]
    Incomplete(&'static str),
    /// tonic refused the server configuration.
    #[error("TLS: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl From<TlsError> for eddy_common::EddyError {
    fn from(error: TlsError) -> Self {
        eddy_common::EddyError::Config(error.to_string())
    }
}

/// Where a node's TLS files are: its certificate chain and key (PEM), and the CA
/// certificate(s) it trusts.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// The node's certificate chain.
    pub cert: Option<PathBuf>,
    /// The node's private key.
    pub key: Option<PathBuf>,
    /// The CA certificate(s) peers must be signed by.
    pub ca: Option<PathBuf>,
    /// The name to expect in servers' certificates instead of the host of the address
    /// dialled (for clusters whose nodes are reached by names their certificates lack).
    pub server_name: Option<String>,
}

impl TlsFiles {
    /// Whether any TLS option is set.
    pub fn is_set(&self) -> bool {
        self.cert.is_some() || self.key.is_some() || self.ca.is_some()
    }

    /// The material of a server (a daemon): certificate, key and CA are all needed.
    /// `None` when no option is set.
    pub fn load_server(&self) -> Result<Option<Tls>, TlsError> {
        if !self.is_set() {
            return Ok(None);
        }
        let (Some(_), Some(_), Some(ca)) = (&self.cert, &self.key, &self.ca) else {
            return Err(TlsError::Incomplete(
                "TLS needs all of --tls-cert, --tls-key and --tls-ca",
            ));
        };
        self.load(ca).map(Some)
    }

    /// The material of a client: the CA is needed, certificate and key are optional (a
    /// user's client authenticates with a token).
    pub fn load_client(&self) -> Result<Option<Tls>, TlsError> {
        if !self.is_set() {
            return Ok(None);
        }
        let Some(ca) = &self.ca else {
            return Err(TlsError::Incomplete(
                "TLS needs --tls-ca to verify the server",
            ));
        };
        if self.cert.is_some() != self.key.is_some() {
            return Err(TlsError::Incomplete("--tls-cert and --tls-key go together"));
        }
        self.load(ca).map(Some)
    }

    fn load(&self, ca_path: &Path) -> Result<Tls, TlsError> {
        let ca = read_pem("CA certificate", ca_path)?;
        check_certificates("CA certificate", ca_path, &ca)?;
        let identity = match (&self.cert, &self.key) {
            (Some(cert_path), Some(key_path)) => {
                let cert = read_pem("certificate", cert_path)?;
                check_certificates("certificate", cert_path, &cert)?;
                let key = read_pem("key", key_path)?;
                PrivateKeyDer::from_pem_slice(&key).map_err(|e| TlsError::Pem {
                    what: "key",
                    path: key_path.clone(),
                    expected: "private key",
                    detail: e.to_string(),
                })?;
                Some((cert, key))
            }
            _ => None,
        };
        // Built here, so that a key that does not match its certificate is reported at
        // start-up, not at the first connection.
        let acceptor = identity
            .as_ref()
            .map(|(cert, key)| https_acceptor(cert, key))
            .transpose()?;
        Ok(Tls {
            identity,
            ca,
            server_name: self.server_name.clone(),
            acceptor,
        })
    }
}

fn read_pem(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn check_certificates(what: &'static str, path: &Path, pem: &[u8]) -> Result<(), TlsError> {
    let error = |detail: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        expected: "certificate",
        detail,
    };
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| error(e.to_string()))?;
        count += 1;
    }
    match count {
        0 => Err(error("no CERTIFICATE section".into())),
        _ => Ok(()),
    }
}

/// A node's loaded TLS material.
#[derive(Clone)]
pub struct Tls {
    /// Certificate chain and key (PEM), for a server or a client that authenticates.
    identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The trusted CA certificate(s) (PEM).
    ca: Vec<u8>,
    server_name: Option<String>,
    /// The HTTP port's acceptor, with an identity.
    acceptor: Option<TlsAcceptor>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("identity", &self.identity.is_some())
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// Whether a gRPC server demands a client certificate of every peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Every peer must present a certificate signed by the CA (TaskManagers).
    Required,
    /// A peer without a certificate is let in (users' clients on the JobManager; the
    /// services meant for cluster members check [`peer_is_member`]); one with a
    /// certificate from another CA is still refused.
    Optional,
}

impl Tls {
    /// The configuration of a gRPC server.
    fn grpc_server(&self, clients: ClientAuth) -> ServerTlsConfig {
        let (cert, key) = self.identity.clone().unwrap_or_default();
        ServerTlsConfig::new()
            .identity(Identity::from_pem(cert, key))
            .client_ca_root(Certificate::from_pem(&self.ca))
            .client_auth_optional(clients == ClientAuth::Optional)
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// The configuration of a gRPC client dialling `host`.
    fn grpc_client(&self, host: &str) -> ClientTlsConfig {
        let name = self.server_name.as_deref().unwrap_or(host);
        let mut config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .domain_name(name)
            .timeout(HANDSHAKE_TIMEOUT);
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        config
    }

    /// The acceptor of an HTTP port (server authentication only: HTTP clients
    /// authenticate with tokens); `None` without a certificate and key.
    pub fn acceptor(&self) -> Option<TlsAcceptor> {
        self.acceptor.clone()
    }
}

/// An HTTPS acceptor presenting the certificate chain `cert` with `key` (PEM).
fn https_acceptor(cert: &[u8], key: &[u8]) -> Result<TlsAcceptor, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| rustls::Error::General(e.to_string()))?;
    let key =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| rustls::Error::General(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A gRPC server builder, over TLS with `tls` (asking peers for certificates as `clients`
/// says) or in plain text.
pub fn server(tls: Option<&Tls>, clients: ClientAuth) -> Result<Server, TlsError> {
    let builder = Server::builder();
    Ok(match tls {
        Some(tls) => builder.tls_config(tls.grpc_server(clients))?,
        None => builder,
    })
}

/// The gRPC endpoint of `address` (`http://host:port`, `https://host:port` or `host:port`),
/// over TLS when `tls` is given (the scheme becomes `https`) and in plain text otherwise.
pub fn endpoint(address: &str, tls: Option<&Tls>) -> Result<Endpoint, tonic::transport::Error> {
    let rest = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
        .unwrap_or(address);
    let endpoint = match tls {
        Some(tls) => {
            let host = rest.rsplit_once(':').map_or(rest, |(host, _)| host);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Endpoint::from_shared(format!("https://{rest}"))?.tls_config(tls.grpc_client(host))?
        }
        None => Endpoint::from_shared(format!("http://{rest}"))?,
    };
    Ok(endpoint)
}

/// The URL scheme of Eddy's ports: `https` with TLS, `http` without.
pub fn scheme(tls: Option<&Tls>) -> &'static str {
    match tls {
        Some(_) => "https",
        None => "http",
    }
}

/// Whether a request came over a connection whose peer presented a certificate signed by
/// the cluster CA (the handshake verified it); always true when the server runs without
/// TLS (there is nothing to check: such a cluster trusts its network).
pub fn peer_is_member<T>(request: &tonic::Request<T>, tls: bool) -> bool {
    !tls || request.peer_certs().is_some_and(|certs| !certs.is_empty())
}
