//! Upstream links: the connections this relay opens to its parent relays (edge → mid-tier →
//! origin). A link's session is an ordinary client session on one core; to the rest of the
//! relay it is a publisher of the namespace prefixes routed to it (configuration), so
//! aggregation (one upstream subscription per track), the cache, upstream FETCH and
//! TRACK_STATUS work through it unchanged. Announcements of publishers connected here are
//! forwarded up the link whose route covers them, so the parent can route subscriptions back
//! down to them.
//!
//! Loops: every moq-edge names its node ID in its SETUP (MOQT_IMPLEMENTATION). A link whose
//! parent turns out to be this node is closed; a request that came down a link is never sent
//! up a link; a request from a relay is never sent up the link to that same relay; an
//! announcement is never forwarded back to the relay it came from. MoQT carries no path of
//! relays, so a cycle of three or more relays configured as each other's parents is not
//! detected by these rules (see ARCHITECTURE.md).

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::msg::{IngestMsg, NamespaceMsg, OwnerMsg, SessionRef};
use super::namespaces::{Requester, Via};
use super::{session, RelayShard};
use crate::hash::{HashMap, HashSet};
use crate::session::{Session, SessionCode};
use crate::wire::model::{Message, PublishNamespace, RequestId, SetupOptions, TrackNamespace};

/// The MOQT_IMPLEMENTATION every moq-edge sends: `moq-edge/<version> node=<16 hex digits>`.
pub fn implementation(node: u64) -> Bytes {
    Bytes::from(format!("moq-edge/{} node={node:016x}", env!("CARGO_PKG_VERSION")))
}

/// The node ID a peer's SETUP names, when the peer is a moq-edge relay.
pub fn node_of(peer: &SetupOptions) -> Option<u64> {
    let text = std::str::from_utf8(peer.implementation.as_deref()?).ok()?;
    let rest = text.strip_prefix("moq-edge/")?;
    let hex = rest.split_whitespace().find_map(|w| w.strip_prefix("node="))?;
    u64::from_str_radix(hex, 16).ok()
}

/// Request IDs of a link's route entries in the namespace table (never a peer's: those are
/// below 2^62).
const ROUTE_RID_BASE: u64 = u64::MAX - crate::config::MAX_ROUTES_PER_UPSTREAM as u64;

#[derive(Debug)]
struct Link {
    routes: Vec<TrackNamespace>,
    /// The parent's node ID, once its SETUP arrived.
    peer: Option<u64>,
    /// Announcements forwarded up this link, and their requests on it.
    forwarded: HashMap<TrackNamespace, Forwarded>,
    by_rid: HashMap<RequestId, TrackNamespace>,
    /// The link this one replaces (its parent sent GOAWAY).
    replaces: Option<u64>,
    /// Its replacement is up: its tracks are moving there, and it closes once they have.
    moved: bool,
}

/// One namespace forwarded up a link.
#[derive(Debug)]
struct Forwarded {
    rid: RequestId,
    /// Who announced it here.
    who: HashSet<SessionRef>,
    /// Announcements (announcer, its request) whose REQUEST_OK waits for the parent's answer,
    /// so that a subscription the publisher's REQUEST_OK prompts anywhere in the tree finds
    /// the namespace at the parent, for at most [`FORWARD_WAIT`] (`Links::waits`).
    held: Vec<(SessionRef, RequestId)>,
    answered: bool,
}

/// The longest an announcement's REQUEST_OK waits for the parent's answer.
const FORWARD_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub struct Links {
    on_core: HashMap<u64, Link>,
    /// Relay node IDs of this core's sessions whose peer is a moq-edge.
    peer_nodes: HashMap<u64, u64>,
    /// Forwarded announcements not yet answered, oldest first: (forwarded at, link, namespace);
    /// their held confirmations are released [`FORWARD_WAIT`] later at the latest.
    waits: std::collections::VecDeque<(Instant, u64, TrackNamespace)>,
    /// Links whose parent sent GOAWAY, with its New Session URI, for the runtime to open
    /// their replacements.
    goaways: Vec<(u64, Bytes)>,
}

