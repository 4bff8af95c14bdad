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

use crate::msg::ConnId;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::msg::{IngestMsg, SessionRef};
use super::namespaces::Via;
use super::sessions::{Holder, Sessions};
use crate::cx::Cx;
use ahash::{HashMap, HashSet};
use session::SessionCode;
use wire::model::{
    Message, Parameters, PublishNamespace, RequestId, SetupOptions, SubscribeNamespace, SubscribeOptions,
    TrackNamespace,
};

/// A parent relay this relay subscribes from (an upstream link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    /// `moqt://host:port` as configured (for logs).
    pub url: String,
    /// Its host (a name or an address).
    pub host: String,
    /// Its UDP port.
    pub port: u16,
    /// Namespace prefixes routed to it (an empty prefix: the default route).
    pub routes: Vec<TrackNamespace>,
    /// Authorization token sent in the link's SETUP.
    pub token: Option<String>,
}

/// Namespace prefixes one parent may serve (the relay numbers a link's routes in this range).
pub const MAX_ROUTES_PER_UPSTREAM: usize = 4096;

/// The host and port of a `moqt://HOST[:PORT][/PATH]` URL (port 443 when none is given).
pub fn moqt_host_port(url: &str) -> Result<(String, u16), &'static str> {
    let authority = url.strip_prefix("moqt://").ok_or("not a moqt:// URL")?;
    let authority = authority.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => {
            let port = p.parse::<u16>().ok().filter(|p| *p != 0).ok_or("bad port")?;
            (h.trim_start_matches('[').trim_end_matches(']'), port)
        }
        None => (authority, 443),
    };
    if host.is_empty() {
        return Err("no host");
    }
    Ok((host.to_string(), port))
}

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
const ROUTE_RID_BASE: u64 = u64::MAX - MAX_ROUTES_PER_UPSTREAM as u64;

#[derive(Debug)]
struct Link {
    /// Its routes; route `i` is request ID `ROUTE_RID_BASE + i` in the namespace table (a
    /// route the namespace directory took away leaves a hole, filled by the next one).
    routes: Vec<Option<TrackNamespace>>,
    /// The parent's node ID, once its SETUP arrived.
    peer: Option<u64>,
    /// Announcements forwarded up this link, and their requests on it.
    forwarded: HashMap<TrackNamespace, Forwarded>,
    by_rid: HashMap<RequestId, TrackNamespace>,
    /// The link this one replaces (its parent sent GOAWAY).
    replaces: Option<ConnId>,
    /// Its replacement is up: its tracks are moving there, and it closes once they have.
    moved: bool,
    /// It leads to a relay the namespace directory named (`Input::Link`):
    /// announcements are not forwarded up it.
    directory: bool,
    /// The relay's SUBSCRIBE_NAMESPACEs up this link, one per route: their prefixes.
    discovering: HashMap<RequestId, TrackNamespace>,
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
pub(crate) struct Links {
    on_core: HashMap<ConnId, Link>,
    /// Forwarded announcements not yet answered, oldest first: (forwarded at, link, namespace);
    /// their held confirmations are released [`FORWARD_WAIT`] later at the latest.
    waits: std::collections::VecDeque<(Instant, ConnId, TrackNamespace)>,
    /// Links whose parent sent GOAWAY, with its New Session URI, for the runtime to open
    /// their replacements.
    goaways: Vec<(ConnId, Bytes)>,
}

/// Most fields a Track Namespace has (draft-16 §2.4.1, draft-22 §2.4.1).
const MAX_NAMESPACE_FIELDS: usize = 32;

/// Sends SUBSCRIBE_NAMESPACE for `prefix` up link `conn`: the parent answers with its
/// namespaces under it, now and as they come and go (NAMESPACE, NAMESPACE_DONE).
fn discover(sessions: &mut Sessions, conn: ConnId, link: &mut Link, prefix: &TrackNamespace) {
    let Some(s) = sessions.get_mut(conn) else { return };
    let sent = s.next_request_id().and_then(|request_id| {
        let msg = SubscribeNamespace {
            request_id,
            prefix: prefix.clone(),
            options: SubscribeOptions::Namespace,
            params: Parameters::default(),
        };
        s.send(Message::SubscribeNamespace(msg)).map(|()| request_id)
    });
    match sent {
        Ok(rid) => {
            sessions.register(conn, rid, Holder::Discovering);
            link.discovering.insert(rid, prefix.clone());
        }
        Err(e) => tracing::debug!(%conn, error = %e, "SUBSCRIBE_NAMESPACE up the link not sent"),
    }
}

/// Tells every core that tracks under `namespace` come from link `publisher`, whose parent
/// is relay `parent`.
fn announce_route(
    cx: &mut Cx,
    publisher: SessionRef,
    rid: RequestId,
    parent: u64,
    namespace: &TrackNamespace,
) {
    cx.namespace_announced(namespace, publisher, rid, Via::Upstream { node: parent });
}

/// A link whose SETUP exchange completed ([`Links::ready`]): the routes to enter as its
/// namespaces (each with its route's request ID), and the link it replaces.
pub(super) struct LinkUp {
    pub routes: Vec<(RequestId, TrackNamespace)>,
    pub replaces: Option<ConnId>,
}

impl Links {
    /// A session this core opened to a parent relay, serving the namespace prefixes `routes`
    /// (an empty prefix is the default route). The routes take effect when its SETUP exchange
    /// completes. `replaces`: the link (on this core) whose parent sent GOAWAY; its tracks
    /// move to this one once it is up.
    pub(super) fn add(&mut self, conn: ConnId, routes: Vec<TrackNamespace>, replaces: Option<ConnId>) {
        // The configuration allows no more (`config::MAX_ROUTES_PER_UPSTREAM`).
        let routes = routes.into_iter().take(MAX_ROUTES_PER_UPSTREAM).map(Some).collect();
        let (forwarded, by_rid) = (HashMap::default(), HashMap::default());
        let link = Link {
            routes,
            peer: None,
            forwarded,
            by_rid,
            replaces,
            moved: false,
            directory: false,
            discovering: HashMap::default(),
        };
        self.on_core.insert(conn, link);
    }

