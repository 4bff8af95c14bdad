//! The sending half of the data plane: subgroup streams and object datagrams (draft-14 §10.3.1,
//! §10.4.2; draft-16 §10.3.1,
//! §10.4.2; draft-18 §11.3.1, §11.4.2; draft-22 §11.2.1, §11.3.1). Each subgroup stream is a
//! new local unidirectional stream (client 2, 6, 10..., server 3, 7, 11...; draft-18 and
//! draft-22 skip our control stream). Object
//! headers are encoded here, cut from a shared block rather than allocated one by one;
//! payloads travel as the caller's `Bytes`, never copied.

use std::time::Instant;

use ahash::HashMap;

use bytes::{Bytes, BytesMut};

use super::Session;
use crate::error::SessionError;
use crate::StreamId;
use crate::Transmit;
use wire::model::{DatagramHeader, RequestId, SubgroupHeader, SubgroupObject};
use wire::{EncodeError, SubgroupWriter, Version};

/// The Publisher Priority draft-14 writes where the caller's header inherits the track's
/// (draft-14 has no default priority bit and no track-level publisher priority): 128, the
/// middle of the range, as the later drafts' default.
pub(super) const DRAFT14_PUBLISHER_PRIORITY: u8 = 128;

#[derive(Debug)]
enum Writer {
    Subgroup(SubgroupWriter),
    /// A fetch stream: objects are written by the caller with the fetch writers.
    Fetch,
}

/// Our open data streams.
#[derive(Debug)]
pub(crate) struct DataOut {
    next_uni: StreamId,
    streams: HashMap<StreamId, Writer>,
    /// Object headers (a few bytes each, one per object per subscriber) are cut from this
    /// shared block, [`HEADER_BLOCK`] bytes at a time, rather than allocated one by one.
    headers: BytesMut,
    /// Where a header is encoded before it joins the block (reused).
    scratch: Vec<u8>,
}

/// Bytes allocated at once for object headers: a few hundred headers. A block lives until
/// the last header cut from it is sent, so it stays small.
const HEADER_BLOCK: usize = 2048;

impl DataOut {
    /// `first_uni` is the first local unidirectional stream id free for data.
    pub(crate) fn new(first_uni: StreamId) -> Self {
        DataOut {
            next_uni: first_uni,
            streams: HashMap::default(),
            headers: BytesMut::new(),
            scratch: Vec::new(),
        }
    }

    /// Encodes object `object`'s header for subgroup stream `stream`.
    fn object_header(&mut self, stream: StreamId, object: &SubgroupObject) -> Result<Bytes, SessionError> {
        self.scratch.clear();
        match self.streams.get_mut(&stream) {
            Some(Writer::Subgroup(w)) => w.encode(object, &mut self.scratch)?,
            Some(Writer::Fetch) => return Err(SessionError::Misrouted("subgroup object on a fetch stream")),
            None => return Err(SessionError::UnknownStream(stream)),
        }
        if self.headers.capacity() < self.scratch.len() {
            self.headers.reserve(HEADER_BLOCK.max(self.scratch.len()));
        }
        self.headers.extend_from_slice(&self.scratch);
        Ok(self.headers.split().freeze())
    }

    fn open(&mut self, w: Writer) -> StreamId {
        let id = self.next_uni;
        self.next_uni = self.next_uni.next();
        self.streams.insert(id, w);
        id
    }
}

