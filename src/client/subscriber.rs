//! A MoQT subscriber, every draft: [`SubscriberCore`] is the protocol logic, a state machine
//! over a [`Session`] and its [`Event`]s (no I/O, testable with two sessions back to back);
//! [`Subscriber`] drives it over one QUIC connection ([`MoqtClient`]), and
//! [`super::fleet::Fleet`] drives many from one thread.
//!
//! What it does:
//! - SUBSCRIBE with FORWARD=1 and the caller's filter ([`SubscriberCore::subscribe`]); the
//!   answer is SUBSCRIBE_OK (Track Alias, LARGEST_OBJECT) or REQUEST_ERROR (code and reason).
//! - Every object of a subscription, from subgroup streams and datagrams, is kept in arrival
//!   order as a [`Received`] (payloads are the session's zero-copy slices). Objects carrying a
//!   status instead of a payload (End of Group, End of Track) are not objects and are skipped.
//! - Data streams that end with a reset are noted with their code; PUBLISH_DONE with its
//!   status, Stream Count and reason. draft-22: we FIN our side of the request stream after
//!   PUBLISH_DONE or REQUEST_ERROR (§6.4.2.2).
//! - UNSUBSCRIBE (draft-16) / cancelling the request stream (draft-22) with
//!   [`SubscriberCore::unsubscribe`]; objects arriving afterwards are counted, not kept.
//! - REQUEST_UPDATE with FORWARD ([`SubscriberCore::update_forward`]) to pause or resume.
//! - Acting as the receiving end of a publisher (a relay's upstream side, or a test peer):
//!   PUBLISH_NAMESPACE is accepted with REQUEST_OK and remembered; PUBLISH is accepted with
//!   PUBLISH_OK when enabled ([`SubscriberCore::accept_publish`]) and refused with UNINTERESTED
//!   otherwise. Other requests get NOT_SUPPORTED.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bytes::Bytes;

use super::codes::request_error;
use super::moqt::{Driven, Origin, RequestState, SessionCore};
use super::publisher::refuse;
use super::quic::ClientError;
use session::{DataObject, Event, Session, SessionError, StreamId};
use wire::model::{
    FullTrackName, GoAway, Location, LocationFilter, Message, ObjectStatus, Parameters, PublishOk, RequestId,
    RequestOk, RequestUpdate, SubgroupId, Subscribe, TrackAlias, TrackNamespace,
};
use wire::Version;

/// One object as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Its group.
    pub group: u64,
    /// The Subgroup ID (0 for datagrams).
    pub subgroup: u64,
    /// Its Object ID.
    pub object: u64,
    /// Its payload.
    pub payload: Bytes,
    /// It came as a datagram.
    pub via_datagram: bool,
}

impl Received {
    /// Its Location.
    pub fn location(&self) -> Location {
        Location::new(self.group, self.object)
    }
}

/// PUBLISH_DONE as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoneInfo {
    /// The status code.
    pub status: u64,
    /// The Stream Count.
    pub stream_count: u64,
    /// The reason phrase.
    pub reason: Bytes,
}

/// One subscription of ours, or a PUBLISH we accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The track.
    pub track: FullTrackName,
    /// Whether we subscribed or the peer published.
    pub origin: Origin,
    /// The answer to SUBSCRIBE (`Accepted` at once for an accepted PUBLISH).
    pub state: RequestState,
    /// The Track Alias its objects carry, once known.
    pub track_alias: Option<TrackAlias>,
    /// LARGEST_OBJECT of SUBSCRIBE_OK or PUBLISH.
    pub largest: Option<Location>,
    /// The Forward State we asked for last.
    pub forward: bool,
    /// We unsubscribed.
    pub unsubscribed: bool,
    /// Objects in arrival order.
    pub received: Vec<Received>,
    /// Subgroup streams that ended with FIN.
    pub streams_finished: u64,
    /// Reset codes of subgroup streams that ended abruptly, in order.
    pub resets: Vec<u64>,
    /// PUBLISH_DONE, once it arrived.
    pub done: Option<DoneInfo>,
    /// Objects that arrived after we unsubscribed (not kept).
    pub late_objects: u64,
}

