//! How a server connection becomes a MoQT session: the ALPNs it offers (one per draft, and
//! `h3` for WebTransport), and, for `h3`, the WebTransport exchange that comes first
//! (ARCHITECTURE.md, "Transports"). The runtime only hands over connections by ALPN; the
//! draft and the transport are decided here.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use runtime::Transport;
use runtime::{ConnApp, QuicConnection};
use webtransport::{Output, WebTransport};
use wire::model::SetupOptions;
use wire::Version;

use super::WEBTRANSPORT_DEFAULT;

/// The ALPN (raw QUIC) of each of `drafts`, in their order: what an upstream link offers,
/// and the WT-Protocols a WebTransport session may choose.
pub fn draft_alpns(drafts: &[Version]) -> Vec<String> {
    drafts.iter().map(|v| v.alpn().to_string()).collect()
}

/// The ALPNs a MoQT server of `drafts` offers, in order: each draft's (raw QUIC), then `h3`
/// (MoQT inside WebTransport, the draft chosen by WT-Protocol).
pub fn server_alpns(drafts: &[Version]) -> Vec<String> {
    let mut alpns = draft_alpns(drafts);
    alpns.push(webtransport::ALPN.to_string());
    alpns
}

/// An accepted WebTransport session and the HTTP/3 bytes of its exchange not yet written,
/// handed to the application that runs MoQT inside it ([`crate::Pump::with_webtransport`]).
pub struct WebTransportConn {
    /// The session's state machine, accepted.
    pub wt: WebTransport,
    /// HTTP/3 bytes not yet taken by the transport: (QUIC stream, bytes, fin).
    pub h3: VecDeque<(u64, Bytes, bool)>,
}

/// A server connection with ALPN `h3` until its WebTransport session is accepted: it runs the
/// HTTP/3 exchange (SETTINGS, the extended CONNECT and its answer), then hands the connection
/// to the application `then` makes for the draft the client's WT-Protocol chose, and from
/// there on is that application.
pub struct WebTransportAccept<F> {
    exchange: Option<(WebTransportConn, F)>,
    app: Option<Box<dyn ConnApp>>,
    setup_deadline: Option<Instant>,
    /// draft-14 is served: a client that names no WT-Protocol may speak it (draft-14 defines
    /// none), told by its CLIENT_SETUP (`Version::sniff_client_setup`).
    sniff_d14: bool,
}

impl<F: FnOnce(Version, WebTransportConn) -> Box<dyn ConnApp>> WebTransportAccept<F> {
    /// Accepts WebTransport sessions for `drafts`: the first protocol of a client's
    /// WT-Available-Protocols that is one of them, or, when it names none,
    /// [`WEBTRANSPORT_DEFAULT`] if offered (else the first of `drafts`), within `limits`.
    pub fn new(drafts: &[Version], limits: webtransport::Limits, then: F) -> Self {
        let default = match drafts.first() {
            Some(first) if !drafts.contains(&WEBTRANSPORT_DEFAULT) => first.alpn(),
            _ => WEBTRANSPORT_DEFAULT.alpn(),
        };
        let wt = WebTransport::server(draft_alpns(drafts), default.to_string(), limits);
        WebTransportAccept {
            exchange: Some((WebTransportConn { wt, h3: VecDeque::new() }, then)),
            app: None,
            setup_deadline: None,
            sniff_d14: drafts.contains(&Version::Draft14),
        }
    }
}

impl<F: FnOnce(Version, WebTransportConn) -> Box<dyn ConnApp>> ConnApp for WebTransportAccept<F> {
    fn on_io(&mut self, conn: &mut QuicConnection) {
        if let Some((mut wtc, then)) = self.exchange.take() {
            // Scratch space on the stack: a connection waiting for its CONNECT holds none.
            let mut buf = [0u8; 16 * 1024];
            webtransport_handshake(conn, &mut wtc.wt, &mut wtc.h3, &mut buf);
            let accepted = wtc.wt.accepted().and_then(|a| match a.negotiated || !self.sniff_d14 {
                true => Version::from_alpn(a.protocol.as_bytes()),
                // No WT-Protocol named: the first bytes of the client's control stream (its
                // first bidirectional stream, 0 in the session's numbering) tell 14 from the
                // default; until they arrive, wait (they are held, bounded, meanwhile).
                false => Version::sniff_client_setup(&wtc.wt.early_of(0)).map(|v| match v {
                    Version::Draft14 => v,
                    _ => Version::from_alpn(a.protocol.as_bytes()).unwrap_or(v),
                }),
            });
            match accepted {
                Some(version) => {
                    let mut app = then(version, wtc);
                    if let Some(at) = self.setup_deadline {
                        app.set_setup_deadline(at);
                    }
                    self.app = Some(app);
                }
                None if self.setup_deadline.is_some_and(|at| at <= Instant::now()) => {
                    // The CONNECT did not come in time. RFC 9114 §5.2: an HTTP/3 connection
                    // closed with no error to signal.
                    let _ =
                        conn.close(true, webtransport::code::H3_NO_ERROR, b"setup did not complete in time");
                    return;
                }
                None => {
                    self.exchange = Some((wtc, then));
                    return;
                }
            }
        }
        if let Some(app) = self.app.as_mut() {
            app.on_io(conn);
        }
    }

