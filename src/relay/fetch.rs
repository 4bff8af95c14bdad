//! FETCH on the subscriber's core (draft-16 §9.16, draft-22 §3.2, §3.4, §9.11): the request
//! is turned into a range and sent to the track's owner, which answers from its cache
//! (`owner.rs`) once it knows the End Location; this core then writes FETCH_OK and the fetch
//! stream. Joining FETCHes (draft-16) and fill fetch streams (draft-22 FILL_PARAMETERS) are
//! resolved against their subscription in `fanout.rs` and come here as the same range
//! request, capped at the subscription's Largest Location so the two are contiguous.
//!
//! The whole answer is written at once (payloads shared with the cache, not copied); the
//! session's send backlog bounds what it costs a slow subscriber.

use crate::msg::ConnId;
use ahash::HashMap;

use bytes::Bytes;
use tracing::debug;

use super::fanout::{Fanout, Join, DEFAULT_PRIORITY};
use super::msg::{FetchAsk, FetchBound, FetchData, FetchStart, OwnerMsg, Piece};
use super::sessions::{Holder, Sessions};
use crate::cx::unheeded;
use crate::cx::Cx;
use session::{data_urgency, StreamId};
use wire::model::{
    Fetch, FetchItem, FetchKind, FetchObject, GroupOrder, LocationFilter, RequestId, TrackAlias,
};
use wire::{RequestErrorCode, ResetCode};

/// FETCHes of this core's sessions waiting for their owner's answer.
#[derive(Debug, Default)]
pub(super) struct Fetches {
    /// FETCHes waiting for their answer, with the subscriber priority of their stream.
    pending: HashMap<(ConnId, RequestId), u8>,
    per_session: HashMap<ConnId, usize>,
}

impl Fetches {
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

/// A range from a Location filter, evaluated as for a FETCH (draft-22 §9.20.9; draft-16
/// Standalone FETCH arrives as `AbsoluteStartGroupEnd` / `AbsoluteRange`). `None`: the
/// filter selects nothing a FETCH can return (the Next Object).
pub(super) fn fetch_range(filter: Option<LocationFilter>) -> Option<(FetchStart, FetchBound)> {
    use wire::model::Location;
    Some(match filter {
        None | Some(LocationFilter::None) => (FetchStart::At(Location::default()), FetchBound::Largest),
        Some(LocationFilter::RelativeStart { groups_back }) => {
            (FetchStart::GroupsBack(groups_back), FetchBound::Largest)
        }
        Some(LocationFilter::AbsoluteStart { start }) => (FetchStart::At(start), FetchBound::Largest),
        Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group }) => {
            (FetchStart::At(start), FetchBound::Group(end_group))
        }
        Some(LocationFilter::AbsoluteRange { start, end }) => {
            (FetchStart::At(start), FetchBound::Object(end))
        }
        Some(LocationFilter::NextObject) => return None,
    })
}

impl Fanout {
    pub(super) fn fetch_request(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId, m: Fetch) {
        let rid = m.request_id;
        let count = self.fetches.per_session.get(&conn).copied().unwrap_or(0);
        if count >= cx.config.max_subscriptions_per_session {
            return sessions.answer_error(
                conn,
                rid,
                RequestErrorCode::ExcessiveLoad,
                "too many FETCHes in progress",
                true,
            );
        }
        let descending = m.params.group_order == Some(GroupOrder::Descending);
        match m.kind {
            FetchKind::Standalone { track } => {
                let Some((start, end)) = fetch_range(m.params.location_filter) else {
                    return sessions.answer_error(
                        conn,
                        rid,
                        RequestErrorCode::InvalidRange,
                        "the range is empty",
                        true,
                    );
                };
                let alias = cx.key.alias(&track);
                let fill_timeout = m.params.fill_timeout.map(std::time::Duration::from_millis);
                let ask = FetchAsk {
                    from: cx.core,
                    conn,
                    rid,
                    start,
                    end,
                    descending,
                    cap: None,
                    fill: false,
                    fill_timeout,
                    priority: m.params.subscriber_priority.unwrap_or(DEFAULT_PRIORITY),
                };
                self.fetch_ask(cx, sessions, alias, track, ask);
            }
            FetchKind::RelativeJoining { joining_request_id, joining_start } => self.join(
                cx,
                sessions,
                conn,
                joining_request_id,
                Join { rid, relative: true, start: joining_start, descending },
            ),
            FetchKind::AbsoluteJoining { joining_request_id, joining_start } => self.join(
                cx,
                sessions,
                conn,
                joining_request_id,
                Join { rid, relative: false, start: joining_start, descending },
            ),
        }
    }

    /// Sends `ask` to the owner of `alias` and remembers it as pending.
    pub(super) fn fetch_ask(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        alias: TrackAlias,
        track: wire::model::FullTrackName,
        ask: FetchAsk,
    ) {
        if self.fetches.pending.insert((ask.conn, ask.rid), ask.priority).is_none() {
            *self.fetches.per_session.entry(ask.conn).or_default() += 1;
        }
        sessions.register_also(ask.conn, ask.rid, Holder::Fetch);
        let who = sessions.requester(ask.conn);
        cx.send(cx.owner_of(alias), OwnerMsg::Fetch { alias, track, ask, who });
    }