    /// Links whose parent sent GOAWAY since the last call, with its New Session URI (empty:
    /// the same parent).
    pub(super) fn take_goaways(&mut self) -> Vec<(ConnId, Bytes)> {
        std::mem::take(&mut self.goaways)
    }

    /// Link `conn` leads to a relay the namespace directory named.
    pub(super) fn mark_directory(&mut self, conn: ConnId) {
        if let Some(link) = self.on_core.get_mut(&conn) {
            link.directory = true;
        }
    }

    /// Whether link `conn` was replaced (its tracks are moving to its replacement).
    pub(super) fn moved(&self, conn: ConnId) -> bool {
        self.on_core.get(&conn).is_some_and(|l| l.moved)
    }

    /// GOAWAY from a link's parent: its replacement is opened by the runtime.
    pub(super) fn goaway(&mut self, conn: ConnId, new_session_uri: Bytes) {
        tracing::info!(%conn, uri = %String::from_utf8_lossy(&new_session_uri), "upstream parent going away");
        self.goaways.push((conn, new_session_uri));
    }

    /// Upstream links of this core whose session is set up.
    pub(super) fn up(&self) -> usize {
        self.on_core.values().filter(|l| l.peer.is_some()).count()
    }

    /// Session `conn` finished its SETUP exchange; `peer` is what the peer sent. For a link:
    /// refuse a parent that is this node, else publish its routes to every core; the caller
    /// enters the routes it returns as the link's namespaces, and moves the link it replaces.
    pub(super) fn ready(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        peer: &SetupOptions,
    ) -> Option<LinkUp> {
        let node = node_of(peer);
        if let Some(n) = node {
            sessions.set_node(conn, n);
        }
        let link = self.on_core.get_mut(&conn)?;
        // A parent that is not a moq-edge has no node ID: it still gets one (never ours).
        let parent = node.unwrap_or(u64::MAX ^ cx.config.node_id);
        if parent == cx.config.node_id {
            tracing::warn!(%conn, "upstream link leads back to this relay: closed (routing loop)");
            sessions.close(conn, SessionCode::ProtocolViolation, "routing loop: the upstream is this relay");
            return None;
        }
        link.peer = Some(parent);
        tracing::info!(
            %conn,
            parent = format!("{parent:016x}"),
            routes = link.routes.len(),
            "upstream link up"
        );
        let publisher = cx.me(conn);
        let mut routes = Vec::with_capacity(link.routes.len());
        for (i, namespace) in link.routes.iter().enumerate() {
            let Some(namespace) = namespace else { continue };
            let rid = RequestId(ROUTE_RID_BASE + i as u64);
            announce_route(cx, publisher, rid, parent, namespace);
            routes.push((rid, namespace.clone()));
        }
        // The parent's namespaces under each route, for this relay's namespace subscribers
        // (a relay the directory named needs not: the directory tells every relay its own).
        if !link.directory {
            for (_, prefix) in &routes {
                discover(sessions, conn, link, prefix);
            }
        }
        Some(LinkUp { routes, replaces: link.replaces })
    }

