//! draft-14 (draft-ietf-moq-transport-14) on the session's draft-16 machinery: one
//! bidirectional control stream carries every message (§3.3), Request IDs and MAX_REQUEST_ID
//! are draft-16's (§9.1, §9.3.2.3). What this file adds:
//!
//! - Version negotiation (§9.3.1): CLIENT_SETUP offers 0xff00000e, SERVER_SETUP selects it;
//!   otherwise VERSION_NEGOTIATION_FAILED (0x15, §3.4).
//! - One answer message per request kind (§9.9 SUBSCRIBE_ERROR, §9.15 PUBLISH_ERROR, §9.18
//!   FETCH_ERROR, §9.21-§9.22 TRACK_STATUS_OK/_ERROR, §9.24-§9.25 PUBLISH_NAMESPACE_OK/_ERROR,
//!   §9.29-§9.30 SUBSCRIBE_NAMESPACE_OK/_ERROR): the kind of each peer request is kept until
//!   it is answered, and the answer written with `encode_response`; error codes per kind.
//! - SUBSCRIBE_UPDATE (§9.10) has fixed fields and no answer: the session keeps each
//!   subscription's start, end, priority and Forward state and completes the caller's
//!   REQUEST_UPDATE from it; the caller's answer to a peer's SUBSCRIBE_UPDATE is dropped.
//! - PUBLISH_NAMESPACE_DONE (§9.26), PUBLISH_NAMESPACE_CANCEL (§9.27) and
//!   UNSUBSCRIBE_NAMESPACE (§9.31) name a namespace: mapped to and from the Request IDs of
//!   the PUBLISH_NAMESPACE / SUBSCRIBE_NAMESPACE they end.
//! - Namespace discovery (§4.1, §9.28): after SUBSCRIBE_NAMESPACE_OK the publisher sends
//!   PUBLISH_NAMESPACE requests of its own. The caller's NAMESPACE / NAMESPACE_DONE for a
//!   peer's SUBSCRIBE_NAMESPACE ([`Session::send_on`]) become such a PUBLISH_NAMESPACE (a
//!   Request ID of the session's) and PUBLISH_NAMESPACE_DONE; a peer PUBLISH_NAMESPACE under
//!   the prefix of one of our SUBSCRIBE_NAMESPACEs is answered PUBLISH_NAMESPACE_OK by the
//!   session and reported as [`Event::RequestMessage`] NAMESPACE, its DONE as NAMESPACE_DONE:
//!   the caller sees what it sees at draft-16.

use std::collections::VecDeque;

use ahash::{HashMap, HashSet};

use super::Session;
use crate::error::{SessionCode, SessionError};
use crate::{Event, Transmit};
use wire::model::{
    property_type, GroupOrder, Location, LocationFilter, Message, Parameters, PublishNamespace,
    PublishNamespaceCancel, PublishNamespaceCancelNamed, RequestId, RequestKind, Role, SetupOptions,
    SubscribeOptions, TrackNamespace,
};
use wire::{RequestErrorCode, Version};

/// The Subscriber Priority of a subscription that never named one (draft-14 §9.7 has no
/// default; 128 is the later drafts' default for its absence).
const DEFAULT_PRIORITY: u8 = 128;

/// Error answers whose request kind is remembered for [`Session::peer_request_error_of`].
const ERRORED: usize = 64;

/// Namespaces and the Request IDs of the requests that name them.
#[derive(Debug, Default)]
struct Names {
    by_ns: HashMap<TrackNamespace, RequestId>,
    by_id: HashMap<RequestId, TrackNamespace>,
}

impl Names {
    fn insert(&mut self, ns: TrackNamespace, rid: RequestId) {
        if let Some(old) = self.by_ns.insert(ns.clone(), rid) {
            self.by_id.remove(&old);
        }
        self.by_id.insert(rid, ns);
    }

