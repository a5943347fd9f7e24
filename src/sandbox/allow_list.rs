//! `sandbox.network = { allow: [...] }`: which hosts a kernel's proxy may connect to.
//!
//! Pure (no I/O, no tokio): the entries as the host gave them, parsed once, and a verdict
//! for each host and port a client asks for. `egress_proxy.rs` asks; this file decides.
//!
//! An entry is one of
//!
//! - a host name (`pypi.org`, `localhost`): that name alone, in any case, with or without
//!   a trailing dot;
//! - `*.suffix` (`*.pythonhosted.org`): any name strictly beneath the suffix
//!   (`files.pythonhosted.org`, `a.b.pythonhosted.org`), not the suffix itself, which
//!   needs an entry of its own;
//! - an IPv4 address (`127.0.0.1`) or a bracketed IPv6 address (`[::1]`): admitted only
//!   when a client asks for that address, never for a name that resolves to it;
//!
//! each with an optional `:port`. Without one an entry admits the web's ports, 80 and
//! 443; with one, that port alone (`localhost:8080` does not admit `localhost:443`).
//!
//! Matching is on the name the client asked for, before any resolution: a name is
//! admitted for what it is, and what it resolves to is the resolver's business. So an
//! address is only ever admitted by an entry that is that address, and a numeric form a
//! resolver would also take for one (`127.1`, `2130706433`) is neither a valid entry nor
//! a name that matches one.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The ports an entry without a port admits: plain HTTP and HTTPS.
const WEB_PORTS: [u16; 2] = [80, 443];

/// Longest host name, without its trailing dot (RFC 1035's 255 octets on the wire).
const MAX_NAME: usize = 253;

/// Longest label of a name (RFC 1035).
const MAX_LABEL: usize = 63;

/// The parsed `allow` entries of one kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// As the host wrote it, for messages.
    given: String,
    pattern: Pattern,
    /// `None`: the web's ports.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// This host exactly (a name lowercased without its trailing dot, or an address).
    Exact(RemoteHost),
    /// Any name ending in `.` and this suffix (lowercased, without a trailing dot).
    Beneath(String),
}

/// Whether an entry lets a client reach a host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Admitted,
    /// No entry names the host.
    NotListed,
    /// Entries name the host, but for other ports: these (sorted), so a refusal can say
    /// which.
    PortNotAllowed {
        allowed: Vec<u16>,
    },
}

/// A host as a client names it, normalised: a name in lowercase without its trailing dot,
/// or an address. Displayed the way it is written before `:port` (`[::1]` for IPv6).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RemoteHost {
    Name(String),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl RemoteHost {
    /// Reads a host as a client gives it: a name, an IPv4 address, or an IPv6 address with
    /// or without brackets. `None` for anything else (an empty label, `_`, a space, a
    /// numeric form that is not a dotted quad), which no entry admits.
    pub fn parse(host: &str) -> Option<RemoteHost> {
        if let Some(inner) = host.strip_prefix('[') {
            return inner.strip_suffix(']')?.parse().ok().map(RemoteHost::V6);
        }
        if host.contains(':') {
            return host.parse().ok().map(RemoteHost::V6);
        }
        let host = host.strip_suffix('.').unwrap_or(host);
        if let Ok(v4) = host.parse() {
            return Some(RemoteHost::V4(v4));
        }
        check_name(host).ok()?;
        Some(RemoteHost::Name(host.to_ascii_lowercase()))
    }
}

impl fmt::Display for RemoteHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteHost::Name(name) => f.write_str(name),
            RemoteHost::V4(v4) => write!(f, "{v4}"),
            RemoteHost::V6(v6) => write!(f, "[{v6}]"),
        }
    }
}

