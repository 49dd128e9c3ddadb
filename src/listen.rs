//! Where the server listens: the `--listen` flag, `SKILLCAT_LISTEN` and the config file's
//! `listen`, in one type.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs as _};
use std::str::FromStr;

/// An address to listen on, as written: `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT` (a name, resolved
/// when the server starts) or `:PORT` (every IPv4 interface, `0.0.0.0:PORT`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct ListenAddr(Kind);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Socket(SocketAddr),
    /// A host name (never an IP address) and a port.
    Host(String, u16),
}

/// Why a text is no address to listen on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected IP:PORT, [IPv6]:PORT, HOST:PORT or :PORT (every IPv4 interface), such as 127.0.0.1:8080")]
pub struct InvalidListenAddr;

impl ListenAddr {
    pub const fn socket(address: SocketAddr) -> Self {
        ListenAddr(Kind::Socket(address))
    }

    /// The socket address to bind: the address itself, or the host name's first IPv4 address if
    /// it has one (`localhost` is then 127.0.0.1, as most clients and documents assume), else its
    /// first address.
    pub fn resolve(&self) -> std::io::Result<SocketAddr> {
        match &self.0 {
            Kind::Socket(address) => Ok(*address),
            Kind::Host(host, port) => {
                let addresses: Vec<SocketAddr> = (host.as_str(), *port).to_socket_addrs()?.collect();
                let preferred = addresses.iter().find(|address| address.is_ipv4()).or(addresses.first());
                preferred
                    .copied()
                    .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host} has no address")))
            }
        }
    }
}

impl From<SocketAddr> for ListenAddr {
    fn from(address: SocketAddr) -> Self {
        ListenAddr::socket(address)
    }
}

impl FromStr for ListenAddr {
    type Err = InvalidListenAddr;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Ok(address) = text.parse::<SocketAddr>() {
            return Ok(ListenAddr(Kind::Socket(address)));
        }
        let (host, port) = text.rsplit_once(':').ok_or(InvalidListenAddr)?;
        // `u16::from_str` takes a leading `+`; a port is digits only.
        if port.is_empty() || !port.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(InvalidListenAddr);
        }
        let port: u16 = port.parse().map_err(|_| InvalidListenAddr)?;
        if host.is_empty() {
            return Ok(ListenAddr(Kind::Socket(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))));
        }
        if is_host_name(host) { Ok(ListenAddr(Kind::Host(host.to_owned(), port))) } else { Err(InvalidListenAddr) }
    }
}

impl TryFrom<String> for ListenAddr {
    type Error = InvalidListenAddr;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Socket(address) => address.fmt(formatter),
            Kind::Host(host, port) => write!(formatter, "{host}:{port}"),
        }
    }
}

/// A DNS name: dot-separated labels of letters, digits, `-` and `_`, not starting or ending with
/// `-`. Digits and dots alone are refused: the resolver would read `10.1` as the IPv4 address
/// 10.0.0.1, a surprise rather than a name.
fn is_host_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
    };
    host.len() <= 253
        && host.split('.').all(label_ok)
        && !host.bytes().all(|byte| byte.is_ascii_digit() || byte == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        let socket = |text: &str| ListenAddr::socket(text.parse().unwrap());
        let cases = [
            ("127.0.0.1:8080", socket("127.0.0.1:8080")),
            ("0.0.0.0:0", socket("0.0.0.0:0")),
            ("[::]:8080", socket("[::]:8080")),
            ("[::1]:80", socket("[::1]:80")),
            (":8080", socket("0.0.0.0:8080")),
            ("localhost:8080", ListenAddr(Kind::Host("localhost".into(), 8080))),
            ("skills.internal.:443", ListenAddr(Kind::Host("skills.internal.".into(), 443))),
            ("my_host-1:1", ListenAddr(Kind::Host("my_host-1".into(), 1))),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<ListenAddr>(), Ok(expected), "{text}");
        }
        assert_eq!("localhost:8080".parse::<ListenAddr>().unwrap().to_string(), "localhost:8080");
        assert_eq!(":8080".parse::<ListenAddr>().unwrap().to_string(), "0.0.0.0:8080");
    }

    #[test]
    fn refused_forms() {
        for text in [
            "",
            "8080",
            ":",
            "localhost",
            "localhost:",
            ":+80",
            "host:65536",
            "host:-1",
            "::1:8080",
            "[::1]",
            "1.2.3:80",
            "256.0.0.1:80",
            "a b:80",
            "-host:80",
            "host..name:80",
            "http://localhost:80",
            "[host]:80",
        ] {
            assert_eq!(text.parse::<ListenAddr>(), Err(InvalidListenAddr), "{text:?}");
        }
    }

    #[test]
    fn localhost_resolves_to_loopback_preferring_ipv4() {
        let address = "localhost:8080".parse::<ListenAddr>().unwrap().resolve().unwrap();
        assert!(address.ip().is_loopback(), "{address}");
        assert_eq!(address.port(), 8080);
        // Where localhost has an IPv4 address (it has on any ordinary host), that one is taken.
        let has_ipv4 = ("localhost", 0).to_socket_addrs().unwrap().any(|address| address.is_ipv4());
        assert_eq!(address.is_ipv4(), has_ipv4);
    }
}
