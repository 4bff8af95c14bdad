//! A subscriber that follows its relay's GOAWAY to a new relay without losing or repeating an
//! object of a live track (the subscriber side of graceful relay switchover, draft-22 §7.4.1;
//! draft-16 "Graceful Subscriber Relay Switchover" describes the same).
//!
//! On GOAWAY it connects to the New Session URI (the same relay when the URI is empty) and
//! SUBSCRIBEs there for every Established subscription while the old relay keeps delivering.
//! The move is cut at a group boundary, so that it is exact whatever the number of subgroups
//! per group: the new subscription's SUBSCRIBE_OK names its Largest Object; every group after
//! that one comes whole from the new relay, and every group up to it from the old one. The
//! new relay's objects are held until the old one has delivered an object of a group past the
//! cut and has no stream of an earlier group left open (every subgroup of the groups it owes
//! has ended), or the old subscription ended: then the old subscription is cancelled, the held
//! objects of the new relay's groups are passed on, and the new one continues. Once every
//! subscription has moved, the old session is closed with NO_ERROR. A location seen from both
//! relays is delivered once.
//!
//! A subgroup stream that the publisher opens for a group after a later group's streams have
//! begun and ended can still be missed. A subscription the new relay refuses stays on the old
//! one (and the old session open) until the old relay ends it or closes.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::cli::resolve_relay;
use super::moqt::RequestState;
use super::quic::ClientError;
use super::subscriber::{Received, Subscriber};
use wire::model::{FullTrackName, Location, RequestId};
use wire::Version;

/// Locations remembered per subscription to deliver each once.
const RECENT: usize = 4096;
/// How long connecting to the new relay (QUIC handshake and SETUP) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection is served before the other gets a turn during a move.
const SLICE: Duration = Duration::from_millis(2);

/// One subscription of the caller, wherever it currently lives.
#[derive(Debug)]
struct Followed {
    track: FullTrackName,
    /// Its Request ID on the current session.
    rid: RequestId,
    /// Delivered objects the caller has not taken yet.
    out: Vec<Received>,
    /// The largest Location delivered.
    last: Option<Location>,
    /// The last [`RECENT`] Locations delivered.
    recent: VecDeque<Location>,
    recent_set: HashSet<Location>,
}

impl Followed {
    /// Passes `r` on unless it was already delivered.
    fn deliver(&mut self, r: Received) {
        let at = r.location();
        if !self.recent_set.insert(at) {
            return;
        }
        self.recent.push_back(at);
        if self.recent.len() > RECENT {
            if let Some(old) = self.recent.pop_front() {
                self.recent_set.remove(&old);
            }
        }
        self.last = self.last.max(Some(at));
        self.out.push(r);
    }
}

/// A subscription being moved to the new session.
#[derive(Debug)]
struct Moving {
    rid: RequestId,
    /// Objects from the new relay, held until the old one has delivered the groups before the
    /// cut.
    held: Vec<Received>,
}

/// A move in progress: the new session and each subscription's place on it (`None`: not
/// moving, because it was not Established, or it already moved).
struct Move {
    next: Subscriber,
    relay: SocketAddr,
    subs: Vec<Option<Moving>>,
}

/// A subscriber that follows GOAWAY (see the module header).
pub struct FollowingSubscriber {
    version: Version,
    relay: SocketAddr,
    current: Subscriber,
    subs: Vec<Followed>,
    moving: Option<Move>,
    switches: usize,
}

impl FollowingSubscriber {
    /// Connects to `relay` with the ALPN of `version`.
    pub fn connect(relay: SocketAddr, version: Version, deadline: Instant) -> Result<Self, ClientError> {
        let current = Subscriber::connect(relay, version, deadline)?;
        Ok(FollowingSubscriber { version, relay, current, subs: Vec::new(), moving: None, switches: 0 })
    }

    /// SUBSCRIBE to `track` from its Largest Object on, waiting for SUBSCRIBE_OK; returns the
    /// handle that [`FollowingSubscriber::take_received`] takes.
    pub fn subscribe(&mut self, track: FullTrackName, deadline: Instant) -> Result<usize, ClientError> {
        let rid = self.current.subscribe(track.clone(), None, deadline)?;
        self.subs.push(Followed {
            track,
            rid,
            out: Vec::new(),
            last: None,
            recent: VecDeque::new(),
            recent_set: HashSet::new(),
        });
        Ok(self.subs.len() - 1)
    }

    /// The objects of subscription `handle` delivered since the last call, in order, each
    /// once, whichever relay they came from.
    pub fn take_received(&mut self, handle: usize) -> Vec<Received> {
        self.subs.get_mut(handle).map(|f| std::mem::take(&mut f.out)).unwrap_or_default()
    }

    /// The relay the subscriptions are on (the new one once a move has completed).
    pub fn relay(&self) -> SocketAddr {
        self.relay
    }

    /// Moves completed so far.
    pub fn switches(&self) -> usize {
        self.switches
    }

