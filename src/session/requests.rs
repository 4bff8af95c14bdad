//! Request ID accounting for one session (draft-16 "Request ID", "MAX_REQUEST_ID" and
//! "REQUESTS_BLOCKED"; draft-18 §10.1; draft-22 §6.4.2.1): the IDs we hand out, the IDs the peer may use, and
//! the message classes that consume or reference an ID.

use std::collections::BTreeSet;

use super::error::{SessionCode, SessionError};
use wire::model::{Message, RequestId, Role};
use wire::Version;

/// The parity bit of the Request IDs `role` generates (client even from 0, server odd from 1).
pub(crate) const fn parity(role: Role) -> u64 {
    match role {
        Role::Client => 0,
        Role::Server => 1,
    }
}

/// The Request ID a request message consumes (SUBSCRIBE, PUBLISH, FETCH, TRACK_STATUS,
/// PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, SUBSCRIBE_TRACKS, REQUEST_UPDATE).
pub(crate) fn consumed_id(msg: &Message) -> Option<RequestId> {
    match msg {
        Message::Subscribe(m) | Message::TrackStatus(m) => Some(m.request_id),
        Message::Publish(m) => Some(m.request_id),
        Message::Fetch(m) => Some(m.request_id),
        Message::PublishNamespace(m) => Some(m.request_id),
        Message::SubscribeNamespace(m) => Some(m.request_id),
        Message::SubscribeTracks(m) => Some(m.request_id),
        Message::RequestUpdate(m) => Some(m.request_id),
        _ => None,
    }
}

/// True for the messages that may begin a draft-22 request stream (§6.3).
pub(crate) fn opens_stream(msg: &Message) -> bool {
    consumed_id(msg).is_some() && !matches!(msg, Message::RequestUpdate(_))
}

/// The earlier request a message answers or names.
pub(crate) fn referenced_id(msg: &Message) -> Option<RequestId> {
    match msg {
        Message::RequestOk(m) => Some(m.request_id),
        Message::RequestError(m) => Some(m.request_id),
        Message::SubscribeOk(m) => Some(m.request_id),
        Message::RequestUpdate(m) => Some(m.existing_request_id),
        Message::PublishOk(m) => Some(m.request_id),
        Message::PublishDone(m) => Some(m.request_id),
        Message::PublishStateNotify(m) => Some(m.request_id),
        Message::FetchOk(m) => Some(m.request_id),
        Message::PublishSkipped(m) => Some(m.request_id),
        Message::PublishNamespaceCancel(m) => Some(m.request_id),
        Message::Unsubscribe(r) | Message::FetchCancel(r) | Message::PublishNamespaceDone(r) => Some(*r),
        _ => None,
    }
}

/// Both directions of Request ID use in one session.
#[derive(Debug)]
pub(crate) struct RequestIds {
    version: Version,
    local: Role,
    /// Our next Request ID.
    next_local: u64,
    /// draft-16: the peer's MAX_REQUEST_ID (exclusive); `None` before its SETUP.
    peer_max: Option<u64>,
    /// draft-16: the limit at which we last sent REQUESTS_BLOCKED.
    blocked_at: Option<u64>,
    /// draft-16: the MAX_REQUEST_ID we advertised (exclusive).
    local_max: u64,
    /// draft-16: the last Request ID a request on the control stream used (QUIC keeps one
    /// stream's order, so these must increase).
    last_control: Option<u64>,
    /// draft-16: the newest IDs of the peer's REQUEST_UPDATEs and of our PUBLISHes (what a
    /// REQUEST_UPDATE may not, and may, name among requests it did not send), bounded.
    peer_updates: BTreeSet<u64>,
    local_publishes: BTreeSet<u64>,
    /// The peer's IDs seen so far: draft-22's request streams, and draft-16's
    /// SUBSCRIBE_NAMESPACE streams beside its control stream, may arrive in any order.
    peer_seen: PeerIds,
}

/// The draft-22 peer Request IDs already used, bounded: the newest [`PeerIds::WINDOW`] IDs
/// are kept exactly, and everything below the lowest one dropped from the window (`floor`)
/// counts as used. A peer can have at most `initial_max_streams_bidi` request streams open, so
/// a legitimate new request never arrives that far out of order.
#[derive(Debug, Default)]
struct PeerIds {
    floor: u64,
    seen: BTreeSet<u64>,
}

