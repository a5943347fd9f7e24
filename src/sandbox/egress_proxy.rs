//! The host's side of `sandbox.network = { allow: [...] }`: an HTTP proxy, one per kernel,
//! that reaches the listed hosts from the host's network, and nothing else.
//!
//! A kernel with an allow list has a network namespace of its own with only loopback up,
//! so nothing in it can reach out. Its set-up code listens on 127.0.0.1:3128 inside that
//! namespace and hands the listener to the host, which serves it with [`serve`] (no host
//! port is opened); the kernel's `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` name that
//! address. A cell's pip, requests or curl then ask this proxy, and the proxy asks the
//! allow list (`allow_list.rs`):
//!
//! - `CONNECT host:port` (HTTPS, or any TCP a proxy-aware client tunnels): admitted, the
//!   proxy connects from the host and relays bytes both ways until both sides close;
//! - `GET http://host/path` (plain HTTP, any method): admitted, the request goes on in
//!   origin-form with `Connection: close` (`egress_proxy/request.rs`), then the rest is
//!   relayed the same way;
//! - refused: `403` with a line that says what was refused and how the host can allow it,
//!   and `on_denied` once, so the host can tell the agent as well.
//!
//! The list is asked about the host the client named, and the proxy resolves that name
//! on the host: what a listed name resolves to is reached, whatever it is.
//!
//! Bounded wherever a cell could make the host hold more: connections at once (past
//! them, a `503`), a request head's size and the time it may take to arrive, the relay's
//! buffers, the wait for an upstream connection, and what is read and dropped after a
//! refusal. A relay itself has no time limit (a long download, a websocket): what idle
//! relays can hold is bounded by the number of connections.
//!
//! Cancel safety: dropping the future of [`serve`] (aborting its task) ends every
//! connection it accepted. They are tasks of a `JoinSet` the future owns, and their
//! sockets close with them.

mod request;

/// Where the proxy listens inside a kernel's network namespace (squid's port, the usual
/// one for a proxy): the namespace is the kernel's own, so the port is free.
pub const KERNEL_PORT: u16 = 3128;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::timeout;

use crate::sandbox::allow_list::{AllowList, RemoteHost, Verdict};
use request::Request;

/// A request the allow list refused, as the host hears of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// As the client asked, normalised: lowercase without a trailing dot, an address as
    /// written before `:port` (`[::1]` for IPv6).
    pub host: String,
    pub port: u16,
    pub why: DeniedWhy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeniedWhy {
    /// No entry names the host.
    NotListed,
    /// Entries name the host, for other ports.
    PortNotAllowed,
}

/// The bounds on what one proxy takes from the host.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Connections served at once; past them a client gets a `503`.
    connections: usize,
    /// A request head's size, its blank line included.
    head_bytes: usize,
    /// How long a client has to send a whole head once connected.
    head_time: Duration,
    /// How long resolving and connecting upstream may take, every address included.
    connect_time: Duration,
}

impl Limits {
    const DEFAULT: Limits = Limits {
        connections: 256,
        head_bytes: 64 * 1024,
        head_time: Duration::from_secs(30),
        connect_time: Duration::from_secs(10),
    };
}

/// Each way's buffer in a relay: as fast as a direct fetch over loopback (8 KiB, tokio's
/// default, is not), at 128 KiB a connection.
const RELAY_BUFFER: usize = 64 * 1024;

/// A head is read in pieces of this size first, grown up to the limit only for a client
/// that sends a larger one.
const FIRST_READ: usize = 4 * 1024;

/// Clients past the connection limit that are told so at once; past these, their
/// connection is closed unanswered.
const BUSY_REFUSALS: usize = 32;

/// How long a refusal may take to write.
const WRITE_TIME: Duration = Duration::from_secs(10);

/// After a refusal, how long and how much of what the client still sends is read and
/// dropped before the proxy closes (see [`finish`]).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: u64 = 1024 * 1024;

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection Established\r\n\r\n";