    /// Serves the connection(s) until `deadline`, following a GOAWAY when one comes.
    pub fn pump(&mut self, deadline: Instant) -> Result<(), ClientError> {
        loop {
            let now = Instant::now();
            let slice = deadline.min(now + SLICE);
            let old = match &mut self.moving {
                None => self.current.pump(slice),
                Some(m) => {
                    let old = self.current.pump(now);
                    m.next.pump(slice)?;
                    old
                }
            };
            self.collect();
            match old {
                Ok(()) => {}
                // The old session is gone (GOAWAY_TIMEOUT, or the relay went away): what
                // moved is all there is.
                Err(_) if self.moving.is_some() => self.finish_move(true),
                Err(e) => return Err(e),
            }
            if self.moving.is_none() && self.current.core().goaway().is_some() {
                self.start_move(Instant::now() + CONNECT_TIMEOUT)?;
            }
            if self.moving.is_some() {
                self.advance_move();
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
        }
    }

    /// Closes the session (CONNECTION_CLOSE, NO_ERROR) and a move's new one.
    pub fn close(&mut self) -> Result<(), ClientError> {
        if let Some(m) = &mut self.moving {
            m.next.close()?;
        }
        self.current.close()
    }

    /// Takes what both sessions received: the old session's objects are delivered, the new
    /// one's held until its subscription is released.
    fn collect(&mut self) {
        for (i, f) in self.subs.iter_mut().enumerate() {
            for r in self.current.take_received(f.rid) {
                f.deliver(r);
            }
            let Some(m) = &mut self.moving else { continue };
            if let Some(Some(mv)) = m.subs.get_mut(i) {
                mv.held.extend(m.next.take_received(mv.rid));
            }
        }
    }

    /// GOAWAY: connect to its URI (or the same relay) and SUBSCRIBE there for every
    /// Established subscription.
    fn start_move(&mut self, deadline: Instant) -> Result<(), ClientError> {
        let uri = self.current.core().goaway().map(|g| g.new_session_uri.clone()).unwrap_or_default();
        let relay = if uri.is_empty() {
            self.relay
        } else {
            let text = String::from_utf8_lossy(&uri);
            resolve_relay(&text).map_err(|e| ClientError::Refused { code: 0, reason: e.to_string() })?
        };
        let mut next = Subscriber::connect(relay, self.version, deadline)?;
        let mut subs = Vec::with_capacity(self.subs.len());
        for f in &self.subs {
            let live = self.current.core().subscription(f.rid).is_some_and(|s| s.is_live());
            subs.push(if live {
                let session = next.client.session_mut();
                let rid = next.core.subscribe(session, f.track.clone(), None)?;
                Some(Moving { rid, held: Vec::new() })
            } else {
                None
            });
        }
        next.flush()?;
        self.moving = Some(Move { next, relay, subs });
        Ok(())
    }

    /// Releases each subscription whose new copy is Established and whose old copy has
    /// reached the new one's first object (or ended); completes the move when none is left.
    fn advance_move(&mut self) {
        let Some(m) = &mut self.moving else { return };
        for (i, slot) in m.subs.iter_mut().enumerate() {
            let Some(mv) = slot else { continue };
            let f = &mut self.subs[i];
            let new_state = m.next.core().subscription(mv.rid).map(|s| s.state.clone());
            let old_ended = !self.current.core().subscription(f.rid).is_some_and(|s| s.is_live());
            match new_state {
                Some(RequestState::Accepted) => {}
                Some(RequestState::Pending) => continue,
                // Refused or cancelled there: it stays on the old relay until that ends it.
                _ => {
                    if old_ended {
                        *slot = None;
                    }
                    continue;
                }
            }
            // The first group the new relay gives whole: the one after its Largest Object.
            let largest = m.next.core().subscription(mv.rid).and_then(|s| s.largest);
            let cut = largest.map_or(0, |l| l.group + 1);
            let old = self.current.core();
            let done_before_cut =
                f.last.is_some_and(|l| l.group >= cut) && !old.has_open_stream_before(f.rid, cut);
            if !(old_ended || done_before_cut) {
                continue;
            }
            let _ = self.current.unsubscribe(f.rid);
            for r in mv.held.drain(..) {
                // Groups before the cut came from the old relay (all of them, unless it ended
                // first: then whatever the new one has of them fills in).
                if r.group >= cut || old_ended {
                    f.deliver(r);
                }
            }
            f.rid = mv.rid;
            *slot = None;
        }
        if m.subs.iter().all(Option::is_none) {
            self.finish_move(false);
        }
    }

    /// The new session becomes the current one; the old one is closed (NO_ERROR).
    /// `old_gone`: it closed first, so what is held is passed on as it is.
    fn finish_move(&mut self, old_gone: bool) {
        let Some(mut m) = self.moving.take() else { return };
        for (i, slot) in m.subs.iter_mut().enumerate() {
            let Some(mv) = slot.take() else { continue };
            let state = m.next.core().subscription(mv.rid).map(|s| s.state.clone());
            if old_gone && matches!(state, Some(RequestState::Accepted | RequestState::Pending)) {
                let f = &mut self.subs[i];
                for r in mv.held {
                    f.deliver(r);
                }
                f.rid = mv.rid;
            }
        }
        let _ = self.current.close();
        self.current = m.next;
        self.relay = m.relay;
        self.switches += 1;
    }
}
