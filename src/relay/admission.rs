//! Admission by the platform (config `auth = "http"`, `RelayConfig::admission`; README.md
//! "Admission by HTTP"). A session that is set up (not a link) is held: its later events wait
//! in it, unread, while the host asks the platform's service about the tokens of its SETUP and
//! its URL ([`AdmitAsk`], taken by the host). The verdict (`Input::Admitted`) either
//! lets it go on, its requests authorized by the grants the service answered as a token's
//! would be, or closes it UNAUTHORIZED. The host asks again when an answer's time is up
//! (revalidation): a later verdict replaces the grants, or closes the session.

use bytes::Bytes;
use session::SessionCode;
use tracing::debug;
use wire::model::{AuthToken, SetupOptions};

use crate::cx::Cx;
use crate::msg::ConnId;
use crate::sessions::Sessions;

/// A session to ask the platform about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitAsk {
    /// The session.
    pub conn: ConnId,
    /// The values of its SETUP's and its URL's authorization tokens, in order.
    pub tokens: Vec<Bytes>,
    /// Its authority (SETUP's or the URL's).
    pub authority: Option<Bytes>,
    /// Its path (SETUP's or the URL's).
    pub path: Option<Bytes>,
}

/// The platform's answer on a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// What it may publish and subscribe to.
    Allow(auth::Grant),
    /// Not admitted, or no longer: the session closes UNAUTHORIZED.
    Deny,
}

/// The sessions this core holds for the platform's verdict, and the questions not yet taken.
#[derive(Debug, Default)]
pub(crate) struct Admissions {
    asks: Vec<AdmitAsk>,
}

impl Admissions {
    /// Session `conn` is set up with `peer`'s options: it waits for the platform.
    pub(crate) fn hold(&mut self, sessions: &mut Sessions, conn: ConnId, peer: &SetupOptions) {
        sessions.set_admitting(conn, true);
        let tokens = peer
            .auth_tokens
            .iter()
            .filter_map(|t| match t {
                AuthToken::UseValue { value, .. } | AuthToken::Register { value, .. } => Some(value.clone()),
                _ => None,
            })
            .collect();
        let (authority, path) = (peer.authority.clone(), peer.path.clone());
        self.asks.push(AdmitAsk { conn, tokens, authority, path });
    }

    /// Whether session `conn` waits for the platform: a flag read first, so that without
    /// admission the per-event path does no lookup.
    pub(crate) fn holds(cx: &Cx, sessions: &Sessions, conn: ConnId) -> bool {
        cx.config.admission && sessions.admitting(conn)
    }

    /// The sessions to ask the platform about since the last call.
    pub(crate) fn take(&mut self) -> Vec<AdmitAsk> {
        std::mem::take(&mut self.asks)
    }

    /// The platform's verdict on session `conn`, at its admission or at a revalidation.
    pub(crate) fn verdict(cx: &Cx, sessions: &mut Sessions, conn: ConnId, verdict: Verdict) {
        let waited = sessions.set_admitting(conn, false);
        if sessions.in_turn(conn).is_none() {
            return; // gone meanwhile
        }
        match verdict {
            Verdict::Allow(grant) => {
                debug!(core = cx.core, %conn, waited, ?grant, "admitted by the platform");
                sessions.set_admitted(conn, vec![grant]);
                // Its held events are read at its connection's next turn.
                let _ = sessions.get_mut(conn);
            }
            Verdict::Deny => {
                debug!(core = cx.core, %conn, waited, "refused by the platform");
                sessions.close(conn, SessionCode::Unauthorized, "not admitted by the platform");
            }
        }
    }
}