impl Subscription {
    fn new(track: FullTrackName, origin: Origin, state: RequestState, forward: bool) -> Self {
        Subscription {
            track,
            origin,
            state,
            track_alias: None,
            largest: None,
            forward,
            unsubscribed: false,
            received: Vec::new(),
            streams_finished: 0,
            resets: Vec::new(),
            done: None,
            late_objects: 0,
        }
    }

    /// Established and not ended by either side.
    pub fn is_live(&self) -> bool {
        self.state == RequestState::Accepted && !self.unsubscribed && self.done.is_none()
    }

    fn receive(&mut self, r: Received) {
        if self.unsubscribed {
            self.late_objects += 1;
        } else {
            self.received.push(r);
        }
    }
}

#[derive(Debug)]
struct Update {
    target: RequestId,
    state: RequestState,
}

/// The subscriber's protocol logic (see the module header).
#[derive(Debug, Default)]
pub struct SubscriberCore {
    subs: BTreeMap<RequestId, Subscription>,
    /// Data stream → (subscription, Subgroup ID, Group ID).
    streams: HashMap<StreamId, (RequestId, u64, u64)>,
    updates: BTreeMap<RequestId, Update>,
    namespaces: BTreeMap<RequestId, TrackNamespace>,
    /// `Some(forward)`: PUBLISH is accepted; draft-16 PUBLISH_OK carries FORWARD = `forward`
    /// (`None`: the PUBLISH's own value).
    accept_publish: Option<Option<bool>>,
    closed: Option<(u64, String)>,
    stray_objects: u64,
    goaway: Option<GoAway>,
}

impl SubscriberCore {
    /// A subscriber with no subscription yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts the peer's PUBLISH from now on. `forward`: the Forward State a draft-16
    /// PUBLISH_OK sets (`None`: keep the PUBLISH's). A draft-22 PUBLISH_OK cannot carry
    /// FORWARD; change it with [`SubscriberCore::update_forward`].
    pub fn accept_publish(&mut self, forward: Option<bool>) {
        self.accept_publish = Some(forward);
    }

    /// SUBSCRIBE for `track` with FORWARD=1 and `filter` (`None`: no filter parameter).
    pub fn subscribe(
        &mut self,
        s: &mut Session,
        track: FullTrackName,
        filter: Option<LocationFilter>,
    ) -> Result<RequestId, SessionError> {
        let params = Parameters { forward: Some(true), location_filter: filter, ..Parameters::default() };
        self.subscribe_with(s, track, params)
    }

    /// SUBSCRIBE for `track` with the caller's parameters.
    pub fn subscribe_with(
        &mut self,
        s: &mut Session,
        track: FullTrackName,
        params: Parameters,
    ) -> Result<RequestId, SessionError> {
        let request_id = s.next_request_id()?;
        let forward = params.forward.unwrap_or(true);
        s.send(Message::Subscribe(Subscribe { request_id, track: track.clone(), params }))?;
        self.subs
            .insert(request_id, Subscription::new(track, Origin::Subscribe, RequestState::Pending, forward));
        Ok(request_id)
    }

    /// Ends subscription `request_id`: UNSUBSCRIBE (draft-16) or the request stream's
    /// cancellation (draft-22). Nothing is sent for a subscription already ended.
    pub fn unsubscribe(&mut self, s: &mut Session, request_id: RequestId) -> Result<(), SessionError> {
        let Some(sub) = self.subs.get_mut(&request_id) else {
            return Err(SessionError::UnknownRequest(request_id.0));
        };
        if sub.unsubscribed || sub.done.is_some() || matches!(sub.state, RequestState::Refused { .. }) {
            return Ok(());
        }
        sub.unsubscribed = true;
        match s.version() {
            Version::Draft14 | Version::Draft16 => s.send(Message::Unsubscribe(request_id)),
            Version::Draft18 | Version::Draft20 | Version::Draft22 => s.cancel(request_id),
        }
    }

