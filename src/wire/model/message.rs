//! Control messages, version-neutral.
//!
//! The set is the union of draft-14, draft-16, draft-18 and draft-22. A few exist in one draft only (noted on
//! each); encoding them in the other draft fails with `EncodeError::Unsupported`, and the
//! session maps them onto that draft's stream operations instead (for example draft-16
//! UNSUBSCRIBE is a STOP_SENDING/reset of the request stream in draft-22).
//!
//! Responses carry the `request_id` they answer. draft-22 sends responses on the request's
//! own bidirectional stream without a Request ID; its decoder takes the ID from the
//! [`DecodeContext`] the session supplies, so both dialects produce the same value.

use bytes::Bytes;

use super::params::{Parameters, SetupOptions};
use super::properties::Properties;
use super::{FullTrackName, Location, RequestId, Role, TrackAlias, TrackNamespace};

/// What a decoder needs to know about where a message arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeContext {
    /// The role of the endpoint that *sent* the bytes.
    pub sender: Role,
    /// draft-22: the Request ID of the request stream the bytes arrived on (None on the
    /// control stream). Ignored by draft-16, whose messages carry their IDs.
    pub request_id: Option<RequestId>,
}

impl DecodeContext {
    pub const fn control(sender: Role) -> Self {
        DecodeContext { sender, request_id: None }
    }

    pub const fn request(sender: Role, request_id: RequestId) -> Self {
        DecodeContext { sender, request_id: Some(request_id) }
    }
}

/// CLIENT_SETUP / SERVER_SETUP (draft-16) or SETUP (draft-18, draft-22).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Setup {
    pub options: SetupOptions,
}

/// GOAWAY.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GoAway {
    /// Empty means "reuse the current URI".
    pub new_session_uri: Bytes,
    /// draft-18 and draft-22: milliseconds until the sender closes (0 = no specific timeout).
    pub timeout_ms: u64,
    /// draft-18 only, and only on the control stream: the smallest Request ID of the
    /// receiver that the sender did not (or might not) process (draft-ietf-moq-transport-18
    /// §10.4). `None` on a request stream, and always in the other drafts.
    pub request_id: Option<RequestId>,
}

/// REQUEST_OK (and draft-22's PUBLISH_OK, REQUEST_UPDATE_OK, TRACK_STATUS_OK, ... which share
/// its code point).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestOk {
    pub request_id: RequestId,
    pub params: Parameters,
    /// draft-18 and draft-22: Track Properties (populated in TRACK_STATUS_OK).
    pub track_properties: Properties,
}

/// A Redirect (draft-18 §10.6.1, draft-22 §9.4.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Redirect {
    pub connect_uri: Bytes,
    pub track: FullTrackName,
}

/// REQUEST_ERROR.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestError {
    pub request_id: RequestId,
    pub error_code: u64,
    /// Milliseconds before retrying, plus one; 0 = do not retry.
    pub retry_interval: u64,
    pub reason: Bytes,
    /// draft-18 and draft-22; present exactly when `error_code` is REDIRECT (0x34).
    pub redirect: Option<Redirect>,
}

/// SUBSCRIBE, and TRACK_STATUS which has the same shape.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscribe {
    pub request_id: RequestId,
    pub track: FullTrackName,
    pub params: Parameters,
}

/// SUBSCRIBE_OK.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeOk {
    pub request_id: RequestId,
    pub track_alias: TrackAlias,
    pub params: Parameters,
    pub track_properties: Properties,
}

/// REQUEST_UPDATE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestUpdate {
    /// The update's own Request ID.
    pub request_id: RequestId,
    /// The request being updated (draft-16 field; draft-22: the stream's request).
    pub existing_request_id: RequestId,
    pub params: Parameters,
}

/// PUBLISH.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Publish {
    pub request_id: RequestId,
    pub track: FullTrackName,
    pub track_alias: TrackAlias,
    pub params: Parameters,
    pub track_properties: Properties,
}

/// draft-16 PUBLISH_OK (0x1E). draft-22 answers PUBLISH with REQUEST_OK; its encoder writes
/// this as REQUEST_OK and its decoder yields [`RequestOk`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishOk {
    pub request_id: RequestId,
    pub params: Parameters,
}

/// PUBLISH_DONE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishDone {
    pub request_id: RequestId,
    pub status_code: u64,
    pub stream_count: u64,
    pub reason: Bytes,
}

/// Whether a PUBLISH_DONE Stream Count `n` means "unknown": 2^62-1 (the largest draft-16's
/// varint carries, what draft-16 peers send) or more (draft-22 says 2^64-1).
pub fn stream_count_unknown(n: u64) -> bool {
    n >= (1 << 62) - 1
}