impl Links {
    pub fn is_link(&self, conn: u64) -> bool {
        self.on_core.contains_key(&conn)
    }
}

impl RelayShard {
    /// A session this core opened to a parent relay, serving the namespace prefixes `routes`
    /// (an empty prefix is the default route). The routes take effect when its SETUP exchange
    /// completes. `replaces`: the link (on this core) whose parent sent GOAWAY; its tracks
    /// move to this one once it is up.
    pub fn add_link(
        &mut self,
        conn: u64,
        session: Session,
        routes: Vec<TrackNamespace>,
        replaces: Option<u64>,
    ) {
        // The configuration allows no more (`config::MAX_ROUTES_PER_UPSTREAM`).
        let routes = routes.into_iter().take(crate::config::MAX_ROUTES_PER_UPSTREAM).collect();
        let (forwarded, by_rid) = (HashMap::default(), HashMap::default());
        let link = Link { routes, peer: None, forwarded, by_rid, replaces, moved: false };
        self.links.on_core.insert(conn, link);
        self.add_session(conn, session);
    }

    /// Whether session `conn` is an upstream link of this core.
    pub fn is_link(&self, conn: u64) -> bool {
        self.links.on_core.contains_key(&conn)
    }

    /// Links whose parent sent GOAWAY since the last call, with its New Session URI (empty:
    /// the same parent).
    pub fn take_link_goaways(&mut self) -> Vec<(u64, Bytes)> {
        std::mem::take(&mut self.links.goaways)
    }

    /// Whether link `conn` was replaced and carries no subscription any more, neither ours
    /// nor the parent's (its subscribers move too, and it ends them on the old link): time to
    /// close it.
    pub fn link_moved_out(&self, conn: u64) -> bool {
        self.links.on_core.get(&conn).is_some_and(|l| l.moved)
            && !self.ingest_has_upstreams(conn)
            && self.fanout_subscriptions(conn) == 0
    }

    /// Closes link `conn` (its tracks moved to its replacement); false when it was closed
    /// already.
    pub fn close_link(&mut self, conn: u64) -> bool {
        match session(&mut self.sessions, &mut self.woken, conn) {
            Some(s) if !s.is_closed() => {
                s.close(SessionCode::NoError, "moved to the new session");
                true
            }
            _ => false,
        }
    }

    /// GOAWAY from a link's parent: its replacement is opened by the runtime.
    pub(super) fn links_goaway(&mut self, conn: u64, new_session_uri: Bytes) {
        tracing::info!(conn, uri = %String::from_utf8_lossy(&new_session_uri), "upstream parent going away");
        self.links.goaways.push((conn, new_session_uri));
    }

    /// Upstream links of this core whose session is set up.
    pub fn links_up(&self) -> usize {
        self.links.on_core.values().filter(|l| l.peer.is_some()).count()
    }

    /// Who session `conn` is, for the loop rules of routing.
    pub(super) fn requester(&self, conn: u64) -> Requester {
        Requester { from_upstream: self.is_link(conn), node: self.links.peer_nodes.get(&conn).copied() }
    }