impl PeerIds {
    const WINDOW: usize = 4096;

    /// Records `id`; false when it was used before (or is below the window).
    fn insert(&mut self, id: u64) -> bool {
        if id < self.floor || !self.seen.insert(id) {
            return false;
        }
        if self.seen.len() > Self::WINDOW {
            if let Some(lowest) = self.seen.pop_first() {
                self.floor = lowest.saturating_add(1);
            }
        }
        true
    }

    fn contains(&self, id: u64) -> bool {
        id < self.floor || self.seen.contains(&id)
    }
}

/// IDs kept in [`RequestIds`]'s draft-16 update sets.
const REMEMBERED: usize = 4096;

/// Adds `id` to `set`, dropping the oldest past [`REMEMBERED`].
fn remember(set: &mut BTreeSet<u64>, id: u64) {
    set.insert(id);
    if set.len() > REMEMBERED {
        set.pop_first();
    }
}

/// What [`RequestIds::allocate`] could not do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alloc {
    /// draft-16 before the peer's SETUP.
    NotReady,
    /// Blocked at `max`; `send_blocked` is true the first time for this limit.
    Blocked { max: u64, send_blocked: bool },
}

impl RequestIds {
    /// `local_max` is the draft-16 MAX_REQUEST_ID we advertise in our SETUP.
    pub(crate) fn new(version: Version, local: Role, local_max: u64) -> Self {
        RequestIds {
            version,
            local,
            next_local: parity(local),
            peer_max: None,
            blocked_at: None,
            local_max,
            last_control: None,
            peer_updates: BTreeSet::new(),
            local_publishes: BTreeSet::new(),
            peer_seen: PeerIds::default(),
        }
    }

    /// The peer's SETUP arrived with this MAX_REQUEST_ID (absent = 0).
    pub(crate) fn set_peer_initial_max(&mut self, max: Option<u64>) {
        self.peer_max = Some(max.unwrap_or(0));
    }

    /// The peer raised its MAX_REQUEST_ID (draft-16 "MAX_REQUEST_ID": it must strictly increase).
    pub(crate) fn on_max_request_id(&mut self, max: u64) -> Result<(), SessionError> {
        match self.peer_max {
            Some(m) if max <= m => Err(SessionError::violation("MAX_REQUEST_ID did not increase")),
            _ => {
                self.peer_max = Some(max);
                Ok(())
            }
        }
    }

    /// Our next Request ID.
    pub(crate) fn allocate(&mut self) -> Result<RequestId, Alloc> {
        if !self.version.request_streams() {
            let max = self.peer_max.ok_or(Alloc::NotReady)?;
            if self.next_local >= max {
                let send_blocked = self.blocked_at != Some(max);
                self.blocked_at = Some(max);
                return Err(Alloc::Blocked { max, send_blocked });
            }
        }
        let id = self.next_local;
        self.next_local = self.next_local.saturating_add(2);
        Ok(RequestId(id))
    }

    /// Raises our advertised MAX_REQUEST_ID by `requests` requests; returns the new value.
    pub(crate) fn grant(&mut self, requests: u64) -> u64 {
        self.local_max = self.local_max.saturating_add(requests.saturating_mul(2));
        self.local_max
    }

    /// draft-16: whether the peer, having just used `id`, has fewer than half of `window`
    /// requests left under our MAX_REQUEST_ID (time to raise it).
    pub(crate) fn running_low(&self, id: RequestId, window: u64) -> bool {
        !self.version.request_streams() && self.local_max.saturating_sub(id.0 + 1) / 2 < window.div_ceil(2)
    }

    /// Records a MAX_REQUEST_ID the relay sent itself.
    pub(crate) fn set_local_max(&mut self, max: u64) {
        self.local_max = self.local_max.max(max);
    }

    /// True when `id` was issued by us (it has our parity and we handed it out).
    pub(crate) fn is_ours(&self, id: RequestId) -> bool {
        id.0 & 1 == parity(self.local) && id.0 < self.next_local
    }

