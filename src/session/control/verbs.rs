//! What the relay says to a peer by meaning, written in this session's draft: typed error,
//! status and reset codes, the end of a request, and the messages whose shape differs by
//! draft. The relay calls these instead of asking which draft a peer speaks.

use std::time::Instant;

use bytes::Bytes;

use super::Session;
use crate::{SessionError, StreamId, Transmit};
use wire::model::{
    FetchEnd, FetchOk, GoAway, GroupOrder, Location, LocationFilter, Message, Parameters, Properties,
    PublishDone, RequestError, RequestId, RequestOk, RequestUpdate,
};
use wire::{DoneStatus, FetchWriter, RequestErrorCode, ResetCode, Version};

impl Session {
    /// REQUEST_ERROR for request `rid` with `code` (draft-16 §9.8, draft-18 §10.6, draft-22 §9.4;
    /// draft-14: the error message of the request's kind, with that message's code, §13.1).
    pub fn request_error(
        &mut self,
        rid: RequestId,
        code: RequestErrorCode,
        reason: &str,
    ) -> Result<(), SessionError> {
        let error_code = match self.version {
            Version::Draft14 => super::d14::typed_code(code, self.peer_kind(rid)),
            v => code.code(v),
        };
        self.send(Message::RequestError(RequestError {
            request_id: rid,
            error_code,
            retry_interval: 0,
            reason: Bytes::copy_from_slice(reason.as_bytes()),
            redirect: None,
        }))
    }

    /// Our side of request `rid` is over: a draft-18 or draft-22 request stream ends (FIN,
    /// draft-18 §3.3.2, draft-22 §6.4.2.2); draft-14 and draft-16 requests on the control
    /// stream have nothing to end.
    pub fn end_request(&mut self, rid: RequestId) -> Result<(), SessionError> {
        match self.version {
            Version::Draft14 | Version::Draft16 => Ok(()),
            Version::Draft18 | Version::Draft20 | Version::Draft22 => self.finish(rid),
        }
    }

    /// PUBLISH_DONE for subscription `rid` with `status`, then the end of the request.
    pub fn publish_done(
        &mut self,
        rid: RequestId,
        status: DoneStatus,
        stream_count: u64,
        reason: Bytes,
    ) -> Result<(), SessionError> {
        let done =
            PublishDone { request_id: rid, status_code: status.code(self.version), stream_count, reason };
        self.send(Message::PublishDone(done))?;
        self.end_request(rid)
    }

    /// PUBLISH_DONE as [`Session::publish_done`], held back until the data streams it counts
    /// (`streams`: those that may still be in flight) are acknowledged or reset, or until
    /// `until` ([`Transmit::Hold`]): a subscriber that ends the subscription at PUBLISH_DONE
    /// then has its objects first, even when it handles the message before it has seen the
    /// streams (draft-16 §9.12 and draft-22 §9.12 have it count the streams for that case).
    pub fn publish_done_after(
        &mut self,
        rid: RequestId,
        (status, stream_count, reason): (DoneStatus, u64, Bytes),
        streams: Vec<StreamId>,
        until: Instant,
    ) -> Result<(), SessionError> {
        let at = self.transmits.len();
        let done =
            PublishDone { request_id: rid, status_code: status.code(self.version), stream_count, reason };
        self.send(Message::PublishDone(done))?;
        if let (false, Some(&Transmit::Stream { id, .. })) = (streams.is_empty(), self.transmits.get(at)) {
            self.transmits.insert(at, Transmit::Hold { id, streams, until });
        }
        self.end_request(rid)
    }

    /// Resets our data stream `stream` with `code`.
    pub fn reset_stream(&mut self, stream: StreamId, code: ResetCode) -> Result<(), SessionError> {
        self.reset_data_stream(stream, code.code(self.version))
    }

    /// GOAWAY on the control stream; draft-14's and draft-16's have no Timeout field, so it
    /// goes without one.
    /// draft-18's Request ID (§10.4) is the session's to fill in ([`Session::send`]).
    pub fn go_away(&mut self, mut goaway: GoAway) -> Result<(), SessionError> {
        goaway.request_id = None;
        if !self.version.request_streams() {
            goaway.timeout_ms = 0;
        }
        self.send(Message::GoAway(goaway))
    }

    /// The answer to TRACK_STATUS `rid`: REQUEST_OK with LARGEST_OBJECT and, where the
    /// draft carries them (draft-18 §10.5, draft-22 §9.7; draft-14 §9.21 TRACK_STATUS_OK: Group
    /// Order, DELIVERY TIMEOUT, MAX CACHE DURATION), the Track Properties; then the request
    /// ends.
    pub fn track_status_ok(
        &mut self,
        rid: RequestId,
        largest: Option<Location>,
        properties: Properties,
    ) -> Result<(), SessionError> {
        let track_properties = match self.version {
            Version::Draft16 => Properties::default(),
            Version::Draft14 | Version::Draft18 | Version::Draft20 | Version::Draft22 => properties,
        };
        let params = Parameters { largest_object: largest, ..Parameters::default() };
        self.send(Message::RequestOk(RequestOk { request_id: rid, params, track_properties }))?;
        self.end_request(rid)
    }

