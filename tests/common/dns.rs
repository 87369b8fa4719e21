//! A DNS server on 127.0.0.1:0 (UDP) for the tests that change what a name
//! resolves to: it answers A queries for any name with the addresses set
//! now (TTL 0), AAAA queries with none, or SERVFAIL for every query while
//! failing. A few dozen lines of RFC 1035 rather than a server crate: the
//! tests need only this.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;

#[derive(Clone, Debug)]
pub enum Answer {
    Addrs(Vec<Ipv4Addr>),
    ServFail,
}

pub struct Dns {
    pub addr: SocketAddr,
    answer: Arc<Mutex<Answer>>,
    queries: Arc<AtomicUsize>,
}

impl Dns {
    pub async fn start(answer: Answer) -> Dns {
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind dns");
        let addr = socket.local_addr().expect("addr");
        let answer = Arc::new(Mutex::new(answer));
        let queries = Arc::new(AtomicUsize::new(0));
        let (now, count) = (answer.clone(), queries.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                count.fetch_add(1, Ordering::SeqCst);
                let current = now.lock().expect("lock").clone();
                if let Some(reply) = reply(&buf[..n], &current) {
                    let _ = socket.send_to(&reply, from).await;
                }
            }
        });
        Dns {
            addr,
            answer,
            queries,
        }
    }

    pub fn set(&self, answer: Answer) {
        *self.answer.lock().expect("lock") = answer;
    }

    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

/// The reply to one query: its header and question echoed, then answers.
fn reply(query: &[u8], answer: &Answer) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    // The question: labels up to the root, then type and class.
    let mut end = 12;
    while *query.get(end)? != 0 {
        end += 1 + usize::from(query[end]);
    }
    let question = query.get(12..end + 5)?;
    let qtype = u16::from_be_bytes([question[question.len() - 4], question[question.len() - 3]]);
    let (rcode, addrs): (u8, &[Ipv4Addr]) = match answer {
        Answer::ServFail => (2, &[]),
        Answer::Addrs(a) if qtype == 1 => (0, a),
        Answer::Addrs(_) => (0, &[]),
    };
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&query[..2]); // id
    out.push(0x81 | (query[2] & 0x01)); // response, recursion desired as asked
    out.push(0x80 | rcode); // recursion available
    out.extend_from_slice(&[0, 1]);
    out.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(question);
    for a in addrs {
        // The name by pointer to the question's, A, IN, TTL 0, 4 bytes.
        out.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
        out.extend_from_slice(&a.octets());
    }
    Some(out)
}
