//! A MoQT publisher, every draft: [`PublisherCore`] is the protocol logic, a state machine over
//! a [`Session`] and its [`Event`]s (no I/O, testable with two sessions back to back);
//! [`Publisher`] drives it over a QUIC connection ([`MoqtClient`]).
//!
//! What it does:
//! - PUBLISH_NAMESPACE ([`PublisherCore::announce`]), answered by REQUEST_OK or REQUEST_ERROR.
//! - SUBSCRIBE from the peer: a registered track ([`PublisherCore::add_track`]) gets
//!   SUBSCRIBE_OK with a Track Alias of its own (one per subscription, never reused in the
//!   session) and LARGEST_OBJECT once an object of the track was sent; any other track gets
//!   REQUEST_ERROR DOES_NOT_EXIST (0x10 in every draft).
//! - PUBLISH ([`PublisherCore::publish`], draft-22 §9.8, draft-16 "PUBLISH"): the subscription
//!   is established by PUBLISH_OK (draft-22: REQUEST_OK on the PUBLISH stream). Its FORWARD
//!   state starts as the PUBLISH says; a draft-16 PUBLISH_OK sets it (FORWARD, 1 when absent,
//!   draft-16 "FORWARD Parameter"); a draft-22 PUBLISH_OK cannot carry FORWARD and keeps it.
//! - REQUEST_UPDATE for a subscription: FORWARD pauses or resumes it, a LOCATION_FILTER moves
//!   its bounds; answered with REQUEST_OK carrying LARGEST_OBJECT.
//! - UNSUBSCRIBE (draft-16) or the cancellation of the request stream (draft-22,
//!   [`Event::Cancelled`]): the subscription ends at once and its open subgroup stream is reset
//!   with CANCELLED (draft-16 "Subscription State Management": "MUST reset any open streams").
//! - Objects: one subgroup stream per group and subscription (subgroup 0, explicit publisher
//!   priority, END_OF_GROUP set: the one subgroup holds the group's largest object), Object IDs
//!   from 0 ascending, FIN at the end of the group; or one OBJECT_DATAGRAM per object and
//!   subscription. Only established, forwarding subscriptions whose filter admits the object
//!   receive it; a subscription paused in the middle of a group gets no further objects of it.
//! - PUBLISH_DONE ([`PublisherCore::done`]) after the track's streams are closed, with the
//!   number of streams opened for that subscription; draft-22 then FINs the request stream.
//!
//! The publisher is live only: it keeps no objects, so a filter that starts in the past
//! (AbsoluteStart before the next object, RelativeStart) delivers from the next object sent.
//! Other requests (FETCH, TRACK_STATUS, SUBSCRIBE_NAMESPACE, ...) get NOT_SUPPORTED.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bytes::Bytes;

use super::codes::{request_error, reset};
use super::moqt::{Driven, Origin, RequestState, SessionCore};
use super::quic::ClientError;
use session::{Event, Session, SessionError, StreamId};
use wire::model::{
    DatagramHeader, FullTrackName, GoAway, Location, LocationFilter, Message, ObjectStatus, Parameters,
    Properties, Publish, PublishDone, PublishNamespace, RequestError, RequestId, RequestOk, RequestUpdate,
    SubgroupHeader, SubgroupId, SubgroupObject, Subscribe, SubscribeOk, TrackAlias, TrackNamespace,
};

/// Publisher priority written on our subgroup headers and datagrams unless changed.
pub const DEFAULT_PRIORITY: u8 = 128;

/// One subscription the publisher serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The track.
    pub track: FullTrackName,
    /// The Track Alias its objects carry.
    pub alias: TrackAlias,
    /// Whether the peer subscribed or we published.
    pub origin: Origin,
    /// `Accepted` once objects may flow (at once for SUBSCRIBE; after PUBLISH_OK for PUBLISH).
    pub state: RequestState,
    /// The Forward State: objects are sent only while it is set.
    pub forward: bool,
    /// The filter's bounds (inclusive); `None` = open.
    pub start: Option<Location>,
    /// The filter's end.
    pub end: Option<Location>,
    /// The filter asks for objects already published: none, an absolute start, or a start some
    /// groups back (not the Largest Object's or the next group's live start).
    pub past: bool,
    /// Subgroup streams opened for this subscription (PUBLISH_DONE's Stream Count).
    pub streams_opened: u64,
    /// Objects sent on subgroup streams.
    pub objects_sent: u64,
    /// Objects sent as datagrams.
    pub datagrams_sent: u64,
    /// The subgroup streams of the group in progress, by Subgroup ID.
    streams: Vec<StreamId>,
}