    /// The namespace a NAMESPACE or NAMESPACE_DONE `suffix` names, on the response stream of
    /// the relay's SUBSCRIBE_NAMESPACE `rid` up link `conn`; `None` for another request, or
    /// one longer than a namespace may be (32 fields).
    pub(super) fn parent_namespace(
        &self,
        conn: ConnId,
        rid: RequestId,
        suffix: &TrackNamespace,
    ) -> Option<TrackNamespace> {
        let prefix = self.on_core.get(&conn)?.discovering.get(&rid)?;
        let fields: Vec<Bytes> = prefix.fields().iter().chain(suffix.fields()).cloned().collect();
        (fields.len() <= MAX_NAMESPACE_FIELDS).then_some(TrackNamespace(fields))
    }

    /// The parent refused or ended the relay's SUBSCRIBE_NAMESPACE `rid` up link `conn`: its
    /// prefix is no longer followed (the namespaces it brought stay until the link closes).
    pub(super) fn discovery_ended(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        if let Some(link) = self.on_core.get_mut(&conn) {
            if let Some(prefix) = link.discovering.remove(&rid) {
                tracing::info!(%conn, ?prefix, "the parent does not list its namespaces under this route");
            }
        }
        sessions.forget(conn, rid);
    }

    /// Link `conn` takes one more route, `prefix` (the namespace directory names its parent
    /// as the relay serving it). Returns the route's request ID when the link is set up and
    /// the route is announced to every core now; otherwise it is announced when the link is
    /// (`ready`), or it was there already, or the link is full or gone.
    pub(super) fn add_route(
        &mut self,
        cx: &mut Cx,
        conn: ConnId,
        prefix: TrackNamespace,
    ) -> Option<RequestId> {
        let link = self.on_core.get_mut(&conn)?;
        if link.routes.iter().flatten().any(|r| *r == prefix) {
            return None;
        }
        let i = match link.routes.iter().position(Option::is_none) {
            Some(i) => i,
            None if link.routes.len() < MAX_ROUTES_PER_UPSTREAM => {
                link.routes.push(None);
                link.routes.len() - 1
            }
            None => {
                tracing::warn!(%conn, "upstream link has no room for another route");
                return None;
            }
        };
        link.routes[i] = Some(prefix.clone());
        let (parent, moved) = (link.peer?, link.moved);
        if moved {
            return None; // its replacement takes the routes
        }
        let rid = RequestId(ROUTE_RID_BASE + i as u64);
        announce_route(cx, cx.me(conn), rid, parent, &prefix);
        Some(rid)
    }

    /// Link `conn` drops route `prefix`. Returns its request ID when it had been announced
    /// (the caller withdraws it).
    pub(super) fn remove_route(&mut self, conn: ConnId, prefix: &TrackNamespace) -> Option<RequestId> {
        let link = self.on_core.get_mut(&conn)?;
        let i = link.routes.iter().position(|r| r.as_ref() == Some(prefix))?;
        link.routes[i] = None;
        link.peer.map(|_| RequestId(ROUTE_RID_BASE + i as u64))
    }

    /// Link `old`'s replacement is up: it is marked moved, and the first time, the request
    /// IDs of its routes are returned (to withdraw). `None`: no such link here.
    pub(super) fn mark_moved(&mut self, old: ConnId) -> Option<Vec<RequestId>> {
        let link = self.on_core.get_mut(&old)?;
        if std::mem::replace(&mut link.moved, true) {
            return Some(Vec::new());
        }
        let announced = link.routes.iter().enumerate().filter(|(_, r)| r.is_some());
        Some(announced.map(|(i, _)| RequestId(ROUTE_RID_BASE + i as u64)).collect())
    }

    /// The namespace table of this core changed: a link on this core whose route now covers
    /// announcements it has not forwarded yet forwards them (called after routes and
    /// announcements are applied).
    pub(super) fn forward_all(&mut self, cx: &mut Cx, sessions: &mut Sessions, link_conn: ConnId) {
        let all: Vec<(TrackNamespace, SessionRef, Option<u64>)> =
            cx.namespaces.announced().map(|(n, p, node)| (n.clone(), p, node)).collect();
        for (namespace, publisher, node) in all {
            if cx.namespaces.upstream_for(&namespace) == Some(cx.me(link_conn)) {
                self.announced(cx, sessions, &namespace, publisher, node, None);
            }
        }
    }

