//! The upstream link slots of a core: one sans-IO state machine per configured parent (config
//! `upstream`; link `i` on core `i % cores`). A slot decides when to resolve, connect, retry
//! and close, and where to (the parent, or a GOAWAY's New Session URI); the runtime executes
//! its [`LinkCommand`]s (DNS, QUIC connect, closing a link through the relay) and feeds back
//! what happened. It reads no clock: every call takes the turn's `now`.
//!
//! States: down (waiting out the backoff), resolving (a host name), connecting, up (with its
//! connection). Links replaced after their parent's GOAWAY stay open (make before break)
//! until they carry nothing, at most [`MAX_OLD_LINKS`] of them.

use crate::msg::ConnId;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tracing::warn;

use crate::links::{moqt_host_port, Parent};

/// First and longest wait before connecting a link again.
pub const LINK_BACKOFF_MIN: Duration = Duration::from_millis(250);
pub(crate) const LINK_BACKOFF_MAX: Duration = Duration::from_secs(15);
/// A link that stayed up this long starts its backoff afresh when it drops.
pub const LINK_STABLE: Duration = Duration::from_secs(30);
/// Replaced links a slot keeps open while their tracks move (beyond it the oldest is closed).
pub const MAX_OLD_LINKS: usize = 2;

/// What a slot asks of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkCommand {
    /// Resolve host name `host` (off the core); the answer goes to [`LinkSlots::resolved`].
    Resolve {
        /// The slot asking.
        slot: u64,
        /// The host name.
        host: String,
        /// The port to connect to.
        port: u16,
    },
    /// Open a QUIC connection to `peer`, TLS server name `server_name`; the outcome goes to
    /// [`LinkSlots::connected`] or [`LinkSlots::connect_failed`].
    Connect {
        /// The slot asking.
        slot: u64,
        /// The address.
        peer: SocketAddr,
        /// The TLS server name.
        server_name: String,
    },
    /// Close replaced link `conn` (the relay closes its session with NO_ERROR).
    Close {
        /// The slot asking.
        slot: u64,
        /// The replaced link.
        conn: ConnId,
        /// Why.
        why: CloseReason,
    },
}

/// Why a replaced link is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The slot holds [`MAX_OLD_LINKS`] replaced links already: the oldest goes (its tracks
    /// are lost and subscribed again).
    TooManyReplaced,
    /// Its tracks moved to the slot's new link: it carries nothing.
    MovedOut,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Down { retry_at: Instant, backoff: Duration },
    Resolving { host: String, backoff: Duration },
    Connecting { backoff: Duration },
    Up { conn: ConnId, since: Instant, backoff: Duration },
}

/// One configured parent's link.
#[derive(Debug)]
pub struct LinkSlot {
    tag: u64,
    upstream: Parent,
    state: State,
    /// Connections whose parent sent GOAWAY, oldest first: open while their tracks move to
    /// the slot's new connection (make before break), closed once none is left on them.
    old: Vec<ConnId>,
    /// Where the next connection goes instead of the configured parent (a GOAWAY's New
    /// Session URI).
    target: Option<(String, u16)>,
    /// A link to a relay the namespace directory named (not configured): its routes come
    /// and go with the directory, and it closes once it has none and carries nothing.
    directory: bool,
}

impl LinkSlot {
    /// A slot that connects at `now`; `tag` names it in commands.
    pub fn new(tag: u64, upstream: Parent, now: Instant) -> Self {
        let state = State::Down { retry_at: now, backoff: LINK_BACKOFF_MIN };
        LinkSlot { tag, upstream, state, old: Vec::new(), target: None, directory: false }
    }

    /// The parent it connects to.
    pub fn upstream(&self) -> &Parent {
        &self.upstream
    }

    /// The link connection that is up.
    pub fn conn(&self) -> Option<ConnId> {
        match self.state {
            State::Up { conn, .. } => Some(conn),
            _ => None,
        }
    }

    /// Whether the link leads to a relay the namespace directory named (not a configured
    /// parent).
    pub fn is_directory(&self) -> bool {
        self.directory
    }