impl Delivery {
    fn admits(&self, at: Location) -> bool {
        self.state == RequestState::Accepted
            && self.forward
            && self.start.is_none_or(|s| at >= s)
            && self.end.is_none_or(|e| at <= e)
    }

    fn admits_group(&self, group: u64) -> bool {
        self.state == RequestState::Accepted
            && self.forward
            && self.start.is_none_or(|s| group >= s.group)
            && self.end.is_none_or(|e| group <= e.group)
    }

    fn set_filter(&mut self, filter: Option<LocationFilter>) {
        let (start, end) = match filter {
            Some(LocationFilter::AbsoluteStart { start }) => (Some(start), None),
            Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group }) => {
                (Some(start), Some(Location::new(end_group, u64::MAX)))
            }
            Some(LocationFilter::AbsoluteRange { start, end }) => (Some(start), Some(end)),
            // Live from the next object: nothing older is kept here.
            _ => (None, None),
        };
        self.past = matches!(
            filter,
            None | Some(LocationFilter::None)
                | Some(LocationFilter::AbsoluteStart { .. })
                | Some(LocationFilter::AbsoluteStartGroupEnd { .. })
                | Some(LocationFilter::AbsoluteRange { .. })
                | Some(LocationFilter::RelativeStart { groups_back: 1.. })
        );
        self.start = start;
        self.end = end;
    }
}

/// Why a subscription the publisher served ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// UNSUBSCRIBE (draft-16) or the request stream's cancellation (draft-22).
    Unsubscribed,
    /// We sent PUBLISH_DONE with this status.
    Done {
        /// The status code.
        status: u64,
    },
    /// The peer refused our PUBLISH.
    Refused {
        /// The error code.
        code: u64,
        /// The reason phrase.
        reason: String,
    },
}

#[derive(Debug, Default)]
struct Track {
    largest: Option<Location>,
    /// The group in progress and its next Object ID.
    open: Option<(u64, u64)>,
    /// Subgroups of the group in progress (objects go to them round robin).
    subgroups: u64,
    /// Its objects carry properties (the subgroup streams say so in their header).
    properties: bool,
}

#[derive(Debug)]
struct Announcement {
    namespace: TrackNamespace,
    state: RequestState,
}

/// The publisher's protocol logic (see the module header).
#[derive(Debug)]
pub struct PublisherCore {
    priority: u8,
    tracks: HashMap<FullTrackName, Track>,
    announcements: BTreeMap<RequestId, Announcement>,
    subs: BTreeMap<RequestId, Delivery>,
    ended: BTreeMap<RequestId, Ended>,
    next_alias: u64,
    closed: Option<(u64, String)>,
    goaway: Option<GoAway>,
}

impl Default for PublisherCore {
    fn default() -> Self {
        Self::new()
    }
}

impl PublisherCore {
    /// A publisher with no track yet.
    pub fn new() -> Self {
        PublisherCore {
            priority: DEFAULT_PRIORITY,
            tracks: HashMap::new(),
            announcements: BTreeMap::new(),
            subs: BTreeMap::new(),
            ended: BTreeMap::new(),
            next_alias: 0,
            closed: None,
            goaway: None,
        }
    }

    /// The publisher priority of our subgroup headers and datagrams.
    pub fn set_priority(&mut self, priority: u8) {
        self.priority = priority;
    }

    /// Makes `track` known: SUBSCRIBEs for it are accepted.
    pub fn add_track(&mut self, track: FullTrackName) {
        self.tracks.entry(track).or_default();
    }

    /// Adds `track`, whose objects carry properties ([`PublisherCore::send_object_with`]).
    pub fn add_track_with_properties(&mut self, track: FullTrackName) {
        self.tracks.entry(track).or_default().properties = true;
    }

    /// The largest Location sent on `track` (whether or not anyone received it).
    pub fn largest(&self, track: &FullTrackName) -> Option<Location> {
        self.tracks.get(track).and_then(|t| t.largest)
    }

