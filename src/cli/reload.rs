//! `weir reload`: ask the running weir to reload its config, through its
//! admin API (`POST /admin/reload`, the address and token of the config's
//! `[admin]` table), wait for the answer and say what it was.
//!
//! The admin API rather than a signal: a signal cannot answer, and the
//! point of the command is to know whether the new config is running (its
//! generation) or why it is not (the problems, file and line). weir keeps
//! no pid file; for a SIGHUP, `systemctl reload weir` or `kill -HUP`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::config::Secret;

/// How long the running weir may take to reload (it reads certificates
/// and key files; an ACME account may be set up).
const ANSWER_WITHIN: Duration = Duration::from_secs(120);
/// The most of an answer read (a config with thousands of problems).
const MAX_ANSWER: u64 = 4 << 20;

/// What the running weir said.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The new config runs; `restart_needed` lists settings it holds that
    /// only a restart applies.
    Reloaded {
        generation: u64,
        restart_needed: Vec<String>,
    },
    /// It refused the new config (the running one stays): every problem.
    Refused(Vec<String>),
}

/// Where an address that listens on every interface is reached from here.
fn reachable(admin: SocketAddr) -> SocketAddr {
    match admin.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, admin.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, admin.port()).into(),
        _ => admin,
    }
}

/// One request to the admin API at `admin`: its status and body.
pub(super) fn call(
    admin: SocketAddr,
    token: &Secret,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let addr = reachable(admin);
    let fail = |e: std::io::Error| format!("the admin API at {addr}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(fail)?;
    stream.set_read_timeout(Some(ANSWER_WITHIN)).map_err(fail)?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        token.0,
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(fail)?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .map_err(fail)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("the admin API at {addr} sent no HTTP answer"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    Ok((status, body.trim().to_string()))
}

/// Ask the weir whose admin API is at `admin` to reload.
pub(super) fn reload(admin: SocketAddr, token: &Secret) -> Result<Outcome, String> {
    let addr = reachable(admin);
    let (status, body) = call(admin, token, "POST", "/admin/reload", None)?;
    let body = body.as_str();
    let json: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_default();
    match status {
        200 => Ok(Outcome::Reloaded {
            generation: json["generation"].as_u64().unwrap_or(0),
            restart_needed: strings(&json["restart_needed"]),
        }),
        422 => Ok(Outcome::Refused(strings(&json["problems"]))),
        401 => Err(format!(
            "the admin API at {addr} refused the token: is it the running weir's `[admin]` token?"
        )),
        404 => Err(format!(
            "the admin API at {addr} has no /admin endpoints: the running weir has no `[admin]` token"
        )),
        other => Err(format!(
            "the admin API at {addr} answered {other}: {}",
            body.trim()
        )),
    }
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
