//! The console's answers: its static files, and the headers every answer carries (no
//! script but its own, nothing cached, nothing sniffed).

use hyper::header::HeaderValue;
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::super::http::{self, Body};

/// The static files: name, content type, bytes. The script is split by page; the HTML
/// loads the files in this order (the helpers first, the frame last).
pub const ASSETS: [(&str, &str, &str); 8] = [
    (
        "console-base.js",
        "text/javascript",
        include_str!("assets/console-base.js"),
    ),
    (
        "console-ensemble.js",
        "text/javascript",
        include_str!("assets/console-ensemble.js"),
    ),
    (
        "console-tree.js",
        "text/javascript",
        include_str!("assets/console-tree.js"),
    ),
    (
        "console-sessions.js",
        "text/javascript",
        include_str!("assets/console-sessions.js"),
    ),
    (
        "console-metrics.js",
        "text/javascript",
        include_str!("assets/console-metrics.js"),
    ),
    (
        "console.js",
        "text/javascript",
        include_str!("assets/console.js"),
    ),
    (
        "console.css",
        "text/css",
        include_str!("assets/console.css"),
    ),
    (
        "",
        "text/html; charset=utf-8",
        include_str!("assets/console.html"),
    ),
];

/// No script but the console's own file, no styles but its own, nothing from elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   frame-ancestors 'none'; form-action 'none'";

pub fn with_headers(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    h.insert("Content-Security-Policy", HeaderValue::from_static(CSP));
    h.insert(
        "X-Content-Type-Options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("Cache-Control", HeaderValue::from_static("no-store"));
    h.insert("Referrer-Policy", HeaderValue::from_static("no-referrer"));
    r
}

pub fn json_answer(status: StatusCode, body: &Value) -> Response<Body> {
    let text = serde_json::to_string(body).unwrap_or_default();
    with_headers(http::answer(status, "application/json", text))
}

pub fn error(status: StatusCode, message: impl std::fmt::Display) -> Response<Body> {
    json_answer(status, &json!({"error": message.to_string()}))
}
