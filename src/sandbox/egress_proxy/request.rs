//! A proxy request's head: what the client asks for, read from the bytes it sent, and
//! the head the origin gets in its place for plain HTTP. Pure (no I/O), and total: any
//! input is a request or a reason it is not one, never a panic.

use crate::sandbox::allow_list::RemoteHost;

/// What a client asked the proxy for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Request {
    /// `CONNECT host:port`: a tunnel, for HTTPS or anything else over TCP.
    Tunnel { host: RemoteHost, port: u16 },
    /// An absolute-form `http://` request, and the head that goes to the origin instead
    /// (origin-form, the proxy's and the connection's headers out, `Connection: close`).
    Forward {
        host: RemoteHost,
        port: u16,
        head: Vec<u8>,
    },
}

impl Request {
    pub(super) fn destination(&self) -> (&RemoteHost, u16) {
        match self {
            Request::Tunnel { host, port } | Request::Forward { host, port, .. } => (host, *port),
        }
    }
}

/// Headers that are about the client's connection to the proxy, not the request: they
/// never reach the origin. `Host` is written anew from the URL (below).
const NOT_FORWARDED: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "host",
];

/// Where a head ends in `buf` (the index past its blank line), looking at what lies from
/// `from` on: a caller that reads in pieces passes where the last piece began, so no byte
/// is looked at more than a few times. Lines end in CRLF or, tolerated, a bare LF.
pub(super) fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    // A blank line's first LF can lie two bytes before the new piece ("\n\r" + "\n").
    let from = from.saturating_sub(2).min(buf.len());
    memchr::memchr_iter(b'\n', &buf[from..])
        .map(|i| from + i)
        .find_map(|lf| match &buf[lf + 1..] {
            [b'\n', ..] => Some(lf + 2),
            [b'\r', b'\n', ..] => Some(lf + 3),
            _ => None,
        })
}

/// Reads a head (up to and including its blank line). `Err` says, in a line, why it is
/// not a request this proxy serves.
pub(super) fn parse(head: &[u8]) -> Result<Request, String> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    // A control character (a stray CR) in the line would reach the origin in its own.
    let request_line = std::str::from_utf8(request_line)
        .ok()
        .filter(|line| !line.bytes().any(|b| b.is_ascii_control()))
        .ok_or_else(|| format!("the request line {} is not text", shown(request_line)))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!(
            "the request line {} is not METHOD TARGET HTTP/1.1",
            shown(request_line.as_bytes())
        ));
    };
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err(format!("{} is not a method", shown(method.as_bytes())));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!(
            "{} is not HTTP/1.1 or HTTP/1.0",
            shown(version.as_bytes())
        ));
    }
    let headers = lines
        .take_while(|line| !line.is_empty())
        .map(header)
        .collect::<Result<Vec<_>, _>>()?;
    if method == "CONNECT" {
        if target.contains("://") {
            return Err(format!(
                "CONNECT {}: CONNECT names host:port, not a URL",
                shown(target.as_bytes())
            ));
        }
        let (host, port) = authority(target, None)?;
        return Ok(Request::Tunnel { host, port });
    }
    let absolute = target
        .split_once("://")
        .filter(|_| !target.starts_with('/'));
    let Some((scheme, rest)) = absolute else {
        return Err(format!(
            "{method} {} names no host: through a proxy, ask for the full URL (http://host/path), or CONNECT host:port for HTTPS",
            shown(target.as_bytes())
        ));
    };
    if scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "{method} {}: https:// goes through a tunnel (CONNECT host:443), which clients make when HTTPS_PROXY names this proxy",
            shown(target.as_bytes())
        ));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!(
            "{method} {}: only http:// URLs are forwarded (and https:// through CONNECT)",
            shown(target.as_bytes())
        ));
    }
    // The fragment is the client's own; it never goes on the wire.
    let rest = rest.split('#').next().unwrap_or_default();
    let (named, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    if named.contains('@') {
        return Err(format!(
            "{method} {}: user info in a URL is not forwarded; send credentials in a header",
            shown(target.as_bytes())
        ));
    }
    let (host, port) = authority(named, Some(80))?;
    let path = match path {
        "" => "/".to_string(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_string(),
    };
    let mut forwarded = Vec::with_capacity(head.len() + 64);
    forwarded.extend_from_slice(format!("{method} {path} {version}\r\n").as_bytes());
    // The URL's host, which the allow list admitted, and no other: a server hosting
    // several sites would otherwise serve the one a client's own Host names.
    forwarded.extend_from_slice(format!("Host: {named}\r\n").as_bytes());
    for header in headers
        .iter()
        .filter(|h| !NOT_FORWARDED.iter().any(|n| h.name.eq_ignore_ascii_case(n)))
    {
        forwarded.extend_from_slice(header.line);
        forwarded.extend_from_slice(b"\r\n");
    }
    // One request per connection: the proxy relays bytes, not messages, so it cannot
    // tell where a second request would begin.
    forwarded.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request::Forward {
        host,
        port,
        head: forwarded,
    })
}