    /// Sends PUBLISH_NAMESPACE for `namespace`; [`PublisherCore::announcement`] follows it.
    pub fn announce(
        &mut self,
        s: &mut Session,
        namespace: TrackNamespace,
    ) -> Result<RequestId, SessionError> {
        let request_id = s.next_request_id()?;
        s.send(Message::PublishNamespace(PublishNamespace {
            request_id,
            namespace: namespace.clone(),
            params: Parameters::default(),
        }))?;
        self.announcements.insert(request_id, Announcement { namespace, state: RequestState::Pending });
        Ok(request_id)
    }

    /// Where the PUBLISH_NAMESPACE `request_id` stands.
    pub fn announcement(&self, request_id: RequestId) -> Option<&RequestState> {
        self.announcements.get(&request_id).map(|a| &a.state)
    }

    /// The namespaces announced and accepted.
    pub fn announced(&self) -> impl Iterator<Item = &TrackNamespace> {
        self.announcements.values().filter(|a| a.state == RequestState::Accepted).map(|a| &a.namespace)
    }

    /// Sends PUBLISH for `track` with FORWARD = `forward` (registering the track); the
    /// subscription is established by PUBLISH_OK ([`PublisherCore::subscription`]).
    pub fn publish(
        &mut self,
        s: &mut Session,
        track: FullTrackName,
        forward: bool,
    ) -> Result<RequestId, SessionError> {
        let largest = self.largest(&track);
        let request_id = s.next_request_id()?;
        let alias = TrackAlias(self.next_alias);
        s.send(Message::Publish(Publish {
            request_id,
            track: track.clone(),
            track_alias: alias,
            params: Parameters { forward: Some(forward), largest_object: largest, ..Parameters::default() },
            track_properties: Properties::new(),
        }))?;
        self.next_alias += 1;
        self.add_track(track.clone());
        self.subs
            .insert(request_id, new_delivery(track, alias, Origin::Publish, RequestState::Pending, forward));
        Ok(request_id)
    }

    /// The subscription `request_id` (its SUBSCRIBE's or our PUBLISH's Request ID) while it lasts.
    pub fn subscription(&self, request_id: RequestId) -> Option<&Delivery> {
        self.subs.get(&request_id)
    }

    /// Every live subscription.
    pub fn subscriptions(&self) -> impl Iterator<Item = (RequestId, &Delivery)> {
        self.subs.iter().map(|(r, d)| (*r, d))
    }

    /// Subscriptions of `track` that receive objects now (established and forwarding).
    pub fn active(&self, track: &FullTrackName) -> usize {
        self.subs
            .values()
            .filter(|d| &d.track == track && d.state == RequestState::Accepted && d.forward)
            .count()
    }

    /// Why subscription `request_id` ended, once it has.
    pub fn ended(&self, request_id: RequestId) -> Option<&Ended> {
        self.ended.get(&request_id)
    }

    /// The peer's GOAWAY (New Session URI, draft-22 timeout), once it came.
    pub fn goaway(&self) -> Option<&GoAway> {
        self.goaway.as_ref()
    }

    /// The session's close (code, reason), once it closed.
    pub fn closed(&self) -> Option<(u64, &str)> {
        self.closed.as_ref().map(|(c, r)| (*c, r.as_str()))
    }

    // -----------------------------------------------------------------------------------------
    // Objects
    // -----------------------------------------------------------------------------------------

    /// Starts group `group` of `track` (ending a group still open): opens one subgroup stream
    /// per subscription that admits the group. Returns the streams opened.
    pub fn begin_group(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        group: u64,
    ) -> Result<usize, SessionError> {
        self.begin_subgroups(s, track, group, 1)
    }

    /// Starts group `group` of `track` with `subgroups` subgroups (at least 1): one stream per
    /// subgroup and admitting subscription; Object ID n goes to subgroup n mod `subgroups`.
    /// Returns the streams opened.
    pub fn begin_subgroups(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        group: u64,
        subgroups: u64,
    ) -> Result<usize, SessionError> {
        self.end_group(s, track)?;
        let subgroups = subgroups.max(1);
        let t = self.tracks.entry(track.clone()).or_default();
        t.open = Some((group, 0));
        t.subgroups = subgroups;
        let properties = t.properties;
        let mut opened = 0;
        let priority = self.priority;
        for d in self.subs.values_mut().filter(|d| &d.track == track && d.admits_group(group)) {
            for k in 0..subgroups {
                let header = subgroup_header(s, d.alias, (group, k, subgroups), priority, properties);
                d.streams.push(s.open_subgroup(&header)?);
                d.streams_opened += 1;
                opened += 1;
            }
        }
        Ok(opened)
    }