    /// Checks a Request ID the peer consumed with a new request (draft-16 "Request ID": parity,
    /// order, MAX_REQUEST_ID; draft-22 §6.4.2.1: parity, no duplicates). `on_control`: it came
    /// on the draft-16 control stream.
    ///
    /// draft-16 asks for "the next in sequence", but a SUBSCRIBE_NAMESPACE travels on its own
    /// stream, which QUIC does not order with the control stream: a server's SUBSCRIBE_NAMESPACE
    /// (ID 1) may arrive after its PUBLISH_NAMESPACE (ID 3). So the order is checked within the
    /// control stream (its IDs increase; the gaps are requests on other streams, which may
    /// still be in flight), and every ID anywhere is used once.
    pub(crate) fn on_peer_request(&mut self, id: RequestId, on_control: bool) -> Result<(), SessionError> {
        let bad = |r: &str| SessionError::protocol(SessionCode::InvalidRequestId, r.to_string());
        if id.0 & 1 == parity(self.local) {
            return Err(bad("peer Request ID has the wrong parity"));
        }
        match self.version {
            // draft-14 §9.1 is draft-16's rule.
            Version::Draft14 | Version::Draft16 => {
                if id.0 >= self.local_max {
                    return Err(SessionError::protocol(
                        SessionCode::TooManyRequests,
                        "Request ID at or beyond MAX_REQUEST_ID",
                    ));
                }
                if on_control && self.last_control.is_some_and(|last| id.0 <= last) {
                    return Err(bad("Request ID out of sequence"));
                }
                if !self.peer_seen.insert(id.0) {
                    return Err(bad("duplicate Request ID"));
                }
                if on_control {
                    self.last_control = Some(id.0);
                }
            }
            Version::Draft18 | Version::Draft20 | Version::Draft22 => {
                if !self.peer_seen.insert(id.0) {
                    return Err(bad("duplicate Request ID"));
                }
            }
        }
        Ok(())
    }

    /// The smallest peer Request ID not used yet: what a draft-18 GOAWAY names as the first
    /// request not processed (draft-18 §10.4).
    pub(crate) fn first_unused_peer(&self) -> RequestId {
        let peer_parity = 1 - parity(self.local);
        let mut id = self.peer_seen.floor;
        if id & 1 != peer_parity {
            id = id.saturating_add(1);
        }
        while self.peer_seen.contains(id) && id < u64::MAX - 1 {
            id += 2;
        }
        RequestId(id)
    }

    /// The peer sent REQUEST_UPDATE `id` (not itself a request it may update).
    pub(crate) fn note_peer_update(&mut self, id: RequestId) {
        remember(&mut self.peer_updates, id.0);
    }

    /// We sent PUBLISH `id` (its receiver, the peer, may update it).
    pub(crate) fn note_local_publish(&mut self, id: RequestId) {
        remember(&mut self.local_publishes, id.0);
    }

    /// Whether the peer may send REQUEST_UPDATE for request `id` (draft-16 §9.11, draft-22
    /// §9.5): a request it sent other than a REQUEST_UPDATE, or a PUBLISH of ours. (Requests
    /// older than the sets remember are given the benefit of the doubt.)
    pub(crate) fn updatable_by_peer(&self, id: RequestId) -> bool {
        if id.0 & 1 == parity(self.local) {
            self.local_publishes.contains(&id.0)
                || self.local_publishes.len() >= REMEMBERED
                    && self.local_publishes.first().is_some_and(|&f| id.0 < f)
        } else {
            !self.peer_updates.contains(&id.0)
        }
    }