    /// Replaced links still open, oldest first.
    pub fn replaced(&self) -> &[ConnId] {
        &self.old
    }

    /// When [`LinkSlot::tick`] has something to do (a reconnection).
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Down { retry_at, .. } => Some(retry_at),
            _ => None,
        }
    }

    /// A reconnection that is due starts: an IP address is connected to as it is, a host
    /// name is resolved first.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<LinkCommand>) {
        let State::Down { retry_at, backoff } = self.state else { return };
        if retry_at > now {
            return;
        }
        let (host, port) =
            self.target.take().unwrap_or_else(|| (self.upstream.host.clone(), self.upstream.port));
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.state = State::Connecting { backoff };
            let peer = SocketAddr::new(ip, port);
            out.push(LinkCommand::Connect { slot: self.tag, peer, server_name: host });
            return;
        }
        self.state = State::Resolving { host: host.clone(), backoff };
        out.push(LinkCommand::Resolve { slot: self.tag, host, port });
    }

    /// The answer of a [`LinkCommand::Resolve`] (or why there is none).
    pub fn resolved(&mut self, answer: Result<SocketAddr, String>, now: Instant, out: &mut Vec<LinkCommand>) {
        let State::Resolving { host, backoff } = &self.state else { return };
        let (host, backoff) = (host.clone(), *backoff);
        self.state = State::Connecting { backoff };
        match answer {
            Ok(peer) => out.push(LinkCommand::Connect { slot: self.tag, peer, server_name: host }),
            Err(why) => self.down(now, &why),
        }
    }

    /// A [`LinkCommand::Connect`] finished its handshake: link `conn` is up.
    pub fn connected(&mut self, conn: ConnId, now: Instant) {
        self.state = State::Up { conn, since: now, backoff: self.backoff() };
    }

    /// A [`LinkCommand::Connect`] failed.
    pub fn connect_failed(&mut self, why: &str, now: Instant) {
        self.down(now, why);
    }

    /// Connection `conn` closed: a replaced link is forgotten; the link that was up is
    /// connected again after the backoff.
    pub fn closed(&mut self, conn: ConnId, why: &str, now: Instant) {
        self.old.retain(|&c| c != conn);
        if self.conn() == Some(conn) {
            self.down(now, why);
        }
    }

    /// The parent of link `conn` sent GOAWAY: the slot connects again (to the New Session URI
    /// when there is one; at once unless the link was up for less than [`LINK_STABLE`]) while
    /// the old connection stays open; the relay moves the tracks once the new one is up.
    pub fn goaway(&mut self, conn: ConnId, uri: &[u8], now: Instant, out: &mut Vec<LinkCommand>) {
        let State::Up { conn: up, since, backoff } = self.state else { return };
        if up != conn {
            return;
        }
        let uri = String::from_utf8_lossy(uri);
        self.target = match moqt_host_port(&uri) {
            Ok(target) => Some(target),
            Err(why) if !uri.is_empty() => {
                warn!(upstream = %self.upstream.url, %uri, why, "GOAWAY's New Session URI not usable: reconnecting to the parent");
                None
            }
            Err(_) => None,
        };
        if self.old.len() >= MAX_OLD_LINKS {
            // A parent that keeps sending GOAWAY and keeps the old links busy: the oldest
            // goes (its tracks are lost and subscribed again), so a slot holds a bounded
            // number of connections.
            let oldest = self.old.remove(0);
            out.push(LinkCommand::Close { slot: self.tag, conn: oldest, why: CloseReason::TooManyReplaced });
        }
        // A parent that sends GOAWAY soon after every connection gets reconnections spaced
        // by the usual backoff, not a storm of them.
        self.state = if now.duration_since(since) < LINK_STABLE {
            State::Down { retry_at: now + backoff, backoff: (backoff * 2).min(LINK_BACKOFF_MAX) }
        } else {
            State::Down { retry_at: now, backoff: LINK_BACKOFF_MIN }
        };
        self.old.push(conn);
    }

    /// Replaced link `conn` carries no subscription any more (the relay's
    /// `link_moved_out`): it is closed.
    pub fn carries_nothing(&mut self, conn: ConnId, out: &mut Vec<LinkCommand>) {
        if self.old.contains(&conn) {
            out.push(LinkCommand::Close { slot: self.tag, conn, why: CloseReason::MovedOut });
        }
    }

    fn backoff(&self) -> Duration {
        match self.state {
            State::Down { backoff, .. }
            | State::Resolving { backoff, .. }
            | State::Connecting { backoff }
            | State::Up { backoff, .. } => backoff,
        }
    }

    /// The link failed or closed: connect again after a backoff that doubles per failure.
    fn down(&mut self, now: Instant, why: &str) {
        let backoff = match self.state {
            State::Up { since, .. } if now.duration_since(since) >= LINK_STABLE => LINK_BACKOFF_MIN,
            _ => self.backoff(),
        };
        warn!(upstream = %self.upstream.url, why, retry_ms = backoff.as_millis() as u64, "upstream link down");
        self.state = State::Down { retry_at: now + backoff, backoff: (backoff * 2).min(LINK_BACKOFF_MAX) };
    }
}

