//! The listener of a daemon's HTTP port, in plain text or TLS, for `axum::serve`.
//!
//! TLS handshakes run in their own tasks, each bounded by [`HANDSHAKE_TIMEOUT`], so a peer
//! that connects and stays silent never holds up the connections behind it.

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::tls::HANDSHAKE_TIMEOUT;

/// Handshaken connections waiting for the server to take them.
const READY_CONNECTIONS: usize = 64;

/// A bound HTTP port: plain TCP, or TLS over TCP.
pub enum HttpListener {
    /// Plain HTTP.
    Plain(TcpListener),
    /// HTTPS: connections arrive after their handshake.
    Tls {
        /// The bound address.
        local: SocketAddr,
        /// Connections whose handshake succeeded.
        ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    },
}

impl HttpListener {
    /// Serves `listener`, over TLS when `acceptor` is given.
    pub fn new(listener: TcpListener, acceptor: Option<TlsAcceptor>) -> io::Result<Self> {
        let Some(acceptor) = acceptor else {
            return Ok(HttpListener::Plain(listener));
        };
        let local = listener.local_addr()?;
        let (sender, ready) = mpsc::channel(READY_CONNECTIONS);
        tokio::spawn(accept_tls(listener, acceptor, sender));
        Ok(HttpListener::Tls { local, ready })
    }
}

/// Accepts connections and hands each one's handshake to a task of its own, until the
/// server drops its end.
async fn accept_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::debug!(%error, "http accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = ready.closed() => return,
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(error)) => tracing::debug!(%peer, %error, "https handshake failed"),
                Err(_) => tracing::debug!(%peer, "https handshake timed out"),
            }
        });
    }
}

/// A connection of an [`HttpListener`].
pub enum HttpIo {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl axum::serve::Listener for HttpListener {
    type Io = HttpIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (HttpIo, SocketAddr) {
        match self {
            HttpListener::Plain(listener) => {
                let (stream, peer) = axum::serve::Listener::accept(listener).await;
                (HttpIo::Plain(stream), peer)
            }
            HttpListener::Tls { ready, .. } => match ready.recv().await {
                Some((stream, peer)) => (HttpIo::Tls(Box::new(stream)), peer),
                // The accepting task only ends when this side is dropped.
                None => std::future::pending().await,
            },
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            HttpListener::Plain(listener) => listener.local_addr(),
            HttpListener::Tls { local, .. } => Ok(*local),
        }
    }
}

macro_rules! delegate_io {
    ($self:ident, $io:ident => $body:expr) => {
        match $self.get_mut() {
            HttpIo::Plain($io) => {
                let $io = std::pin::Pin::new($io);
                $body
            }
            HttpIo::Tls($io) => {
                let $io = std::pin::Pin::new($io.as_mut());
                $body
            }
        }
    };
}

impl tokio::io::AsyncRead for HttpIo {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        delegate_io!(self, io => io.poll_read(cx, buf))
    }
}

impl tokio::io::AsyncWrite for HttpIo {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        delegate_io!(self, io => io.poll_write(cx, buf))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        delegate_io!(self, io => io.poll_flush(cx))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        delegate_io!(self, io => io.poll_shutdown(cx))
    }
}
