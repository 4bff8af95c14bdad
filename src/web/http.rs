//! The listener's answers: the routes (the watch page, its bundle, the certificate's hash),
//! the request line and head checks, and a response as bytes on the wire. Pure functions over
//! a complete request head: nothing here reads a socket.

use std::borrow::Cow;

use super::Sources;

/// The built page (`web/dist/`, see the module header of `crate::web`).
const INDEX_HTML: &[u8] = include_bytes!("../../web/dist/index.html");
const WATCH_JS: &[u8] = include_bytes!("../../web/dist/watch.js");
const WATCH_CSS: &[u8] = include_bytes!("../../web/dist/watch.css");
const LICENSES: &[u8] = include_bytes!("../../web/dist/LICENSES.txt");

/// The page's scripts, styles and connections come from its own origin, except WebTransport
/// sessions, which go to an `https:` URL (the relay's UDP port, or a `relay=` of the query),
/// the WebSocket a player falls back to without WebTransport (`wss:`, the same port), and
/// the player's audio worklet and workers, which it builds from its own code as `blob:` URLs
/// (only a script already running in the page can make one); without them the player plays
/// no sound.
const CSP: &str = "default-src 'self'; script-src 'self' blob:; worker-src 'self' blob:; connect-src 'self' https: wss:; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// One answer: status, type, extra headers, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, Cow<'static, str>)>,
    /// The embedded files are borrowed, not copied per request: a connection that reads its
    /// answer slowly holds no copy of the bundle.
    pub body: Cow<'static, [u8]>,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<Cow<'static, [u8]>>) -> Self {
        Response { status, content_type, headers: Vec::new(), body: body.into() }
    }

    pub(crate) fn text(status: u16, body: &str) -> Self {
        Response::new(status, "text/plain; charset=utf-8", body.as_bytes().to_vec())
    }

    pub(crate) fn with(mut self, name: &'static str, value: impl Into<Cow<'static, str>>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The response as bytes on the wire; a HEAD answer has the headers (with the length the
    /// body would have) and no body (RFC 9110 §9.3.2).
    pub fn bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = self.head();
        if !head_only {
            out.extend_from_slice(&self.body);
        }
        out
    }

    /// The status line and headers, through the blank line that ends them.
    pub fn head(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// The answer to a whole request head (request line, headers, blank line), and whether it is
/// a HEAD request. Only the request line matters: `METHOD SP TARGET SP HTTP/1.x`.
pub fn respond(head: &[u8], sources: &Sources) -> (Response, bool) {
    let line_end = head.windows(2).position(|w| w == b"\r\n").unwrap_or(head.len());
    let line = head.get(..line_end).unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (Response::text(400, "bad request line\n"), false);
    };
    if !version.starts_with(b"HTTP/1.") || !target.starts_with(b"/") {
        return (Response::text(400, "bad request line\n"), false);
    }
    let is_head = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => return (Response::text(405, "GET or HEAD only\n").with("Allow", "GET, HEAD"), false),
    };
    let target = target.split(|b| *b == b'#').next().unwrap_or_default();
    let (path, query) = match target.iter().position(|b| *b == b'?') {
        Some(i) => (target.get(..i).unwrap_or_default(), target.get(i + 1..).unwrap_or_default()),
        None => (target, &b""[..]),
    };
    if let Some(r) = super::side::respond(path, query, head, sources) {
        return (r, is_head);
    }
    let response = match path {
        b"/" | b"/index.html" => Response::new(200, "text/html; charset=utf-8", INDEX_HTML)
            .with("Cache-Control", "no-cache")
            .with("Content-Security-Policy", CSP),
        b"/watch.js" => {
            Response::new(200, "text/javascript; charset=utf-8", WATCH_JS).with("Cache-Control", "no-cache")
        }
        b"/watch.css" => {
            Response::new(200, "text/css; charset=utf-8", WATCH_CSS).with("Cache-Control", "no-cache")
        }
        b"/LICENSES.txt" => Response::new(200, "text/plain; charset=utf-8", LICENSES),
        b"/certificate.sha256" => {
            Response::new(200, "text/plain; charset=utf-8", hex_lower(&(sources.certificate)()).into_bytes())
                .with("Cache-Control", "no-store")
                // A page served elsewhere (a development server, another relay) may pin this
                // relay's certificate too; the digest is public (the TLS handshake sends it).
                .with("Access-Control-Allow-Origin", "*")
        }
        _ => Response::text(404, "not found\n"),
    };
    (response, is_head)
}

