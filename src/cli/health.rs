//! `skillcat health`: a liveness check of a running server with nothing but a TCP connection.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

use crate::listen::ListenAddr;

pub fn main(listen: ListenAddr, timeout: Duration) -> ExitCode {
    match check(listen, timeout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("skillcat: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The address to reach a server listening on `listen` from this host.
fn target(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

fn check(listen: ListenAddr, timeout: Duration) -> Result<(), String> {
    // The name resolved as `serve` resolves it, so both mean the same address.
    let listen = listen.resolve().map_err(|error| format!("health check of {listen} failed: {error}"))?;
    let address = target(listen);
    let failed = |error: std::io::Error| format!("health check of {address} failed: {error}");
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(failed)?;
    stream.set_read_timeout(Some(timeout)).map_err(failed)?;
    stream.set_write_timeout(Some(timeout)).map_err(failed)?;
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(failed)?;
    // The status line is all that matters; the answer is a few hundred bytes.
    let mut answer = Vec::new();
    stream.take(4096).read_to_end(&mut answer).map_err(failed)?;
    let status_line = answer.split(|&byte| byte == b'\r').next().unwrap_or_default();
    match status_line.strip_prefix(b"HTTP/1.1 ") {
        Some(rest) if rest.starts_with(b"200 ") => Ok(()),
        _ => Err(format!("health check of {address} failed: {}", String::from_utf8_lossy(status_line))),
    }
}