#[derive(Debug, Clone, Copy)]
struct Status(u16, &'static str);

const BAD_REQUEST: Status = Status(400, "Bad Request");
const FORBIDDEN: Status = Status(403, "Forbidden");
const REQUEST_TIMEOUT: Status = Status(408, "Request Timeout");
const BAD_GATEWAY: Status = Status(502, "Bad Gateway");
const SERVICE_UNAVAILABLE: Status = Status(503, "Service Unavailable");

/// Serves `listener` (the kernel's 127.0.0.1:3128) as the kernel's proxy: admits what
/// `allow` lists, calls `on_denied` once for each request it refuses (on the
/// connection's task: it should return at once). Runs until the listener fails, then
/// until the connections in flight end; the owner aborts it when the kernel ends, which
/// ends those connections too.
pub async fn serve(
    listener: TcpListener,
    allow: Arc<AllowList>,
    on_denied: Arc<dyn Fn(Denied) + Send + Sync>,
) {
    serve_with(listener, allow, on_denied, Limits::DEFAULT).await
}

async fn serve_with(
    listener: TcpListener,
    allow: Arc<AllowList>,
    on_denied: Arc<dyn Fn(Denied) + Send + Sync>,
    limits: Limits,
) {
    let room = Arc::new(Semaphore::new(limits.connections));
    let busy_refusals = Arc::new(Semaphore::new(BUSY_REFUSALS));
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // Ended connections are reaped as they end, so the set holds only live ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let client = match accepted {
            Ok((client, _)) => client,
            Err(e) if out_of_resources(&e) => {
                // The host is out of descriptors or memory: wait for some to be freed
                // rather than spin, and keep serving.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            // A client that gave up before it was accepted.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => {
                tracing::warn!("the kernel's egress proxy stops accepting: {e}");
                break;
            }
        };
        if let Ok(place) = room.clone().try_acquire_owned() {
            let (allow, on_denied) = (allow.clone(), on_denied.clone());
            connections.spawn(async move {
                connection(client, &allow, &*on_denied, limits).await;
                drop(place);
            });
        } else if let Ok(place) = busy_refusals.clone().try_acquire_owned() {
            let why = format!(
                "the proxy is serving {} connections, its most; retry once some have closed",
                limits.connections
            );
            connections.spawn(async move {
                refuse(client, SERVICE_UNAVAILABLE, &why).await;
                drop(place);
            });
        }
        // Else the client is dropped: closed unanswered.
    }
    while connections.join_next().await.is_some() {}
}

fn out_of_resources(e: &io::Error) -> bool {
    use nix::libc;
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// One client: its request read, checked, and answered or relayed.
async fn connection(
    mut client: TcpStream,
    allow: &AllowList,
    on_denied: &(dyn Fn(Denied) + Send + Sync),
    limits: Limits,
) {
    let head = match timeout(limits.head_time, read_head(&mut client, limits.head_bytes)).await {
        Ok(Ok(head)) => head,
        Ok(Err(HeadError::TooLarge)) => {
            let why = format!(
                "bad request: its head is larger than {} bytes",
                limits.head_bytes
            );
            return refuse(client, BAD_REQUEST, &why).await;
        }
        // Closed (or failed) before a whole head: there is no one to answer.
        Ok(Err(HeadError::Closed)) => return,
        Err(_) => {
            let why = format!(
                "no whole request head within {} s",
                limits.head_time.as_secs_f32()
            );
            return refuse(client, REQUEST_TIMEOUT, &why).await;
        }
    };
    let request = match request::parse(head.head()) {
        Ok(request) => request,
        Err(why) => return refuse(client, BAD_REQUEST, &format!("bad request: {why}")).await,
    };
    let (host, port) = request.destination();
    let verdict = allow.admits_host(host, port);
    let why = match verdict {
        Verdict::Admitted => None,
        Verdict::NotListed => Some(DeniedWhy::NotListed),
        Verdict::PortNotAllowed { .. } => Some(DeniedWhy::PortNotAllowed),
    };
    if let Some(why) = why {
        let message = denial(allow, host, port, &verdict);
        respond(&mut client, FORBIDDEN, &message, true).await;
        on_denied(Denied {
            host: host.to_string(),
            port,
            why,
        });
        return finish(client).await;
    }
    let upstream = match timeout(limits.connect_time, connect(host, port)).await {
        Ok(Ok(upstream)) => upstream,
        Ok(Err(e)) => {
            let why = format!("could not connect to {host}:{port}: {e}");
            return refuse(client, BAD_GATEWAY, &why).await;
        }
        Err(_) => {
            let why = format!(
                "could not connect to {host}:{port}: no connection within {} s",
                limits.connect_time.as_secs_f32()
            );
            return refuse(client, BAD_GATEWAY, &why).await;
        }
    };
    relay(client, upstream, &request, head.rest()).await;
}

/// A request head as read: the head, and what the client sent after it.
struct Head {
    buf: Vec<u8>,
    end: usize,
}

impl Head {
    fn head(&self) -> &[u8] {
        &self.buf[..self.end]
    }

    /// Bytes sent right after the head, before any answer: a pipelined TLS ClientHello,
    /// the start of a request body.
    fn rest(&self) -> &[u8] {
        &self.buf[self.end..]
    }
}

#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    TooLarge,
    Closed,
}