    /// REQUEST_UPDATE of subscription `request_id` with FORWARD = `forward` (pause or
    /// resume); returns the update's Request ID ([`SubscriberCore::update`] follows it).
    pub fn update_forward(
        &mut self,
        s: &mut Session,
        request_id: RequestId,
        forward: bool,
    ) -> Result<RequestId, SessionError> {
        let update_id = s.next_request_id()?;
        s.send(Message::RequestUpdate(RequestUpdate {
            request_id: update_id,
            existing_request_id: request_id,
            params: Parameters { forward: Some(forward), ..Parameters::default() },
        }))?;
        if let Some(sub) = self.subs.get_mut(&request_id) {
            sub.forward = forward;
        }
        // draft-14's SUBSCRIBE_UPDATE has no answer: it holds once sent.
        let state = if s.updates_are_answered() { RequestState::Pending } else { RequestState::Accepted };
        self.updates.insert(update_id, Update { target: request_id, state });
        Ok(update_id)
    }

    /// Where REQUEST_UPDATE `update_id` stands.
    pub fn update(&self, update_id: RequestId) -> Option<&RequestState> {
        self.updates.get(&update_id).map(|u| &u.state)
    }

    /// Subscription `request_id`.
    pub fn subscription(&self, request_id: RequestId) -> Option<&Subscription> {
        self.subs.get(&request_id)
    }

    /// Every subscription, by request.
    pub fn subscriptions(&self) -> impl Iterator<Item = (RequestId, &Subscription)> {
        self.subs.iter().map(|(r, s)| (*r, s))
    }

    /// The objects of subscription `request_id` so far, in arrival order.
    pub fn received(&self, request_id: RequestId) -> &[Received] {
        self.subs.get(&request_id).map_or(&[], |s| &s.received)
    }

    /// Takes the objects of subscription `request_id` received so far.
    pub fn take_received(&mut self, request_id: RequestId) -> Vec<Received> {
        self.subs.get_mut(&request_id).map(|s| std::mem::take(&mut s.received)).unwrap_or_default()
    }

    /// Namespaces the peer announced to us (PUBLISH_NAMESPACE accepted, not withdrawn).
    pub fn namespaces(&self) -> impl Iterator<Item = (RequestId, &TrackNamespace)> {
        self.namespaces.iter().map(|(r, n)| (*r, n))
    }

    /// Objects for no subscription we know.
    /// Whether subscription `request_id` has a subgroup stream of a group before `group` still
    /// open (objects of it may still come).
    pub fn has_open_stream_before(&self, request_id: RequestId, group: u64) -> bool {
        self.streams.values().any(|&(r, _, g)| r == request_id && g < group)
    }

    /// Objects that matched no subscription.
    pub fn stray_objects(&self) -> u64 {
        self.stray_objects
    }

    /// The session's close (code, reason), once it closed.
    pub fn closed(&self) -> Option<(u64, &str)> {
        self.closed.as_ref().map(|(c, r)| (*c, r.as_str()))
    }

    /// The peer's GOAWAY (New Session URI, draft-22 timeout), once it came.
    pub fn goaway(&self) -> Option<&GoAway> {
        self.goaway.as_ref()
    }