    /// Session `conn` finished its SETUP exchange; `peer` is what the peer sent. For a link:
    /// refuse a parent that is this node, else publish its routes to every core and forward
    /// the announcements they cover.
    pub(super) fn links_ready(&mut self, conn: u64, peer: &SetupOptions) {
        let node = node_of(peer);
        if let Some(n) = node {
            self.links.peer_nodes.insert(conn, n);
        }
        let Some(link) = self.links.on_core.get_mut(&conn) else { return };
        // A parent that is not a moq-edge has no node ID: it still gets one (never ours).
        let parent = node.unwrap_or(u64::MAX ^ self.config.node_id);
        if parent == self.config.node_id {
            tracing::warn!(conn, "upstream link leads back to this relay: closed (routing loop)");
            if let Some(s) = session(&mut self.sessions, &mut self.woken, conn) {
                s.close(SessionCode::ProtocolViolation, "routing loop: the upstream is this relay");
            }
            return;
        }
        link.peer = Some(parent);
        let routes = link.routes.clone();
        tracing::info!(conn, parent = format!("{parent:016x}"), routes = routes.len(), "upstream link up");
        let publisher = self.me(conn);
        for (i, namespace) in routes.into_iter().enumerate() {
            let rid = RequestId(ROUTE_RID_BASE + i as u64);
            self.ingest_add_route(conn, rid, namespace.clone());
            let via = Via::Upstream { node: parent };
            for core in 0..self.cores {
                self.send(
                    core,
                    NamespaceMsg::NamespaceAnnounced { namespace: namespace.clone(), publisher, rid, via },
                );
            }
        }
        if let Some(old) = self.links.on_core.get(&conn).and_then(|l| l.replaces) {
            self.links_replaced(old);
        }
    }

    /// Link `old`'s replacement is up (its routes announced to every core before this): the
    /// old routes are withdrawn, and every owner moves the old link's tracks (make before
    /// break: the old link closes once none is left on it, `link_moved_out`). Again when a
    /// replacement that failed is itself replaced.
    fn links_replaced(&mut self, old: u64) {
        let Some(link) = self.links.on_core.get_mut(&old) else { return };
        if !link.moved {
            link.moved = true;
            let n = link.routes.len();
            for i in 0..n {
                self.ingest_withdraw_namespace(old, RequestId(ROUTE_RID_BASE + i as u64));
            }
        }
        let from = self.me(old);
        for core in 0..self.cores {
            self.send(core, OwnerMsg::UpstreamMoved { from });
        }
    }

    /// The namespace table of this core changed: a link on this core whose route now covers
    /// announcements it has not forwarded yet forwards them (called after routes and
    /// announcements are applied).
    pub(super) fn links_forward_all(&mut self, link_conn: u64) {
        let all: Vec<(TrackNamespace, SessionRef, Option<u64>)> =
            self.namespaces.announced().map(|(n, p, node)| (n.clone(), p, node)).collect();
        for (namespace, publisher, node) in all {
            if self.namespaces.upstream_for(&namespace) == Some(self.me(link_conn)) {
                self.links_announced(&namespace, publisher, node, None);
            }
        }
    }

    /// `publisher` announced `namespace` with request `rid` (applied on this core): forward
    /// it up the link that routes it, when that link lives on this core. True when this
    /// core's confirmation of the announcement (`NamespaceKnown`) is held until the parent
    /// answers.
    pub(super) fn links_announced(
        &mut self,
        namespace: &TrackNamespace,
        publisher: SessionRef,
        node: Option<u64>,
        rid: Option<RequestId>,
    ) -> bool {
        let Some(up) = self.namespaces.upstream_for(namespace) else { return false };
        if up.core != self.core || up == publisher {
            return false;
        }
        let now = self.now;
        let Some(link) = self.links.on_core.get_mut(&up.conn) else { return false };
        let Some(parent) = link.peer else { return false };
        if node == Some(parent) {
            return false; // it came from the parent itself
        }
        if let Some(f) = link.forwarded.get_mut(namespace) {
            f.who.insert(publisher);
            let (Some(rid), false) = (rid, f.answered) else { return false };
            if f.held.is_empty() {
                self.links.waits.push_back((now, up.conn, namespace.clone()));
            }
            f.held.push((publisher, rid));
            return true;
        }
        let Some(s) = session(&mut self.sessions, &mut self.woken, up.conn) else { return false };
        let Ok(up_rid) = s.next_request_id() else {
            tracing::warn!(conn = up.conn, "upstream allows no more requests: announcement not forwarded");
            return false;
        };
        let msg =
            PublishNamespace { request_id: up_rid, namespace: namespace.clone(), params: Default::default() };
        if let Err(e) = s.send(Message::PublishNamespace(msg)) {
            tracing::debug!(conn = up.conn, error = %e, "PUBLISH_NAMESPACE not forwarded");
            return false;
        }
        let mut who = HashSet::default();
        who.insert(publisher);
        let held: Vec<(SessionRef, RequestId)> = rid.map(|r| vec![(publisher, r)]).unwrap_or_default();
        let hold = !held.is_empty();
        let f = Forwarded { rid: up_rid, who, held, answered: false };
        link.forwarded.insert(namespace.clone(), f);
        link.by_rid.insert(up_rid, namespace.clone());
        if hold {
            self.links.waits.push_back((now, up.conn, namespace.clone()));
        }
        hold
    }