impl AllowList {
    /// Parses the host's entries. Errs on the first entry that is not one of the forms
    /// above, with a message that names the entry and what is wrong with it. An empty
    /// list is valid, and admits nothing.
    pub fn parse(entries: &[String]) -> Result<AllowList, String> {
        let entries = entries
            .iter()
            .map(|given| {
                parse_entry(given)
                    .map_err(|why| format!("network allow list entry {given:?}: {why}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(AllowList { entries })
    }

    /// Whether a client may reach `host` at `port`. `host` is read as [`RemoteHost::parse`]
    /// reads it; one it cannot read is not listed.
    pub fn admits(&self, host: &str, port: u16) -> Verdict {
        match RemoteHost::parse(host) {
            Some(host) => self.admits_host(&host, port),
            None => Verdict::NotListed,
        }
    }

    /// [`AllowList::admits`] for a host already read.
    pub fn admits_host(&self, host: &RemoteHost, port: u16) -> Verdict {
        let mut allowed: Vec<u16> = Vec::new();
        for entry in self.entries.iter().filter(|e| e.pattern.matches(host)) {
            let ports = match entry.port {
                Some(only) => vec![only],
                None => WEB_PORTS.to_vec(),
            };
            if ports.contains(&port) {
                return Verdict::Admitted;
            }
            allowed.extend(ports);
        }
        if allowed.is_empty() {
            return Verdict::NotListed;
        }
        allowed.sort_unstable();
        allowed.dedup();
        Verdict::PortNotAllowed { allowed }
    }

    /// The entries as the host gave them.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = &str> {
        self.entries.iter().map(|e| e.given.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The entries as given, comma-separated (`pypi.org, *.pythonhosted.org`).
impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, entry) in self.entries().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(entry)?;
        }
        Ok(())
    }
}

impl Pattern {
    fn matches(&self, host: &RemoteHost) -> bool {
        match (self, host) {
            (Pattern::Exact(listed), host) => listed == host,
            (Pattern::Beneath(suffix), RemoteHost::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|head| !head.is_empty()),
            (Pattern::Beneath(_), _) => false,
        }
    }
}

fn parse_entry(given: &str) -> Result<Entry, String> {
    if given.is_empty() {
        return Err("empty; give a host name such as pypi.org".into());
    }
    if given.chars().any(char::is_whitespace) {
        return Err("contains white space; give the host alone, as in pypi.org".into());
    }
    if let Some((scheme, _)) = given.split_once("://") {
        return Err(format!(
            "a URL, not a host; drop {:?} and give the host alone (a port may follow it: host:port)",
            format!("{scheme}://")
        ));
    }
    if let Some(at) = given.find(['/', '?', '#']) {
        return Err(format!(
            "has a path ({:?}); give the host alone, as in pypi.org",
            &given[at..]
        ));
    }
    if let Some(at) = given.rfind('@') {
        return Err(format!(
            "has user info ({:?}); give the host alone, as in pypi.org",
            &given[..=at]
        ));
    }
    let (host, port) = split_port(given)?;
    let port = port.map(parse_port).transpose()?;
    let pattern = parse_pattern(host)?;
    Ok(Entry {
        given: given.to_string(),
        pattern,
        port,
    })
}

/// `host[:port]` or `[v6][:port]` into the host (brackets kept) and the port's text.
fn split_port(given: &str) -> Result<(&str, Option<&str>), String> {
    if given.starts_with('[') {
        let Some(close) = given.find(']') else {
            return Err("an IPv6 address without its closing bracket, as in [::1]".into());
        };
        let (host, rest) = given.split_at(close + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => match rest.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(format!(
                    "{rest:?} after the IPv6 address; a port is written [::1]:8443"
                )),
            },
        };
    }
    match given.split_once(':') {
        None => Ok((given, None)),
        Some((host, port)) if !port.contains(':') => Ok((host, Some(port))),
        Some(_) => Err("an IPv6 address goes in brackets, as in [::1] or [::1]:8443".into()),
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    let number = (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u32>().ok())
        .flatten();
    match number {
        Some(port @ 1..=65535) => Ok(port as u16),
        _ => Err(format!("port {text:?} is not a port from 1 to 65535")),
    }
}

fn parse_pattern(host: &str) -> Result<Pattern, String> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return inner
            .parse()
            .map(|v6| Pattern::Exact(RemoteHost::V6(v6)))
            .map_err(|_| format!("{inner:?} is not an IPv6 address"));
    }
    if host == "*" {
        return Err(
            "a lone * would admit every host; list the hosts, or *.domain for the names beneath one"
                .into(),
        );
    }
    let (beneath, name) = match host.strip_prefix("*.") {
        Some(suffix) => (true, suffix),
        None => (false, host),
    };
    if name.contains('*') {
        return Err("* is allowed only as a leading \"*.\", as in *.pythonhosted.org".into());
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if !beneath {
        if let Ok(v4) = name.parse() {
            return Ok(Pattern::Exact(RemoteHost::V4(v4)));
        }
    }
    check_name(name)?;
    let name = name.to_ascii_lowercase();
    Ok(match beneath {
        true => Pattern::Beneath(name),
        false => Pattern::Exact(RemoteHost::Name(name)),
    })
}

/// A host name (without its trailing dot): labels of letters, digits and inner hyphens,
/// 1 to 63 each, 253 in all, the last not all digits (that would be an address, or a
/// resolver's reading of one such as `127.1`).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("no host name".into());
    }
    if name.len() > MAX_NAME {
        return Err(format!(
            "the name is {} characters long; a host name has at most {MAX_NAME}",
            name.len()
        ));
    }
    for label in name.split('.') {
        let valid = (1..=MAX_LABEL).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !valid {
            return Err(format!(
                "{label:?} is not a host-name label (letters, digits and inner hyphens, 1 to {MAX_LABEL} of them)"
            ));
        }
    }
    if name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!(
            "{name:?} is neither an IPv4 address (four numbers from 0 to 255) nor a host name (whose last label is not all digits)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        AllowList::parse(&entries).unwrap_or_else(|e| panic!("{entries:?}: {e}"))
    }

    fn refusal(entry: &str) -> String {
        match AllowList::parse(&[entry.to_string()]) {
            Ok(parsed) => panic!("{entry:?} was accepted as {parsed:?}"),
            Err(e) => e,
        }
    }

    fn not_allowed(ports: &[u16]) -> Verdict {
        Verdict::PortNotAllowed {
            allowed: ports.to_vec(),
        }
    }

    #[test]
    fn an_exact_name_admits_itself_in_any_case_with_or_without_its_trailing_dot() {
        let allow = list(&["pypi.org", "LocalHost."]);
        for host in ["pypi.org", "PyPI.Org", "pypi.org."] {
            assert_eq!(allow.admits(host, 443), Verdict::Admitted, "{host}");
        }
        assert_eq!(allow.admits("localhost", 80), Verdict::Admitted);
        assert_eq!(allow.admits("localhost.", 443), Verdict::Admitted);
    }

    #[test]
    fn an_exact_name_admits_no_other_name() {
        let allow = list(&["pypi.org"]);
        for host in [
            "evil.pypi.org.attacker.com",
            "pypi.org.attacker.com",
            "files.pypi.org",
            "xpypi.org",
            "pypi.or",
            "pypi.org..",
            "",
            ".",
        ] {
            assert_eq!(allow.admits(host, 443), Verdict::NotListed, "{host:?}");
        }
    }

    #[test]
    fn a_wildcard_admits_names_strictly_beneath_its_suffix() {
        let allow = list(&["*.pythonhosted.org"]);
        for host in [
            "files.pythonhosted.org",
            "a.b.pythonhosted.org",
            "FILES.PythonHosted.org.",
        ] {
            assert_eq!(allow.admits(host, 443), Verdict::Admitted, "{host}");
        }
        for host in [
            "pythonhosted.org",
            "xpythonhosted.org",
            "files.pythonhosted.org.evil.com",
            "pythonhosted.org.evil.com",
        ] {
            assert_eq!(allow.admits(host, 443), Verdict::NotListed, "{host}");
        }
    }

    #[test]
    fn an_address_admits_only_a_client_asking_for_that_address() {
        let allow = list(&["127.0.0.1", "[::1]"]);
        assert_eq!(allow.admits("127.0.0.1", 80), Verdict::Admitted);
        assert_eq!(allow.admits("[::1]", 443), Verdict::Admitted);
        // The same address written out in full, and without brackets.
        assert_eq!(allow.admits("[0:0:0:0:0:0:0:1]", 443), Verdict::Admitted);
        assert_eq!(allow.admits("::1", 443), Verdict::Admitted);
        // A name that resolves to it, or a resolver's other spellings of it, are not it.
        for host in [
            "localhost",
            "127.1",
            "2130706433",
            "0x7f000001",
            "127.000.000.001",
        ] {
            assert_eq!(allow.admits(host, 80), Verdict::NotListed, "{host}");
        }
        assert_eq!(allow.admits("[::ffff:127.0.0.1]", 80), Verdict::NotListed);
        assert_eq!(allow.admits("127.0.0.2", 80), Verdict::NotListed);
    }

    #[test]
    fn a_name_entry_does_not_admit_an_address() {
        let allow = list(&["localhost:8080"]);
        assert_eq!(allow.admits("127.0.0.1", 8080), Verdict::NotListed);
        assert_eq!(allow.admits("[::1]", 8080), Verdict::NotListed);
    }

    #[test]
    fn without_a_port_an_entry_admits_80_and_443_only() {
        let allow = list(&["pypi.org", "*.example.com", "[::1]"]);
        for host in ["pypi.org", "a.example.com", "[::1]"] {
            assert_eq!(allow.admits(host, 80), Verdict::Admitted, "{host}");
            assert_eq!(allow.admits(host, 443), Verdict::Admitted, "{host}");
            assert_eq!(allow.admits(host, 8080), not_allowed(&[80, 443]), "{host}");
            assert_eq!(allow.admits(host, 22), not_allowed(&[80, 443]), "{host}");
        }
    }

    #[test]
    fn with_a_port_an_entry_admits_that_port_alone() {
        let allow = list(&["localhost:8080", "[::1]:8443", "*.example.com:8443"]);
        assert_eq!(allow.admits("localhost", 8080), Verdict::Admitted);
        assert_eq!(allow.admits("localhost", 443), not_allowed(&[8080]));
        assert_eq!(allow.admits("localhost", 80), not_allowed(&[8080]));
        assert_eq!(allow.admits("[::1]", 8443), Verdict::Admitted);
        assert_eq!(allow.admits("[::1]", 443), not_allowed(&[8443]));
        assert_eq!(allow.admits("api.example.com", 8443), Verdict::Admitted);
        assert_eq!(allow.admits("api.example.com", 443), not_allowed(&[8443]));
        assert_eq!(allow.admits("example.com", 8443), Verdict::NotListed);
    }

    #[test]
    fn the_ports_of_every_entry_for_a_host_add_up() {
        let allow = list(&[
            "localhost:8080",
            "localhost:3000",
            "localhost:8080",
            "*.example.com",
            "api.example.com:9000",
        ]);
        assert_eq!(allow.admits("localhost", 3000), Verdict::Admitted);
        assert_eq!(allow.admits("localhost", 443), not_allowed(&[3000, 8080]));
        assert_eq!(allow.admits("api.example.com", 9000), Verdict::Admitted);
        assert_eq!(allow.admits("api.example.com", 443), Verdict::Admitted);
        assert_eq!(
            allow.admits("api.example.com", 22),
            not_allowed(&[80, 443, 9000])
        );
    }

    #[test]
    fn an_empty_list_admits_nothing() {
        let allow = list(&[]);
        assert!(allow.is_empty());
        assert_eq!(allow.admits("localhost", 80), Verdict::NotListed);
        assert_eq!(allow.to_string(), "");
    }

    #[test]
    fn the_entries_are_shown_as_given() {
        let given = [
            "PyPI.org.",
            "*.pythonhosted.org",
            "[::1]:8443",
            "localhost:8080",
        ];
        let allow = list(&given);
        assert_eq!(allow.entries().collect::<Vec<_>>(), given);
        assert_eq!(
            allow.to_string(),
            "PyPI.org., *.pythonhosted.org, [::1]:8443, localhost:8080"
        );
    }

    #[test]
    fn a_host_is_read_and_shown_normalised() {
        let shown = |host: &str| RemoteHost::parse(host).map(|h| h.to_string());
        assert_eq!(shown("PyPI.Org."), Some("pypi.org".into()));
        assert_eq!(shown("127.0.0.1"), Some("127.0.0.1".into()));
        assert_eq!(shown("[0:0::1]"), Some("[::1]".into()));
        assert_eq!(shown("::1"), Some("[::1]".into()));
        for garbage in [
            "",
            ".",
            "a..b",
            "a b",
            "a_b.com",
            "[::1",
            "1.2.3.4:80",
            "*.x",
            "a/b",
        ] {
            assert_eq!(RemoteHost::parse(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn malformed_entries_are_refused_naming_the_entry_and_the_fault() {
        for (entry, fault) in [
            ("", "empty"),
            ("*", "lone *"),
            ("*:443", "lone *"),
            ("*.*.example.com", "leading \"*.\""),
            ("a.*.example.com", "leading \"*.\""),
            ("example.*", "leading \"*.\""),
            ("*example.com", "leading \"*.\""),
            ("*.", "no host name"),
            ("https://pypi.org", "a URL, not a host; drop \"https://\""),
            ("pypi.org/simple", "has a path (\"/simple\")"),
            ("pypi.org?x", "has a path"),
            ("user@pypi.org", "has user info (\"user@\")"),
            ("user:secret@pypi.org", "has user info"),
            ("pypi .org", "white space"),
            (" pypi.org", "white space"),
            ("pypi.org\t", "white space"),
            ("localhost:0", "port \"0\" is not a port from 1 to 65535"),
            ("localhost:65536", "port \"65536\""),
            ("localhost:99999999999", "port \"99999999999\""),
            ("localhost:", "port \"\""),
            ("localhost:+80", "port \"+80\""),
            ("localhost:http", "port \"http\""),
            ("[::1]:0", "port \"0\""),
            ("a_b.example.com", "\"a_b\" is not a host-name label"),
            ("a..example.com", "\"\" is not a host-name label"),
            ("-a.example.com", "\"-a\" is not a host-name label"),
            ("a-.example.com", "\"a-\" is not a host-name label"),
            ("bücher.de", "\"bücher\" is not a host-name label"),
            ("::1", "in brackets"),
            ("[::1", "closing bracket"),
            ("[::1]8443", "after the IPv6 address"),
            ("[not-v6]", "\"not-v6\" is not an IPv6 address"),
            ("[fe80::1%eth0]", "is not an IPv6 address"),
            ("[127.0.0.1]", "is not an IPv6 address"),
            ("127.1", "neither an IPv4 address"),
            ("1.2.3.256", "neither an IPv4 address"),
            ("2130706433", "neither an IPv4 address"),
            ("*.0.0.1", "neither an IPv4 address"),
        ] {
            let message = refusal(entry);
            assert!(
                message.starts_with(&format!("network allow list entry {entry:?}: ")),
                "{message}"
            );
            assert!(message.contains(fault), "{entry:?}: {message}");
        }
    }

    #[test]
    fn names_are_bounded_by_label_and_in_all() {
        let label = "a".repeat(MAX_LABEL);
        list(&[&format!("{label}.example.com")]);
        let message = refusal(&format!("a{label}.example.com"));
        assert!(message.contains("is not a host-name label"), "{message}");
        // Four labels of 63 and their dots: 255 characters.
        let long = [label.as_str(); 4].join(".");
        assert!(refusal(&long).contains("255 characters long"));
        list(&[&long[..MAX_NAME]]);
        assert_eq!(
            list(&[&long[..MAX_NAME]]).admits(&long[..MAX_NAME], 443),
            Verdict::Admitted
        );
        assert_eq!(
            list(&["example.com"]).admits(&long, 443),
            Verdict::NotListed
        );
    }

    #[test]
    fn the_first_bad_entry_is_the_one_named() {
        let entries = ["pypi.org", "x/y", "*"].map(String::from);
        let message = AllowList::parse(&entries).unwrap_err();
        assert!(message.contains("\"x/y\""), "{message}");
    }
}