    /// True when `id` names a request either side has made (draft-16: responses and
    /// cancellations on the control stream must name one).
    pub(crate) fn is_known(&self, id: RequestId) -> bool {
        if id.0 & 1 == parity(self.local) {
            id.0 < self.next_local
        } else {
            self.peer_seen.contains(id.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draft22_peer_ids_stay_bounded() {
        let mut ids = PeerIds::default();
        for id in (0..(PeerIds::WINDOW as u64 + 100) * 2).step_by(2) {
            assert!(ids.insert(id), "{id} is new");
        }
        assert_eq!(ids.seen.len(), PeerIds::WINDOW);
        assert!(!ids.insert(0), "below the window counts as used");
        assert!(!ids.insert(2 * PeerIds::WINDOW as u64), "inside the window: a duplicate");
        assert!(ids.contains(10));
    }

    fn code(r: Result<(), SessionError>) -> Option<SessionCode> {
        match r {
            Err(SessionError::Protocol { code, .. }) => Some(code),
            _ => None,
        }
    }

    #[test]
    fn draft16_allocation_follows_the_peer_limit() {
        let mut ids = RequestIds::new(Version::Draft16, Role::Client, 10);
        assert_eq!(ids.allocate(), Err(Alloc::NotReady));
        ids.set_peer_initial_max(Some(4));
        assert_eq!(ids.allocate(), Ok(RequestId(0)));
        assert_eq!(ids.allocate(), Ok(RequestId(2)));
        assert_eq!(ids.allocate(), Err(Alloc::Blocked { max: 4, send_blocked: true }));
        assert_eq!(ids.allocate(), Err(Alloc::Blocked { max: 4, send_blocked: false }));
        assert!(ids.on_max_request_id(4).is_err());
        assert!(ids.on_max_request_id(6).is_ok());
        assert_eq!(ids.allocate(), Ok(RequestId(4)));
        assert!(ids.is_ours(RequestId(4)) && !ids.is_ours(RequestId(6)) && !ids.is_ours(RequestId(1)));
    }

    #[test]
    fn draft16_peer_ids_in_order_below_our_limit() {
        let mut ids = RequestIds::new(Version::Draft16, Role::Server, 6);
        assert_eq!(code(ids.on_peer_request(RequestId(1), true)), Some(SessionCode::InvalidRequestId));
        // 0 may be a SUBSCRIBE_NAMESPACE stream still in flight.
        assert_eq!(code(ids.on_peer_request(RequestId(2), true)), None);
        assert_eq!(
            code(ids.on_peer_request(RequestId(0), true)),
            Some(SessionCode::InvalidRequestId),
            "order"
        );
        assert_eq!(code(ids.on_peer_request(RequestId(0), false)), None, "on its own stream");
        assert_eq!(code(ids.on_peer_request(RequestId(0), false)), Some(SessionCode::InvalidRequestId));
        assert_eq!(code(ids.on_peer_request(RequestId(2), false)), Some(SessionCode::InvalidRequestId));
        assert_eq!(code(ids.on_peer_request(RequestId(6), true)), Some(SessionCode::TooManyRequests));
        assert_eq!(ids.grant(1), 8);
        assert_eq!(code(ids.on_peer_request(RequestId(6), true)), None);
        assert!(ids.is_known(RequestId(6)) && !ids.is_known(RequestId(4)) && !ids.is_known(RequestId(8)));
    }

    #[test]
    fn draft22_peer_ids_any_order_no_duplicates() {
        let mut ids = RequestIds::new(Version::Draft22, Role::Client, 0);
        assert_eq!(ids.allocate(), Ok(RequestId(0)));
        assert_eq!(code(ids.on_peer_request(RequestId(5), false)), None);
        assert_eq!(code(ids.on_peer_request(RequestId(1), false)), None);
        assert_eq!(code(ids.on_peer_request(RequestId(5), false)), Some(SessionCode::InvalidRequestId));
        assert_eq!(code(ids.on_peer_request(RequestId(2), false)), Some(SessionCode::InvalidRequestId));
        assert!(ids.is_known(RequestId(1)) && !ids.is_known(RequestId(3)));
    }

    #[test]
    fn message_classes() {
        let sub = Message::Subscribe(Default::default());
        assert!(opens_stream(&sub));
        let up = Message::RequestUpdate(wire::model::RequestUpdate {
            request_id: RequestId(4),
            existing_request_id: RequestId(2),
            ..Default::default()
        });
        assert!(!opens_stream(&up));
        assert_eq!(consumed_id(&up), Some(RequestId(4)));
        assert_eq!(referenced_id(&up), Some(RequestId(2)));
        assert_eq!(referenced_id(&Message::Unsubscribe(RequestId(8))), Some(RequestId(8)));
        assert_eq!(consumed_id(&Message::GoAway(Default::default())), None);
    }
}