    fn ns(&self, rid: RequestId) -> Option<&TrackNamespace> {
        self.by_id.get(&rid)
    }

    fn contains_ns(&self, ns: &TrackNamespace) -> bool {
        self.by_ns.contains_key(ns)
    }

    fn remove_id(&mut self, rid: RequestId) -> Option<TrackNamespace> {
        let ns = self.by_id.remove(&rid)?;
        self.by_ns.remove(&ns);
        Some(ns)
    }

    fn remove_ns(&mut self, ns: &TrackNamespace) -> Option<RequestId> {
        let rid = self.by_ns.remove(ns)?;
        self.by_id.remove(&rid);
        Some(rid)
    }

    /// The request whose prefix `ns` falls under.
    fn prefix_of(&self, ns: &TrackNamespace) -> Option<(RequestId, TrackNamespace)> {
        self.by_ns.iter().find(|(p, _)| ns.starts_with(p)).map(|(p, r)| (*r, p.clone()))
    }
}

/// What SUBSCRIBE_UPDATE must repeat of a subscription (§9.10).
#[derive(Debug, Clone, Copy, Default)]
struct SubState {
    filter: Option<LocationFilter>,
    /// The largest Location the publisher reported (SUBSCRIBE_OK, PUBLISH).
    largest: Option<Location>,
    priority: Option<u8>,
    forward: Option<bool>,
}

impl SubState {
    /// The subscription's start and end as draft-14's absolute form: an open filter starts
    /// where the publisher said its content ends (§5.1.1 Largest Object: the next object;
    /// Next Group Start: the next group), or at {0, 0} when it said nothing.
    fn absolute(&self) -> LocationFilter {
        let next = |l: Location| Location::new(l.group, l.object.saturating_add(1));
        match self.filter {
            Some(
                f @ (LocationFilter::AbsoluteStart { .. } | LocationFilter::AbsoluteStartGroupEnd { .. }),
            ) => f,
            Some(LocationFilter::AbsoluteRange { start, end }) => {
                LocationFilter::AbsoluteStartGroupEnd { start, end_group: end.group }
            }
            Some(LocationFilter::NextObject) => {
                LocationFilter::AbsoluteStart { start: self.largest.map(next).unwrap_or_default() }
            }
            Some(LocationFilter::RelativeStart { .. }) => LocationFilter::AbsoluteStart {
                start: self.largest.map(|l| Location::new(l.group.saturating_add(1), 0)).unwrap_or_default(),
            },
            Some(LocationFilter::None) | None => LocationFilter::AbsoluteStart { start: Location::default() },
        }
    }
}

/// A draft-14 session's own state (see the module header).
#[derive(Debug, Default)]
pub(super) struct D14 {
    /// Peer requests not answered yet, by kind (the answer message depends on it).
    peer_kinds: HashMap<RequestId, RequestKind>,
    /// Our requests, by kind, until they end (for error code meanings).
    local_kinds: HashMap<RequestId, RequestKind>,
    /// Our requests the peer refused, newest last, bounded by [`ERRORED`].
    errored: VecDeque<(RequestId, RequestKind)>,
    /// Subscriptions the peer may be asked to update: our SUBSCRIBEs, PUBLISHes we accepted.
    subs: HashMap<RequestId, SubState>,
    /// The Group Order of each peer PUBLISH not answered yet (PUBLISH_OK repeats it, §9.14).
    publish_order: HashMap<RequestId, GroupOrder>,
    /// Our PUBLISH_NAMESPACEs (the caller's and discovery's) and the peer's.
    local_ns: Names,
    peer_ns: Names,
    /// Our SUBSCRIBE_NAMESPACEs and the peer's, by prefix.
    local_sn: Names,
    peer_sn: Names,
    /// PUBLISH_NAMESPACEs the session sent for discovery: their SUBSCRIBE_NAMESPACE.
    offers_out: HashMap<RequestId, RequestId>,
    /// Peer PUBLISH_NAMESPACEs reported as NAMESPACE: the SUBSCRIBE_NAMESPACE they answer.
    offers_in: HashMap<RequestId, RequestId>,
    /// Peer SUBSCRIBE_UPDATEs: answers to them are not sent.
    peer_updates: HashSet<RequestId>,
}