    fn on_message(&mut self, s: &mut Session, msg: Message) {
        match msg {
            Message::SubscribeOk(m) => {
                if let Some(sub) = self.subs.get_mut(&m.request_id) {
                    if sub.state == RequestState::Pending {
                        sub.state = RequestState::Accepted;
                        sub.track_alias = Some(m.track_alias);
                        sub.largest = m.params.largest_object;
                    }
                }
            }
            Message::RequestOk(m) => {
                if let Some(u) = self.update_answered(m.request_id) {
                    u.state = RequestState::Accepted;
                }
            }
            Message::RequestError(m) => {
                let reason = String::from_utf8_lossy(&m.reason).into_owned();
                let pending_sub =
                    self.subs.get(&m.request_id).is_some_and(|sub| sub.state == RequestState::Pending);
                if pending_sub {
                    if let Some(sub) = self.subs.get_mut(&m.request_id) {
                        sub.state = RequestState::Refused { code: m.error_code, reason };
                    }
                    if s.version().request_streams() {
                        let _ = s.finish(m.request_id);
                    }
                } else if let Some(u) = self.update_answered(m.request_id) {
                    u.state = RequestState::Refused { code: m.error_code, reason };
                }
            }
            Message::PublishDone(m) => {
                if let Some(sub) = self.subs.get_mut(&m.request_id) {
                    sub.done = Some(DoneInfo {
                        status: m.status_code,
                        stream_count: m.stream_count,
                        reason: m.reason,
                    });
                    if s.version().request_streams() {
                        let _ = s.finish(m.request_id);
                    }
                }
            }
            Message::Publish(m) => {
                let Some(choice) = self.accept_publish else {
                    return refuse(s, m.request_id, request_error::UNINTERESTED, "not interested");
                };
                let announced = m.params.forward.unwrap_or(true);
                // draft-16 and draft-18 PUBLISH_OK carry FORWARD; draft-22's does not.
                let (forward, params) = if s.publish_ok_has_forward() {
                    let forward = choice.unwrap_or(announced);
                    (forward, Parameters { forward: Some(forward), ..Parameters::default() })
                } else {
                    (announced, Parameters::default())
                };
                if s.send(Message::PublishOk(PublishOk { request_id: m.request_id, params })).is_err() {
                    return;
                }
                let mut sub = Subscription::new(m.track, Origin::Publish, RequestState::Accepted, forward);
                sub.track_alias = Some(m.track_alias);
                sub.largest = m.params.largest_object;
                self.subs.insert(m.request_id, sub);
            }
            Message::PublishNamespace(m) => {
                let ok = RequestOk { request_id: m.request_id, ..RequestOk::default() };
                if s.send(Message::RequestOk(ok)).is_ok() {
                    self.namespaces.insert(m.request_id, m.namespace);
                }
            }
            Message::PublishNamespaceDone(request_id) => {
                self.namespaces.remove(&request_id);
            }
            Message::Subscribe(m) | Message::TrackStatus(m) => {
                refuse(s, m.request_id, request_error::NOT_SUPPORTED, "a subscriber only")
            }
            Message::Fetch(m) => refuse(s, m.request_id, request_error::NOT_SUPPORTED, "a subscriber only"),
            Message::SubscribeNamespace(m) => {
                refuse(s, m.request_id, request_error::NOT_SUPPORTED, "a subscriber only")
            }
            Message::SubscribeTracks(m) => {
                refuse(s, m.request_id, request_error::NOT_SUPPORTED, "a subscriber only")
            }
            Message::GoAway(g) => self.goaway = Some(g),
            _ => {}
        }
    }

    /// The pending update a REQUEST_OK / REQUEST_ERROR naming `id` answers: draft-16 names
    /// the update itself; draft-22 answers on the updated request's stream, so the session
    /// reports that request's ID (updates of one request are answered in order).
    fn update_answered(&mut self, id: RequestId) -> Option<&mut Update> {
        if self.updates.get(&id).is_some_and(|u| u.state == RequestState::Pending) {
            return self.updates.get_mut(&id);
        }
        self.updates.values_mut().find(|u| u.target == id && u.state == RequestState::Pending)
    }

