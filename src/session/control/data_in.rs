//! Glue between [`Session`] and the incoming data plane ([`DataState`](crate::data)):
//! routing peer unidirectional data streams and datagrams into it, and keeping the Track Alias
//! table in step with control messages (draft-16 "Track Alias", draft-22 §3.1.3): SUBSCRIBE_OK
//! and PUBLISH from the peer add an alias; PUBLISH_DONE, cancellation, UNSUBSCRIBE and a
//! rejected PUBLISH remove it.

use bytes::Bytes;

use super::Session;
use crate::data::Out;
use crate::error::SessionError;
use crate::StreamId;
use wire::model::{Message, RequestId, TrackAlias};

impl Session {
    /// A datagram arrived (draft-16 §10.3.1, draft-22 §11.2.1). Objects for an unknown Track
    /// Alias are dropped and counted ([`Session::dropped_datagrams`]); a malformed datagram
    /// closes the session.
    pub fn on_datagram(&mut self, data: Bytes) {
        if self.closed {
            return;
        }
        let mut out = Out { events: &mut self.events, transmits: &mut self.transmits };
        if let Err(e) = self.data.on_datagram(data, &mut out) {
            self.fail(e);
        }
    }

    /// Datagrams dropped because their Track Alias was unknown.
    pub fn dropped_datagrams(&self) -> u64 {
        self.data.dropped_datagrams()
    }

    /// The request the peer's Track Alias `alias` currently belongs to.
    pub fn peer_track_alias(&self, alias: TrackAlias) -> Option<RequestId> {
        self.data.request_of(alias)
    }

    /// Bytes on a peer data stream.
    pub(super) fn data_stream_input(
        &mut self,
        id: StreamId,
        data: &[u8],
        fin: bool,
    ) -> Result<(), SessionError> {
        let mut out = Out { events: &mut self.events, transmits: &mut self.transmits };
        self.data.on_data(id, data, fin, &mut out)
    }

    /// The peer reset stream `id`: true when it was a data stream.
    pub(super) fn data_stream_reset(&mut self, id: StreamId, code: u64) -> bool {
        let mut out = Out { events: &mut self.events, transmits: &mut self.transmits };
        self.data.on_reset(id, code, &mut out)
    }

    /// A control message from the peer, already queued as an event: alias bookkeeping.
    pub(super) fn observe_incoming(&mut self, msg: &Message) -> Result<(), SessionError> {
        let (alias, rid, track) = match msg {
            Message::SubscribeOk(m) => (m.track_alias, m.request_id, None),
            Message::Publish(m) => (m.track_alias, m.request_id, Some(&m.track)),
            Message::PublishDone(m) => {
                // Streams the PUBLISH_DONE overtook still resolve (draft-22 §9.9).
                self.data.finish_request(m.request_id);
                return Ok(());
            }
            _ => return Ok(()),
        };
        let mut out = Out { events: &mut self.events, transmits: &mut self.transmits };
        self.data.add_alias(alias, rid, track, &mut out)
    }

    /// A message we send: alias and fetch bookkeeping.
    pub(super) fn observe_outgoing(&mut self, msg: &Message) {
        match msg {
            // draft-22 fetch streams (FETCH responses, and fill fetch streams named by the
            // SUBSCRIBE, §11.4.1) carry Group ID deltas in the request's Group Order.
            Message::Fetch(m) => {
                if let Some(order) = m.params.group_order {
                    self.data.set_fetch_order(m.request_id, order);
                }
            }
            Message::Subscribe(m) => {
                if let Some(order) = m.params.group_order {
                    self.data.set_fetch_order(m.request_id, order);
                }
            }
            Message::Unsubscribe(r) | Message::FetchCancel(r) => self.data.remove_request(*r),
            Message::RequestError(m) => self.data.remove_request(m.request_id),
            _ => {}
        }
    }

    /// Request `rid` ended by cancellation (either side).
    pub(super) fn request_ended(&mut self, rid: RequestId) {
        self.data.remove_request(rid);
    }
}