fn kind_of(msg: &Message) -> Option<(RequestId, RequestKind)> {
    Some(match msg {
        Message::Subscribe(m) => (m.request_id, RequestKind::Subscribe),
        Message::TrackStatus(m) => (m.request_id, RequestKind::TrackStatus),
        Message::Publish(m) => (m.request_id, RequestKind::Publish),
        Message::Fetch(m) => (m.request_id, RequestKind::Fetch),
        Message::PublishNamespace(m) => (m.request_id, RequestKind::PublishNamespace),
        Message::SubscribeNamespace(m) => (m.request_id, RequestKind::SubscribeNamespace),
        Message::RequestUpdate(m) => (m.request_id, RequestKind::RequestUpdate),
        _ => return None,
    })
}

fn joined(prefix: &TrackNamespace, suffix: &TrackNamespace) -> TrackNamespace {
    TrackNamespace(prefix.fields().iter().chain(suffix.fields()).cloned().collect())
}

fn suffix(ns: &TrackNamespace, prefix: &TrackNamespace) -> TrackNamespace {
    TrackNamespace(ns.fields().get(prefix.fields().len()..).unwrap_or_default().to_vec())
}

/// Keeps only what draft-14 carries of a subscription's parameters (§9.2.1: DELIVERY
/// TIMEOUT, AUTHORIZATION TOKEN; the fixed fields).
fn draft14_subscription_params(p: Parameters) -> Parameters {
    Parameters {
        auth_tokens: p.auth_tokens,
        object_delivery_timeout: p.object_delivery_timeout,
        forward: p.forward,
        subscriber_priority: p.subscriber_priority,
        location_filter: p.location_filter,
        group_order: p.group_order,
        largest_object: p.largest_object,
        ..Parameters::default()
    }
}

impl Session {
    /// §9.3.1: the client offers 0xff00000e; the server must select one the client offered,
    /// and the client must get one it offered; otherwise VERSION_NEGOTIATION_FAILED.
    pub(super) fn d14_negotiate(&mut self, peer: &SetupOptions) -> Result<(), SessionError> {
        let ours = self.version.setup_version();
        let agreed = match self.role {
            Role::Server => ours.is_some_and(|v| peer.versions.contains(&v)),
            Role::Client => peer.selected_version.is_some() && peer.selected_version == ours,
        };
        if !agreed {
            return Err(SessionError::protocol(
                SessionCode::VersionNegotiationFailed,
                "no draft-14 version (0xff00000e) agreed in SETUP",
            ));
        }
        if self.role == Role::Server {
            self.setup.local.selected_version = ours;
        }
        Ok(())
    }

    fn d14_write(&mut self, data: Vec<u8>) {
        let id = self.control.local;
        self.transmits.push_back(Transmit::Stream { id, data: data.into(), fin: false, expires: None });
    }

    fn d14_encode(&mut self, msg: &Message, kind: Option<RequestKind>) -> Result<(), SessionError> {
        let mut out = Vec::new();
        match kind {
            Some(k) => self.codec.encode_response(msg, k, &mut out)?,
            None => self.codec.encode_message(msg, &mut out)?,
        }
        self.d14_write(out);
        Ok(())
    }

    /// Sends `msg` as draft-14 writes it, on the control stream (see the module header).
    pub(super) fn send_d14(&mut self, msg: Message) -> Result<(), SessionError> {
        // §9.10: a SUBSCRIBE_UPDATE gets no answer, so its kind is never needed.
        let kind = kind_of(&msg).filter(|(_, k)| *k != RequestKind::RequestUpdate);
        self.send_d14_message(msg)?;
        if let Some((rid, kind)) = kind {
            self.d14.local_kinds.insert(rid, kind);
        }
        Ok(())
    }

