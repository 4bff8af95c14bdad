//! The sessions of one core, as the session-side roles (fan-out, ingest, discovery, upstream
//! fetch, links) see them: each session, who its peer is (an upstream link, a relay's node
//! ID), its tokens, and the registry of its requests, `(session, Request ID) → role`, that
//! the shard dispatches answers, cancellations and updates by (ARCHITECTURE.md, "The relay
//! layer"). Looking a session up to write to it notes that it has output for the runtime.

use crate::msg::ConnId;
use ahash::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tracing::debug;

use super::namespaces::Requester;
use crate::cx::unheeded;
use crate::cx::Cx;
use auth::{Denied, Right, SessionAuth};
use session::{Session, SessionCode};
use wire::model::{AuthToken, Message, Parameters, RequestId, RequestOk, TrackNamespace};
use wire::RequestErrorCode;

/// Which role holds a request of a session (its holder): the one its answers, cancellation and
/// REQUEST_UPDATE go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holder {
    /// The peer's SUBSCRIBE, or the relay's PUBLISH the peer accepted (fan-out).
    Subscription,
    /// The peer's FETCH, until it is answered (fan-out).
    Fetch,
    /// The peer's SUBSCRIBE_NAMESPACE or SUBSCRIBE_TRACKS (discovery).
    NamespaceSub,
    /// The relay's PUBLISH to a namespace subscriber, not yet accepted (discovery).
    Offer,
    /// The peer's PUBLISH_NAMESPACE, or a route of an upstream link (ingest).
    Namespace,
    /// The relay's SUBSCRIBE upstream, or the peer's PUBLISH (ingest).
    Upstream,
    /// The relay's FETCH upstream (upstream fetch).
    UpFetch,
    /// An announcement the relay forwarded up a link (links).
    Forwarded,
    /// The relay's SUBSCRIBE_NAMESPACE up a link, for its parent's namespaces (links).
    Discovering,
}

/// What the shard knows of one session's peer.
#[derive(Debug, Default)]
struct Peer {
    /// One of this core's upstream links (its peer is our parent).
    link: bool,
    /// The peer's relay node ID, when it is a moq-edge relay.
    node: Option<u64>,
    /// Its tokens (when tokens are required).
    auth: Option<SessionAuth>,
    /// It waits for the platform's admission (`admission.rs`): its events wait in it.
    admitting: bool,
}

/// Sessions written to outside their own turn, each once.
#[derive(Debug, Default)]
struct Woken {
    list: Vec<ConnId>,
    set: HashSet<ConnId>,
}

/// One core's sessions (see the module header).
#[derive(Debug, Default)]
pub(super) struct Sessions {
    /// Boxed: a session is large, and growing the map then moves pointers, not sessions.
    map: HashMap<ConnId, Box<Session>>,
    peers: HashMap<ConnId, Peer>,
    /// Per session, so that forgetting a session visits its own requests only.
    requests: HashMap<ConnId, HashMap<RequestId, Holder>>,
    woken: Woken,
}

impl Sessions {
    pub(crate) fn insert(&mut self, conn: ConnId, session: Session) {
        self.map.insert(conn, Box::new(session));
    }

    /// Removes session `conn` (its connection is gone); false when it was not here. Who its
    /// peer was stays known until [`Sessions::forget_peer`], while the roles clean up.
    pub(crate) fn remove(&mut self, conn: ConnId) -> bool {
        self.map.remove(&conn).is_some()
    }