struct Header<'a> {
    name: &'a str,
    /// The whole line, without its line end.
    line: &'a [u8],
}

fn header(line: &[u8]) -> Result<Header<'_>, String> {
    if line.starts_with(b" ") || line.starts_with(b"\t") {
        return Err(format!(
            "a folded header line {} (obsolete line folding)",
            shown(line)
        ));
    }
    let name = match memchr::memchr(b':', line) {
        Some(colon) => &line[..colon],
        None => return Err(format!("the header line {} has no colon", shown(line))),
    };
    if name.is_empty() || !name.iter().copied().all(is_token) {
        return Err(format!("{} is not a header name", shown(name)));
    }
    if line.iter().any(|&b| b == b'\r' || b == 0) {
        return Err(format!("the header line {} holds a CR or NUL", shown(line)));
    }
    Ok(Header {
        // Token characters are ASCII.
        name: std::str::from_utf8(name).unwrap_or_default(),
        line,
    })
}

/// `host[:port]`, `[v6][:port]`: the host, and the port or `default` (none for CONNECT,
/// which must name one).
fn authority(text: &str, default: Option<u16>) -> Result<(RemoteHost, u16), String> {
    let split = match text.strip_prefix('[') {
        Some(inner) => inner.find(']').map(|close| close + 2),
        None => Some(text.rfind(':').unwrap_or(text.len())),
    };
    let Some((host, port)) = split.map(|at| text.split_at(at)) else {
        return Err(format!(
            "{} lacks the ] of its IPv6 address",
            shown(text.as_bytes())
        ));
    };
    if host.contains(':') && !host.starts_with('[') {
        return Err(format!(
            "{}: an IPv6 address goes in brackets, as in [::1]:443",
            shown(text.as_bytes())
        ));
    }
    let port = match (port, default) {
        ("", Some(default)) => default,
        ("", None) => {
            return Err(format!(
                "CONNECT {} names no port (CONNECT host:443)",
                shown(text.as_bytes())
            ))
        }
        (port, _) => port
            .strip_prefix(':')
            .and_then(port_number)
            .ok_or_else(|| {
                format!(
                    "{} has no valid port after the host",
                    shown(text.as_bytes())
                )
            })?,
    };
    let host = RemoteHost::parse(host)
        .ok_or_else(|| format!("{} is not a host name or address", shown(host.as_bytes())))?;
    Ok((host, port))
}

fn port_number(text: &str) -> Option<u16> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&port| port != 0)
}

