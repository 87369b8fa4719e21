//! systemd's notify protocol from the real binary: READY, RELOADING with
//! its timestamp, WATCHDOG, STOPPING, and the new MAINPID after an upgrade.

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::process::*;
use common::*;

/// The socket systemd would listen on for notifications (`NOTIFY_SOCKET`),
/// in `dir`; a read waits at most `timeout`.
fn notify_socket(dir: &tempfile::TempDir, timeout: Duration) -> (UnixDatagram, PathBuf) {
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind notify socket");
    socket.set_read_timeout(Some(timeout)).expect("timeout");
    (socket, path)
}

#[test]
fn systemd_hears_ready_reloading_watchdog_and_stopping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (socket, socket_path) = notify_socket(&dir, Duration::from_secs(10));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let up = runtime.block_on(demo_upstream());
    let path = write_config(&dir, &run_config(up));
    // WATCHDOG_PID must be weir's own pid: exec keeps the shell's.
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "WATCHDOG_PID=$$ WATCHDOG_USEC=200000 exec \"$0\" run --config \"$1\"",
        WEIR,
        &path,
    ])
    .env("NOTIFY_SOCKET", &socket_path);
    let mut weir = Proc::spawn_command(cmd);
    let mut heard = Vec::new();
    let next = |until: &str| -> Vec<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            let n = socket
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("waiting for {until}: {e}; heard {got:?}"));
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = msg.contains(until);
            got.push(msg);
            if done {
                return got;
            }
        }
    };
    heard.extend(next("READY=1"));
    weir.listening("web");
    heard.extend(next("WATCHDOG=1"));
    weir.signal("-HUP");
    let reload = next("RELOADING=1");
    assert!(
        reload.last().expect("msg").contains("MONOTONIC_USEC="),
        "systemd 253+ needs the timestamp: {reload:?}"
    );
    let after = next("READY=1");
    heard.extend(reload);
    heard.extend(after);
    weir.signal("-TERM");
    heard.extend(next("STOPPING=1"));
    assert_eq!(weir.wait_exit(Duration::from_secs(10)), 0);
    let first_ready = heard
        .iter()
        .position(|m| m.contains("READY=1"))
        .expect("ready");
    assert_eq!(first_ready, 0, "READY=1 comes first: {heard:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_an_upgrade_systemd_hears_the_new_main_pid_and_no_stopping() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (socket, socket_path) = notify_socket(&dir, Duration::from_secs(15));
    let path = write_config(&dir, &run_config(up));
    let mut cmd = Command::new(WEIR);
    cmd.args(["run", "--config", &path])
        .env("NOTIFY_SOCKET", &socket_path);
    let mut weir = Proc::spawn_command(cmd);
    weir.listening("web");
    let messages = tokio::task::spawn_blocking(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = socket.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = msg.contains("MAINPID=");
            got.push(msg);
            if done {
                // Anything the old process says while it drains.
                let _ = socket.set_read_timeout(Some(Duration::from_millis(1500)));
            }
        }
        got
    });
    weir.signal("-USR2");
    let ready = weir.wait_for(|l| l.contains("the new process is ready"));
    let new_pid = log_pid(&ready);
    assert_eq!(weir.wait_exit(Duration::from_secs(20)), 0);
    let messages = messages.await.expect("join");
    signal(new_pid, "-TERM");
    assert!(
        messages
            .iter()
            .any(|m| m.contains(&format!("MAINPID={new_pid}")) && m.contains("READY=1")),
        "{messages:?}"
    );
    assert!(
        !messages.iter().any(|m| m.contains("STOPPING=1")),
        "the unit is not stopping: {messages:?}"
    );
}