    /// Gives subscription `request_id`, which began while a one-subgroup group of its track was
    /// in progress, that group from its start: opens its stream and sends `earlier`, the
    /// group's objects so far (Object IDs 0, 1, ...), so that later objects of the group follow
    /// on it. A live video track's subscriber then starts at the GOP's keyframe rather than at
    /// the next one. Returns false (and does nothing) when the subscription already has the
    /// group, does not admit its start, or `earlier` is not the whole group so far.
    pub fn join_group(
        &mut self,
        s: &mut Session,
        request_id: RequestId,
        earlier: &[Bytes],
    ) -> Result<bool, SessionError> {
        let earlier: Vec<(Bytes, Properties)> =
            earlier.iter().map(|b| (b.clone(), Properties::new())).collect();
        self.join_group_with(s, request_id, &earlier)
    }

    /// [`PublisherCore::join_group`] with each earlier object's properties.
    pub fn join_group_with(
        &mut self,
        s: &mut Session,
        request_id: RequestId,
        earlier: &[(Bytes, Properties)],
    ) -> Result<bool, SessionError> {
        let Some(d) = self.subs.get_mut(&request_id) else { return Ok(false) };
        let Some(t) = self.tracks.get(&d.track) else { return Ok(false) };
        let Some((group, next)) = t.open else { return Ok(false) };
        if t.subgroups != 1 || next != earlier.len() as u64 || !d.streams.is_empty() {
            return Ok(false);
        }
        if earlier.is_empty() || !d.past || !d.admits(Location::new(group, 0)) {
            return Ok(false);
        }
        let header = subgroup_header(s, d.alias, (group, 0, 1), self.priority, t.properties);
        let stream = s.open_subgroup(&header)?;
        d.streams.push(stream);
        d.streams_opened += 1;
        for (id, (payload, properties)) in earlier.iter().enumerate() {
            let object = SubgroupObject {
                object_id: id as u64,
                properties: properties.clone(),
                payload_len: payload.len() as u64,
                status: ObjectStatus::Normal,
            };
            s.send_object(stream, &object, payload.clone())?;
            d.objects_sent += 1;
        }
        Ok(true)
    }

    /// Sends the next object of the group in progress on `track` (Object IDs 0, 1, 2, ...)
    /// to every subscription with a stream open for the group that admits it. Returns its
    /// Location. Fails (`Misrouted`) when no group is open.
    pub fn send_object(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        payload: Bytes,
    ) -> Result<Location, SessionError> {
        self.send_object_with(s, track, payload, Properties::new())
    }

    /// [`PublisherCore::send_object`] with object properties (on a track added with
    /// [`PublisherCore::add_track_with_properties`]).
    pub fn send_object_with(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        payload: Bytes,
        properties: Properties,
    ) -> Result<Location, SessionError> {
        let t = self.tracks.get_mut(track).ok_or(SessionError::Misrouted("an object before begin_group"))?;
        let (group, next) = t.open.as_mut().ok_or(SessionError::Misrouted("an object before begin_group"))?;
        let at = Location::new(*group, *next);
        *next += 1;
        let subgroup = (at.object % t.subgroups.max(1)) as usize;
        t.largest = t.largest.max(Some(at));
        let object = SubgroupObject {
            object_id: at.object,
            properties,
            payload_len: payload.len() as u64,
            status: ObjectStatus::Normal,
        };
        for d in self.subs.values_mut().filter(|d| &d.track == track && d.admits(at)) {
            if let Some(&stream) = d.streams.get(subgroup) {
                s.send_object(stream, &object, payload.clone())?;
                d.objects_sent += 1;
            }
        }
        Ok(at)
    }

    /// Ends the group in progress on `track`, if any: FIN on each of its streams.
    pub fn end_group(&mut self, s: &mut Session, track: &FullTrackName) -> Result<(), SessionError> {
        if let Some(t) = self.tracks.get_mut(track) {
            t.open = None;
        }
        for d in self.subs.values_mut().filter(|d| &d.track == track) {
            for stream in d.streams.drain(..) {
                s.finish_data_stream(stream)?;
            }
        }
        Ok(())
    }