/// PUBLISH_STATE_NOTIFY (draft-22 only).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishStateNotify {
    pub request_id: RequestId,
    pub params: Parameters,
}

/// How a FETCH names what it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchKind {
    /// A track; the range is `params.location_filter` (draft-16 Standalone Fetch maps its
    /// Start/End Locations onto `AbsoluteStartGroupEnd` / `AbsoluteRange`).
    Standalone { track: FullTrackName },
    /// draft-16 Relative Joining Fetch (0x2): `joining_start` groups before the largest.
    RelativeJoining { joining_request_id: RequestId, joining_start: u64 },
    /// draft-16 Absolute Joining Fetch (0x3): from group `joining_start`.
    AbsoluteJoining { joining_request_id: RequestId, joining_start: u64 },
}

/// FETCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    pub request_id: RequestId,
    pub kind: FetchKind,
    pub params: Parameters,
}

/// The end of a FETCH response range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchEnd {
    /// Up to and including this object.
    Object(Location),
    /// Through the end of this group, wherever it ends (draft-16 writes `{G, 0}`; draft-22
    /// cannot express it).
    Group(u64),
}

impl Default for FetchEnd {
    fn default() -> Self {
        FetchEnd::Object(Location::default())
    }
}

/// FETCH_OK.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchOk {
    pub request_id: RequestId,
    pub end_of_track: bool,
    /// draft-22 carries the inclusive end; draft-16 carries "end plus one, object 0 = whole
    /// group", which its codec converts to and from this form.
    pub end_location: FetchEnd,
    pub params: Parameters,
    pub track_properties: Properties,
}

/// PUBLISH_NAMESPACE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishNamespace {
    pub request_id: RequestId,
    pub namespace: TrackNamespace,
    pub params: Parameters,
}

/// draft-16 Subscribe Options of SUBSCRIBE_NAMESPACE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubscribeOptions {
    /// 0x00: PUBLISH messages only.
    Publish,
    /// 0x01: NAMESPACE messages only (the only form draft-22's SUBSCRIBE_NAMESPACE has).
    #[default]
    Namespace,
    /// 0x02: both.
    Both,
}

/// SUBSCRIBE_NAMESPACE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeNamespace {
    pub request_id: RequestId,
    pub prefix: TrackNamespace,
    pub options: SubscribeOptions,
    pub params: Parameters,
}

/// SUBSCRIBE_TRACKS (draft-18 and draft-22).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeTracks {
    pub request_id: RequestId,
    pub prefix: TrackNamespace,
    pub params: Parameters,
}

/// PUBLISH_NAMESPACE_CANCEL (draft-16 only).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishNamespaceCancel {
    pub request_id: RequestId,
    pub error_code: u64,
    pub reason: Bytes,
}

/// draft-14's PUBLISH_NAMESPACE_CANCEL (draft-14 §9.27), which names the namespace rather
/// than the PUBLISH_NAMESPACE request (draft-14 only; the session maps it to and from
/// [`PublishNamespaceCancel`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishNamespaceCancelNamed {
    pub namespace: TrackNamespace,
    pub error_code: u64,
    pub reason: Bytes,
}

/// What a response answers, for the drafts whose response messages differ by request
/// (draft-14: SUBSCRIBE_ERROR, FETCH_ERROR, TRACK_STATUS_OK, ...) where the model has one
/// [`RequestOk`] / [`RequestError`]. The encoder of such a draft takes it alongside the
/// message (`ControlCodec::encode_response`); the session knows it from the Request ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    Subscribe,
    Publish,
    Fetch,
    TrackStatus,
    PublishNamespace,
    SubscribeNamespace,
    /// REQUEST_UPDATE (draft-14 SUBSCRIBE_UPDATE, which gets no response).
    RequestUpdate,
    /// SUBSCRIBE_TRACKS (draft-18 and draft-22).
    SubscribeTracks,
}

/// PUBLISH_SKIPPED (draft-22; draft-18's PUBLISH_BLOCKED has the same fields).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishSkipped {
    pub request_id: RequestId,
    pub namespace_suffix: TrackNamespace,
    pub track_name: Bytes,
}