/// A core's link slots; events are routed by slot tag or connection.
#[derive(Debug, Default)]
pub struct LinkSlots {
    slots: Vec<LinkSlot>,
    /// The next directory slot's tag (after [`DIRECTORY_TAGS`]).
    next_tag: u64,
}

/// Tags of the slots of links the namespace directory asks for (configured parents' tags are
/// their index).
const DIRECTORY_TAGS: u64 = 1 << 32;

impl LinkSlots {
    /// The slots of core `core` of `cores`: parent `i` is slot `i` on core `i % cores`; each
    /// connects at `now`.
    pub fn new(upstreams: &[Parent], core: usize, cores: usize, now: Instant) -> Self {
        let slots = upstreams
            .iter()
            .enumerate()
            .filter(|(i, _)| i % cores.max(1) == core)
            .map(|(i, u)| LinkSlot::new(i as u64, u.clone(), now))
            .collect();
        LinkSlots { slots, next_tag: DIRECTORY_TAGS }
    }

    /// The namespace directory routes `prefix` to the relay at `url` (`on`), or no longer: the
    /// slot of the link to `url` (made the first time, connecting at `now`, sending `token`)
    /// takes or drops the route. Returns the link's connection when it is up (the relay
    /// then takes or drops the route at once); a new route of a link not up yet is given to
    /// it when it is (`upstream().routes`).
    pub fn directory_route(
        &mut self,
        url: &str,
        prefix: &wire::model::TrackNamespace,
        on: bool,
        token: Option<&str>,
        now: Instant,
    ) -> Result<Option<ConnId>, &'static str> {
        let i = match self.slots.iter().position(|s| s.directory && s.upstream.url == url) {
            Some(i) => i,
            None if !on => return Ok(None),
            None => {
                let (host, port) = moqt_host_port(url)?;
                let token = token.map(str::to_string);
                let upstream = Parent { url: url.to_string(), host, port, routes: Vec::new(), token };
                let mut slot = LinkSlot::new(self.next_tag, upstream, now);
                self.next_tag += 1;
                slot.directory = true;
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[i];
        if on && !s.upstream.routes.contains(prefix) {
            s.upstream.routes.push(prefix.clone());
        } else if !on {
            s.upstream.routes.retain(|r| r != prefix);
        }
        Ok(s.conn())
    }

    /// Directory slots with no route left: the connection each has up (to close once it
    /// carries nothing). One with none (and no replaced links) is removed at once.
    pub fn unrouted(&mut self) -> Vec<ConnId> {
        self.slots.retain(|s| {
            !s.directory || !s.upstream.routes.is_empty() || s.conn().is_some() || !s.old.is_empty()
        });
        self.slots
            .iter()
            .filter(|s| s.directory && s.upstream.routes.is_empty())
            .filter_map(LinkSlot::conn)
            .collect()
    }

    /// The directory slot whose link is `conn` is closed by the relay: it is removed (it is
    /// not connected again).
    pub fn retire(&mut self, conn: ConnId) {
        self.slots.retain(|s| !(s.directory && s.conn() == Some(conn)));
    }

    /// Whether there is no slot (no parent configured, none named by the directory).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slots.
    pub fn iter(&self) -> impl Iterator<Item = &LinkSlot> {
        self.slots.iter()
    }

    /// The slot `tag`.
    pub fn get(&self, tag: u64) -> Option<&LinkSlot> {
        self.slots.iter().find(|s| s.tag == tag)
    }

    fn by_tag(&mut self, tag: u64) -> Option<&mut LinkSlot> {
        self.slots.iter_mut().find(|s| s.tag == tag)
    }

    /// Whether any slot has a link open (up or replaced): they need keep-alives.
    pub fn has_links(&self) -> bool {
        self.slots.iter().any(|s| s.conn().is_some() || !s.old.is_empty())
    }

    /// The earliest reconnection.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.slots.iter().filter_map(LinkSlot::next_deadline).min()
    }

