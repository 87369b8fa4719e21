//! A connection flood for `bench/flood_scale.sh`: opens connections to
//! ADDR as fast as one task can, sends half a request head on each (the
//! slowloris signature, so each is reclaimable), keeps the newest HOLD
//! open and closes the oldest, for SECONDS. Prints the connections made.
//!
//! Connections come from 127.0.0.2 … 127.0.0.251 in turn and are closed
//! with a reset (linger 0): one source address's 28,000 ephemeral ports,
//! half of them in TIME_WAIT, would otherwise throttle the flood itself.
//!
//! `cargo run --release --example conn_flood ADDR HOLD SECONDS`

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use std::net::{Ipv4Addr, SocketAddr};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr: SocketAddr = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    let hold: usize = args.get(1).and_then(|h| h.parse().ok()).unwrap_or(1000);
    let seconds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut open = VecDeque::with_capacity(hold + 1);
    let mut made = 0u64;
    let mut failed = 0u64;
    let mut source = 0u8;
    while Instant::now() < end {
        source = source % 250 + 1;
        let connected = async {
            let socket = TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, source + 1), 0)))?;
            socket.set_reuseaddr(true)?;
            socket.set_zero_linger()?;
            socket.connect(addr).await
        };
        match connected.await {
            Ok(mut s) => {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: flood\r\n").await;
                made += 1;
                open.push_back(s);
                if open.len() > hold {
                    open.pop_front();
                }
            }
            Err(_) => failed += 1,
        }
    }
    println!("{{\"made\": {made}, \"failed\": {failed}, \"seconds\": {seconds}}}");
}
