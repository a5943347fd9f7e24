//! The proxy over loopback: a listener of the test's own served by it, origins of the
//! test's own behind it, and clients that speak to it as a kernel's would.

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::*;

/// What a test waits for at most: a hang fails the test instead of stalling the suite.
/// Never a measure of speed.
async fn guard<F: Future>(what: &str, future: F) -> F::Output {
    timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no end within 30 s"))
}

struct Proxy {
    address: SocketAddr,
    task: JoinHandle<()>,
    denied: Arc<Mutex<Vec<Denied>>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    fn denied(&self) -> Vec<Denied> {
        self.denied.lock().unwrap().clone()
    }
}

async fn proxy(allow: &[String]) -> Proxy {
    proxy_with(allow, Limits::DEFAULT).await
}

async fn proxy_with(allow: &[String], limits: Limits) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let allow = Arc::new(AllowList::parse(allow).unwrap());
    let denied = Arc::new(Mutex::new(Vec::new()));
    let seen = denied.clone();
    let on_denied = Arc::new(move |d: Denied| seen.lock().unwrap().push(d));
    let task = tokio::spawn(serve_with(listener, allow, on_denied, limits));
    Proxy {
        address,
        task,
        denied,
    }
}

/// A request an origin got: its head, and its body (as long as its Content-Length).
#[derive(Debug)]
struct Received {
    head: String,
    body: Vec<u8>,
}

/// An origin that answers each request with `answer` and the request's body, then
/// closes, and tells what it got.
async fn http_origin(answer: &'static str) -> (u16, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let head = read_head(&mut stream, 64 * 1024).await.unwrap();
            let text = String::from_utf8_lossy(head.head()).into_owned();
            let length = text
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|n| n.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            let mut body = head.rest().to_vec();
            let missing = length.saturating_sub(body.len());
            let mut more = vec![0; missing];
            stream.read_exact(&mut more).await.unwrap();
            body.extend(more);
            let answer = [answer.as_bytes(), &body].concat();
            let mut response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                answer.len()
            )
            .into_bytes();
            response.extend(answer);
            let _ = tx.send(Received {
                head: text,
                body: body.clone(),
            });
            stream.write_all(&response).await.unwrap();
        }
    });
    (port, rx)
}

/// An origin that echoes each connection until the client ends its side, and says
/// when a connection has ended.
async fn echo_origin() -> (u16, mpsc::UnboundedReceiver<()>) {
    echo_origin_on("127.0.0.1:0").await.unwrap()
}

async fn echo_origin_on(address: &str) -> io::Result<(u16, mpsc::UnboundedReceiver<()>)> {
    let listener = TcpListener::bind(address).await?;
    let port = listener.local_addr()?.port();
    let (ended, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let ended = ended.clone();
            tokio::spawn(async move {
                let (mut from, mut to) = stream.into_split();
                let _ = tokio::io::copy(&mut from, &mut to).await;
                let _ = to.shutdown().await;
                let _ = ended.send(());
            });
        }
    });
    Ok((port, rx))
}

/// A port nothing listens on (it did, a moment ago).
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// Sends `request` and reads the answer to its end.
async fn ask(proxy: &Proxy, request: &[u8]) -> String {
    let mut client = TcpStream::connect(proxy.address).await.unwrap();
    client.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    guard("the answer", client.read_to_end(&mut answer))
        .await
        .unwrap();
    String::from_utf8(answer).unwrap()
}

/// Opens a tunnel to `target`, sending `early` with the CONNECT head.
async fn tunnel(proxy: &Proxy, target: &str, early: &[u8]) -> TcpStream {
    let mut client = TcpStream::connect(proxy.address).await.unwrap();
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").into_bytes();
    request.extend_from_slice(early);
    client.write_all(&request).await.unwrap();
    let mut answer = vec![0; ESTABLISHED.len()];
    guard("the tunnel's 200", client.read_exact(&mut answer))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&answer),
        String::from_utf8_lossy(ESTABLISHED)
    );
    client
}

async fn read_n(client: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0; n];
    guard("the echo", client.read_exact(&mut got))
        .await
        .unwrap();
    got
}

fn entries(entries: &[&str]) -> Vec<String> {
    entries.iter().map(|e| e.to_string()).collect()
}