    /// Starts the reconnections that are due.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<LinkCommand>) {
        for s in &mut self.slots {
            s.tick(now, out);
        }
    }

    /// See [`LinkSlot::resolved`].
    pub fn resolved(
        &mut self,
        tag: u64,
        answer: Result<SocketAddr, String>,
        now: Instant,
        out: &mut Vec<LinkCommand>,
    ) {
        if let Some(s) = self.by_tag(tag) {
            s.resolved(answer, now, out);
        }
    }

    /// Slot `tag`'s connection is up as `conn`; the slot (None: no such slot).
    pub fn connected(&mut self, tag: u64, conn: ConnId, now: Instant) -> Option<&LinkSlot> {
        let s = self.by_tag(tag)?;
        s.connected(conn, now);
        Some(s)
    }

    /// See [`LinkSlot::connect_failed`].
    pub fn connect_failed(&mut self, tag: u64, why: &str, now: Instant) {
        if let Some(s) = self.by_tag(tag) {
            s.connect_failed(why, now);
        }
    }

    /// See [`LinkSlot::closed`].
    pub fn closed(&mut self, conn: ConnId, why: &str, now: Instant) {
        for s in &mut self.slots {
            s.closed(conn, why, now);
        }
    }

    /// See [`LinkSlot::goaway`] (a connection no slot has up is ignored).
    pub fn goaway(&mut self, conn: ConnId, uri: &[u8], now: Instant, out: &mut Vec<LinkCommand>) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.conn() == Some(conn)) {
            s.goaway(conn, uri, now, out);
        }
    }

    /// See [`LinkSlot::carries_nothing`].
    pub fn carries_nothing(&mut self, conn: ConnId, out: &mut Vec<LinkCommand>) {
        for s in &mut self.slots {
            s.carries_nothing(conn, out);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use wire::model::TrackNamespace;

    const MS: Duration = Duration::from_millis(1);

    fn parent(host: &str) -> Parent {
        Parent {
            url: format!("moqt://{host}:4443"),
            host: host.to_string(),
            port: 4443,
            routes: vec![TrackNamespace::from_strs::<&str>(&[])],
            token: None,
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn connect(peer: &str, server_name: &str) -> LinkCommand {
        LinkCommand::Connect { slot: 0, peer: addr(peer), server_name: server_name.to_string() }
    }

    /// Ticks at `now` and returns the commands.
    fn tick(slot: &mut LinkSlot, now: Instant) -> Vec<LinkCommand> {
        let mut out = Vec::new();
        slot.tick(now, &mut out);
        out
    }

    fn goaway(slot: &mut LinkSlot, conn: u64, uri: &str, now: Instant) -> Vec<LinkCommand> {
        let mut out = Vec::new();
        slot.goaway(ConnId(conn), uri.as_bytes(), now, &mut out);
        out
    }

    /// A slot to 127.0.0.1:4443 whose first link is up as `conn` at `t0`.
    fn up(conn: u64, t0: Instant) -> LinkSlot {
        let mut slot = LinkSlot::new(0, parent("127.0.0.1"), t0);
        assert_eq!(tick(&mut slot, t0), vec![connect("127.0.0.1:4443", "127.0.0.1")]);
        slot.connected(ConnId(conn), t0);
        slot
    }

    #[test]
    fn the_first_connection_starts_at_once() {
        let t0 = Instant::now();
        let mut slot = LinkSlot::new(0, parent("127.0.0.1"), t0);
        assert_eq!(slot.next_deadline(), Some(t0));
        assert_eq!(tick(&mut slot, t0), vec![connect("127.0.0.1:4443", "127.0.0.1")]);
        assert_eq!((slot.next_deadline(), tick(&mut slot, t0 + LINK_BACKOFF_MAX)), (None, vec![]));
        slot.connected(ConnId(7), t0 + 3 * MS);
        assert_eq!((slot.conn(), slot.next_deadline()), (Some(ConnId(7)), None));
    }

    #[test]
    fn a_host_name_is_resolved_before_connecting() {
        let t0 = Instant::now();
        let mut slot = LinkSlot::new(0, parent("origin"), t0);
        let resolve = LinkCommand::Resolve { slot: 0, host: "origin".into(), port: 4443 };
        assert_eq!(tick(&mut slot, t0), vec![resolve.clone()]);
        assert_eq!((slot.next_deadline(), tick(&mut slot, t0 + MS)), (None, vec![]));
        let mut out = Vec::new();
        slot.resolved(Ok(addr("10.0.0.1:4443")), t0 + 2 * MS, &mut out);
        assert_eq!(out, vec![connect("10.0.0.1:4443", "origin")]);
        // A failed resolution is a failed attempt: retried after the backoff.
        slot.connect_failed("refused", t0 + 3 * MS);
        let t1 = t0 + 3 * MS + LINK_BACKOFF_MIN;
        assert_eq!(tick(&mut slot, t1), vec![resolve]);
        out.clear();
        slot.resolved(Err("the host name has no address".into()), t1, &mut out);
        assert_eq!((out, slot.next_deadline()), (vec![], Some(t1 + 2 * LINK_BACKOFF_MIN)));
    }

    #[test]
    fn failures_retry_after_a_backoff_doubling_from_250_ms_to_15_s() {
        let t0 = Instant::now();
        let mut slot = LinkSlot::new(0, parent("127.0.0.1"), t0);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..10 {
            assert_eq!(tick(&mut slot, now), vec![connect("127.0.0.1:4443", "127.0.0.1")]);
            slot.connect_failed("no answer", now);
            let at = slot.next_deadline().unwrap();
            assert_eq!(tick(&mut slot, at - MS), vec![], "nothing before the deadline");
            waits.push(at - now);
            now = at;
        }
        let ms: Vec<u64> = waits.iter().map(|w| w.as_millis() as u64).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 8000, 15_000, 15_000, 15_000, 15_000]);
    }

    #[test]
    fn a_link_up_for_30_s_starts_its_backoff_afresh() {
        let t0 = Instant::now();
        let mut slot = LinkSlot::new(0, parent("127.0.0.1"), t0);
        let mut now = t0;
        for _ in 0..4 {
            tick(&mut slot, now);
            slot.connect_failed("no answer", now);
            now = slot.next_deadline().unwrap();
        }
        // Backoff now 4 s. A link up for less than LINK_STABLE keeps it growing...
        assert_eq!(tick(&mut slot, now).len(), 1);
        slot.connected(ConnId(1), now);
        let closed = now + LINK_STABLE - MS;
        slot.closed(ConnId(1), "idle timeout", closed);
        assert_eq!(slot.next_deadline(), Some(closed + 4000 * MS));
        // ...one up for LINK_STABLE starts again from 250 ms.
        now = closed + 4000 * MS;
        assert_eq!(tick(&mut slot, now).len(), 1);
        slot.connected(ConnId(2), now);
        let closed = now + LINK_STABLE;
        slot.closed(ConnId(2), "closed", closed);
        assert_eq!(slot.next_deadline(), Some(closed + LINK_BACKOFF_MIN));
        tick(&mut slot, closed + LINK_BACKOFF_MIN);
        slot.connect_failed("no answer", closed + LINK_BACKOFF_MIN);
        assert_eq!(slot.next_deadline(), Some(closed + LINK_BACKOFF_MIN + 2 * LINK_BACKOFF_MIN));
    }

    #[test]
    fn goaway_connects_to_the_new_session_uri_while_the_old_link_stays() {
        let t0 = Instant::now();
        let mut slot = up(1, t0);
        let t1 = t0 + LINK_STABLE;
        assert_eq!(goaway(&mut slot, 1, "moqt://10.0.0.2:5000/relay", t1), vec![]);
        assert_eq!((slot.conn(), slot.replaced(), slot.next_deadline()), (None, &[ConnId(1)][..], Some(t1)));
        assert_eq!(tick(&mut slot, t1), vec![connect("10.0.0.2:5000", "10.0.0.2")]);
        slot.connected(ConnId(2), t1 + MS);
        assert_eq!((slot.conn(), slot.replaced()), (Some(ConnId(2)), &[ConnId(1)][..]));
        // The URI was for that connection only: a later reconnection goes to the parent.
        slot.closed(ConnId(2), "closed", t1 + 2 * MS);
        assert_eq!(slot.replaced(), &[ConnId(1)]);
        let retry = slot.next_deadline().unwrap();
        assert_eq!(tick(&mut slot, retry), vec![connect("127.0.0.1:4443", "127.0.0.1")]);
    }

    #[test]
    fn goaway_without_a_usable_uri_connects_to_the_parent_again() {
        for uri in ["", "https://elsewhere", "moqt://x:0"] {
            let t0 = Instant::now();
            let mut slot = up(1, t0);
            let t1 = t0 + LINK_STABLE;
            assert_eq!(goaway(&mut slot, 1, uri, t1), vec![], "{uri}");
            assert_eq!(tick(&mut slot, t1), vec![connect("127.0.0.1:4443", "127.0.0.1")], "{uri}");
            assert_eq!(slot.replaced(), &[ConnId(1)]);
        }
    }

    #[test]
    fn goaway_soon_after_connecting_reconnects_after_the_backoff() {
        let t0 = Instant::now();
        let mut slot = up(1, t0);
        let mut now = t0 + 2000 * MS;
        let mut conn = 1;
        let mut waits = Vec::new();
        for _ in 0..3 {
            assert_eq!(goaway(&mut slot, conn, "moqt://10.0.0.2:5000", now), vec![]);
            let at = slot.next_deadline().unwrap();
            assert_eq!(tick(&mut slot, at - MS), vec![], "nothing before the backoff");
            assert_eq!(tick(&mut slot, at), vec![connect("10.0.0.2:5000", "10.0.0.2")]);
            waits.push((at - now).as_millis() as u64);
            conn += 1;
            slot.connected(ConnId(conn), at);
            slot.closed(ConnId(conn - 1), "closed", at); // its tracks moved
            now = at + MS;
        }
        assert_eq!(waits, [250, 500, 1000]);
        // A GOAWAY after the link stayed up LINK_STABLE reconnects at once, backoff reset.
        now += LINK_STABLE;
        goaway(&mut slot, conn, "", now);
        assert_eq!(slot.next_deadline(), Some(now));
        tick(&mut slot, now);
        slot.connect_failed("refused", now);
        assert_eq!(slot.next_deadline(), Some(now + LINK_BACKOFF_MIN));
    }

    #[test]
    fn at_most_two_replaced_links_the_oldest_is_closed() {
        let t0 = Instant::now();
        let mut slot = up(1, t0);
        let mut now = t0;
        for conn in 1..=2 {
            now += LINK_STABLE;
            assert_eq!(goaway(&mut slot, conn, "", now), vec![]);
            tick(&mut slot, now);
            slot.connected(ConnId(conn + 1), now);
        }
        assert_eq!(slot.replaced(), &[ConnId(1), ConnId(2)]);
        now += LINK_STABLE;
        let close = LinkCommand::Close { slot: 0, conn: ConnId(1), why: CloseReason::TooManyReplaced };
        assert_eq!(goaway(&mut slot, 3, "", now), vec![close]);
        assert_eq!(slot.replaced(), &[ConnId(2), ConnId(3)]);
        assert_eq!(tick(&mut slot, now), vec![connect("127.0.0.1:4443", "127.0.0.1")]);
    }

    #[test]
    fn a_replaced_link_closes_only_once_it_carries_nothing() {
        let t0 = Instant::now();
        let mut slot = up(1, t0);
        let t1 = t0 + LINK_STABLE;
        goaway(&mut slot, 1, "", t1);
        tick(&mut slot, t1);
        slot.connected(ConnId(2), t1);
        let mut out = Vec::new();
        slot.carries_nothing(ConnId(2), &mut out); // the link that is up is never closed so
        slot.carries_nothing(ConnId(9), &mut out); // nor a connection the slot does not know
        assert_eq!((out.as_slice(), slot.replaced()), (&[][..], &[ConnId(1)][..]));
        slot.carries_nothing(ConnId(1), &mut out);
        assert_eq!(out, vec![LinkCommand::Close { slot: 0, conn: ConnId(1), why: CloseReason::MovedOut }]);
        assert_eq!(slot.replaced(), &[ConnId(1)], "kept until its connection is closed");
        // The replaced link closing leaves the slot's link up and no reconnection pending.
        slot.closed(ConnId(1), "closed", t1 + MS);
        assert_eq!((slot.conn(), slot.replaced(), slot.next_deadline()), (Some(ConnId(2)), &[][..], None));
    }

    #[test]
    fn goaway_and_close_of_a_connection_that_is_not_the_slots_link_change_nothing() {
        let t0 = Instant::now();
        let mut slot = up(1, t0);
        assert_eq!(goaway(&mut slot, 5, "moqt://10.0.0.2:5000", t0 + MS), vec![]);
        slot.closed(ConnId(5), "closed", t0 + MS);
        assert_eq!((slot.conn(), slot.replaced(), slot.next_deadline()), (Some(ConnId(1)), &[][..], None));
    }

    #[test]
    fn slots_of_a_core_are_every_cores_th_parent_and_events_find_their_slot() {
        let t0 = Instant::now();
        let parents: Vec<Parent> = ["10.0.0.1", "10.0.0.2", "10.0.0.3"].map(parent).into();
        let mut slots = LinkSlots::new(&parents, 1, 2, t0);
        assert_eq!(slots.iter().map(|s| s.tag).collect::<Vec<_>>(), [1]);
        assert!(LinkSlots::new(&parents, 0, 2, t0).get(2).is_some());
        assert_eq!(slots.next_deadline(), Some(t0));
        let mut out = Vec::new();
        slots.tick(t0, &mut out);
        let peer = addr("10.0.0.2:4443");
        assert_eq!(out, vec![LinkCommand::Connect { slot: 1, peer, server_name: "10.0.0.2".into() }]);
        assert!(!slots.has_links());
        assert!(slots.connected(0, ConnId(4), t0).is_none());
        assert_eq!(slots.connected(1, ConnId(4), t0).map(LinkSlot::conn), Some(Some(ConnId(4))));
        assert!(slots.has_links());
        out.clear();
        slots.goaway(ConnId(4), b"", t0 + LINK_STABLE, &mut out);
        slots.tick(t0 + LINK_STABLE, &mut out);
        assert_eq!(out, vec![LinkCommand::Connect { slot: 1, peer, server_name: "10.0.0.2".into() }]);
        slots.connect_failed(1, "refused", t0 + LINK_STABLE);
        assert_eq!(slots.next_deadline(), Some(t0 + LINK_STABLE + LINK_BACKOFF_MIN));
        assert!(slots.has_links(), "the replaced link is open");
        slots.closed(ConnId(4), "closed", t0 + LINK_STABLE);
        assert!(!slots.has_links());
    }
}