    fn on_object(&mut self, stream: StreamId, request_id: RequestId, object: DataObject, payload: Bytes) {
        let DataObject::Subgroup { header, object } = object else { return };
        let (_, subgroup, _) = *self.streams.entry(stream).or_insert_with(|| {
            let subgroup = match header.subgroup_id {
                SubgroupId::Zero => 0,
                SubgroupId::FirstObject => object.object_id,
                SubgroupId::Explicit(id) => id,
            };
            (request_id, subgroup, header.group_id)
        });
        if object.status != ObjectStatus::Normal && payload.is_empty() {
            return;
        }
        let Some(sub) = self.subs.get_mut(&request_id) else {
            self.stray_objects += 1;
            return;
        };
        sub.receive(Received {
            group: header.group_id,
            subgroup,
            object: object.object_id,
            payload,
            via_datagram: false,
        });
    }
}

impl SessionCore for SubscriberCore {
    fn on_event(&mut self, s: &mut Session, event: Event) {
        match event {
            Event::Message(msg) => self.on_message(s, msg),
            Event::Object { stream, request_id, object, payload } => {
                self.on_object(stream, request_id, object, payload)
            }
            Event::DataStreamEnd { stream, reset } => {
                let Some((request_id, ..)) = self.streams.remove(&stream) else { return };
                if let Some(sub) = self.subs.get_mut(&request_id) {
                    match reset {
                        Some(code) => sub.resets.push(code),
                        None => sub.streams_finished += 1,
                    }
                }
            }
            Event::Datagram { request_id, header, payload } => {
                if header.status.is_some() {
                    return;
                }
                let Some(sub) = self.subs.get_mut(&request_id) else {
                    self.stray_objects += 1;
                    return;
                };
                sub.receive(Received {
                    group: header.group_id,
                    subgroup: 0,
                    object: header.object_id,
                    payload,
                    via_datagram: true,
                });
            }
            Event::Cancelled { request_id } => {
                if let Some(sub) = self.subs.get_mut(&request_id) {
                    if sub.state == RequestState::Pending {
                        sub.state = RequestState::Cancelled;
                    } else {
                        sub.unsubscribed = true;
                    }
                }
                self.namespaces.remove(&request_id);
            }
            Event::Closed { code, reason } => self.closed = Some((code, reason)),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Over QUIC
// ---------------------------------------------------------------------------------------------

/// A [`SubscriberCore`] on its own QUIC connection.
pub type Subscriber = Driven<SubscriberCore>;

impl Driven<SubscriberCore> {
    /// SUBSCRIBE (FORWARD=1, `filter`), waiting for the answer: SUBSCRIBE_OK gives the
    /// Request ID, REQUEST_ERROR is [`ClientError::Refused`] with its code.
    pub fn subscribe(
        &mut self,
        track: FullTrackName,
        filter: Option<LocationFilter>,
        deadline: Instant,
    ) -> Result<RequestId, ClientError> {
        let params = Parameters { forward: Some(true), location_filter: filter, ..Parameters::default() };
        self.subscribe_with(track, params, deadline)
    }

    /// SUBSCRIBE with the caller's parameters, waiting for the answer as
    /// [`Driven::subscribe`] does.
    pub fn subscribe_with(
        &mut self,
        track: FullTrackName,
        params: Parameters,
        deadline: Instant,
    ) -> Result<RequestId, ClientError> {
        let request_id = self.core.subscribe_with(self.client.session_mut(), track, params)?;
        self.client.drive_core(&mut self.core, deadline, |core, _| {
            core.subscription(request_id).map_or(Ok(true), |s| s.state.outcome())
        })?;
        Ok(request_id)
    }

    /// [`SubscriberCore::unsubscribe`], sent at once.
    pub fn unsubscribe(&mut self, request_id: RequestId) -> Result<(), ClientError> {
        self.core.unsubscribe(self.client.session_mut(), request_id)?;
        self.flush()
    }

    /// The objects of subscription `request_id` so far.
    pub fn received(&self, request_id: RequestId) -> &[Received] {
        self.core.received(request_id)
    }

    /// Takes the objects of subscription `request_id` received so far.
    pub fn take_received(&mut self, request_id: RequestId) -> Vec<Received> {
        self.core.take_received(request_id)
    }
}
