//! Incoming data plane of one session: subgroup and fetch streams parsed incrementally, object
//! datagrams, and the peer's Track Alias table (draft-16 §10 "Data Streams and Datagrams" and
//! "Track Alias"; draft-22 §3.1.3-§3.1.3.1, §6.4.1, §11).
//!
//! - Each peer data stream keeps a `bytes::BytesMut`. The stream header is parsed first, then
//!   object headers; a payload is handed out as a `Bytes` split off that buffer (no copy) once
//!   all of it has arrived. An object header is consumed as soon as it decodes (the readers are
//!   stateful), and its payload is awaited afterwards.
//! - A subgroup stream whose Track Alias is not yet known is *held* (draft-22 §3.1.3.1: "MAY
//!   drop the data or buffer it briefly"): its bytes are kept unparsed until SUBSCRIBE_OK or
//!   PUBLISH names the alias, then released in arrival order. Held streams are bounded in
//!   count and in total bytes; past either limit the stream is dropped with STOP_SENDING.
//! - Datagrams with an unknown alias are dropped and counted (not buffered: a datagram is
//!   droppable by nature, and the spec allows dropping).
//! - An object larger than [`DataLimits::max_object_size`] cannot be delivered whole: the
//!   stream is abandoned with STOP_SENDING (draft-22 EXCESSIVE_LOAD 0x9, §12.5; draft-16 has no
//!   such code and gets CANCELLED 0x1) and [`Event::DataStreamEnd`] reports the code. This is a
//!   local resource limit, not a protocol violation, so the session stays open.
//! - A FIN inside a stream header or an object is a PROTOCOL_VIOLATION (the drafts' "stream
//!   ended inside a message" rule for data streams); bad header bytes close the session with the
//!   codec's code.
//!
//! [`Event::DataStreamEnd`] is emitted once for every subgroup or fetch stream that was
//! surfaced (its alias resolved, or a fetch stream), when it ends by FIN, by the peer's reset,
//! or by our STOP_SENDING. Streams dropped while held, refused by the stream limit, and
//! padding streams end silently.

use ahash::HashMap;
use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use super::error::{SessionCode, SessionError};
use super::streams::{ClosedStreams, StreamId, CLOSED_UNI_WINDOW};
use super::{Event, Transmit};
use wire::model::{
    Datagram, FetchItem, GroupOrder, RequestId, SubgroupHeader, SubgroupObject, TrackAlias, UniStreamHeader,
};
use wire::{DecodeError, FetchReader, SubgroupReader, Version};

/// One object (or fetch End of Range) from a data stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataObject {
    /// An object on a subgroup stream, with the stream's header.
    Subgroup {
        /// The stream's header.
        header: SubgroupHeader,
        /// The object.
        object: SubgroupObject,
    },
    /// An item on a fetch stream (an End of Range has an empty payload).
    Fetch(FetchItem),
}

/// The data-plane limits (part of [`SessionConfig`](super::SessionConfig)).
#[derive(Debug, Clone, Copy)]
pub struct DataLimits {
    /// Largest object payload buffered whole; larger objects abandon their stream.
    pub max_object_size: usize,
    /// Peer data streams buffered at once; further new streams get STOP_SENDING.
    pub max_data_streams: usize,
    /// Subgroup streams held for an unknown Track Alias.
    pub max_held_streams: usize,
    /// Total bytes of held streams.
    pub max_held_bytes: usize,
    /// Total bytes buffered across all data streams (held ones included); the stream whose
    /// bytes cross it is abandoned. Should be at least `max_object_size`.
    pub max_buffered_bytes: usize,
}

impl Default for DataLimits {
    fn default() -> Self {
        DataLimits {
            max_object_size: 8 << 20,
            max_data_streams: 256,
            max_held_streams: 16,
            max_held_bytes: 1 << 20,
            max_buffered_bytes: 32 << 20,
        }
    }
}

/// Room for object headers (properties) on top of the largest payload.
const HEADER_SLACK: usize = 65_536;

