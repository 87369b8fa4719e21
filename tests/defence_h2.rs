//! HTTP/2 abuse, sent as raw frames (byte-exact, so each attack is exactly
//! what it names): the abusive connection is closed with GOAWAY
//! ENHANCE_YOUR_CALM and a parallel normal client is unaffected; an idle
//! connection that only PINGs is closed at the keep-alive deadline.

mod common;

use std::time::{Duration, Instant};

use common::h2raw::*;
use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A normal request on its own connection, made while the attack runs.
async fn bystander_succeeds(weir: &Weir) {
    let (status, _, b) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 200, "{b}");
}

async fn weir(extra: &str) -> Weir {
    let up = demo_upstream().await;
    Weir::start(&format!("{extra}\n{}", simple_config(up, ""))).await
}

#[tokio::test]
async fn a_normal_h2c_request_works() {
    let weir = weir("").await;
    let mut s = h2_connect(weir.addr("web")).await;
    let mut req = frame(SETTINGS, 0x1, 0, &[]);
    req.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, REQUEST_BLOCK));
    s.write_all(&req).await.expect("request");
    let (frames, _) = server_frames(&mut s, Duration::from_millis(500)).await;
    assert!(
        frames
            .iter()
            .any(|(k, f, _)| *k == DATA && f & END_STREAM != 0),
        "a full response arrived: {frames:?}"
    );
}

#[tokio::test]
async fn rapid_reset_is_closed_with_enhance_your_calm() {
    let weir = weir("").await;
    let mut s = h2_connect(weir.addr("web")).await;
    let mut burst = Vec::new();
    for i in 0..2000u32 {
        let id = 1 + 2 * i;
        burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, REQUEST_BLOCK));
        burst.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    let _ = s.write_all(&burst).await;
    bystander_succeeds(&weir).await;
    let (frames, closed) = server_frames(&mut s, Duration::from_secs(5)).await;
    assert_eq!(
        goaway_code(&frames),
        Some(ENHANCE_YOUR_CALM),
        "{:?}",
        frames.iter().map(|f| f.0).collect::<Vec<_>>()
    );
    assert!(closed);
}

#[tokio::test]
async fn continuation_flood_is_closed() {
    let weir = weir("").await;
    let mut s = h2_connect(weir.addr("web")).await;
    let mut flood = frame(HEADERS, 0, 1, REQUEST_BLOCK);
    // Header fields that never end: literal "x-pad: aaaa..." without indexing.
    let mut field = vec![0x00, 0x05];
    field.extend_from_slice(b"x-pad");
    field.push(100);
    field.extend_from_slice(&[b'a'; 100]);
    for _ in 0..20_000 {
        flood.extend(frame(CONTINUATION, 0, 1, &field));
    }
    let _ = s.write_all(&flood).await;
    bystander_succeeds(&weir).await;
    let (frames, closed) = server_frames(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "the connection was closed");
    assert!(
        goaway_code(&frames).is_some(),
        "with a GOAWAY: {:?}",
        frames.iter().map(|f| f.0).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn ping_flood_is_closed_with_enhance_your_calm() {
    let weir = weir("[http2]\nmax_control_frames_per_second = 100").await;
    let mut s = h2_connect(weir.addr("web")).await;
    let mut flood = Vec::new();
    for i in 0..1000u64 {
        flood.extend(frame(PING, 0, 0, &i.to_be_bytes()));
    }
    let _ = s.write_all(&flood).await;
    bystander_succeeds(&weir).await;
    let (frames, closed) = server_frames(&mut s, Duration::from_secs(5)).await;
    assert!(closed);
    assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM));
    let m = metrics(&weir).await;
    assert!(
        m.contains("weir_connections_closed_total{reason=\"h2_flood\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn empty_data_frames_flood_is_closed() {
    let weir = weir("").await;
    let mut s = h2_connect(weir.addr("web")).await;
    let mut flood = frame(HEADERS, END_HEADERS, 1, REQUEST_BLOCK);
    for _ in 0..200 {
        flood.extend(frame(DATA, 0, 1, &[]));
    }
    let _ = s.write_all(&flood).await;
    let (frames, closed) = server_frames(&mut s, Duration::from_secs(5)).await;
    assert!(closed);
    assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM));
}