    /// Forgets the peer of a removed session, and its requests.
    pub(crate) fn forget_peer(&mut self, conn: ConnId) {
        self.peers.remove(&conn);
        self.requests.remove(&conn);
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Session `conn`, to read.
    pub(crate) fn get(&self, conn: ConnId) -> Option<&Session> {
        self.map.get(&conn).map(Box::as_ref)
    }

    /// Session `conn`, to write to: noted as having output.
    pub(crate) fn get_mut(&mut self, conn: ConnId) -> Option<&mut Session> {
        let s = self.map.get_mut(&conn)?;
        if self.woken.set.insert(conn) {
            self.woken.list.push(conn);
        }
        Some(s.as_mut())
    }

    /// Session `conn` without noting it (its own turn: the runtime flushes it anyway).
    pub(crate) fn in_turn(&mut self, conn: ConnId) -> Option<&mut Session> {
        self.map.get_mut(&conn).map(Box::as_mut)
    }

    /// The sessions that are set up and are not upstream links.
    pub(crate) fn downstream_ready(&self) -> Vec<ConnId> {
        self.map.iter().filter(|(c, s)| s.is_ready() && !self.is_link(**c)).map(|(c, _)| *c).collect()
    }

    /// Sessions written to since the last call.
    pub(crate) fn take_woken(&mut self, out: &mut Vec<ConnId>) {
        self.woken.set.clear();
        out.append(&mut self.woken.list);
    }

    // --- who the peer is -------------------------------------------------------------------

    /// Session `conn` is one of this core's upstream links.
    pub(crate) fn mark_link(&mut self, conn: ConnId) {
        self.peers.entry(conn).or_default().link = true;
    }

    pub(crate) fn is_link(&self, conn: ConnId) -> bool {
        self.peers.get(&conn).is_some_and(|p| p.link)
    }

    /// The peer of `conn` named its relay node ID in SETUP.
    pub(crate) fn set_node(&mut self, conn: ConnId, node: u64) {
        self.peers.entry(conn).or_default().node = Some(node);
    }

    /// Who session `conn` is, for the loop rules of routing.
    pub(crate) fn requester(&self, conn: ConnId) -> Requester {
        let peer = self.peers.get(&conn);
        Requester { from_upstream: peer.is_some_and(|p| p.link), node: peer.and_then(|p| p.node) }
    }

    // --- the request registry --------------------------------------------------------------

    /// Request `rid` of session `conn` is now `role`'s.
    pub(crate) fn register(&mut self, conn: ConnId, rid: RequestId, role: Holder) {
        self.requests.entry(conn).or_default().insert(rid, role);
    }

    /// Request `rid` of session `conn` is `role`'s too, unless another role holds it (a fill
    /// fetch stream has its subscription's Request ID).
    pub(crate) fn register_also(&mut self, conn: ConnId, rid: RequestId, role: Holder) {
        self.requests.entry(conn).or_default().entry(rid).or_insert(role);
    }

    /// Request `rid` of session `conn` is over.
    pub(crate) fn forget(&mut self, conn: ConnId, rid: RequestId) {
        if let Some(held) = self.requests.get_mut(&conn) {
            held.remove(&rid);
        }
    }

    /// Request `rid` of session `conn` is over for `role`, if it held it.
    pub(crate) fn forget_holder(&mut self, conn: ConnId, rid: RequestId, role: Holder) {
        if self.role(conn, rid) == Some(role) {
            self.forget(conn, rid);
        }
    }

    /// The role that holds request `rid` of session `conn`.
    pub(crate) fn role(&self, conn: ConnId, rid: RequestId) -> Option<Holder> {
        self.requests.get(&conn).and_then(|held| held.get(&rid)).copied()
    }

    // --- answers ---------------------------------------------------------------------------

    /// REQUEST_OK for request `rid` of session `conn`; false when it could not be sent.
    pub(crate) fn answer_ok(&mut self, conn: ConnId, rid: RequestId, params: Parameters) -> bool {
        let Some(s) = self.get_mut(conn) else { return false };
        let ok =
            Message::RequestOk(RequestOk { request_id: rid, params, track_properties: Default::default() });
        match s.send(ok) {
            Ok(()) => true,
            Err(e) => {
                debug!(%conn, error = %e, "REQUEST_OK not sent");
                false
            }
        }
    }

    /// REQUEST_ERROR `code` for request `rid` of session `conn`; `end`: the request is over
    /// (its stream ends where it has one).
    pub(crate) fn answer_error(
        &mut self,
        conn: ConnId,
        rid: RequestId,
        code: RequestErrorCode,
        reason: &str,
        end: bool,
    ) {
        let Some(s) = self.get_mut(conn) else { return };
        if let Err(e) = s.request_error(rid, code, reason) {
            debug!(%conn, error = %e, "REQUEST_ERROR not sent");
        }
        if end {
            unheeded(s.end_request(rid), "end request");
        }
    }

    /// Closes session `conn` with `code`.
    pub(crate) fn close(&mut self, conn: ConnId, code: SessionCode, why: impl Into<String>) {
        if let Some(s) = self.get_mut(conn) {
            s.close(code, why.into());
        }
    }

    // --- tokens ----------------------------------------------------------------------------

    /// Whether session `conn` waits for the platform's admission.
    pub(crate) fn admitting(&self, conn: ConnId) -> bool {
        self.peers.get(&conn).is_some_and(|p| p.admitting)
    }

    /// Session `conn` waits for the platform's admission (`on`), or no longer; true when it
    /// waited.
    pub(crate) fn set_admitting(&mut self, conn: ConnId, on: bool) -> bool {
        let p = self.peers.entry(conn).or_default();
        std::mem::replace(&mut p.admitting, on)
    }

    /// Session `conn`'s grants from the platform replace what authorized it before.
    pub(crate) fn set_admitted(&mut self, conn: ConnId, grants: Vec<auth::Grant>) {
        self.peers.entry(conn).or_default().auth = Some(SessionAuth::admitted(grants));
    }

    /// The SETUP's tokens authorize the whole session; a bad one closes it.
    pub(crate) fn auth_setup(&mut self, cx: &Cx, conn: ConnId, tokens: &[AuthToken]) {
        let Some(keys) = cx.config.auth.as_ref().map(auth::KeyRing::keys) else { return };
        match SessionAuth::from_setup(&keys, tokens, cx.config.auth_cache, cx.unix_secs()) {
            Ok(a) => self.peers.entry(conn).or_default().auth = Some(a),
            Err(Denied::Session(code, why)) => self.close(conn, code, why),
            Err(Denied::Request(_, why)) => self.close(conn, SessionCode::MalformedAuthToken, why),
        }
    }

    /// Whether session `conn` may do `right` on `namespace` with the tokens of `params` (and
    /// its SETUP's): always in open mode (`Ok(None)`); otherwise `Ok(Some(t))` says until
    /// when (the shard's clock).
    pub(crate) fn check_auth(
        &mut self,
        cx: &Cx,
        conn: ConnId,
        params: &Parameters,
        namespace: &TrackNamespace,
        right: Right,
    ) -> Result<Option<Instant>, Denied> {
        let Some(keys) = cx.config.auth.as_ref().map(auth::KeyRing::keys) else { return Ok(None) };
        let a = self.peers.entry(conn).or_default().auth.get_or_insert_with(SessionAuth::default);
        let now = cx.unix_secs();
        let tokens = if cx.config.admission { &[][..] } else { &params.auth_tokens[..] };
        let until = a.authorize(&keys, tokens, namespace, right, cx.config.auth_cache, now)?;
        Ok(Some(cx.now + Duration::from_secs(until.saturating_sub(now))))
    }

    /// Like [`Sessions::check_auth`] for a namespace subscription under `prefix`: until when,
    /// and what it may see (`auth::SessionAuth::authorize_discovery`).
    pub(crate) fn check_discovery(
        &mut self,
        cx: &Cx,
        conn: ConnId,
        params: &Parameters,
        prefix: &TrackNamespace,
    ) -> Result<Option<(Instant, auth::Scope)>, Denied> {
        let Some(keys) = cx.config.auth.as_ref().map(auth::KeyRing::keys) else { return Ok(None) };
        let a = self.peers.entry(conn).or_default().auth.get_or_insert_with(SessionAuth::default);
        let now = cx.unix_secs();
        let tokens = if cx.config.admission { &[][..] } else { &params.auth_tokens[..] };
        let (until, scope) = a.authorize_discovery(&keys, tokens, prefix, cx.config.auth_cache, now)?;
        Ok(Some((cx.now + Duration::from_secs(until.saturating_sub(now)), scope)))
    }
}
