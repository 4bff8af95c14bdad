//! How a server connection becomes a MoQT session: the ALPNs it offers (one per draft, and
//! `h3` for WebTransport), and, for `h3`, the WebTransport exchange that comes first
//! (ARCHITECTURE.md, "Transports"). The runtime only hands over connections by ALPN; the
//! draft and the transport are decided here.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use runtime::{ConnApp, QuicConnection};
use webtransport::WebTransport;
use wire::Version;

use super::{webtransport_handshake, WEBTRANSPORT_DEFAULT};

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
    pub wt: WebTransport,
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