/// Every control message of draft-16, draft-18 and draft-22.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    ClientSetup(Setup),
    ServerSetup(Setup),
    GoAway(GoAway),
    /// draft-16 only.
    MaxRequestId(RequestId),
    /// draft-16 only.
    RequestsBlocked(RequestId),
    RequestOk(RequestOk),
    RequestError(RequestError),
    Subscribe(Subscribe),
    SubscribeOk(SubscribeOk),
    RequestUpdate(RequestUpdate),
    /// draft-16 only (draft-18 and draft-22 cancel the request stream).
    Unsubscribe(RequestId),
    Publish(Publish),
    PublishOk(PublishOk),
    PublishDone(PublishDone),
    /// draft-22 only.
    PublishStateNotify(PublishStateNotify),
    Fetch(Fetch),
    FetchOk(FetchOk),
    /// draft-16 only (draft-18 and draft-22 cancel the request stream).
    FetchCancel(RequestId),
    TrackStatus(Subscribe),
    PublishNamespace(PublishNamespace),
    /// Sent on a SUBSCRIBE_NAMESPACE response stream: the namespace suffix.
    Namespace(TrackNamespace),
    /// draft-16 only (draft-18 and draft-22 close the request stream).
    PublishNamespaceDone(RequestId),
    /// Sent on a SUBSCRIBE_NAMESPACE response stream: the namespace suffix.
    NamespaceDone(TrackNamespace),
    /// draft-16 only.
    PublishNamespaceCancel(PublishNamespaceCancel),
    SubscribeNamespace(SubscribeNamespace),
    /// draft-18 and draft-22.
    SubscribeTracks(SubscribeTracks),
    /// draft-22 PUBLISH_SKIPPED, draft-18 PUBLISH_BLOCKED.
    PublishSkipped(PublishSkipped),
    /// draft-14 only: PUBLISH_NAMESPACE_DONE naming the namespace, not the request (§9.26).
    PublishNamespaceDoneNamed(TrackNamespace),
    /// draft-14 only: PUBLISH_NAMESPACE_CANCEL naming the namespace (§9.27).
    PublishNamespaceCancelNamed(PublishNamespaceCancelNamed),
    /// draft-14 only: UNSUBSCRIBE_NAMESPACE, naming the prefix of the SUBSCRIBE_NAMESPACE it
    /// ends (§9.31); later drafts end it with the request (stream).
    UnsubscribeNamespace(TrackNamespace),
}

impl Message {
    /// Spec name, for logs and errors.
    pub const fn name(&self) -> &'static str {
        match self {
            Message::ClientSetup(_) => "CLIENT_SETUP",
            Message::ServerSetup(_) => "SERVER_SETUP",
            Message::GoAway(_) => "GOAWAY",
            Message::MaxRequestId(_) => "MAX_REQUEST_ID",
            Message::RequestsBlocked(_) => "REQUESTS_BLOCKED",
            Message::RequestOk(_) => "REQUEST_OK",
            Message::RequestError(_) => "REQUEST_ERROR",
            Message::Subscribe(_) => "SUBSCRIBE",
            Message::SubscribeOk(_) => "SUBSCRIBE_OK",
            Message::RequestUpdate(_) => "REQUEST_UPDATE",
            Message::Unsubscribe(_) => "UNSUBSCRIBE",
            Message::Publish(_) => "PUBLISH",
            Message::PublishOk(_) => "PUBLISH_OK",
            Message::PublishDone(_) => "PUBLISH_DONE",
            Message::PublishStateNotify(_) => "PUBLISH_STATE_NOTIFY",
            Message::Fetch(_) => "FETCH",
            Message::FetchOk(_) => "FETCH_OK",
            Message::FetchCancel(_) => "FETCH_CANCEL",
            Message::TrackStatus(_) => "TRACK_STATUS",
            Message::PublishNamespace(_) => "PUBLISH_NAMESPACE",
            Message::Namespace(_) => "NAMESPACE",
            Message::PublishNamespaceDone(_) => "PUBLISH_NAMESPACE_DONE",
            Message::NamespaceDone(_) => "NAMESPACE_DONE",
            Message::PublishNamespaceCancel(_) => "PUBLISH_NAMESPACE_CANCEL",
            Message::SubscribeNamespace(_) => "SUBSCRIBE_NAMESPACE",
            Message::SubscribeTracks(_) => "SUBSCRIBE_TRACKS",
            Message::PublishSkipped(_) => "PUBLISH_SKIPPED",
            Message::PublishNamespaceDoneNamed(_) => "PUBLISH_NAMESPACE_DONE",
            Message::PublishNamespaceCancelNamed(_) => "PUBLISH_NAMESPACE_CANCEL",
            Message::UnsubscribeNamespace(_) => "UNSUBSCRIBE_NAMESPACE",
        }
    }
}