impl Session {
    fn check_open(&self) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if !self.setup.ready {
            return Err(SessionError::NotReady);
        }
        Ok(())
    }

    /// Opens a subgroup stream and queues its SUBGROUP_HEADER; returns the stream id.
    pub fn open_subgroup(&mut self, header: &SubgroupHeader) -> Result<StreamId, SessionError> {
        self.check_open()?;
        let header = &self.explicit_subgroup(header);
        let mut out = Vec::new();
        self.version.encode_subgroup_header(header, &mut out)?;
        let id = self.data_out.open(Writer::Subgroup(self.version.subgroup_writer(header)));
        self.transmits.push_back(Transmit::Stream { id, data: out.into(), fin: false, expires: None });
        Ok(id)
    }

    /// Opens a fetch stream for request `request_id` and queues its FETCH_HEADER; the caller
    /// writes the items with the draft's `FetchWriter` and [`Session::send_raw_data`].
    pub fn open_fetch_stream(&mut self, request_id: RequestId) -> Result<StreamId, SessionError> {
        self.check_open()?;
        let mut out = Vec::new();
        self.codec.fetch_version().encode_fetch_header(request_id, &mut out)?;
        let id = self.data_out.open(Writer::Fetch);
        self.transmits.push_back(Transmit::Stream { id, data: out.into(), fin: false, expires: None });
        Ok(id)
    }

    /// Queues one object on subgroup stream `stream`: its header, then `payload` (uncopied).
    /// `payload.len()` must equal `object.payload_len`.
    pub fn send_object(
        &mut self,
        stream: StreamId,
        object: &SubgroupObject,
        payload: Bytes,
    ) -> Result<(), SessionError> {
        self.send_object_until(stream, object, payload, None)
    }

    /// [`Session::send_object`] under an object delivery timeout: if its bytes are not handed
    /// to the transport by `expires`, the stream is reset with DELIVERY_TIMEOUT instead.
    pub fn send_object_until(
        &mut self,
        stream: StreamId,
        object: &SubgroupObject,
        payload: Bytes,
        expires: Option<Instant>,
    ) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if payload.len() as u64 != object.payload_len {
            return Err(EncodeError::OutOfRange("payload length differs from payload_len").into());
        }
        let header = self.data_out.object_header(stream, object)?;
        self.transmits.push_back(Transmit::Stream { id: stream, data: header, fin: false, expires });
        if !payload.is_empty() {
            self.transmits.push_back(Transmit::Stream { id: stream, data: payload, fin: false, expires });
        }
        Ok(())
    }

    /// Queues bytes already encoded by the caller (fetch stream items and their payloads).
    pub fn send_raw_data(&mut self, stream: StreamId, data: Bytes) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if !self.data_out.streams.contains_key(&stream) {
            return Err(SessionError::UnknownStream(stream));
        }
        self.transmits.push_back(Transmit::Stream { id: stream, data, fin: false, expires: None });
        Ok(())
    }

    /// Sets the send urgency of our data stream `stream` (see [`crate::data_urgency`]).
    pub fn set_priority(&mut self, stream: StreamId, urgency: u8) -> Result<(), SessionError> {
        self.set_priority_ordered(stream, urgency, false)
    }

    /// [`Session::set_priority`]; `descending`: among equals, newer streams go first (the
    /// subscription asked for descending group order).
    pub fn set_priority_ordered(
        &mut self,
        stream: StreamId,
        urgency: u8,
        descending: bool,
    ) -> Result<(), SessionError> {
        if !self.data_out.streams.contains_key(&stream) {
            return Err(SessionError::UnknownStream(stream));
        }
        self.transmits.push_back(Transmit::Priority { id: stream, urgency, descending });
        Ok(())
    }

    /// Ends data stream `stream` with FIN.
    pub fn finish_data_stream(&mut self, stream: StreamId) -> Result<(), SessionError> {
        self.finish_data_stream_by(stream, None)
    }

    /// Ends data stream `stream` with FIN; with `deliver_by` (a subgroup delivery timeout),
    /// the stream is reset with DELIVERY_TIMEOUT if not fully delivered by then.
    pub fn finish_data_stream_by(
        &mut self,
        stream: StreamId,
        deliver_by: Option<Instant>,
    ) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        self.data_out.streams.remove(&stream).ok_or(SessionError::UnknownStream(stream))?;
        self.transmits.push_back(Transmit::Stream {
            id: stream,
            data: Bytes::new(),
            fin: true,
            expires: None,
        });
        if let Some(at) = deliver_by {
            self.transmits.push_back(Transmit::DeliverBy { id: stream, at });
        }
        Ok(())
    }

    /// Resets data stream `stream` with a stream reset code (draft-22 §12.5).
    pub fn reset_data_stream(&mut self, stream: StreamId, code: u64) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        self.data_out.streams.remove(&stream).ok_or(SessionError::UnknownStream(stream))?;
        self.transmits.push_back(Transmit::Reset { id: stream, code });
        Ok(())
    }

    /// Queues an OBJECT_DATAGRAM (one contiguous datagram: header and payload), with the
    /// urgency of its publisher priority.
    pub fn send_datagram(&mut self, header: &DatagramHeader, payload: &[u8]) -> Result<(), SessionError> {
        let urgency = crate::data_urgency(128, header.publisher_priority.unwrap_or(128));
        self.send_datagram_with_urgency(header, payload, urgency)
    }

    /// [`Session::send_datagram`] with this urgency ([`crate::data_urgency`] of the
    /// subscription's priority and the publisher's).
    pub fn send_datagram_with_urgency(
        &mut self,
        header: &DatagramHeader,
        payload: &[u8],
        urgency: u8,
    ) -> Result<(), SessionError> {
        self.check_open()?;
        let mut out = Vec::with_capacity(payload.len() + 32);
        if self.version == Version::Draft14 && header.publisher_priority.is_none() {
            // draft-14 §10.3.1: the datagram always carries its Publisher Priority.
            let h = DatagramHeader { publisher_priority: Some(DRAFT14_PUBLISHER_PRIORITY), ..header.clone() };
            self.version.encode_datagram(&h, payload, &mut out)?;
        } else {
            self.version.encode_datagram(header, payload, &mut out)?;
        }
        self.transmits.push_back(Transmit::Datagram { data: out.into(), urgency });
        Ok(())
    }

    /// `header` as this draft writes it: draft-14 (§10.4.2) has no default priority bit, so an
    /// inherited publisher priority is written as [`DRAFT14_PUBLISHER_PRIORITY`], and no
    /// FIRST_OBJECT bit.
    fn explicit_subgroup(&self, header: &SubgroupHeader) -> SubgroupHeader {
        let mut h = *header;
        if self.version == Version::Draft14 {
            h.publisher_priority.get_or_insert(DRAFT14_PUBLISHER_PRIORITY);
            h.first_object = false;
        }
        h
    }

    /// The peer sent STOP_SENDING on one of our data streams: it is reset and forgotten.
    /// True when `stream` was one.
    pub(super) fn data_stop_sending(&mut self, stream: StreamId, code: u64) -> bool {
        if self.data_out.streams.remove(&stream).is_none() {
            return false;
        }
        self.transmits.push_back(Transmit::Reset { id: stream, code });
        true
    }
}