/// Lowercase hex, no separators.
pub fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::web::tests::sources;
    use proptest::prelude::*;

    fn get(head: &str) -> (Response, bool) {
        respond(head.as_bytes(), &sources([0xab; 32]).0)
    }

    #[test]
    fn routes_and_methods() {
        let (r, head) = get("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!((r.status, r.content_type, head), (200, "text/html; charset=utf-8", false));
        assert!(r.body.starts_with(b"<!doctype html>"));
        assert!(r.headers.iter().any(|(n, _)| *n == "Content-Security-Policy"));
        assert_eq!(&*get("GET /?namespace=live&track=video HTTP/1.1\r\n\r\n").0.body, INDEX_HTML);
        assert_eq!(get("GET /index.html HTTP/1.0\r\n\r\n").0.status, 200);
        let js = get("GET /watch.js HTTP/1.1\r\n\r\n").0;
        assert_eq!((js.status, js.content_type), (200, "text/javascript; charset=utf-8"));
        assert_eq!(&*js.body, WATCH_JS);
        assert_eq!(get("GET /watch.css HTTP/1.1\r\n\r\n").0.content_type, "text/css; charset=utf-8");
        assert!(get("GET /LICENSES.txt HTTP/1.1\r\n\r\n").0.body.starts_with(b"Packages bundled"));
        for missing in ["/nope", "/watch.js/", "//", "/certificate.sha256x", "/../Cargo.toml"] {
            assert_eq!(get(&format!("GET {missing} HTTP/1.1\r\n\r\n")).0.status, 404, "{missing}");
        }
        let post = get("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").0;
        assert_eq!(post.status, 405);
        assert!(post.headers.contains(&("Allow", "GET, HEAD".into())));
        for bad in ["", "GET\r\n\r\n", "GET /\r\n\r\n", "GET / HTTP/2\r\n\r\n", "GET x HTTP/1.1\r\n\r\n"] {
            assert_eq!(get(bad).0.status, 400, "{bad:?}");
        }
        assert_eq!(get("GET  / HTTP/1.1\r\n\r\n").0.status, 400, "two spaces");
    }

    #[test]
    fn head_has_the_length_and_no_body() {
        let (r, head) = get("HEAD /watch.js HTTP/1.1\r\n\r\n");
        assert!(head);
        let wire = String::from_utf8(r.bytes(true)).unwrap();
        assert!(wire.contains(&format!("Content-Length: {}\r\n", WATCH_JS.len())), "{wire}");
        assert!(wire.ends_with("\r\n\r\n"), "{wire}");
    }

    #[test]
    fn certificate_hash_is_lowercase_hex_and_follows_the_source() {
        let (src, current) = sources([0xab; 32]);
        let r = respond(b"GET /certificate.sha256 HTTP/1.1\r\n\r\n", &src).0;
        assert_eq!(r.status, 200);
        assert_eq!(&*r.body, "ab".repeat(32).as_bytes());
        assert!(r.headers.contains(&("Cache-Control", "no-store".into())));
        let mut next = [0u8; 32];
        next[0] = 0x0f;
        next[31] = 0xf0;
        *current.lock().unwrap() = next;
        let r = respond(b"GET /certificate.sha256 HTTP/1.1\r\n\r\n", &src).0;
        assert_eq!(String::from_utf8(r.body.to_vec()).unwrap(), format!("0f{}f0", "00".repeat(30)));
        assert_eq!(hex_lower(&[0x00, 0x9a, 0xff]), "009aff");
    }

    proptest! {
        #[test]
        fn any_head_gets_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let (r, _) = respond(&bytes, &sources([7; 32]).0);
            prop_assert!([200, 400, 404, 405].contains(&r.status));
        }

        #[test]
        fn any_path_gets_an_answer(path in "/[ -~]{0,64}") {
            let (r, _) = respond(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(), &sources([7; 32]).0);
            prop_assert!([200, 400, 404].contains(&r.status));
        }
    }
}
