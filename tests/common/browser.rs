//! Headless Chromium driven over the DevTools protocol: open a page, read
//! the DOM with JavaScript, keep every console error, uncaught exception
//! and browser log error (a Content-Security-Policy violation is one),
//! and take screenshots. For the tests of what only a browser shows.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Debian's Chromium, if installed.
pub fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// One headless Chromium with one page (a DevTools session on it);
/// killed on drop.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
    /// Every error the page reported, in order.
    pub errors: Vec<String>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long one DevTools command may take.
const CALL: Duration = Duration::from_secs(30);

impl Browser {
    /// Start `chromium` headless and attach to a blank page.
    pub async fn start(chromium: &Path) -> Browser {
        let profile = tempfile::tempdir().expect("profile");
        let mut child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let url = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(30)))
            .await
            .expect("join")
            .expect("chromium prints its DevTools address");
        let (ws, _) = tokio_tungstenite::connect_async(&url)
            .await
            .expect("DevTools connects");
        let mut b = Browser {
            child,
            _profile: profile,
            ws,
            session: String::new(),
            next: 0,
            errors: Vec::new(),
        };
        let target = b
            .browser_call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let target = target["targetId"].as_str().expect("a target").to_string();
        let attached = b
            .browser_call(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await;
        b.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.call(domain, json!({})).await;
        }
        b
    }

    async fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(json!({"method": method, "params": params})).await
    }

    /// A command to the page's session; its result.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(json!({"method": method, "params": params, "sessionId": session}))
            .await
    }

    async fn send(&mut self, mut message: Value) -> Value {
        self.next += 1;
        let id = self.next;
        message["id"] = json!(id);
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .expect("DevTools send");
        tokio::time::timeout(CALL, async {
            loop {
                let frame = self.ws.next().await.expect("DevTools open").expect("frame");
                let Message::Text(text) = frame else { continue };
                let v: Value = serde_json::from_str(&text).expect("DevTools JSON");
                if v["id"].as_u64() == Some(id) {
                    assert!(v.get("error").is_none(), "{message}: {v}");
                    return v["result"].clone();
                }
                self.note(&v);
            }
        })
        .await
        .expect("DevTools answers in time")
    }

    /// Keep what an event says went wrong.
    fn note(&mut self, event: &Value) {
        let p = &event["params"];
        match event["method"].as_str() {
            Some("Runtime.consoleAPICalled")
                if matches!(p["type"].as_str(), Some("error" | "assert")) =>
            {
                self.errors
                    .push(format!("console.{}: {}", p["type"], p["args"]));
            }
            Some("Runtime.exceptionThrown") => {
                self.errors
                    .push(format!("exception: {}", p["exceptionDetails"]));
            }
            Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                self.errors.push(format!("log: {}", p["entry"]));
            }
            _ => {}
        }
    }

    /// Set the viewport (`mobile`: a phone's, with touch and its meta
    /// viewport honoured).
    pub async fn viewport(&mut self, width: u32, height: u32, mobile: bool) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
    }

    /// Go to `url` and wait until the document has loaded.
    pub async fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        let loaded = self
            .until(
                Duration::from_secs(30),
                "document.readyState === 'complete' && location.href !== 'about:blank'",
            )
            .await;
        assert!(loaded, "{url} loads");
    }

    /// The value of the JavaScript expression `js` (promises awaited).
    pub async fn eval(&mut self, js: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(e) = r.get("exceptionDetails") {
            panic!("{js} threw: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Whether `js` becomes true within `within` (polled every 50 ms).
    pub async fn until(&mut self, within: Duration, js: &str) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.eval(js).await == json!(true) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The page from its top, as a PNG, at most `max_height` CSS pixels
    /// of it.
    pub async fn screenshot(&mut self, to: &Path, max_height: f64) {
        let m = self.call("Page.getLayoutMetrics", json!({})).await;
        let size = &m["cssContentSize"];
        let width = size["width"].as_f64().unwrap_or(800.0);
        let height = size["height"].as_f64().unwrap_or(600.0).min(max_height);
        let r = self
            .call(
                "Page.captureScreenshot",
                json!({
                    "format": "png",
                    "captureBeyondViewport": true,
                    "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                }),
            )
            .await;
        use base64::Engine;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("image data"))
            .expect("base64");
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).expect("screenshot directory");
        }
        std::fs::write(to, png).expect("screenshot written");
    }
}