    /// Sends group `group` of `track` whole: one subgroup stream per admitting subscription,
    /// `objects` with Object IDs 0, 1, ..., then FIN. Returns the streams opened.
    pub fn send_group(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        group: u64,
        objects: &[Bytes],
    ) -> Result<usize, SessionError> {
        let opened = self.begin_group(s, track, group)?;
        for object in objects {
            self.send_object(s, track, object.clone())?;
        }
        self.end_group(s, track)?;
        Ok(opened)
    }

    /// Sends group `group` of `track` as datagrams: one OBJECT_DATAGRAM per object and
    /// admitting subscription, Object IDs 0, 1, ..., the last one marked END_OF_GROUP.
    /// Returns the datagrams queued.
    pub fn send_datagrams(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        group: u64,
        objects: &[Bytes],
    ) -> Result<usize, SessionError> {
        let mut sent = 0;
        for (i, payload) in objects.iter().enumerate() {
            let at = Location::new(group, i as u64);
            sent += self.send_datagram(s, track, at, payload, i + 1 == objects.len())?;
        }
        Ok(sent)
    }

    /// Sends the object at `at` of `track` as one OBJECT_DATAGRAM per admitting
    /// subscription (`end_of_group`: it is the group's last object). Returns the datagrams
    /// queued. A group in progress on subgroup streams is not affected.
    pub fn send_datagram(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        at: Location,
        payload: &[u8],
        end_of_group: bool,
    ) -> Result<usize, SessionError> {
        let t = self.tracks.entry(track.clone()).or_default();
        t.largest = t.largest.max(Some(at));
        let mut sent = 0;
        for d in self.subs.values_mut().filter(|d| &d.track == track && d.admits(at)) {
            let header = DatagramHeader {
                track_alias: d.alias,
                group_id: at.group,
                object_id: at.object,
                publisher_priority: Some(self.priority),
                properties: Properties::new(),
                end_of_group,
                status: None,
            };
            s.send_datagram(&header, payload)?;
            d.datagrams_sent += 1;
            sent += 1;
        }
        Ok(sent)
    }

    /// Ends every subscription of `track`: closes its streams, then PUBLISH_DONE with
    /// `status` (see [`super::codes::publish_done`]) and the Stream Count; draft-22 FINs the
    /// request stream after it. Returns the subscriptions ended.
    pub fn done(
        &mut self,
        s: &mut Session,
        track: &FullTrackName,
        status: u64,
        reason: &str,
    ) -> Result<usize, SessionError> {
        self.end_group(s, track)?;
        let ids: Vec<RequestId> =
            self.subs.iter().filter(|(_, d)| &d.track == track).map(|(r, _)| *r).collect();
        for request_id in &ids {
            let Some(d) = self.subs.remove(request_id) else { continue };
            s.send(Message::PublishDone(PublishDone {
                request_id: *request_id,
                status_code: status,
                stream_count: d.streams_opened,
                reason: Bytes::copy_from_slice(reason.as_bytes()),
            }))?;
            if s.version().request_streams() {
                s.finish(*request_id)?;
            }
            self.ended.insert(*request_id, Ended::Done { status });
        }
        Ok(ids.len())
    }

    // -----------------------------------------------------------------------------------------
    // Events
    // -----------------------------------------------------------------------------------------