#[tokio::test]
async fn idle_h2_connection_is_closed_even_while_pinging() {
    let weir = weir("[connections]\nkeepalive_timeout = \"400ms\"").await;
    let mut s = h2_connect(weir.addr("web")).await;
    let mut first = frame(SETTINGS, 0x1, 0, &[]);
    first.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, REQUEST_BLOCK));
    s.write_all(&first).await.expect("request");
    let started = Instant::now();
    let (mut reader, mut writer) = s.into_split();
    let pinger = tokio::spawn(async move {
        for i in 0..60u64 {
            if writer
                .write_all(&frame(PING, 0, 0, &i.to_be_bytes()))
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut bytes = Vec::new();
    let closed = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut bytes),
    )
    .await
    .is_ok();
    pinger.abort();
    assert!(closed, "PINGs do not keep an idle connection open");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // The server answered the PINGs and ended with a graceful GOAWAY.
    let frames = parse_frames(&bytes);
    let kinds: Vec<u8> = frames.iter().map(|f| f.0).collect();
    assert!(
        frames.iter().any(|(k, f, _)| *k == PING && f & 0x1 != 0),
        "PINGs were acknowledged: {kinds:?}"
    );
    assert_eq!(goaway_code(&frames), Some(NO_ERROR), "{kinds:?}");
}

/// Write the preface in pieces (`cuts` are offsets into it), pausing after
/// each so the server reads them separately, then `rest` in one write.
async fn split_preface(addr: std::net::SocketAddr, cuts: &[usize], rest: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut from = 0;
    for &cut in cuts {
        s.write_all(&PREFACE[from..cut]).await.expect("part");
        from = cut;
        // The attack is the pause: the client waits between the pieces.
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let mut tail = PREFACE[from..].to_vec();
    tail.extend_from_slice(rest);
    let _ = s.write_all(&tail).await;
    s
}

#[tokio::test]
async fn a_preface_split_at_any_offset_still_meets_the_flood_meter() {
    let weir = weir("[http2]\nmax_control_frames_per_second = 100").await;
    let mut flood = frame(SETTINGS, 0, 0, &[]);
    for i in 0..2000u64 {
        flood.extend(frame(PING, 0, 0, &i.to_be_bytes()));
    }
    let one_byte_per_write: Vec<usize> = (1..PREFACE.len()).collect();
    let mut splits: Vec<Vec<usize>> = (1..PREFACE.len()).map(|k| vec![k]).collect();
    splits.push(one_byte_per_write);
    for cuts in &splits {
        let mut s = split_preface(weir.addr("web"), cuts, &flood).await;
        let (frames, closed) = server_frames(&mut s, Duration::from_secs(5)).await;
        assert!(
            closed,
            "split at {cuts:?}: the flooding connection was closed"
        );
        assert_eq!(
            goaway_code(&frames),
            Some(ENHANCE_YOUR_CALM),
            "split at {cuts:?}: {:?}",
            frames.iter().map(|f| f.0).collect::<Vec<_>>()
        );
    }
    let m = metrics(&weir).await;
    assert!(
        m.contains(&format!(
            "weir_connections_closed_total{{reason=\"h2_flood\"}} {}",
            splits.len()
        )),
        "{m}"
    );
}

#[tokio::test]
async fn an_idle_h2c_connection_never_receives_http1_bytes() {
    let weir = weir("[connections]\nrequest_head_timeout = \"300ms\"").await;
    let addr = weir.addr("web");
    // A split preface then silence; half a preface then silence.
    let mut whole = split_preface(addr, &[2], &frame(SETTINGS, 0, 0, &[])).await;
    let mut half = TcpStream::connect(addr).await.expect("connect");
    half.write_all(&PREFACE[..2]).await.expect("write");
    for (name, s) in [("split preface", &mut whole), ("half a preface", &mut half)] {
        let (bytes, closed) = read_bytes_until_close(s, Duration::from_secs(3)).await;
        assert!(closed, "{name}: closed at the head deadline");
        assert!(
            !bytes.windows(5).any(|w| w == b"HTTP/"),
            "{name}: no HTTP/1.1 bytes on a connection that may be HTTP/2: {:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
}
