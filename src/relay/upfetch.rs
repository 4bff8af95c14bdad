//! Upstream FETCH (draft-22 §3.2.3), on the publisher's core: when a FETCH asks for objects
//! its track's owner has not cached, the owner asks this core to FETCH that range from the
//! track's publisher. Its objects and range markers go back to the owner one by one; the end
//! of the fetch stream (FIN: complete; a reset, REQUEST_ERROR or the session closing: not)
//! ends it. The owner holds the FETCH's answer until then, or until FILL_TIMEOUT.

use crate::msg::ConnId;
use ahash::HashMap;

use bytes::Bytes;
use tracing::debug;

use super::cache::CachedObject;
use super::msg::{OwnerMsg, Piece, UpFetchMsg, UpFetchStart};
use super::sessions::{Holder, Sessions};
use crate::cx::unheeded;
use crate::cx::Cx;
use session::{DataObject, StreamId};
use wire::model::{Fetch, FetchItem, FetchKind, LocationFilter, Message, Parameters, RequestId, TrackAlias};

/// Upstream FETCHes this core sent.
#[derive(Debug, Default)]
pub(crate) struct UpFetches {
    /// (publisher session, our FETCH's Request ID) → (track, the owner's fetch id).
    by_req: HashMap<(ConnId, RequestId), (TrackAlias, u64)>,
    /// Their fetch streams: (session, stream) → Request ID.
    streams: HashMap<(ConnId, StreamId), RequestId>,
}

impl UpFetches {
    pub(crate) fn len(&self) -> usize {
        self.by_req.len()
    }
}

impl UpFetches {
    /// A message for the upstream fetch role of this core.
    pub(super) fn on_msg(&mut self, cx: &mut Cx, sessions: &mut Sessions, msg: UpFetchMsg) {
        match msg {
            UpFetchMsg::Start(m) => self.start(cx, sessions, m),
            UpFetchMsg::Cancel { id, publisher } => self.cancel(sessions, publisher.conn, id),
        }
    }

    /// The owner's request: FETCH `start..=end` of `track` on `publisher`'s session.
    pub(super) fn start(&mut self, cx: &mut Cx, sessions: &mut Sessions, m: UpFetchStart) {
        let UpFetchStart { alias, id, track, publisher, start, end } = m;
        let conn = publisher.conn;
        let sent = sessions.get_mut(conn).and_then(|s| {
            let rid = s.next_request_id().ok()?;
            // "The rest of group G" (a range that ends where the cache begins, at an object 0)
            // is that group's end, which every draft can say; its last Object ID cannot be
            // written in draft-16's End Location, which is one past it.
            let location_filter = Some(match end.object {
                super::owner::LAST_OBJECT => {
                    LocationFilter::AbsoluteStartGroupEnd { start, end_group: end.group }
                }
                _ => LocationFilter::AbsoluteRange { start, end },
            });
            let params = Parameters { location_filter, ..Parameters::default() };
            let fetch = Fetch { request_id: rid, kind: FetchKind::Standalone { track }, params };
            match s.send(Message::Fetch(fetch)) {
                Ok(()) => Some(rid),
                Err(e) => {
                    debug!(%conn, error = %e, "upstream FETCH not sent");
                    None
                }
            }
        });
        match sent {
            Some(rid) => {
                self.by_req.insert((conn, rid), (alias, id));
                sessions.register(conn, rid, Holder::UpFetch);
            }
            None => self.done(cx, alias, id, false),
        }
    }

    fn done(&mut self, cx: &mut Cx, alias: TrackAlias, id: u64, complete: bool) {
        cx.send(cx.owner_of(alias), OwnerMsg::UpstreamFetchDone { alias, id, complete });
    }

    /// REQUEST_ERROR for upstream FETCH `rid` of session `conn`: nothing comes.
    pub(super) fn refused(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        if let Some((alias, id)) = self.by_req.remove(&(conn, rid)) {
            sessions.forget(conn, rid);
            self.streams.retain(|_, r| *r != rid);
            self.done(cx, alias, id, false);
        }
    }

    /// An item of an upstream fetch stream, on its way to the owner.
    pub(super) fn item(
        &mut self,
        cx: &mut Cx,
        conn: ConnId,
        stream: StreamId,
        rid: RequestId,
        object: DataObject,
        payload: Bytes,
    ) {
        let (DataObject::Fetch(item), Some(&(alias, id))) = (object, self.by_req.get(&(conn, rid))) else {
            return;
        };
        self.streams.insert((conn, stream), rid);
        let piece = match item {
            FetchItem::Object(o) => Piece::Object(
                o.location,
                CachedObject {
                    subgroup: o.subgroup_id,
                    priority: o.publisher_priority,
                    properties: o.properties,
                    payload,
                    expires: None,
                    from: None,
                },
            ),
            FetchItem::EndOfRange { kind, location } => Piece::Gap(kind, location),
        };
        cx.send(cx.owner_of(alias), OwnerMsg::UpstreamFetchItem { alias, id, piece });
    }

    /// The owner gave up on upstream fetch `id` (FILL_TIMEOUT): FETCH_CANCEL (draft-16), or
    /// the request stream cancelled (draft-22).
    pub(super) fn cancel(&mut self, sessions: &mut Sessions, conn: ConnId, id: u64) {
        let Some(rid) =
            self.by_req.iter().find(|((c, _), (_, i))| *c == conn && *i == id).map(|((_, r), _)| *r)
        else {
            return;
        };
        self.by_req.remove(&(conn, rid));
        sessions.forget(conn, rid);
        self.streams.retain(|_, r| *r != rid);
        let Some(s) = sessions.get_mut(conn) else { return };
        // draft-22 sessions send this as the request stream's cancellation.
        unheeded(s.send(Message::FetchCancel(rid)), "FETCH_CANCEL");
    }

    /// The end of a data stream of session `conn`; true when it was an upstream fetch stream.
    pub(super) fn stream_end(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        stream: StreamId,
        reset: Option<u64>,
    ) -> bool {
        let Some(rid) = self.streams.remove(&(conn, stream)) else { return false };
        if let Some((alias, id)) = self.by_req.remove(&(conn, rid)) {
            sessions.forget(conn, rid);
            self.done(cx, alias, id, reset.is_none());
        }
        true
    }

    /// The publisher's session is gone: its upstream fetches end incomplete.
    pub(super) fn session_closed(&mut self, cx: &mut Cx, conn: ConnId) {
        let gone: Vec<(RequestId, (TrackAlias, u64))> =
            self.by_req.iter().filter(|((c, _), _)| *c == conn).map(|((_, r), v)| (*r, *v)).collect();
        for (rid, (alias, id)) in gone {
            self.by_req.remove(&(conn, rid));
            self.done(cx, alias, id, false);
        }
        self.streams.retain(|(c, _), _| *c != conn);
    }
}
