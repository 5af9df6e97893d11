//! Headless Chromium driven through chromedriver's WebDriver HTTP API: a plain HTTP/1.1
//! client over a `TcpStream` speaking JSON, so the test needs no browser-automation crate.
//!
//! [`Browser::start`] runs chromedriver on a free loopback port and opens one session with
//! its own temporary profile; dropping the browser ends the session and the driver process
//! group, so a failed test leaves no Chromium behind.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zooraft_tests::free_port;

/// Bound on one WebDriver call (page loads are bounded below it by the session's timeouts).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// One HTTP request to 127.0.0.1:`port`; the status and the body.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(CALL_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let body = body.unwrap_or("");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    // Read the head, then exactly the body it announces: a server may keep the connection
    // open whatever the request asked.
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("connection closed before the head ended: {raw:?}"));
        }
        raw.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &raw[head_end..];
        let complete = match length {
            Some(n) => body.len() >= n,
            None if chunked => body.windows(5).any(|w| w == b"0\r\n\r\n"),
            None => false,
        };
        if complete {
            break;
        }
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&raw[head_end..]).into_owned();
    Ok((status, if chunked { dechunk(&body) } else { body }))
}

/// The body of a chunked answer.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// A WebDriver session on headless Chromium.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session (1280×900).
    pub fn start() -> Browser {
        let port = free_port();
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut cmd = Command::new("/usr/bin/chromedriver");
        cmd.arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let driver = cmd.spawn().expect("run /usr/bin/chromedriver");
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http(port, "GET", "/status", &[], None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         format!("--user-data-dir={}", browser._profile.path().display()),
                         "--window-size=1280,900"],
            },
            "timeouts": {"pageLoad": 30000, "script": 20000},
        }}});
        let created = browser.call("POST", "/session", Some(caps));
        browser.session = created["sessionId"]
            .as_str()
            .expect("a WebDriver session id")
            .to_string();
        browser
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let text = body.map(|b| b.to_string());
        let (status, answer) = http(self.port, method, path, &[], text.as_deref())
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let value: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}: {answer}"));
        assert_eq!(status, 200, "WebDriver {method} {path}: {answer}");
        value["value"].clone()
    }

    fn s(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Loads `url` and waits for the document to finish loading.
    pub fn open(&self, url: &str) {
        self.s("POST", "/url", Some(json!({ "url": url })));
    }

    /// Loads `url` as a new document (a URL that differs from the current one only in its
    /// fragment would otherwise not reload the page).
    pub fn open_fresh(&self, url: &str) {
        self.open("about:blank");
        self.open(url);
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.s(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Runs an async script: it must call `arguments[arguments.length - 1](result)`.
    pub fn run_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.s(
            "POST",
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        let b64 = self.s("GET", "/screenshot", None);
        base64_decode(b64.as_str().expect("screenshot data"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                &[],
                None,
            );
        }
        // chromedriver runs in its own process group, with the Chromium it started.
        // SAFETY: killpg only sends a signal; the group id is our child's pid.
        unsafe {
            libc::killpg(self.driver.id() as i32, libc::SIGTERM);
        }
        let _ = self.driver.wait();
    }
}

/// Standard base64 (WebDriver's screenshot encoding).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
