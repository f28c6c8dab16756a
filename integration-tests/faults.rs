//! A fault-injecting TCP proxy for external systems (the S3 server): it forwards
//! connections until told to fail, and then answers new requests with HTTP 503, or holds
//! them unanswered, or cuts every open connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the proxy treats requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwards everything.
    Forward = 0,
    /// Answers every new connection `503 Service Unavailable` (as S3 does when it throttles).
    Errors = 1,
    /// Reads new connections' requests and never answers (a server that hangs).
    Stall = 2,
}

/// A proxy on a free loopback port, in front of `target`; stopped on drop.
pub struct FaultyProxy {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    mode: Arc<AtomicU8>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl FaultyProxy {
    /// Starts forwarding to `target` (`host:port`).
    pub fn start(target: &str) -> FaultyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let mode = Arc::new(AtomicU8::new(Mode::Forward as u8));
        let open = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (target, accept_mode, accept_open, accept_stop) =
            (target.to_string(), mode.clone(), open.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accept_stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                match accept_mode.load(Ordering::Relaxed) {
                    1 => answer_unavailable(client),
                    2 => stall(client, &accept_open),
                    _ => forward(client, &target, &accept_open),
                }
            }
        });
        FaultyProxy {
            endpoint,
            mode,
            open,
            stop,
        }
    }

    /// Treats new connections so from now on.
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// Cuts every open connection (requests in flight fail mid-way).
    pub fn cut(&self) {
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for FaultyProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cut();
        // Wake the accepting thread so that it sees the stop.
        let _ = TcpStream::connect(self.endpoint.trim_start_matches("http://"));
    }
}

fn answer_unavailable(mut client: TcpStream) {
    std::thread::spawn(move || {
        let mut request = [0u8; 4096];
        let _ = client.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = client.read(&mut request);
        let body = "<Error><Code>SlowDown</Code><Message>injected fault</Message></Error>";
        let _ = write!(
            client,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
}

fn stall(client: TcpStream, open: &Mutex<Vec<TcpStream>>) {
    // Held until cut, or dropped by the client's timeout.
    if let Ok(copy) = client.try_clone() {
        open.lock().unwrap().push(copy);
    }
    std::thread::spawn(move || {
        let mut sink = [0u8; 4096];
        let mut client = client;
        while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
    });
}

fn forward(client: TcpStream, target: &str, open: &Mutex<Vec<TcpStream>>) {
    let Ok(server) = TcpStream::connect(target) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
        let mut open = open.lock().unwrap();
        open.retain(|stream| stream.peer_addr().is_ok());
        open.push(c);
        open.push(s);
    }
    let (Ok(mut client_read), Ok(mut server_write)) = (client.try_clone(), server.try_clone())
    else {
        return;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(Shutdown::Write);
    });
    std::thread::spawn(move || {
        let (mut server, mut client) = (server, client);
        let _ = std::io::copy(&mut server, &mut client);
        let _ = client.shutdown(Shutdown::Write);
    });
}
