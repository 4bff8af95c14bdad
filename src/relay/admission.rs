//! Admission by the platform (config `auth = "http"`, `RelayConfig::admission`; README.md
//! "Admission by HTTP"). A session that is set up (not a link) is held: its later events wait
//! in it, unread, while the host asks the platform's service about the tokens of its SETUP and
//! its URL ([`AdmitAsk`], taken by the host). The verdict ([`RelayShard::admitted`]) either
//! lets it go on, its requests authorized by the grants the service answered as a token's
//! would be, or closes it UNAUTHORIZED. The host asks again when an answer's time is up
//! (revalidation): a later verdict replaces the grants, or closes the session.

use std::time::Instant;

use bytes::Bytes;
use session::SessionCode;
use tracing::debug;
use wire::model::{AuthToken, SetupOptions};

use crate::msg::ConnId;
use crate::RelayShard;

/// A session to ask the platform about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitAsk {
    pub conn: ConnId,
    /// The values of its SETUP's and its URL's authorization tokens, in order.
    pub tokens: Vec<Bytes>,
    pub authority: Option<Bytes>,
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

impl RelayShard {
    /// Session `conn` is set up with `peer`'s options: it waits for the platform.
    pub(crate) fn hold_for_admission(&mut self, conn: ConnId, peer: &SetupOptions) {
        self.sessions.set_admitting(conn, true);
        let tokens = peer
            .auth_tokens
            .iter()
            .filter_map(|t| match t {
                AuthToken::UseValue { value, .. } | AuthToken::Register { value, .. } => Some(value.clone()),
                _ => None,
            })
            .collect();
        let (authority, path) = (peer.authority.clone(), peer.path.clone());
        self.admissions.push(AdmitAsk { conn, tokens, authority, path });
    }

    /// Whether session `conn` has events the relay would read now: none while it waits for
    /// the platform (they stay in it).
    pub fn has_events(&mut self, conn: ConnId) -> bool {
        !self.held_for_admission(conn) && self.sessions.in_turn(conn).is_some_and(|s| s.has_events())
    }

    /// Whether session `conn` waits for the platform: a flag read first, so that without
    /// admission the per-event path does no lookup.
    pub(crate) fn held_for_admission(&self, conn: ConnId) -> bool {
        self.config.admission && self.sessions.admitting(conn)
    }

    /// The sessions to ask the platform about since the last call.
    pub fn take_admissions(&mut self) -> Vec<AdmitAsk> {
        std::mem::take(&mut self.admissions)
    }

    /// The platform's verdict on session `conn`, at its admission or at a revalidation.
    pub fn admitted(&mut self, conn: ConnId, verdict: Verdict, now: Instant) {
        self.now = now;
        let waited = self.sessions.set_admitting(conn, false);
        if self.sessions.in_turn(conn).is_none() {
            return; // gone meanwhile
        }
        match verdict {
            Verdict::Allow(grant) => {
                debug!(core = self.core, %conn, waited, ?grant, "admitted by the platform");
                self.sessions.set_admitted(conn, vec![grant]);
                // Its held events are read at its connection's next turn.
                let _ = self.sessions.get_mut(conn);
            }
            Verdict::Deny => {
                debug!(core = self.core, %conn, waited, "refused by the platform");
                self.sessions.close(conn, SessionCode::Unauthorized, "not admitted by the platform");
            }
        }
        self.run_local();
    }
}