    /// Remembers a FETCH that waits for its subscription (a joining FETCH before SUBSCRIBE_OK).
    pub(super) fn fetch_hold(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        if self.fetches.pending.insert((conn, rid), DEFAULT_PRIORITY).is_none() {
            *self.fetches.per_session.entry(conn).or_default() += 1;
        }
        sessions.register_also(conn, rid, Holder::Fetch);
    }

    /// Forgets a pending FETCH; its stream's subscriber priority, or `None` if it was not
    /// pending (answered or cancelled already).
    fn fetch_forget(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) -> Option<u8> {
        let priority = self.fetches.pending.remove(&(conn, rid))?;
        sessions.forget_holder(conn, rid, Holder::Fetch);
        if let Some(c) = self.fetches.per_session.get_mut(&conn) {
            *c = c.saturating_sub(1);
        }
        Some(priority)
    }

    /// FETCH_CANCEL (draft-16) or a cancelled request stream (draft-22) before the answer:
    /// the answer is dropped when it comes.
    pub(super) fn fetch_cancel(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        self.fetch_forget(sessions, conn, rid);
    }

    /// A pending FETCH fails with REQUEST_ERROR `code` (a fill stream is opened and reset).
    pub(super) fn fetch_fail(
        &mut self,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        fill: bool,
        code: RequestErrorCode,
        reason: &str,
    ) {
        if self.fetch_forget(sessions, conn, rid).is_none() {
            return;
        }
        if !fill {
            return sessions.answer_error(conn, rid, code, reason, true);
        }
        // draft-22 §3.4.1: a fill failure is a fill fetch stream reset right after its header.
        let Some(s) = sessions.get_mut(conn) else { return };
        if let Ok(stream) = s.open_fetch_stream(rid) {
            unheeded(s.reset_stream(stream, ResetCode::InternalError), "reset");
        }
    }

    pub(super) fn fetch_session_closed(&mut self, conn: ConnId) {
        self.fetches.pending.retain(|(c, _), _| *c != conn);
        self.fetches.per_session.remove(&conn);
    }

    /// The owner's answer to a FETCH of session `conn`.
    pub(super) fn fetch_answer(
        &mut self,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        fill: bool,
        answer: Result<FetchData, (RequestErrorCode, Bytes)>,
    ) {
        let data = match answer {
            Ok(data) => data,
            Err((code, reason)) => {
                return self.fetch_fail(sessions, conn, rid, fill, code, &String::from_utf8_lossy(&reason));
            }
        };
        let Some(priority) = self.fetch_forget(sessions, conn, rid) else {
            return; // cancelled
        };
        let Some(s) = sessions.get_mut(conn) else { return };
        if !fill {
            if let Err(e) = s.fetch_ok(rid, data.end, data.whole_group, data.properties.clone()) {
                debug!(%conn, error = %e, "FETCH_OK not sent");
                return;
            }
        }
        let stream = match s.open_fetch_stream(rid) {
            Ok(id) => id,
            Err(e) => return debug!(%conn, error = %e, "fetch stream not opened"),
        };
        // Among the data streams by subscriber then publisher priority (draft-22 §5.1), not
        // at the urgency of control streams ahead of all live data.
        let publisher = super::fanout::default_publisher_priority(&data.properties);
        unheeded(
            s.set_priority_ordered(stream, data_urgency(priority, publisher), data.descending),
            "priority",
        );
        if let Err(e) = write_items(s, stream, &data) {
            debug!(%conn, error = %e, "fetch stream not written");
            unheeded(s.reset_stream(stream, ResetCode::InternalError), "reset");
            return;
        }
        unheeded(s.finish_data_stream(stream), "finish");
        if !fill {
            unheeded(s.end_request(rid), "end request");
        }
    }
}

/// The fetch stream's items after its header: the unknown range marker, then every object
/// (its header fields, then its payload, shared).
fn write_items(
    s: &mut session::Session,
    stream: StreamId,
    data: &FetchData,
) -> Result<(), session::SessionError> {
    let order = if data.descending { GroupOrder::Descending } else { GroupOrder::Ascending };
    let mut w = s.fetch_writer(order);
    let mut head = Vec::new();
    for piece in &data.pieces {
        let (location, obj) = match piece {
            Piece::Object(location, obj) => (location, obj),
            Piece::Gap(kind, location) => {
                // A draft without Timed-Out ranges writes them as unknown (`FetchWriter`).
                w.encode(&FetchItem::EndOfRange { kind: *kind, location: *location }, &mut head)?;
                continue;
            }
        };
        let item = FetchItem::Object(FetchObject {
            location: *location,
            subgroup_id: obj.subgroup,
            publisher_priority: obj.priority,
            properties: obj.properties.clone(),
            payload_len: obj.payload.len() as u64,
        });
        w.encode(&item, &mut head)?;
        s.send_raw_data(stream, Bytes::from(std::mem::take(&mut head)))?;
        if !obj.payload.is_empty() {
            s.send_raw_data(stream, obj.payload.clone())?;
        }
    }
    if !head.is_empty() {
        s.send_raw_data(stream, Bytes::from(head))?;
    }
    Ok(())
}