#[tokio::test]
async fn plain_http_is_forwarded_in_origin_form() {
    let (port, mut received) = http_origin("from the origin").await;
    let proxy = proxy(&entries(&[&format!("localhost:{port}")])).await;
    let request = format!(
        "GET http://localhost:{port}/path?q=1 HTTP/1.1\r\n\
         Host: localhost:{port}\r\n\
         Proxy-Connection: keep-alive\r\n\
         Proxy-Authorization: Basic eDp5\r\n\
         Connection: keep-alive\r\n\
         Keep-Alive: timeout=5\r\n\
         Accept: */*\r\n\r\n"
    );
    let answer = ask(&proxy, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nfrom the origin"), "{answer}");
    let got = received.recv().await.unwrap();
    assert_eq!(
        got.head,
        format!(
            "GET /path?q=1 HTTP/1.1\r\nHost: localhost:{port}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        )
    );
    assert!(proxy.denied().is_empty());
}

#[tokio::test]
async fn a_request_body_follows_its_head_to_the_origin() {
    let (port, mut received) = http_origin("").await;
    let proxy = proxy(&entries(&[&format!("localhost:{port}")])).await;
    let mut client = TcpStream::connect(proxy.address).await.unwrap();
    // Part of the body with the head, the rest later.
    let head =
        format!("POST http://localhost:{port}/up HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello");
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(b" world").await.unwrap();
    let mut answer = String::new();
    guard("the answer", client.read_to_string(&mut answer))
        .await
        .unwrap();
    let got = received.recv().await.unwrap();
    assert_eq!(got.body, b"hello world");
    assert!(
        got.head.starts_with("POST /up HTTP/1.1\r\n"),
        "{}",
        got.head
    );
    assert!(answer.ends_with("\r\n\r\nhello world"), "{answer}");
}

#[tokio::test]
async fn connect_relays_both_ways_including_bytes_sent_with_the_head() {
    let (port, mut ended) = echo_origin().await;
    let proxy = proxy(&entries(&[&format!("localhost:{port}")])).await;
    let early = b"\x16\x03\x01 a ClientHello sent before the 200";
    let mut client = tunnel(&proxy, &format!("LocalHost.:{port}"), early).await;
    assert_eq!(read_n(&mut client, early.len()).await, early);
    client.write_all(b"and then more").await.unwrap();
    assert_eq!(read_n(&mut client, 13).await, b"and then more");
    client.shutdown().await.unwrap();
    let mut rest = Vec::new();
    guard("the tunnel's end", client.read_to_end(&mut rest))
        .await
        .unwrap();
    assert_eq!(rest, b"");
    guard("the origin's end", ended.recv()).await.unwrap();
    assert!(proxy.denied().is_empty());
}

#[tokio::test]
async fn an_address_is_refused_when_only_its_name_is_listed() {
    let (port, _ended) = echo_origin().await;
    let proxy = proxy(&entries(&["pypi.org", &format!("localhost:{port}")])).await;
    let answer = ask(
        &proxy,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
    assert!(head.contains("\r\nContent-Type: text/plain"), "{head}");
    assert!(head.contains("\r\nX-Pykernel-Denied: 1"), "{head}");
    assert!(
        head.contains(&format!("\r\nContent-Length: {}", body.len())),
        "{head}"
    );
    assert_eq!(
        body,
        format!("pykernel sandbox: 127.0.0.1:{port} is not on this kernel's network allow list (pypi.org, localhost:{port}); the host can add it to sandbox.network.allow\n")
    );
    assert_eq!(
        proxy.denied(),
        [Denied {
            host: "127.0.0.1".into(),
            port,
            why: DeniedWhy::NotListed
        }]
    );
}

#[tokio::test]
async fn a_refused_plain_request_is_a_denial_too() {
    let proxy = proxy(&[]).await;
    let answer = ask(
        &proxy,
        b"POST http://Example.COM./x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(
        answer.ends_with("example.com:80 is not on this kernel's network allow list (which is empty); the host can add it to sandbox.network.allow\n"),
        "{answer}"
    );
    assert_eq!(
        proxy.denied(),
        [Denied {
            host: "example.com".into(),
            port: 80,
            why: DeniedWhy::NotListed
        }]
    );
}

#[tokio::test]
async fn a_port_the_entry_does_not_admit_is_refused() {
    let (port, _ended) = echo_origin().await;
    let proxy = proxy(&entries(&["localhost"])).await;
    let answer = ask(
        &proxy,
        format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(
        answer.ends_with(&format!("pykernel sandbox: localhost:{port} is not on this kernel's network allow list (localhost): its entries for localhost admit ports 80 and 443 only; the host can allow this one with the entry localhost:{port} in sandbox.network.allow\n")),
        "{answer}"
    );
    assert_eq!(
        proxy.denied(),
        [Denied {
            host: "localhost".into(),
            port,
            why: DeniedWhy::PortNotAllowed
        }]
    );
}

#[tokio::test]
async fn an_oversized_head_is_refused() {
    let proxy = proxy(&entries(&["localhost"])).await;
    let mut request = b"GET http://localhost/ HTTP/1.1\r\nX-Big: ".to_vec();
    request.resize(100 * 1024, b'a');
    let answer = ask(&proxy, &request).await;
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains("its head is larger than 65536 bytes"),
        "{answer}"
    );
    assert!(proxy.denied().is_empty());
}

/// An endless reader that counts what it is asked for.
struct Endless {
    given: usize,
}

impl AsyncRead for Endless {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let n = buf.remaining();
        buf.put_slice(&vec![b'a'; n]);
        self.given += n;
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_head_is_never_read_past_its_bound() {
    let mut endless = Endless { given: 0 };
    let result = read_head(&mut endless, 64 * 1024).await;
    assert_eq!(result.err(), Some(HeadError::TooLarge));
    assert_eq!(endless.given, 64 * 1024);
    // A head that ends exactly at the bound is still a head.
    let head = b"GET http://a/ HTTP/1.1\r\n\r\n";
    let read = read_head(&mut &head[..], head.len()).await.unwrap();
    assert_eq!((read.head(), read.rest()), (&head[..], &b""[..]));
}

#[tokio::test]
async fn a_refused_upstream_is_a_502_not_a_denial() {
    let port = closed_port().await;
    let proxy = proxy(&entries(&[&format!("127.0.0.1:{port}")])).await;
    for request in [
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
        format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n"),
    ] {
        let answer = ask(&proxy, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
            "{answer}"
        );
        assert!(!answer.contains("X-Pykernel-Denied"), "{answer}");
        assert!(
            answer.contains(&format!(
                "pykernel sandbox: could not connect to 127.0.0.1:{port}: "
            )),
            "{answer}"
        );
        assert!(answer.contains("refused"), "{answer}");
    }
    assert!(proxy.denied().is_empty());
}

/// Linux drops a connection attempt while the listener's accept queue is full, so one to
/// a listener with room for one, and one already waiting, goes unanswered.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn an_upstream_that_does_not_answer_in_time_is_a_502() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let full = socket.listen(0).unwrap();
    let port = full.local_addr().unwrap().port();
    let _waiting = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let limits = Limits {
        connect_time: Duration::from_millis(300),
        ..Limits::DEFAULT
    };
    let proxy = proxy_with(&entries(&[&format!("127.0.0.1:{port}")]), limits).await;
    let answer = ask(
        &proxy,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains(&format!(
            "could not connect to 127.0.0.1:{port}: no connection within 0.3 s"
        )),
        "{answer}"
    );
    assert!(proxy.denied().is_empty());
}

#[tokio::test]
async fn what_is_not_a_proxy_request_gets_a_400() {
    let proxy = proxy(&entries(&["localhost"])).await;
    for (request, says) in [
        (
            "GET /simple/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "names no host",
        ),
        (
            "GET https://localhost/ HTTP/1.1\r\n\r\n",
            "https:// goes through a tunnel",
        ),
        ("hello\r\n\r\n", "is not METHOD TARGET HTTP/1.1"),
    ] {
        let answer = ask(&proxy, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        assert!(
            body.starts_with("pykernel sandbox: bad request: "),
            "{body}"
        );
        assert!(body.contains(says), "{body}");
        assert_eq!(body.lines().count(), 1, "{body}");
    }
    assert!(proxy.denied().is_empty());
}

#[tokio::test]
async fn a_head_that_does_not_arrive_in_time_gets_a_408() {
    let limits = Limits {
        head_time: Duration::from_millis(200),
        ..Limits::DEFAULT
    };
    let proxy = proxy_with(&entries(&["localhost"]), limits).await;
    let answer = ask(&proxy, b"GET http://localhost/ HTTP/1.1\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{answer}"
    );
}

#[tokio::test]
async fn past_the_connection_limit_clients_get_a_503() {
    let (port, mut ended) = echo_origin().await;
    let limits = Limits {
        connections: 2,
        ..Limits::DEFAULT
    };
    let proxy = proxy_with(&entries(&[&format!("localhost:{port}")]), limits).await;
    let target = format!("localhost:{port}");
    let first = tunnel(&proxy, &target, b"").await;
    let _second = tunnel(&proxy, &target, b"").await;
    let answer = ask(
        &proxy,
        format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains("serving 2 connections, its most"),
        "{answer}"
    );
    // A place is free again once a connection has ended.
    drop(first);
    guard("the first tunnel's end", ended.recv()).await.unwrap();
    let mut third = loop {
        let mut client = TcpStream::connect(proxy.address).await.unwrap();
        client
            .write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = vec![0; ESTABLISHED.len()];
        guard("an answer", client.read_exact(&mut answer))
            .await
            .unwrap();
        if answer == ESTABLISHED {
            break client;
        }
        // The proxy may not have seen the first tunnel's end yet.
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    third.write_all(b"ping").await.unwrap();
    assert_eq!(read_n(&mut third, 4).await, b"ping");
}

#[tokio::test]
async fn aborting_the_proxy_ends_its_relayed_connections() {
    let (port, mut ended) = echo_origin().await;
    let mut proxy = proxy(&entries(&[&format!("localhost:{port}")])).await;
    let mut client = tunnel(&proxy, &format!("localhost:{port}"), b"").await;
    client.write_all(b"ping").await.unwrap();
    assert_eq!(read_n(&mut client, 4).await, b"ping");
    proxy.task.abort();
    let _ = (&mut proxy.task).await;
    let mut rest = Vec::new();
    let end = guard("the client's end", client.read_to_end(&mut rest)).await;
    assert!(matches!(end, Ok(0)), "{end:?}");
    guard("the origin's end", ended.recv()).await.unwrap();
}

#[tokio::test]
async fn an_ipv6_address_is_tunnelled() {
    let Ok((port, _ended)) = echo_origin_on("[::1]:0").await else {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    };
    let proxy = proxy(&entries(&[&format!("[::1]:{port}")])).await;
    let mut client = tunnel(&proxy, &format!("[0:0::1]:{port}"), b"v6").await;
    assert_eq!(read_n(&mut client, 2).await, b"v6");
    let answer = ask(
        &proxy,
        format!("CONNECT [::1]:{} HTTP/1.1\r\n\r\n", port ^ 1).as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert_eq!(proxy.denied()[0].host, "[::1]");
}

/// Byte `i` of the test stream: not periodic at any power of two, so a lost, doubled
/// or reordered piece of a buffer shows.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8 ^ (i / 251) as u8
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_megabytes_cross_a_tunnel_intact() {
    const TOTAL: usize = 20 * 1024 * 1024;
    let (port, _ended) = echo_origin().await;
    let proxy = proxy(&entries(&[&format!("localhost:{port}")])).await;
    let client = tunnel(&proxy, &format!("localhost:{port}"), b"").await;
    let (mut from, mut to) = client.into_split();
    let writer = tokio::spawn(async move {
        let mut chunk = vec![0; 100_000];
        let mut sent = 0;
        while sent < TOTAL {
            let n = chunk.len().min(TOTAL - sent);
            for (j, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(sent + j);
            }
            to.write_all(&chunk[..n]).await.unwrap();
            sent += n;
        }
        to.shutdown().await.unwrap();
    });
    let mut received = 0;
    let mut buf = vec![0; 77_777];
    loop {
        let n = guard("the echo", from.read(&mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
        for (j, &b) in buf[..n].iter().enumerate() {
            assert_eq!(b, pattern(received + j), "byte {}", received + j);
        }
        received += n;
    }
    assert_eq!(received, TOTAL);
    guard("the writer", writer).await.unwrap();
}

#[test]
fn a_denial_says_what_the_entries_admit() {
    let allow = AllowList::parse(&entries(&["pypi.org", "*.x.org:8443", "*.x.org:9000"])).unwrap();
    let host = RemoteHost::parse("a.x.org").unwrap();
    let verdict = allow.admits_host(&host, 443);
    assert_eq!(
        denial(&allow, &host, 443, &verdict),
        "a.x.org:443 is not on this kernel's network allow list (pypi.org, *.x.org:8443, *.x.org:9000): its entries for a.x.org admit ports 8443 and 9000 only; the host can allow this one with the entry a.x.org:443 in sandbox.network.allow"
    );
    assert_eq!(ports_in_words(&[8080]), "port 8080");
    assert_eq!(ports_in_words(&[80, 443, 9000]), "ports 80, 443 and 9000");
}