    fn send_d14_message(&mut self, msg: Message) -> Result<(), SessionError> {
        match msg {
            Message::RequestOk(_)
            | Message::RequestError(_)
            | Message::SubscribeOk(_)
            | Message::FetchOk(_)
            | Message::PublishOk(_) => self.d14_answer(msg),
            Message::RequestUpdate(mut u) => {
                let state = self.d14.subs.entry(u.existing_request_id).or_default();
                let p = draft14_subscription_params(std::mem::take(&mut u.params));
                state.filter = p.location_filter.or(state.filter);
                state.priority = p.subscriber_priority.or(state.priority);
                state.forward = p.forward.or(state.forward);
                let filter = state.absolute();
                state.filter = Some(filter);
                u.params = Parameters {
                    location_filter: Some(filter),
                    subscriber_priority: Some(state.priority.unwrap_or(DEFAULT_PRIORITY)),
                    forward: Some(state.forward.unwrap_or(true)),
                    group_order: None,
                    largest_object: None,
                    ..p
                };
                self.d14_encode(&Message::RequestUpdate(u), None)
            }
            Message::Subscribe(ref m) => {
                let p = &m.params;
                let state = SubState {
                    filter: p.location_filter,
                    largest: None,
                    priority: p.subscriber_priority,
                    forward: p.forward,
                };
                self.d14.subs.insert(m.request_id, state);
                self.d14_encode(&msg, None)
            }
            Message::PublishNamespace(ref m) => {
                self.d14_encode(&msg, None)?;
                self.d14.local_ns.insert(m.namespace.clone(), m.request_id);
                Ok(())
            }
            Message::SubscribeNamespace(mut m) => {
                // §9.28: draft-14's asks for PUBLISH_NAMESPACE and PUBLISH alike (no options).
                m.options = SubscribeOptions::Both;
                let (prefix, rid) = (m.prefix.clone(), m.request_id);
                self.d14_encode(&Message::SubscribeNamespace(m), None)?;
                self.d14.local_sn.insert(prefix, rid);
                Ok(())
            }
            Message::PublishNamespaceDone(rid) => {
                let ns = self.d14.local_ns.remove_id(rid).ok_or(SessionError::UnknownRequest(rid.0))?;
                self.d14.local_kinds.remove(&rid);
                self.d14_encode(&Message::PublishNamespaceDoneNamed(ns), None)
            }
            Message::PublishNamespaceCancel(m) => {
                let rid = m.request_id;
                let namespace = self.d14.peer_ns.remove_id(rid).ok_or(SessionError::UnknownRequest(rid.0))?;
                let named =
                    PublishNamespaceCancelNamed { namespace, error_code: m.error_code, reason: m.reason };
                self.d14_encode(&Message::PublishNamespaceCancelNamed(named), None)
            }
            Message::Unsubscribe(rid) | Message::FetchCancel(rid) => {
                self.d14_forget_local(rid);
                self.d14_encode(&msg, None)
            }
            Message::PublishDone(ref m) => {
                // Ends a peer's SUBSCRIBE or our PUBLISH.
                self.d14.peer_kinds.remove(&m.request_id);
                self.d14_forget_local(m.request_id);
                self.d14_encode(&msg, None)
            }
            _ => self.d14_encode(&msg, None),
        }
    }