#[derive(Debug)]
enum Reader {
    Subgroup(SubgroupHeader, SubgroupReader),
    Fetch(FetchReader),
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the stream type and header.
    Header,
    /// A subgroup stream whose alias is unknown: bytes are kept unparsed.
    Held { header: SubgroupHeader },
    /// Objects flow; `pending` is a decoded object header awaiting its payload.
    Objects { request_id: RequestId, reader: Reader, pending: Option<(DataObject, usize)> },
    /// draft-22 padding stream: discard everything.
    Padding,
}

#[derive(Debug)]
struct DataStream {
    buf: BytesMut,
    phase: Phase,
    fin: bool,
    /// `buf.len()` as last counted into [`DataState::buffered`].
    counted: usize,
}

/// The incoming data plane and alias table of one session (see the module header).
#[derive(Debug)]
pub(crate) struct DataState {
    version: Version,
    limits: DataLimits,
    streams: HashMap<StreamId, DataStream>,
    /// Peer unidirectional streams finished with; late bytes on them are ignored.
    closed: ClosedStreams,
    aliases: HashMap<TrackAlias, RequestId>,
    /// The track a peer's PUBLISH named for its alias: a later PUBLISH of the same track with
    /// the same alias takes the alias over (a publisher switching over on one session) rather
    /// than being DUPLICATE_TRACK_ALIAS, which is for a different track.
    alias_tracks: HashMap<TrackAlias, wire::model::FullTrackName>,
    alias_of: HashMap<RequestId, TrackAlias>,
    /// Held streams in arrival order.
    held: Vec<StreamId>,
    held_bytes: usize,
    /// Sum of the `counted` bytes of all streams.
    buffered: usize,
    dropped_datagrams: u64,
    /// Group Order of our FETCH requests (draft-22 fetch streams carry Group ID deltas).
    fetch_orders: HashMap<RequestId, GroupOrder>,
    /// Requests ended by PUBLISH_DONE whose alias still resolves late-opening streams
    /// (draft-22 §9.9: PUBLISH_DONE usually overtakes them), oldest first, at most
    /// [`DRAINING_ALIASES`]; a new request may take such an alias over.
    draining: VecDeque<RequestId>,
}

/// Aliases kept for requests that ended with PUBLISH_DONE.
const DRAINING_ALIASES: usize = 64;

/// Where processing writes its output.
pub(crate) struct Out<'a> {
    pub events: &'a mut VecDeque<Event>,
    pub transmits: &'a mut VecDeque<Transmit>,
}

impl DataState {
    /// `first_peer_uni` is the first unidirectional stream id the peer opens.
    pub(crate) fn new(version: Version, limits: DataLimits, first_peer_uni: StreamId) -> Self {
        DataState {
            version,
            limits,
            streams: HashMap::default(),
            closed: ClosedStreams::new(first_peer_uni, CLOSED_UNI_WINDOW),
            aliases: HashMap::default(),
            alias_tracks: HashMap::default(),
            alias_of: HashMap::default(),
            held: Vec::new(),
            held_bytes: 0,
            buffered: 0,
            dropped_datagrams: 0,
            fetch_orders: HashMap::default(),
            draining: VecDeque::new(),
        }
    }

    /// Datagrams dropped for an unknown Track Alias.
    pub(crate) fn dropped_datagrams(&self) -> u64 {
        self.dropped_datagrams
    }

    /// Bytes buffered, data streams open, and closed stream ids remembered.
    pub(crate) fn usage(&self) -> (usize, usize, usize) {
        (self.buffered, self.streams.len(), self.closed.tracked())
    }

    /// True when `id` is a data stream this state owns or has finished with.
    pub(crate) fn owns(&self, id: StreamId) -> bool {
        self.streams.contains_key(&id) || self.closed.contains(id)
    }

    /// Peer unidirectional stream `id` is not (or no longer) a data stream: late bytes on it
    /// are ignored, and the closed-stream watermark can pass it.
    pub(crate) fn retire(&mut self, id: StreamId) {
        self.forget(id);
    }

    fn forget(&mut self, id: StreamId) {
        if let Some(st) = self.remove_stream(id) {
            self.forget_held(id, &st);
        }
        self.closed.insert(id);
    }

    /// The request a Track Alias belongs to.
    pub(crate) fn request_of(&self, alias: TrackAlias) -> Option<RequestId> {
        self.aliases.get(&alias).copied()
    }