/// Reads until a head's blank line, asking `reader` for at most `limit` bytes in all.
///
/// Cancel safety: what was read is lost with the future (the caller then closes).
async fn read_head<R: AsyncRead + Unpin>(reader: &mut R, limit: usize) -> Result<Head, HeadError> {
    let mut buf = vec![0; limit.min(FIRST_READ)];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            if filled >= limit {
                return Err(HeadError::TooLarge);
            }
            buf.resize((filled * 2).clamp(1, limit), 0);
        }
        let n = match reader.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => return Err(HeadError::Closed),
            Ok(n) => n,
        };
        let from = filled;
        filled += n;
        if let Some(end) = request::head_end(&buf[..filled], from) {
            buf.truncate(filled);
            return Ok(Head { buf, end });
        }
    }
}

/// Resolves `host` on the host and connects to the first of its addresses that answers.
async fn connect(host: &RemoteHost, port: u16) -> io::Result<TcpStream> {
    let addresses: Vec<SocketAddr> = match host {
        RemoteHost::Name(name) => tokio::net::lookup_host((name.as_str(), port))
            .await?
            .collect(),
        RemoteHost::V4(address) => vec![(*address, port).into()],
        RemoteHost::V6(address) => vec![(*address, port).into()],
    };
    let mut failure = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(upstream) => return Ok(upstream),
            Err(e) => failure = io::Error::new(e.kind(), format!("{e} (at {address})")),
        }
    }
    Err(failure)
}

/// Opens the way (a tunnel's `200`, or the rewritten head to the origin), forwards what
/// the client sent after its head, then copies both ways until both sides have closed.
async fn relay(mut client: TcpStream, mut upstream: TcpStream, request: &Request, rest: &[u8]) {
    // A relay must not hold back a small write (a TLS handshake's) for Nagle's algorithm.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let opened = match request {
        Request::Tunnel { .. } => client.write_all(ESTABLISHED).await,
        Request::Forward { head, .. } => upstream.write_all(head).await,
    };
    if opened.is_err() || upstream.write_all(rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        RELAY_BUFFER,
        RELAY_BUFFER,
    )
    .await;
}

/// The 403's text: what was refused, what the list holds, and what the host can do.
fn denial(allow: &AllowList, host: &RemoteHost, port: u16, verdict: &Verdict) -> String {
    let listed = match allow.is_empty() {
        true => "which is empty".to_string(),
        false => allow.to_string(),
    };
    match verdict {
        Verdict::PortNotAllowed { allowed } => format!(
            "{host}:{port} is not on this kernel's network allow list ({listed}): its entries for {host} admit {} only; the host can allow this one with the entry {host}:{port} in sandbox.network.allow",
            ports_in_words(allowed)
        ),
        _ => format!(
            "{host}:{port} is not on this kernel's network allow list ({listed}); the host can add it to sandbox.network.allow"
        ),
    }
}

/// `port 8080`, `ports 80 and 443`, `ports 80, 443 and 9000`.
fn ports_in_words(ports: &[u16]) -> String {
    match ports {
        [one] => format!("port {one}"),
        [init @ .., last] => {
            let init: Vec<String> = init.iter().map(u16::to_string).collect();
            format!("ports {} and {last}", init.join(", "))
        }
        [] => "no port".to_string(),
    }
}

/// Answers `status` with a line of text, then closes.
async fn refuse(mut client: TcpStream, status: Status, why: &str) {
    respond(&mut client, status, why, false).await;
    finish(client).await;
}

/// Writes `status` with `why` as its text body (`X-Pykernel-Denied: 1` for the allow
/// list's refusals, which a client or a test can tell from the proxy's other errors).
async fn respond(client: &mut TcpStream, status: Status, why: &str, denied: bool) {
    let Status(code, reason) = status;
    let body = format!("pykernel sandbox: {why}\n");
    let denied = match denied {
        true => "X-Pykernel-Denied: 1\r\n",
        false => "",
    };
    let response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n{denied}\r\n{body}",
        body.len()
    );
    let _ = timeout(WRITE_TIME, client.write_all(response.as_bytes())).await;
}

/// Closes a connection after a refusal. Closing a socket with unread bytes (a request
/// body the proxy never wanted) sends a reset, which can make the client drop the
/// refusal before reading it; so the proxy first ends its side and reads and drops what
/// still comes, for a moment and up to a bound.
async fn finish(mut client: TcpStream) {
    if client.shutdown().await.is_err() {
        return;
    }
    let mut unread = (&mut client).take(LINGER_BYTES);
    let _ = timeout(
        LINGER_TIME,
        tokio::io::copy(&mut unread, &mut tokio::io::sink()),
    )
    .await;
}

#[cfg(test)]
mod tests;