    fn on_message(&mut self, s: &mut Session, msg: Message) {
        match msg {
            Message::Subscribe(m) => self.on_subscribe(s, m),
            Message::RequestUpdate(u) => self.on_update(s, u),
            Message::Unsubscribe(request_id) => self.end_delivery(s, request_id),
            // draft-22 answers PUBLISH with REQUEST_OK (its FORWARD state stays as PUBLISH set it).
            Message::RequestOk(m) => self.on_accepted(m.request_id, m.params.forward),
            // draft-16 PUBLISH_OK sets the Forward State; absent means 1.
            Message::PublishOk(m) => self.on_accepted(m.request_id, Some(m.params.forward.unwrap_or(true))),
            Message::RequestError(m) => {
                let reason = String::from_utf8_lossy(&m.reason).into_owned();
                self.on_refused(s, m.request_id, m.error_code, reason);
            }
            Message::PublishNamespaceCancel(m) => {
                if let Some(a) = self.announcements.get_mut(&m.request_id) {
                    a.state = RequestState::Cancelled;
                }
            }
            Message::Fetch(m) => refuse(s, m.request_id, request_error::NOT_SUPPORTED, "not supported"),
            Message::TrackStatus(m) => refuse(s, m.request_id, request_error::NOT_SUPPORTED, "not supported"),
            Message::Publish(m) => refuse(s, m.request_id, request_error::NOT_SUPPORTED, "a publisher only"),
            Message::PublishNamespace(m) => {
                refuse(s, m.request_id, request_error::NOT_SUPPORTED, "a publisher only")
            }
            Message::SubscribeNamespace(m) => {
                refuse(s, m.request_id, request_error::NOT_SUPPORTED, "not supported")
            }
            Message::SubscribeTracks(m) => {
                refuse(s, m.request_id, request_error::NOT_SUPPORTED, "not supported")
            }
            Message::GoAway(g) => self.goaway = Some(g),
            _ => {}
        }
    }

    fn on_subscribe(&mut self, s: &mut Session, m: Subscribe) {
        let Some(track) = self.tracks.get(&m.track) else {
            return refuse(s, m.request_id, request_error::DOES_NOT_EXIST, "no such track");
        };
        let alias = TrackAlias(self.next_alias);
        let ok = SubscribeOk {
            request_id: m.request_id,
            track_alias: alias,
            params: Parameters { largest_object: track.largest, ..Parameters::default() },
            track_properties: Properties::new(),
        };
        if s.send(Message::SubscribeOk(ok)).is_err() {
            return; // the session is closed
        }
        self.next_alias += 1;
        let forward = m.params.forward.unwrap_or(true);
        let mut d = new_delivery(m.track, alias, Origin::Subscribe, RequestState::Accepted, forward);
        d.set_filter(m.params.location_filter);
        self.subs.insert(m.request_id, d);
    }

    fn on_update(&mut self, s: &mut Session, u: RequestUpdate) {
        let target = u.existing_request_id;
        // draft-16 answers the update's own Request ID; draft-18 and draft-22 answer on the
        // stream of the request being updated, whose ID the session routes by.
        let answer = s.update_answer_id(&u);
        let reply = if let Some(d) = self.subs.get_mut(&target) {
            if let Some(forward) = u.params.forward {
                d.forward = forward;
            }
            if u.params.location_filter.is_some() {
                d.set_filter(u.params.location_filter);
            }
            let largest = self.tracks.get(&d.track).and_then(|t| t.largest);
            Message::RequestOk(RequestOk {
                request_id: answer,
                params: Parameters { largest_object: largest, ..Parameters::default() },
                track_properties: Properties::new(),
            })
        } else if self.announcements.contains_key(&target) {
            Message::RequestOk(RequestOk { request_id: answer, ..RequestOk::default() })
        } else {
            Message::RequestError(RequestError {
                request_id: answer,
                error_code: request_error::DOES_NOT_EXIST,
                retry_interval: 0,
                reason: Bytes::from_static(b"no such subscription"),
                redirect: None,
            })
        };
        let _ = s.send(reply);
    }

    fn on_accepted(&mut self, request_id: RequestId, forward: Option<bool>) {
        if let Some(a) = self.announcements.get_mut(&request_id) {
            if a.state == RequestState::Pending {
                a.state = RequestState::Accepted;
            }
            return;
        }
        if let Some(d) = self.subs.get_mut(&request_id) {
            if d.origin == Origin::Publish && d.state == RequestState::Pending {
                d.state = RequestState::Accepted;
                if let Some(f) = forward {
                    d.forward = f;
                }
            }
        }
    }

    fn on_refused(&mut self, s: &mut Session, request_id: RequestId, code: u64, reason: String) {
        if let Some(a) = self.announcements.get_mut(&request_id) {
            a.state = RequestState::Refused { code, reason };
        } else if self.subs.get(&request_id).is_some_and(|d| d.origin == Origin::Publish) {
            self.subs.remove(&request_id);
            self.ended.insert(request_id, Ended::Refused { code, reason });
        } else {
            return;
        }
        if s.version().request_streams() {
            // The responder FINs after REQUEST_ERROR; close our direction too (§6.4.2.2).
            let _ = s.finish(request_id);
        }
    }