    /// `publisher` announced `namespace` with request `rid` (applied on this core): forward
    /// it up the link that routes it, when that link lives on this core. True when this
    /// core's confirmation of the announcement (`NamespaceKnown`) is held until the parent
    /// answers.
    pub(super) fn announced(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        namespace: &TrackNamespace,
        publisher: SessionRef,
        node: Option<u64>,
        rid: Option<RequestId>,
    ) -> bool {
        let Some(up) = cx.namespaces.upstream_for(namespace) else { return false };
        if up.core != cx.core || up == publisher {
            return false;
        }
        let now = cx.now;
        let Some(link) = self.on_core.get_mut(&up.conn).filter(|l| !l.directory) else { return false };
        let Some(parent) = link.peer else { return false };
        if node == Some(parent) {
            return false; // it came from the parent itself
        }
        if let Some(f) = link.forwarded.get_mut(namespace) {
            f.who.insert(publisher);
            let (Some(rid), false) = (rid, f.answered) else { return false };
            if f.held.is_empty() {
                self.waits.push_back((now, up.conn, namespace.clone()));
            }
            f.held.push((publisher, rid));
            return true;
        }
        let Some(s) = sessions.get_mut(up.conn) else { return false };
        let Ok(up_rid) = s.next_request_id() else {
            tracing::warn!(conn = %up.conn, "upstream allows no more requests: announcement not forwarded");
            return false;
        };
        let msg =
            PublishNamespace { request_id: up_rid, namespace: namespace.clone(), params: Default::default() };
        if let Err(e) = s.send(Message::PublishNamespace(msg)) {
            tracing::debug!(conn = %up.conn, error = %e, "PUBLISH_NAMESPACE not forwarded");
            return false;
        }
        let mut who = HashSet::default();
        who.insert(publisher);
        let held: Vec<(SessionRef, RequestId)> = rid.map(|r| vec![(publisher, r)]).unwrap_or_default();
        let hold = !held.is_empty();
        let f = Forwarded { rid: up_rid, who, held, answered: false };
        link.forwarded.insert(namespace.clone(), f);
        link.by_rid.insert(up_rid, namespace.clone());
        sessions.register(up.conn, up_rid, Holder::Forwarded);
        if hold {
            self.waits.push_back((now, up.conn, namespace.clone()));
        }
        hold
    }

    /// Releases held confirmations of announcements (the parent answered, the link went
    /// away, or [`FORWARD_WAIT`] passed).
    fn release(&mut self, cx: &mut Cx, held: Vec<(SessionRef, RequestId)>) {
        for (p, rid) in held {
            cx.send(p.core, IngestMsg::NamespaceKnown { conn: p.conn, rid });
        }
    }

    /// Held confirmations whose parent has not answered in time.
    pub(super) fn tick(&mut self, cx: &mut Cx) -> Option<Instant> {
        let mut due = Vec::new();
        while let Some((since, conn, namespace)) = self.waits.front() {
            if *since + FORWARD_WAIT > cx.now {
                break;
            }
            // Releases what is held then (a hold added later had its own entry pushed only if
            // none was pending, so it never waits longer than FORWARD_WAIT; it may wait less).
            if let Some(f) = self.on_core.get_mut(conn).and_then(|l| l.forwarded.get_mut(namespace)) {
                due.append(&mut f.held);
            }
            self.waits.pop_front();
        }
        self.release(cx, due);
        self.waits.front().map(|(since, _, _)| *since + FORWARD_WAIT)
    }

    /// `publisher` withdrew `namespace`: once nobody here announces it, withdraw it upstream.
    pub(super) fn withdrawn(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        namespace: &TrackNamespace,
        publisher: SessionRef,
    ) {
        let mut done = None;
        let mut held = Vec::new();
        for (conn, link) in self.on_core.iter_mut() {
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
        self.release(cx, held);
        let Some((conn, rid)) = done else { return };
        sessions.forget(conn, rid);
        let Some(s) = sessions.get_mut(conn) else { return };
        // draft-22 sessions send this as the request stream's cancellation (§3.3.2).
        let sent = s.send(Message::PublishNamespaceDone(rid));
        if let Err(e) = sent {
            tracing::debug!(%conn, error = %e, "PUBLISH_NAMESPACE withdrawal not sent");
        }
    }

    /// The parent answered forwarded announcement `rid` of link `conn` (REQUEST_OK, or
    /// REQUEST_ERROR with `refused`, which is logged): its held confirmations go out.
    pub(super) fn answer(&mut self, cx: &mut Cx, conn: ConnId, rid: RequestId, refused: Option<&Bytes>) {
        let Some(link) = self.on_core.get_mut(&conn) else { return };
        let Some(namespace) = link.by_rid.get(&rid) else { return };
        let Some(f) = link.forwarded.get_mut(namespace) else { return };
        if let Some(reason) = refused {
            tracing::warn!(%conn, ?namespace, reason = %String::from_utf8_lossy(reason), "upstream refused a forwarded announcement");
        }
        f.answered = true;
        let held = std::mem::take(&mut f.held);
        self.release(cx, held);
    }

    /// Session `conn` is gone.
    pub(super) fn session_closed(&mut self, cx: &mut Cx, conn: ConnId) {
        if let Some(link) = self.on_core.remove(&conn) {
            tracing::info!(%conn, "upstream link down");
            let held = link.forwarded.into_values().flat_map(|f| f.held).collect();
            self.release(cx, held);
        }
    }
}