/// RFC 9110's `tchar`: what a method or a header name is made of.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Client bytes quoted for a message, cut short: a refusal never echoes a whole head.
fn shown(bytes: &[u8]) -> String {
    const SHOWN: usize = 80;
    let cut = &bytes[..bytes.len().min(SHOWN)];
    let text = String::from_utf8_lossy(cut);
    match bytes.len() > SHOWN {
        true => format!("{:?}...", text),
        false => format!("{:?}", text),
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    use super::*;

    fn name(host: &str) -> RemoteHost {
        RemoteHost::Name(host.into())
    }

    fn forwarded(head: &str) -> String {
        match parse(head.as_bytes()) {
            Ok(Request::Forward { head, .. }) => String::from_utf8(head).unwrap(),
            other => panic!("{head:?}: {other:?}"),
        }
    }

    fn refused(head: &str) -> String {
        match parse(head.as_bytes()) {
            Err(why) => why,
            Ok(request) => panic!("{head:?} was read as {request:?}"),
        }
    }

    #[test]
    fn a_head_ends_at_its_first_blank_line_however_it_arrived() {
        let head = b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\nbody";
        assert_eq!(head_end(head, 0), Some(head.len() - 4));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 0), None);
        assert_eq!(head_end(b"", 0), None);
        // The blank line split between two reads, at each point.
        for split in 1..head.len() - 4 {
            assert_eq!(head_end(&head[..split], 0), None, "{split}");
            assert_eq!(head_end(head, split), Some(head.len() - 4), "{split}");
        }
    }

    #[test]
    fn connect_names_a_host_and_port() {
        let tunnel = |target: &str| parse(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(
            tunnel("PyPI.org.:443"),
            Ok(Request::Tunnel {
                host: name("pypi.org"),
                port: 443
            })
        );
        assert_eq!(
            tunnel("127.0.0.1:8080"),
            Ok(Request::Tunnel {
                host: RemoteHost::V4(Ipv4Addr::LOCALHOST),
                port: 8080
            })
        );
        assert_eq!(
            tunnel("[::1]:8443"),
            Ok(Request::Tunnel {
                host: RemoteHost::V6(Ipv6Addr::LOCALHOST),
                port: 8443
            })
        );
        for (target, fault) in [
            ("pypi.org", "names no port"),
            ("pypi.org:", "no valid port"),
            ("pypi.org:0", "no valid port"),
            ("pypi.org:65536", "no valid port"),
            ("pypi.org:https", "no valid port"),
            ("::1:443", "goes in brackets"),
            ("[::1:443", "lacks the ]"),
            ("[::1]443", "no valid port"),
            ("a_b.org:443", "\"a_b.org\" is not a host name or address"),
            ("127.1:443", "is not a host name or address"),
            (":443", "is not a host name or address"),
            ("http://pypi.org:443", "names host:port, not a URL"),
        ] {
            let why = tunnel(target).unwrap_err();
            assert!(why.contains(fault), "{target}: {why}");
        }
    }

    #[test]
    fn a_plain_request_goes_on_in_origin_form_without_the_proxys_headers() {
        let head = "POST http://LocalHost:8080/upload?x=1#frag HTTP/1.1\r\n\
                    Host: elsewhere.example\r\n\
                    Proxy-Connection: keep-alive\r\n\
                    proxy-authorization: Basic eDp5\r\n\
                    Connection: keep-alive, Upgrade\r\n\
                    KEEP-ALIVE: timeout=5\r\n\
                    Content-Length: 5\r\n\
                    X-Keep:  spaced  value \r\n\
                    \r\n";
        match parse(head.as_bytes()) {
            Ok(Request::Forward { host, port, .. }) => {
                assert_eq!((host, port), (name("localhost"), 8080));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            forwarded(head),
            "POST /upload?x=1 HTTP/1.1\r\n\
             Host: LocalHost:8080\r\n\
             Content-Length: 5\r\n\
             X-Keep:  spaced  value \r\n\
             Connection: close\r\n\r\n"
        );
    }

    #[test]
    fn the_origin_gets_a_path_a_host_and_the_clients_version() {
        assert_eq!(
            forwarded("GET http://pypi.org HTTP/1.0\n\n"),
            "GET / HTTP/1.0\r\nHost: pypi.org\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            forwarded("HEAD HTTP://pypi.org?q=1 HTTP/1.1\r\n\r\n"),
            "HEAD /?q=1 HTTP/1.1\r\nHost: pypi.org\r\nConnection: close\r\n\r\n"
        );
        match parse(b"GET http://[::1]/x HTTP/1.1\r\n\r\n") {
            Ok(Request::Forward { host, port, head }) => {
                assert_eq!((host, port), (RemoteHost::V6(Ipv6Addr::LOCALHOST), 80));
                assert!(head.starts_with(b"GET /x HTTP/1.1\r\nHost: [::1]\r\n"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_is_not_a_proxy_request_is_refused_saying_why() {
        for (head, fault) in [
            (
                "GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
                "names no host",
            ),
            ("OPTIONS * HTTP/1.1\r\n\r\n", "names no host"),
            ("GET /r?to=http://x/ HTTP/1.1\r\n\r\n", "names no host"),
            ("GET pypi.org/simple HTTP/1.1\r\n\r\n", "names no host"),
            (
                "GET https://pypi.org/ HTTP/1.1\r\n\r\n",
                "https:// goes through a tunnel",
            ),
            ("GET ftp://pypi.org/ HTTP/1.1\r\n\r\n", "only http:// URLs"),
            ("GET http://u:p@pypi.org/ HTTP/1.1\r\n\r\n", "user info"),
            ("GET http://pypi.org:0/ HTTP/1.1\r\n\r\n", "no valid port"),
            ("GET http:///x HTTP/1.1\r\n\r\n", "is not a host name"),
            ("\r\n\r\n", "is not METHOD TARGET HTTP/1.1"),
            ("GET http://a/\r\n\r\n", "is not METHOD TARGET HTTP/1.1"),
            (
                "GET  http://a/ HTTP/1.1\r\n\r\n",
                "is not METHOD TARGET HTTP/1.1",
            ),
            (
                "GET http://a/ HTTP/1.1 x\r\n\r\n",
                "is not METHOD TARGET HTTP/1.1",
            ),
            (
                "GET http://a/ HTTP/2.0\r\n\r\n",
                "\"HTTP/2.0\" is not HTTP/1.1",
            ),
            ("GET http://a/ http/1.1\r\n\r\n", "is not HTTP/1.1"),
            ("G(T http://a/ HTTP/1.1\r\n\r\n", "\"G(T\" is not a method"),
            (
                "GET http://a/ HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n",
                "folded header",
            ),
            ("GET http://a/ HTTP/1.1\r\nNo colon\r\n\r\n", "has no colon"),
            (
                "GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n",
                "\"Host \" is not a header name",
            ),
            (
                "GET http://a/ HTTP/1.1\r\n: a\r\n\r\n",
                "\"\" is not a header name",
            ),
            (
                "GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
                "holds a CR or NUL",
            ),
            (
                "GET http://a/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
                "holds a CR or NUL",
            ),
            (
                "CONNECT pypi.org:443 HTTP/1.1\r\nbad\r\n\r\n",
                "has no colon",
            ),
        ] {
            let why = refused(head);
            assert!(why.contains(fault), "{head:?}: {why}");
        }
        for line in [
            &b"GET \xff HTTP/1.1\r\n\r\n"[..],
            b"GET http://a/\rX HTTP/1.1\r\n\r\n",
            b"GET http://a/\tX HTTP/1.1\r\n\r\n",
        ] {
            let why = parse(line).unwrap_err();
            assert!(why.contains("is not text"), "{why}");
        }
    }

    #[test]
    fn a_refusal_quotes_the_client_only_in_part() {
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(10_000));
        let why = refused(&long);
        assert!(why.len() < 300, "{why}");
        assert!(why.contains("aaa\"..."), "{why}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_are_a_request_or_a_reason(bytes in proptest::collection::vec(any::<u8>(), 0..300), from in 0usize..400) {
            let _ = parse(&bytes);
            if let Some(end) = head_end(&bytes, from) {
                prop_assert!(end <= bytes.len());
            }
        }

        #[test]
        fn near_requests_are_a_request_or_a_reason(
            method in "(CONNECT|GET|POST|G T|)",
            target in "(http://|https://|HTTP://|/|\\[|)[a-zA-Z0-9.:\\[\\]@/?#%_-]{0,40}",
            version in "(HTTP/1\\.1|HTTP/1\\.0|HTTP/2|)",
            headers in proptest::collection::vec("[ -~\t\r]{0,30}", 0..4),
        ) {
            let head = format!("{method} {target} {version}\r\n{}\r\n\r\n", headers.join("\r\n"));
            if let Ok(Request::Forward { head: out, .. }) = parse(head.as_bytes()) {
                prop_assert!(out.ends_with(b"Connection: close\r\n\r\n"));
                prop_assert!(head_end(&out, 0) == Some(out.len()));
            }
        }
    }
}
