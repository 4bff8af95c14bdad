//! PUBLISH_DONE after the data ([`Transmit::Hold`](session::Transmit::Hold)): writes
//! to a stream held back until the data streams they count are delivered or reset, or until a
//! deadline (ARCHITECTURE.md, "Aggregation and state").

use std::time::Instant;

use super::{Chunk, Pump};
use runtime::Transport;
use session::StreamId;

/// Writes to stream `id` that wait until `streams` are delivered or reset, or `until`.
#[derive(Debug)]
pub(super) struct Hold {
    pub(super) id: StreamId,
    pub(super) streams: Vec<StreamId>,
    pub(super) until: Instant,
    pub(super) chunks: Vec<Chunk>,
}

impl Pump {
    /// Queues the writes of each hold whose streams are all delivered (nothing of them queued
    /// here, and gone from quiche: fully acknowledged, or reset and acknowledged), or whose
    /// time is up. Looked at on each write: the ACK that completes the streams makes one.
    pub(super) fn release_holds<C: Transport>(&mut self, conn: &mut C, now: Instant) {
        let mut i = 0;
        while i < self.holds.len() {
            let h = &self.holds[i];
            let behind = self.holds[..i].iter().any(|e| e.id == h.id);
            let delivered = |p: &Self, conn: &mut C, s: StreamId| {
                !p.pending.contains_key(&p.key(s))
                    && p.quic_id(s).is_none_or(|q| conn.stream_capacity(q).is_err())
            };
            if behind || (now < h.until && !h.streams.iter().all(|&s| delivered(self, conn, s))) {
                i += 1;
                continue;
            }
            let h = self.holds.remove(i);
            for chunk in h.chunks {
                self.queue_chunk(h.id, chunk);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::{pair, subscribe_live};
    use super::*;
    use bytes::Bytes;
    use runtime::testing::exchange;
    use runtime::QuicConnection;
    use session::Session;
    use std::time::Duration;
    use wire::model::{ObjectStatus, Properties, SubgroupHeader, SubgroupId, SubgroupObject, TrackAlias};
    use wire::Version;

    /// A PUBLISH_DONE written with `publish_done_after` waits for the subgroup stream it counts:
    /// the server's first flight carries the stream and not the message; the write after the
    /// client's ACK sends it. Toward a client that does not acknowledge, it goes at the
    /// deadline. Every draft (draft-16 and draft-18 hold the control stream, draft-22 the
    /// subscription's request stream).
    #[test]
    fn publish_done_waits_until_its_streams_are_acknowledged() {
        use session::Event;
        use wire::model::{Message, SubscribeOk};
        use wire::DoneStatus;
        /// Moves the server's packets to the client only.
        fn flight(s: &mut QuicConnection, c: &mut QuicConnection) {
            let mut buf = vec![0u8; 65_535];
            let (from, to) =
                (s.path_stats().next().unwrap().local_addr, c.path_stats().next().unwrap().local_addr);
            while let Ok((len, _)) = s.send(&mut buf) {
                let _ = c.recv(&mut buf[..len], quiche::RecvInfo { from, to });
            }
        }
        fn done_seen(cp: &mut Pump, c: &mut QuicConnection, cs: &mut Session) -> (bool, bool) {
            let mut buf = vec![0u8; 65_536];
            cp.read(c, cs, &mut buf);
            let (mut object, mut done) = (false, false);
            while let Some(e) = cs.poll_event() {
                match e {
                    Event::Object { .. } => object = true,
                    Event::Message(Message::PublishDone(_)) => done = true,
                    _ => {}
                }
            }
            (object, done)
        }
        for version in [Version::Draft16, Version::Draft18, Version::Draft22] {
            for acknowledged in [true, false] {
                let ctx = format!("{version:?} acknowledged {acknowledged}");
                let (mut c, mut s, mut cs, mut ss, mut cp, mut sp) = pair(version, Pump::default());
                let mut buf = vec![0u8; 65_536];
                let now = Instant::now();
                let rid = subscribe_live(&mut cs);
                cp.write(&mut c, &mut cs, now);
                exchange(&mut c, &mut s);
                sp.read(&mut s, &mut ss, &mut buf);
                while ss.poll_event().is_some() {}
                let ok = SubscribeOk { request_id: rid, track_alias: TrackAlias(1), ..Default::default() };
                ss.send(Message::SubscribeOk(ok)).unwrap();
                sp.write(&mut s, &mut ss, now);
                exchange(&mut c, &mut s);
                assert_eq!(done_seen(&mut cp, &mut c, &mut cs), (false, false), "{ctx}");

                let header = SubgroupHeader {
                    track_alias: TrackAlias(1),
                    group_id: 0,
                    subgroup_id: SubgroupId::Explicit(0),
                    publisher_priority: Some(1),
                    has_properties: true,
                    end_of_group: false,
                    first_object: false,
                };
                let st = ss.open_subgroup(&header).unwrap();
                let object = SubgroupObject {
                    object_id: 0,
                    properties: Properties::new(),
                    payload_len: 3,
                    status: ObjectStatus::Normal,
                };
                ss.send_object(st, &object, Bytes::from_static(b"abc")).unwrap();
                ss.finish_data_stream(st).unwrap();
                let deadline = now + Duration::from_secs(5);
                let done = (DoneStatus::TrackEnded, 1, Bytes::new());
                ss.publish_done_after(rid, done, vec![st], deadline).unwrap();
                sp.write(&mut s, &mut ss, now);
                flight(&mut s, &mut c);
                assert_eq!(
                    done_seen(&mut cp, &mut c, &mut cs),
                    (true, false),
                    "{ctx}: the stream, not the end"
                );
                if acknowledged {
                    exchange(&mut c, &mut s);
                    sp.write(&mut s, &mut ss, now);
                } else {
                    sp.write(&mut s, &mut ss, now + Duration::from_secs(1));
                    flight(&mut s, &mut c);
                    assert_eq!(
                        done_seen(&mut cp, &mut c, &mut cs),
                        (false, false),
                        "{ctx}: before the deadline"
                    );
                    sp.write(&mut s, &mut ss, deadline);
                }
                flight(&mut s, &mut c);
                assert_eq!(done_seen(&mut cp, &mut c, &mut cs), (false, true), "{ctx}: then PUBLISH_DONE");
            }
        }
    }
}