    /// STOP_SENDING code for a stream we abandon for a local limit.
    fn overload_code(&self) -> u64 {
        overload_code(self.version)
    }

    /// Records that our FETCH `rid` asked for `order` (needed to read draft-22 fetch streams).
    pub(crate) fn set_fetch_order(&mut self, rid: RequestId, order: GroupOrder) {
        if self.fetch_orders.len() < 4096 {
            self.fetch_orders.insert(rid, order);
        }
    }

    /// SUBSCRIBE_OK or PUBLISH from the peer maps `alias` to `rid` (draft-22 §3.1.3, draft-16
    /// "Track Alias"): an alias in use by another request is DUPLICATE_TRACK_ALIAS. Held
    /// streams with this alias are released.
    /// `track`: the track of a PUBLISH (`None` for SUBSCRIBE_OK).
    pub(crate) fn add_alias(
        &mut self,
        alias: TrackAlias,
        rid: RequestId,
        track: Option<&wire::model::FullTrackName>,
        out: &mut Out<'_>,
    ) -> Result<(), SessionError> {
        let same_track = track.is_some_and(|t| self.alias_tracks.get(&alias) == Some(t));
        match self.aliases.get(&alias) {
            Some(r) if *r != rid && (self.draining.contains(r) || same_track) => {
                let old = *r;
                self.remove_request(old);
            }
            Some(r) if *r != rid => {
                return Err(SessionError::protocol(
                    SessionCode::DuplicateTrackAlias,
                    format!("Track Alias {} already used by request {}", alias.0, r.0),
                ))
            }
            _ => {}
        }
        if let Some(old) = self.alias_of.insert(rid, alias) {
            self.aliases.remove(&old);
            self.alias_tracks.remove(&old);
        }
        self.aliases.insert(alias, rid);
        if let Some(t) = track {
            self.alias_tracks.insert(alias, t.clone());
        }
        let ready: Vec<StreamId> = self
            .held
            .iter()
            .copied()
            .filter(|id| matches!(self.streams.get(id), Some(DataStream { phase: Phase::Held { header }, .. }) if header.track_alias == alias))
            .collect();
        for id in ready {
            self.held.retain(|&s| s != id);
            if let Some(st) = self.streams.get_mut(&id) {
                self.held_bytes = self.held_bytes.saturating_sub(st.buf.len());
                if let Phase::Held { header } = st.phase {
                    st.phase = Phase::Objects {
                        request_id: rid,
                        reader: subgroup_reader(self.version, header),
                        pending: None,
                    };
                }
            }
            self.process(id, out)?;
            self.recount(id);
        }
        Ok(())
    }

    /// Request `rid` ended with PUBLISH_DONE: its alias keeps resolving streams that open
    /// late, until [`DRAINING_ALIASES`] newer ones ended or another request takes it.
    pub(crate) fn finish_request(&mut self, rid: RequestId) {
        if !self.alias_of.contains_key(&rid) || self.draining.contains(&rid) {
            return;
        }
        self.draining.push_back(rid);
        if self.draining.len() > DRAINING_ALIASES {
            if let Some(old) = self.draining.pop_front() {
                self.remove_request(old);
            }
        }
    }

    /// Request `rid` ended: its alias is forgotten.
    pub(crate) fn remove_request(&mut self, rid: RequestId) {
        self.draining.retain(|r| *r != rid);
        if let Some(alias) = self.alias_of.remove(&rid) {
            self.aliases.remove(&alias);
            self.alias_tracks.remove(&alias);
        }
        self.fetch_orders.remove(&rid);
    }

