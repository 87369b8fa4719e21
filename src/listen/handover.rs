//! Listening sockets handed from one weir process to the next, for a
//! binary upgrade without a refused connection.
//!
//! The running process starts the new binary with its listening sockets
//! as inherited descriptors, named in the systemd socket-activation
//! protocol (`LISTEN_FDS`, `LISTEN_FDNAMES`; the `listenfd` crate reads
//! it), and waits for the new process to say `READY=1` on a notify socket
//! of its own. Both accept from the same sockets meanwhile, so a client is
//! never refused: the kernel's backlog is shared. Then the old process
//! stops accepting and drains. If the new one fails to start or to become
//! ready, it is killed and the old one keeps serving.

use std::collections::HashMap;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};

/// Sockets this process inherited, by listener name (`admin` for the
/// admin listener).
#[derive(Default)]
pub(crate) struct Inherited(HashMap<String, TcpListener>);

impl Inherited {
    /// Read `LISTEN_FDS`/`LISTEN_FDNAMES` (once, at start).
    pub(crate) fn from_env() -> Self {
        let names: Vec<String> = std::env::var("LISTEN_FDNAMES")
            .map(|n| n.split(':').map(str::to_string).collect())
            .unwrap_or_default();
        let mut fds = listenfd::ListenFd::from_env();
        let mut out = HashMap::new();
        for (i, name) in names.into_iter().enumerate() {
            if let Ok(Some(l)) = fds.take_tcp_listener(i) {
                out.insert(name, l);
            }
        }
        Inherited(out)
    }

    /// The socket named `name`, if it was inherited.
    pub(crate) fn take(&mut self, name: &str) -> Option<TcpListener> {
        self.0.remove(name)
    }
}

/// How long a new process has to become ready.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Start `exe args` with `sockets` (name, socket) handed over, and wait
/// until it is ready. Returns its pid; on any failure the new process is
/// gone and the reason is returned.
pub(crate) fn start_successor(
    sockets: &[(String, TcpListener)],
    exe: PathBuf,
    args: Vec<String>,
) -> Result<u32, String> {
    let notify_path = std::env::temp_dir().join(format!(
        "weir-upgrade-{}-{}.sock",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let _ = std::fs::remove_file(&notify_path);
    let notify = UnixDatagram::bind(&notify_path)
        .map_err(|e| format!("cannot make the notify socket: {e}"))?;
    let cleanup = || {
        let _ = std::fs::remove_file(&notify_path);
    };
    let mut mappings = Vec::new();
    for (i, (name, socket)) in sockets.iter().enumerate() {
        let dup = socket
            .try_clone()
            .map_err(|e| format!("cannot duplicate the `{name}` socket: {e}"))?;
        mappings.push(FdMapping {
            parent_fd: OwnedFd::from(dup),
            child_fd: 3 + i as i32,
        });
    }
    let names: Vec<&str> = sockets.iter().map(|(n, _)| n.as_str()).collect();
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(&args)
        .env("LISTEN_FDS", sockets.len().to_string())
        .env("LISTEN_FDNAMES", names.join(":"))
        .env_remove("LISTEN_PID")
        .env("NOTIFY_SOCKET", &notify_path);
    // systemd's own socket, for the new process to claim MAINPID with.
    if let Ok(systemd) = std::env::var("NOTIFY_SOCKET") {
        cmd.env(crate::systemd::SUCCESSOR_OF, systemd);
    }
    cmd.fd_mappings(mappings)
        .map_err(|e| format!("cannot hand over the sockets: {e}"))?;
    let mut child = cmd.spawn().map_err(|e| {
        cleanup();
        format!("cannot start {}: {e}", exe.display())
    })?;
    let deadline = Instant::now() + READY_TIMEOUT;
    let _ = notify.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 1024];
    let outcome = loop {
        if let Ok(n) = notify.recv(&mut buf)
            && String::from_utf8_lossy(&buf[..n])
                .lines()
                .any(|l| l == "READY=1")
        {
            break Ok(child.id());
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!(
                "the new process exited before it was ready ({status})"
            ));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break Err(format!(
                "the new process was not ready within {} s",
                READY_TIMEOUT.as_secs()
            ));
        }
    };
    cleanup();
    // The new process runs on by itself; reap it if it ever exits while
    // this one still runs.
    if outcome.is_ok() {
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
    outcome
}