    /// An answer to peer request `rid`, as the message of its kind.
    fn d14_answer(&mut self, mut msg: Message) -> Result<(), SessionError> {
        let Some(rid) = crate::requests::referenced_id(&msg) else {
            return Err(SessionError::Misrouted(msg.name()));
        };
        if self.d14.peer_updates.remove(&rid) {
            // §9.10: "There is no control message in response to a SUBSCRIBE_UPDATE".
            return Ok(());
        }
        let kind = *self.d14.peer_kinds.get(&rid).ok_or(SessionError::UnknownRequest(rid.0))?;
        match &mut msg {
            Message::RequestError(_) => {
                self.d14.subs.remove(&rid);
                self.d14.peer_ns.remove_id(rid);
                self.d14.peer_sn.remove_id(rid);
                self.d14.publish_order.remove(&rid);
            }
            Message::PublishOk(m) => {
                m.params = self.d14_accept_publish(rid, std::mem::take(&mut m.params));
            }
            Message::RequestOk(m) if kind == RequestKind::Publish => {
                m.params = self.d14_accept_publish(rid, std::mem::take(&mut m.params));
            }
            _ => {}
        }
        self.d14_encode(&msg, Some(kind))?;
        self.d14.peer_kinds.remove(&rid);
        Ok(())
    }

    /// PUBLISH_OK for peer PUBLISH `rid` (§9.14): its Group Order is the PUBLISH's unless the
    /// caller names one; the subscription's state is kept for SUBSCRIBE_UPDATE.
    fn d14_accept_publish(&mut self, rid: RequestId, params: Parameters) -> Parameters {
        let mut p = draft14_subscription_params(params);
        let order = self.d14.publish_order.remove(&rid).unwrap_or(GroupOrder::Ascending);
        p.group_order.get_or_insert(order);
        p.largest_object = None;
        let state = self.d14.subs.entry(rid).or_default();
        state.filter = p.location_filter.or(state.filter);
        state.priority = p.subscriber_priority.or(state.priority);
        state.forward = p.forward.or(state.forward);
        p
    }

    fn d14_forget_local(&mut self, rid: RequestId) {
        self.d14.subs.remove(&rid);
        self.d14.local_kinds.remove(&rid);
    }

    /// NAMESPACE / NAMESPACE_DONE for the peer's SUBSCRIBE_NAMESPACE `sn` (the caller's
    /// draft-16 form) as the PUBLISH_NAMESPACE / PUBLISH_NAMESPACE_DONE draft-14 sends
    /// (§9.28); other messages go as [`Session::send`].
    pub(super) fn send_on_d14(&mut self, sn: RequestId, msg: Message) -> Result<(), SessionError> {
        let (suffix_ns, on) = match msg {
            Message::Namespace(s) => (s, true),
            Message::NamespaceDone(s) => (s, false),
            other => return self.send(other),
        };
        let prefix = self.d14.peer_sn.ns(sn).ok_or(SessionError::UnknownRequest(sn.0))?;
        let namespace = joined(prefix, &suffix_ns);
        if !on {
            let Some(rid) = self.d14.local_ns.by_ns.get(&namespace).copied() else { return Ok(()) };
            if self.d14.offers_out.remove(&rid).is_none() {
                return Ok(()); // the caller's own PUBLISH_NAMESPACE: it withdraws it itself
            }
            self.d14.local_ns.remove_id(rid);
            self.d14.local_kinds.remove(&rid);
            return self.d14_encode(&Message::PublishNamespaceDoneNamed(namespace), None);
        }
        if self.d14.local_ns.contains_ns(&namespace) {
            return Ok(()); // already published to this peer
        }
        let rid = self.next_request_id()?;
        self.d14.offers_out.insert(rid, sn);
        self.d14.local_ns.insert(namespace.clone(), rid);
        let pn = Message::PublishNamespace(PublishNamespace {
            request_id: rid,
            namespace,
            params: Parameters::default(),
        });
        self.d14_encode(&pn, None)
    }