    /// The subscriber ended subscription `request_id`: forget it, reset its open stream.
    fn end_delivery(&mut self, s: &mut Session, request_id: RequestId) {
        let Some(d) = self.subs.remove(&request_id) else { return };
        for &stream in &d.streams {
            let _ = s.reset_data_stream(stream, reset::CANCELLED);
        }
        self.ended.insert(request_id, Ended::Unsubscribed);
    }
}

fn new_delivery(
    track: FullTrackName,
    alias: TrackAlias,
    origin: Origin,
    state: RequestState,
    forward: bool,
) -> Delivery {
    Delivery {
        track,
        alias,
        origin,
        state,
        forward,
        start: None,
        end: None,
        past: true,
        streams_opened: 0,
        objects_sent: 0,
        datagrams_sent: 0,
        streams: Vec::new(),
    }
}

/// Answers request `request_id` with REQUEST_ERROR `code`; draft-22 also FINs its stream.
pub(crate) fn refuse(s: &mut Session, request_id: RequestId, code: u64, reason: &'static str) {
    let error = Message::RequestError(RequestError {
        request_id,
        error_code: code,
        retry_interval: 0,
        reason: Bytes::from_static(reason.as_bytes()),
        redirect: None,
    });
    if s.send(error).is_ok() && s.version().request_streams() {
        let _ = s.finish(request_id);
    }
}