    /// Bytes on peer data stream `id`.
    pub(crate) fn on_data(
        &mut self,
        id: StreamId,
        data: &[u8],
        fin: bool,
        out: &mut Out<'_>,
    ) -> Result<(), SessionError> {
        if !self.streams.contains_key(&id) {
            if self.closed.contains(id) {
                return Ok(());
            }
            if data.is_empty() && fin {
                self.closed.insert(id);
                return Ok(());
            }
            if self.streams.len() >= self.limits.max_data_streams {
                out.transmits.push_back(Transmit::StopSending { id, code: self.overload_code() });
                self.closed.insert(id);
                return Ok(());
            }
            self.streams.insert(
                id,
                DataStream { buf: BytesMut::new(), phase: Phase::Header, fin: false, counted: 0 },
            );
        }
        let Some(st) = self.streams.get_mut(&id) else { return Ok(()) };
        st.fin |= fin;
        match st.phase {
            Phase::Padding => {}
            Phase::Held { .. } => {
                if self.held_bytes.saturating_add(data.len()) > self.limits.max_held_bytes {
                    self.abandon(id, false, out);
                    return Ok(());
                }
                self.held_bytes += data.len();
                st.buf.extend_from_slice(data);
            }
            _ => st.buf.extend_from_slice(data),
        }
        self.recount(id);
        if self.buffered > self.limits.max_buffered_bytes {
            self.abandon(id, true, out);
            return Ok(());
        }
        self.process(id, out)?;
        self.recount(id);
        Ok(())
    }

    /// The peer reset data stream `id`; false when it is not one of ours.
    pub(crate) fn on_reset(&mut self, id: StreamId, code: u64, out: &mut Out<'_>) -> bool {
        let Some(st) = self.remove_stream(id) else { return self.closed.contains(id) };
        self.closed.insert(id);
        self.forget_held(id, &st);
        if matches!(st.phase, Phase::Objects { .. }) {
            out.events.push_back(Event::DataStreamEnd { stream: id, reset: Some(code) });
        }
        true
    }

    fn remove_stream(&mut self, id: StreamId) -> Option<DataStream> {
        let st = self.streams.remove(&id)?;
        self.buffered = self.buffered.saturating_sub(st.counted);
        Some(st)
    }

    /// Brings [`DataState::buffered`] up to date with stream `id`'s buffer.
    fn recount(&mut self, id: StreamId) {
        if let Some(st) = self.streams.get_mut(&id) {
            self.buffered = self.buffered.saturating_sub(st.counted).saturating_add(st.buf.len());
            st.counted = st.buf.len();
        }
    }

    fn forget_held(&mut self, id: StreamId, st: &DataStream) {
        if matches!(st.phase, Phase::Held { .. }) {
            self.held.retain(|&s| s != id);
            self.held_bytes = self.held_bytes.saturating_sub(st.buf.len());
        }
    }

    /// Drops stream `id` with STOP_SENDING (a local limit); surfaced streams report it.
    fn abandon(&mut self, id: StreamId, report: bool, out: &mut Out<'_>) {
        let code = self.overload_code();
        if let Some(st) = self.remove_stream(id) {
            self.forget_held(id, &st);
            if !st.fin {
                out.transmits.push_back(Transmit::StopSending { id, code });
            }
            if report && matches!(st.phase, Phase::Objects { .. }) {
                out.events.push_back(Event::DataStreamEnd { stream: id, reset: Some(code) });
            }
        }
        self.closed.insert(id);
    }

    fn finish(&mut self, id: StreamId, out: &mut Out<'_>) {
        if let Some(st) = self.remove_stream(id) {
            if matches!(st.phase, Phase::Objects { .. }) {
                out.events.push_back(Event::DataStreamEnd { stream: id, reset: None });
            }
        }
        self.closed.insert(id);
    }