    /// Cancels our SUBSCRIBE_NAMESPACE `rid` with UNSUBSCRIBE_NAMESPACE (§9.31); false when
    /// `rid` is not one.
    pub(super) fn cancel_d14(&mut self, rid: RequestId) -> Result<bool, SessionError> {
        let Some(prefix) = self.d14.local_sn.remove_id(rid) else { return Ok(false) };
        self.d14.local_kinds.remove(&rid);
        let gone: Vec<RequestId> =
            self.d14.offers_in.iter().filter(|(_, s)| **s == rid).map(|(pn, _)| *pn).collect();
        for pn in gone {
            self.d14.offers_in.remove(&pn);
            self.d14.peer_ns.remove_id(pn);
        }
        self.d14_encode(&Message::UnsubscribeNamespace(prefix), None)?;
        Ok(true)
    }

    /// A control message from the peer after the Request ID checks: bookkeeping, and the
    /// draft-16 form the caller sees (`None`: the session handled it, events already queued).
    pub(super) fn incoming_d14(&mut self, msg: Message) -> Result<Option<Message>, SessionError> {
        self.d14_note_kinds(&msg);
        Ok(Some(match msg {
            Message::PublishNamespace(m) => {
                if let Some((sn, prefix)) = self.d14.local_sn.prefix_of(&m.namespace) {
                    return self.d14_discovered(sn, &prefix, m).map(|()| None);
                }
                self.d14.peer_ns.insert(m.namespace.clone(), m.request_id);
                Message::PublishNamespace(m)
            }
            Message::Publish(ref m) => {
                let order = m.track_properties.int(property_type::DEFAULT_PUBLISHER_GROUP_ORDER);
                let order = order.and_then(GroupOrder::from_code).unwrap_or(GroupOrder::Ascending);
                self.d14.publish_order.insert(m.request_id, order);
                let state = SubState {
                    largest: m.params.largest_object,
                    forward: m.params.forward,
                    ..SubState::default()
                };
                self.d14.subs.insert(m.request_id, state);
                msg
            }
            Message::SubscribeNamespace(ref m) => {
                self.d14.peer_sn.insert(m.prefix.clone(), m.request_id);
                msg
            }
            Message::SubscribeOk(ref m) => {
                if let Some(s) = self.d14.subs.get_mut(&m.request_id) {
                    s.largest = m.params.largest_object;
                }
                msg
            }
            Message::RequestOk(ref m) if self.d14.offers_out.contains_key(&m.request_id) => return Ok(None),
            Message::RequestError(ref m) => {
                let rid = m.request_id;
                if self.d14.offers_out.remove(&rid).is_some() {
                    self.d14.local_ns.remove_id(rid);
                    self.d14.local_kinds.remove(&rid);
                    return Ok(None);
                }
                self.d14.local_sn.remove_id(rid);
                self.d14.local_ns.remove_id(rid);
                self.d14.subs.remove(&rid);
                if let Some(kind) = self.d14.local_kinds.remove(&rid) {
                    self.d14.errored.push_back((rid, kind));
                    if self.d14.errored.len() > ERRORED {
                        self.d14.errored.pop_front();
                    }
                }
                msg
            }
            Message::PublishDone(ref m) => {
                self.d14_forget_local(m.request_id);
                msg
            }
            Message::Unsubscribe(rid) | Message::FetchCancel(rid) => {
                self.d14.peer_kinds.remove(&rid);
                msg
            }
            Message::PublishNamespaceDoneNamed(ns) => return Ok(self.d14_namespace_done(&ns)),
            Message::PublishNamespaceCancelNamed(m) => {
                let Some(rid) = self.d14.local_ns.remove_ns(&m.namespace) else { return Ok(None) };
                self.d14.local_kinds.remove(&rid);
                if self.d14.offers_out.remove(&rid).is_some() {
                    return Ok(None);
                }
                let cancel =
                    PublishNamespaceCancel { request_id: rid, error_code: m.error_code, reason: m.reason };
                Message::PublishNamespaceCancel(cancel)
            }
            Message::UnsubscribeNamespace(prefix) => {
                if let Some(rid) = self.d14.peer_sn.remove_ns(&prefix) {
                    self.d14.peer_kinds.remove(&rid);
                    let gone: Vec<RequestId> =
                        self.d14.offers_out.iter().filter(|(_, s)| **s == rid).map(|(pn, _)| *pn).collect();
                    for pn in gone {
                        self.d14.offers_out.remove(&pn);
                        self.d14.local_ns.remove_id(pn);
                    }
                    self.events.push_back(Event::Cancelled { request_id: rid });
                }
                return Ok(None);
            }
            other => other,
        }))
    }