impl SessionCore for PublisherCore {
    fn on_event(&mut self, s: &mut Session, event: Event) {
        match event {
            Event::Message(msg) => self.on_message(s, msg),
            Event::Cancelled { request_id } => {
                if let Some(a) = self.announcements.get_mut(&request_id) {
                    a.state = RequestState::Cancelled;
                } else {
                    self.end_delivery(s, request_id);
                }
            }
            Event::Closed { code, reason } => self.closed = Some((code, reason)),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Over QUIC
// ---------------------------------------------------------------------------------------------

/// A [`PublisherCore`] on its own QUIC connection. Sending methods queue the data and hand
/// it to QUIC at once; requests from the peer are served whenever the connection is driven
/// ([`Driven::pump`], or any waiting method).
pub type Publisher = Driven<PublisherCore>;

impl Driven<PublisherCore> {
    /// Makes `track` known: SUBSCRIBEs for it are accepted.
    pub fn add_track(&mut self, track: FullTrackName) {
        self.core.add_track(track);
    }

    /// [`PublisherCore::add_track_with_properties`].
    pub fn add_track_with_properties(&mut self, track: FullTrackName) {
        self.core.add_track_with_properties(track);
    }

    /// PUBLISH_NAMESPACE, waiting for the answer: REQUEST_ERROR is [`ClientError::Refused`].
    pub fn announce(
        &mut self,
        namespace: TrackNamespace,
        deadline: Instant,
    ) -> Result<RequestId, ClientError> {
        let request_id = self.core.announce(self.client.session_mut(), namespace)?;
        self.client.drive_core(&mut self.core, deadline, |core, _| {
            core.announcement(request_id).map_or(Ok(true), RequestState::outcome)
        })?;
        Ok(request_id)
    }

    /// PUBLISH with FORWARD = `forward`, waiting for PUBLISH_OK; REQUEST_ERROR is
    /// [`ClientError::Refused`].
    pub fn publish(
        &mut self,
        track: FullTrackName,
        forward: bool,
        deadline: Instant,
    ) -> Result<RequestId, ClientError> {
        let request_id = self.core.publish(self.client.session_mut(), track, forward)?;
        self.client.drive_core(&mut self.core, deadline, |core, _| match core.subscription(request_id) {
            Some(d) => d.state.outcome(),
            None => match core.ended(request_id) {
                Some(Ended::Refused { code, reason }) => {
                    Err(ClientError::Refused { code: *code, reason: reason.clone() })
                }
                _ => Err(ClientError::Refused { code: 0, reason: "the subscription ended".to_string() }),
            },
        })?;
        Ok(request_id)
    }

    /// [`PublisherCore::send_group`], sent at once.
    pub fn send_group(
        &mut self,
        track: &FullTrackName,
        group: u64,
        objects: &[Bytes],
    ) -> Result<usize, ClientError> {
        let n = self.core.send_group(self.client.session_mut(), track, group, objects)?;
        self.flush()?;
        Ok(n)
    }

    /// [`PublisherCore::begin_group`], sent at once.
    pub fn begin_group(&mut self, track: &FullTrackName, group: u64) -> Result<usize, ClientError> {
        let n = self.core.begin_group(self.client.session_mut(), track, group)?;
        self.flush()?;
        Ok(n)
    }

    /// [`PublisherCore::begin_subgroups`].
    pub fn begin_subgroups(
        &mut self,
        track: &FullTrackName,
        group: u64,
        subgroups: u64,
    ) -> Result<usize, ClientError> {
        let n = self.core.begin_subgroups(self.client.session_mut(), track, group, subgroups)?;
        self.flush()?;
        Ok(n)
    }

    /// [`PublisherCore::join_group`], sent at once.
    pub fn join_group(&mut self, request_id: RequestId, earlier: &[Bytes]) -> Result<bool, ClientError> {
        let joined = self.core.join_group(self.client.session_mut(), request_id, earlier)?;
        self.flush()?;
        Ok(joined)
    }

    /// [`PublisherCore::join_group_with`], sent at once.
    pub fn join_group_with(
        &mut self,
        request_id: RequestId,
        earlier: &[(Bytes, Properties)],
    ) -> Result<bool, ClientError> {
        let joined = self.core.join_group_with(self.client.session_mut(), request_id, earlier)?;
        self.flush()?;
        Ok(joined)
    }

    /// [`PublisherCore::send_object`], sent at once.
    pub fn send_object(&mut self, track: &FullTrackName, payload: Bytes) -> Result<Location, ClientError> {
        let at = self.core.send_object(self.client.session_mut(), track, payload)?;
        self.flush()?;
        Ok(at)
    }

    /// [`PublisherCore::send_object_with`], sent at once.
    pub fn send_object_with(
        &mut self,
        track: &FullTrackName,
        payload: Bytes,
        properties: Properties,
    ) -> Result<Location, ClientError> {
        let at = self.core.send_object_with(self.client.session_mut(), track, payload, properties)?;
        self.flush()?;
        Ok(at)
    }

    /// [`PublisherCore::end_group`], sent at once.
    pub fn end_group(&mut self, track: &FullTrackName) -> Result<(), ClientError> {
        self.core.end_group(self.client.session_mut(), track)?;
        self.flush()
    }

    /// [`PublisherCore::send_datagrams`], sent at once.
    pub fn send_datagrams(
        &mut self,
        track: &FullTrackName,
        group: u64,
        objects: &[Bytes],
    ) -> Result<usize, ClientError> {
        let n = self.core.send_datagrams(self.client.session_mut(), track, group, objects)?;
        self.flush()?;
        Ok(n)
    }

    /// [`PublisherCore::send_datagram`], sent at once.
    pub fn send_datagram(
        &mut self,
        track: &FullTrackName,
        at: Location,
        payload: &[u8],
        end_of_group: bool,
    ) -> Result<usize, ClientError> {
        let n = self.core.send_datagram(self.client.session_mut(), track, at, payload, end_of_group)?;
        self.flush()?;
        Ok(n)
    }

    /// [`PublisherCore::done`], sent at once.
    pub fn done(&mut self, track: &FullTrackName, status: u64, reason: &str) -> Result<usize, ClientError> {
        let n = self.core.done(self.client.session_mut(), track, status, reason)?;
        self.flush()?;
        Ok(n)
    }
}

/// The SUBGROUP_HEADER of subgroup `k` of `subgroups` in `group`, for the subscription whose
/// Track Alias is `alias`.
fn subgroup_header(
    s: &Session,
    alias: TrackAlias,
    (group, k, subgroups): (u64, u64, u64),
    priority: u8,
    has_properties: bool,
) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: alias,
        group_id: group,
        subgroup_id: if k == 0 { SubgroupId::Zero } else { SubgroupId::Explicit(k) },
        publisher_priority: Some(priority),
        has_properties,
        // With one subgroup its end is the group's end.
        end_of_group: subgroups == 1,
        // draft-18 and draft-22: the stream starts with the subgroup's first object.
        first_object: s.marks_first_object(),
    }
}