    fn on_closed(&mut self, conn: &QuicConnection) {
        if let Some(app) = self.app.as_mut() {
            app.on_closed(conn);
        }
    }

    fn set_setup_deadline(&mut self, at: Instant) {
        self.setup_deadline = Some(at);
        if let Some(app) = self.app.as_mut() {
            app.set_setup_deadline(at);
        }
    }
}

/// Query parameters of a CONNECT URL that carry an authorization token: this relay's own
/// (`token`), moq-dev's relay's JWT (`jwt`), and a Common Access Token (`cat`). Which format a
/// token is, its shape tells (`auth::Keys::verify`).
pub const URL_TOKEN_PARAMS: [&str; 3] = ["token", "jwt", "cat"];

/// What a WebTransport CONNECT says about the client's setup: its authority and path (with
/// the query), and each token query parameter ([`URL_TOKEN_PARAMS`], percent-decoded) as an
/// authorization token for the session (a browser cannot put one in SETUP before it knows
/// it may connect, and pages commonly carry it in the URL).
pub fn setup_from_url(accepted: &webtransport::Accepted) -> SetupOptions {
    setup_from_request(&accepted.authority, &accepted.path)
}

/// What a request's authority and path (with the query) say about the client's setup (see
/// [`setup_from_url`]): a WebTransport CONNECT's, or a WebSocket upgrade's.
pub fn setup_from_request(authority: &str, path: &str) -> SetupOptions {
    let query = path.split_once('?').map_or("", |(_, q)| q);
    let auth_tokens = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, v)| URL_TOKEN_PARAMS.contains(k) && !v.is_empty())
        .map(|(_, v)| wire::model::AuthToken::UseValue {
            token_type: 0,
            value: Bytes::from(percent_decode(v)),
        })
        .collect();
    SetupOptions {
        authority: Some(Bytes::copy_from_slice(authority.as_bytes())),
        path: Some(Bytes::copy_from_slice(path.as_bytes())),
        auth_tokens,
        ..SetupOptions::default()
    }
}

/// `%XX` escapes decoded (RFC 3986 §2.1); a `%` not followed by two hex digits stays as it
/// is, and so does `+` (a base64 token's character, not a space here).
pub(crate) fn percent_decode(text: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(text).collect()
}

/// The WebTransport exchange before the MoQT session exists (SETTINGS, the CONNECT request
/// and its answer): reads every readable stream into `wt` (payload of WebTransport streams
/// is kept there until the session takes it) and writes its output through `h3`.
pub fn webtransport_handshake(
    conn: &mut impl Transport,
    wt: &mut WebTransport,
    h3: &mut VecDeque<(u64, Bytes, bool)>,
    buf: &mut [u8],
) {
    while let Some(id) = conn.stream_readable_next() {
        loop {
            match conn.stream_recv(id, buf) {
                Ok((n, fin)) => {
                    // Before acceptance payload is buffered there (bounded) or refused; after
                    // it (later in this same read) it is held for the session to come.
                    if let Some(d) = wt.on_stream_data(id, &buf[..n], fin) {
                        wt.hold(id, d.stream, &buf[d.offset..n], fin);
                    }
                    if fin {
                        break;
                    }
                }
                Err(quiche::Error::StreamReset(code)) => {
                    let _ = wt.on_stream_reset(id, code);
                    break;
                }
                Err(_) => break,
            }
        }
    }
    write_webtransport_output(conn, wt, h3);
}

/// Carries out what the WebTransport layer asked for: HTTP/3 bytes join `h3` (written in
/// order as quiche takes them), stream errors and connection closes go to quiche at once.
pub(crate) fn write_webtransport_output(
    conn: &mut impl Transport,
    wt: &mut WebTransport,
    h3: &mut VecDeque<(u64, Bytes, bool)>,
) {
    while let Some(o) = wt.poll_output() {
        match o {
            Output::Stream { quic, data, fin } => h3.push_back((quic, data, fin)),
            Output::StopSending { quic, code } => {
                let _ = conn.stream_shutdown(quic, quiche::Shutdown::Read, code);
            }
            Output::Reset { quic, code } => {
                let _ = conn.stream_shutdown(quic, quiche::Shutdown::Write, code);
            }
            Output::Close { code, reason } => {
                let _ = conn.close(true, code, reason.as_bytes());
            }
        }
    }
    write_h3(conn, h3);
}

/// Hands HTTP/3 bytes to quiche in order; what it does not take yet waits at the front.
pub fn write_h3(conn: &mut impl Transport, h3: &mut VecDeque<(u64, Bytes, bool)>) {
    let mut i = 0;
    // Streams whose earlier bytes wait: their later bytes wait behind them.
    let mut blocked: Vec<u64> = Vec::new();
    while i < h3.len() {
        let (quic, data, fin) = &mut h3[i];
        if blocked.contains(quic) {
            i += 1;
            continue;
        }
        match conn.stream_send(*quic, data, *fin) {
            Ok(n) if n == data.len() => {
                h3.remove(i);
            }
            Ok(n) => {
                let _ = data.split_to(n);
                blocked.push(*quic);
                i += 1;
            }
            Err(quiche::Error::Done) => {
                blocked.push(*quic);
                i += 1;
            }
            Err(_) => {
                h3.remove(i);
            }
        }
    }
}