    /// Request kinds: a peer request's is kept until it is answered; ours until the answer
    /// comes (an acceptance: it can no longer be refused).
    fn d14_note_kinds(&mut self, msg: &Message) {
        match (kind_of(msg), msg) {
            (Some((rid, RequestKind::RequestUpdate)), _) => {
                self.d14.peer_updates.insert(rid);
            }
            (Some((rid, kind)), _) => {
                self.d14.peer_kinds.insert(rid, kind);
            }
            (
                None,
                Message::SubscribeOk(_) | Message::FetchOk(_) | Message::PublishOk(_) | Message::RequestOk(_),
            ) => {
                if let Some(rid) = crate::requests::referenced_id(msg) {
                    self.d14.local_kinds.remove(&rid);
                }
            }
            _ => {}
        }
    }

    /// A peer PUBLISH_NAMESPACE under our SUBSCRIBE_NAMESPACE `sn`: answered here
    /// (PUBLISH_NAMESPACE_OK, §9.24) and reported as NAMESPACE.
    fn d14_discovered(
        &mut self,
        sn: RequestId,
        prefix: &TrackNamespace,
        m: PublishNamespace,
    ) -> Result<(), SessionError> {
        let ok =
            Message::RequestOk(wire::model::RequestOk { request_id: m.request_id, ..Default::default() });
        self.d14.peer_kinds.remove(&m.request_id);
        self.d14_encode(&ok, Some(RequestKind::PublishNamespace))?;
        self.d14.offers_in.insert(m.request_id, sn);
        let message = Message::Namespace(suffix(&m.namespace, prefix));
        self.d14.peer_ns.insert(m.namespace, m.request_id);
        self.events.push_back(Event::RequestMessage { request_id: sn, message });
        Ok(())
    }

    /// PUBLISH_NAMESPACE_DONE naming `ns` (§9.26): the draft-16 PUBLISH_NAMESPACE_DONE of its
    /// request, or NAMESPACE_DONE when it was reported as NAMESPACE; nothing when unknown.
    fn d14_namespace_done(&mut self, ns: &TrackNamespace) -> Option<Message> {
        let rid = self.d14.peer_ns.remove_ns(ns)?;
        self.d14.peer_kinds.remove(&rid);
        let Some(sn) = self.d14.offers_in.remove(&rid) else {
            return Some(Message::PublishNamespaceDone(rid));
        };
        if let Some(prefix) = self.d14.local_sn.ns(sn) {
            let message = Message::NamespaceDone(suffix(ns, prefix));
            self.events.push_back(Event::RequestMessage { request_id: sn, message });
        }
        None
    }

    /// The kind of our request `rid` while it is open (or just refused).
    pub(super) fn local_kind(&self, rid: RequestId) -> Option<RequestKind> {
        self.d14
            .local_kinds
            .get(&rid)
            .copied()
            .or_else(|| self.d14.errored.iter().rev().find(|(r, _)| *r == rid).map(|(_, k)| *k))
    }

    /// The kind of the peer's request `rid` while it is not answered.
    pub(super) fn peer_kind(&self, rid: RequestId) -> Option<RequestKind> {
        self.d14.peer_kinds.get(&rid).copied()
    }
}

/// For [`Session::request_error`]: the typed code, written per the answered kind.
pub(super) fn typed_code(code: RequestErrorCode, kind: Option<RequestKind>) -> u64 {
    match kind {
        Some(k) => code.code_for(Version::Draft14, k),
        None => code.code(Version::Draft14),
    }
}