    /// Parses as far as the buffered bytes allow.
    fn process(&mut self, id: StreamId, out: &mut Out<'_>) -> Result<(), SessionError> {
        loop {
            let Some(st) = self.streams.get_mut(&id) else { return Ok(()) };
            if matches!(st.phase, Phase::Header) {
                if !self.read_header(id, out)? {
                    return Ok(());
                }
                continue;
            }
            match &mut st.phase {
                // Read above.
                Phase::Header => return Ok(()),
                // Kept unparsed (FIN included) until the alias is known.
                Phase::Held { .. } => return Ok(()),
                Phase::Padding => {
                    st.buf.clear();
                    if st.fin {
                        self.remove_stream(id);
                        self.closed.insert(id);
                    }
                    return Ok(());
                }
                Phase::Objects { request_id, reader, pending } => {
                    if let Some((_, len)) = pending {
                        if st.buf.len() < *len {
                            if st.fin {
                                return Err(SessionError::violation("data stream ended inside an object"));
                            }
                            return Ok(());
                        }
                        let Some((object, len)) = pending.take() else { return Ok(()) };
                        let payload = st.buf.split_to(len).freeze();
                        out.events.push_back(Event::Object {
                            stream: id,
                            request_id: *request_id,
                            object,
                            payload,
                        });
                        continue;
                    }
                    if st.buf.is_empty() {
                        if st.fin {
                            self.finish(id, out);
                        }
                        return Ok(());
                    }
                    let r = match reader {
                        Reader::Subgroup(h, r) => r.decode(&st.buf).map(|(o, n)| (sub_object(h, o), n)),
                        Reader::Fetch(r) => r.decode(&st.buf).map(|(o, n)| (DataObject::Fetch(o), n)),
                    };
                    match r {
                        Ok((object, n)) => {
                            st.buf.advance(n);
                            let len = payload_len(&object);
                            if len > self.limits.max_object_size as u64 {
                                self.abandon(id, true, out);
                                return Ok(());
                            }
                            // Bounded by max_object_size above.
                            *pending = Some((object, len as usize));
                        }
                        Err(DecodeError::NeedMore) => {
                            if st.fin {
                                return Err(SessionError::violation(
                                    "data stream ended inside an object header",
                                ));
                            }
                            if st.buf.len() > HEADER_SLACK {
                                // Properties beyond what we buffer: a local limit.
                                self.abandon(id, true, out);
                            }
                            return Ok(());
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
    }

    /// A data stream's header: the request its objects belong to (a subgroup's Track Alias, a
    /// fetch's Request ID); a subgroup whose alias is not known yet is held (within limits).
    /// `Ok(false)`: nothing more to read now (more bytes needed, held or abandoned).
    fn read_header(&mut self, id: StreamId, out: &mut Out<'_>) -> Result<bool, SessionError> {
        let Some(st) = self.streams.get_mut(&id) else { return Ok(false) };
        let r = self.version.decode_uni_stream_header(&st.buf);
        let (header, n) = match r {
            Ok(v) => v,
            Err(DecodeError::NeedMore) => {
                if st.fin {
                    return Err(SessionError::violation("data stream ended inside its header"));
                }
                if st.buf.len() > HEADER_SLACK {
                    return Err(SessionError::violation("data stream header too long"));
                }
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        st.buf.advance(n);
        match header {
            UniStreamHeader::Subgroup(h) => match self.aliases.get(&h.track_alias) {
                Some(&rid) => {
                    st.phase = Phase::Objects {
                        request_id: rid,
                        reader: subgroup_reader(self.version, h),
                        pending: None,
                    };
                }
                None => {
                    let len = st.buf.len();
                    if self.held.len() >= self.limits.max_held_streams
                        || self.held_bytes.saturating_add(len) > self.limits.max_held_bytes
                    {
                        // Still in the Header phase: nothing held to undo.
                        self.abandon(id, false, out);
                        return Ok(false);
                    }
                    st.phase = Phase::Held { header: h };
                    self.held.push(id);
                    self.held_bytes += len;
                    return Ok(false);
                }
            },
            UniStreamHeader::Fetch { request_id } => {
                let order = self.fetch_orders.get(&request_id).copied().unwrap_or(GroupOrder::Ascending);
                st.phase = Phase::Objects {
                    request_id,
                    reader: Reader::Fetch(self.version.fetch_reader(order)),
                    pending: None,
                };
            }
            UniStreamHeader::Padding => st.phase = Phase::Padding,
            UniStreamHeader::Control => {
                return Err(SessionError::violation("a control stream type on a data stream"))
            }
        }
        Ok(true)
    }

    /// A datagram from the peer (draft-16 §10.3.1, draft-22 §11.2.1, §11.5.2). A truncated
    /// datagram is a PROTOCOL_VIOLATION (a datagram is always whole).
    pub(crate) fn on_datagram(&mut self, data: Bytes, out: &mut Out<'_>) -> Result<(), SessionError> {
        let r = self.version.decode_datagram(&data);
        let (header, offset) = match r {
            Ok(Datagram::Object { header, payload_offset }) => (header, payload_offset),
            Ok(Datagram::Padding) => return Ok(()),
            Err(DecodeError::NeedMore) => return Err(SessionError::violation("truncated datagram")),
            Err(e) => return Err(e.into()),
        };
        let Some(&request_id) = self.aliases.get(&header.track_alias) else {
            self.dropped_datagrams = self.dropped_datagrams.saturating_add(1);
            return Ok(());
        };
        let payload = data.slice(offset.min(data.len())..);
        out.events.push_back(Event::Datagram { request_id, header, payload });
        Ok(())
    }
}

/// The stream reset / STOP_SENDING code for a stream dropped for a local limit: EXCESSIVE_LOAD
/// (draft-18 §3.3.3, draft-22 §12.5); draft-14 (§13.1.8) and draft-16 have no such code and
/// get CANCELLED.
pub(crate) fn overload_code(version: Version) -> u64 {
    match version {
        Version::Draft14 | Version::Draft16 => 0x1,
        Version::Draft18 | Version::Draft20 | Version::Draft22 => 0x9,
    }
}

fn sub_object(header: &SubgroupHeader, object: SubgroupObject) -> DataObject {
    DataObject::Subgroup { header: *header, object }
}

fn subgroup_reader(version: Version, h: SubgroupHeader) -> Reader {
    Reader::Subgroup(h, version.subgroup_reader(&h))
}

fn payload_len(o: &DataObject) -> u64 {
    match o {
        DataObject::Subgroup { object, .. } => object.payload_len,
        DataObject::Fetch(FetchItem::Object(f)) => f.payload_len,
        DataObject::Fetch(FetchItem::EndOfRange { .. }) => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use wire::model::{SubgroupId, SubgroupObject};

    fn stream_bytes(alias: u64, payload: &[u8]) -> Vec<u8> {
        let h = SubgroupHeader {
            track_alias: TrackAlias(alias),
            group_id: 1,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: None,
            has_properties: false,
            end_of_group: false,
            first_object: false,
        };
        let mut out = Vec::new();
        Version::Draft22.encode_subgroup_header(&h, &mut out).unwrap();
        let obj = SubgroupObject { object_id: 0, payload_len: payload.len() as u64, ..Default::default() };
        Version::Draft22.subgroup_writer(&h).encode(&obj, &mut out).unwrap();
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn accounting_returns_to_zero() {
        let mut d = DataState::new(Version::Draft22, DataLimits::default(), StreamId(2));
        let (mut ev, mut tx) = (VecDeque::new(), VecDeque::new());
        let mut out = Out { events: &mut ev, transmits: &mut tx };
        let a = stream_bytes(1, b"hello");
        // Stream 6: alias known; stream 10: held, then released; stream 14: reset while held.
        d.add_alias(TrackAlias(1), RequestId(0), None, &mut out).unwrap();
        d.on_data(StreamId(6), &a[..4], false, &mut out).unwrap();
        assert!(d.buffered > 0);
        d.on_data(StreamId(6), &a[4..], true, &mut out).unwrap();
        let b = stream_bytes(2, b"world");
        d.on_data(StreamId(10), &b, true, &mut out).unwrap();
        d.on_data(StreamId(14), &b[..6], false, &mut out).unwrap();
        assert_eq!(d.held.len(), 2);
        assert!(d.held_bytes > 0);
        assert!(d.on_reset(StreamId(14), 0, &mut out));
        d.add_alias(TrackAlias(2), RequestId(2), None, &mut out).unwrap();
        assert_eq!((d.buffered, d.held_bytes, d.held.len(), d.streams.len()), (0, 0, 0, 0));
        let objects = ev.iter().filter(|e| matches!(e, Event::Object { .. })).count();
        let ends = ev.iter().filter(|e| matches!(e, Event::DataStreamEnd { reset: None, .. })).count();
        assert_eq!((objects, ends), (2, 2));
        // Finished streams stay known, so late bytes on them are ignored.
        assert!(d.owns(StreamId(6)) && d.owns(StreamId(10)) && d.owns(StreamId(14)) && !d.owns(StreamId(18)));
    }
}