    /// FETCH_OK for `rid`, whose response ends at `end` (inclusive); `whole_group`: the
    /// request asked through the end of this group and the response covers it (draft-14,
    /// draft-16 and draft-18 write that as `{group, 0}`, draft-14 §9.17, draft-16 §9.17,
    /// draft-18 §10.13; draft-22 always names the object).
    pub fn fetch_ok(
        &mut self,
        rid: RequestId,
        end: Location,
        whole_group: Option<u64>,
        track_properties: Properties,
    ) -> Result<(), SessionError> {
        let end_location = match (self.version, whole_group) {
            (Version::Draft14 | Version::Draft16 | Version::Draft18, Some(g)) => FetchEnd::Group(g),
            _ => FetchEnd::Object(end),
        };
        self.send(Message::FetchOk(FetchOk {
            request_id: rid,
            end_of_track: false,
            end_location,
            params: Parameters::default(),
            track_properties,
        }))
    }

    /// A writer for the items of one of this session's fetch streams.
    pub fn fetch_writer(&self, order: GroupOrder) -> FetchWriter {
        self.codec.fetch_version().fetch_writer(order)
    }

    /// The Request ID the answer to REQUEST_UPDATE `m` carries: draft-16 answers the
    /// update's own (§9.11); draft-18 and draft-22 answer on the updated request's stream
    /// (draft-18 §10.9, draft-22 §9.5). draft-14's SUBSCRIBE_UPDATE has no answer (§9.10):
    /// the session drops one sent for the update's own ID.
    pub fn update_answer_id(&self, m: &RequestUpdate) -> RequestId {
        match self.version {
            Version::Draft14 | Version::Draft16 => m.request_id,
            Version::Draft18 | Version::Draft20 | Version::Draft22 => m.existing_request_id,
        }
    }

    /// Whether the peer answers a REQUEST_UPDATE: draft-14's SUBSCRIBE_UPDATE has no answer
    /// (§9.10), every later draft's has one (REQUEST_OK or REQUEST_ERROR).
    pub fn updates_are_answered(&self) -> bool {
        self.version != Version::Draft14
    }

    /// Whether PUBLISH_OK carries FORWARD (draft-14 §9.14, draft-16 §9.14; draft-18 §10.2.12
    /// names PUBLISH_OK, its REQUEST_OK alias); draft-22's REQUEST_OK answer does not, and a
    /// Forward State different from the PUBLISH's is set with REQUEST_UPDATE (§3.1.1).
    pub fn publish_ok_has_forward(&self) -> bool {
        matches!(self.version, Version::Draft14 | Version::Draft16 | Version::Draft18)
    }

    /// Whether a SUBSCRIBE in this draft can carry `filter`: draft-14, draft-16 and draft-18 (§5.1.2)
    /// have no relative start other than Next Group Start, no explicit "no filter" and no
    /// range ending inside a group; draft-22's LOCATION_FILTER has them all.
    pub fn carries_filter(&self, filter: LocationFilter) -> bool {
        match self.version {
            Version::Draft14 | Version::Draft16 | Version::Draft18 => !matches!(
                filter,
                LocationFilter::RelativeStart { groups_back: 1.. }
                    | LocationFilter::None
                    | LocationFilter::AbsoluteRange { .. }
            ),
            Version::Draft20 | Version::Draft22 => true,
        }
    }

    /// Whether the peer may hold only one subscription per Track in each role: draft-16 and
    /// draft-18 ("Subscriptions": a second SUBSCRIBE to a Track fails with
    /// DUPLICATE_SUBSCRIPTION); draft-22 §3.1 allows several, each with its own Request ID.
    pub fn one_subscription_per_track(&self) -> bool {
        matches!(self.version, Version::Draft16 | Version::Draft18)
    }

    /// Whether a SUBGROUP_HEADER can say that its stream starts at the subgroup's first
    /// object (FIRST_OBJECT, draft-18 §11.4.2 and draft-22; draft-16 has no such bit).
    pub fn marks_first_object(&self) -> bool {
        matches!(self.version, Version::Draft18 | Version::Draft20 | Version::Draft22)
    }

    /// The meaning of REQUEST_ERROR code `c` from this session's peer. draft-14's codes
    /// depend on the request refused: use [`Session::peer_request_error_of`].
    pub fn peer_request_error(&self, c: u64) -> RequestErrorCode {
        RequestErrorCode::from_code(c, self.version)
    }

    /// The meaning of code `c` in the peer's refusal of our request `rid`: draft-14 reads it
    /// in the table of the request's kind (§13.1.2-§13.1.7); the other drafts as
    /// [`Session::peer_request_error`].
    pub fn peer_request_error_of(&self, rid: RequestId, c: u64) -> RequestErrorCode {
        match (self.version, self.local_kind(rid)) {
            (Version::Draft14, Some(kind)) => RequestErrorCode::from_code_for(c, Version::Draft14, kind),
            (v, _) => RequestErrorCode::from_code(c, v),
        }
    }

    /// The meaning of PUBLISH_DONE status `c` from this session's peer.
    pub fn peer_done_status(&self, c: u64) -> DoneStatus {
        DoneStatus::from_code(c, self.version)
    }

    /// The meaning of stream reset code `c` from this session's peer.
    pub fn peer_reset(&self, c: u64) -> ResetCode {
        ResetCode::from_code(c, self.version)
    }
}