    /// Releases held confirmations of announcements (the parent answered, the link went
    /// away, or [`FORWARD_WAIT`] passed).
    fn links_release(&mut self, held: Vec<(SessionRef, RequestId)>) {
        for (p, rid) in held {
            self.send(p.core, IngestMsg::NamespaceKnown { conn: p.conn, rid });
        }
    }

    /// Held confirmations whose parent has not answered in time.
    pub(super) fn links_tick(&mut self) -> Option<Instant> {
        let mut due = Vec::new();
        while let Some((since, conn, namespace)) = self.links.waits.front() {
            if *since + FORWARD_WAIT > self.now {
                break;
            }
            // Releases what is held then (a hold added later had its own entry pushed only if
            // none was pending, so it never waits longer than FORWARD_WAIT; it may wait less).
            if let Some(f) = self.links.on_core.get_mut(conn).and_then(|l| l.forwarded.get_mut(namespace)) {
                due.append(&mut f.held);
            }
            self.links.waits.pop_front();
        }
        self.links_release(due);
        self.links.waits.front().map(|(since, _, _)| *since + FORWARD_WAIT)
    }

    /// `publisher` withdrew `namespace`: once nobody here announces it, withdraw it upstream.
    pub(super) fn links_withdrawn(&mut self, namespace: &TrackNamespace, publisher: SessionRef) {
        let mut done = None;
        let mut held = Vec::new();
        for (conn, link) in self.links.on_core.iter_mut() {
            if let Some(f) = link.forwarded.get_mut(namespace) {
                if f.who.remove(&publisher) && f.who.is_empty() {
                    done = Some((*conn, f.rid));
                    if let Some(f) = link.forwarded.remove(namespace) {
                        link.by_rid.remove(&f.rid);
                        held = f.held;
                    }
                }
            }
        }
        self.links_release(held);
        let Some((conn, rid)) = done else { return };
        let Some(s) = session(&mut self.sessions, &mut self.woken, conn) else { return };
        // draft-22 sessions send this as the request stream's cancellation (§3.3.2).
        let sent = s.send(Message::PublishNamespaceDone(rid));
        if let Err(e) = sent {
            tracing::debug!(conn, error = %e, "PUBLISH_NAMESPACE withdrawal not sent");
        }
    }

    /// Whether `rid` of link `conn` is a forwarded announcement (its answers need nothing
    /// more; a refusal is logged).
    pub(super) fn links_answer(&mut self, conn: u64, rid: RequestId, refused: Option<&Bytes>) -> bool {
        let Some(link) = self.links.on_core.get_mut(&conn) else { return false };
        let Some(namespace) = link.by_rid.get(&rid) else { return false };
        let Some(f) = link.forwarded.get_mut(namespace) else { return false };
        if let Some(reason) = refused {
            tracing::warn!(conn, ?namespace, reason = %String::from_utf8_lossy(reason), "upstream refused a forwarded announcement");
        }
        f.answered = true;
        let held = std::mem::take(&mut f.held);
        self.links_release(held);
        true
    }

    /// Session `conn` is gone.
    pub(super) fn links_session_closed(&mut self, conn: u64) {
        self.links.peer_nodes.remove(&conn);
        if let Some(link) = self.links.on_core.remove(&conn) {
            tracing::info!(conn, "upstream link down");
            let held = link.forwarded.into_values().flat_map(|f| f.held).collect();
            self.links_release(held);
        }
    }
}
