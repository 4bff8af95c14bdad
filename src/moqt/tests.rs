//! Unit tests of the Pump and MoqtApp, over a quiche connection pair in memory.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::accept::percent_decode;
use runtime::testing::{exchange, handshake};
use runtime::QuicConnection;
use session::SessionConfig;
use std::time::Duration;
use wire::model::Role;
use wire::model::{
    ObjectStatus, Properties, SetupOptions, SubgroupHeader, SubgroupId, SubgroupObject, TrackAlias,
};

/// A client and server session over a quiche pair, set up; the server writes through
/// `sp`.
pub(super) fn pair(
    version: Version,
    mut sp: Pump,
) -> (QuicConnection, QuicConnection, Session, Session, Pump, Pump) {
    let (mut c, mut s, _, _) = handshake(&[version.alpn()], false);
    let config = SessionConfig::default();
    let mut cs = Session::new(version, Role::Client, config.clone(), SetupOptions::default());
    let mut ss = Session::new(version, Role::Server, config, SetupOptions::default());
    let mut cp = Pump::default();
    let mut buf = vec![0u8; 65_536];
    for _ in 0..10 {
        cp.write(&mut c, &mut cs, Instant::now());
        sp.write(&mut s, &mut ss, Instant::now());
        exchange(&mut c, &mut s);
        cp.read(&mut c, &mut cs, &mut buf);
        sp.read(&mut s, &mut ss, &mut buf);
        while cs.poll_event().is_some() {}
        while ss.poll_event().is_some() {}
    }
    assert!(cs.is_ready() && ss.is_ready(), "{version:?}: setup");
    (c, s, cs, ss, cp, sp)
}

/// The client's SUBSCRIBE for `live/v` (queued, not written).
pub(super) fn subscribe_live(cs: &mut Session) -> wire::model::RequestId {
    use wire::model::{FullTrackName, Message, Subscribe, TrackNamespace};
    let rid = cs.next_request_id().unwrap();
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["live"]), name: Bytes::from_static(b"v") };
    cs.send(Message::Subscribe(Subscribe { request_id: rid, track, ..Default::default() })).unwrap();
    rid
}

/// A peer that keeps sending REQUEST_UPDATEs on its request stream and never reads the
/// answers: once more than [`REQUEST_QUEUE_LIMIT`] bytes of them wait beyond QUIC flow
/// control, the request is cancelled (the relay hears `Cancelled`) and the stream reset
/// and stopped with EXCESSIVE_LOAD (draft-18 §3.3.3, draft-22 §12.5).
#[test]
fn answers_a_peer_does_not_read_drop_its_request() {
    use session::Event;
    use wire::model::{Message, RequestOk, RequestUpdate};
    for version in [Version::Draft18, Version::Draft22] {
        let (mut c, mut s, mut cs, mut ss, mut cp, mut sp) = pair(version, Pump::default());
        let mut buf = vec![0u8; 65_536];
        let now = Instant::now();
        let rid = subscribe_live(&mut cs);
        let mut cancelled = false;
        for _ in 0..2000 {
            for _ in 0..200 {
                let id = cs.next_request_id().unwrap();
                let update = RequestUpdate { request_id: id, existing_request_id: rid, ..Default::default() };
                if cs.send(Message::RequestUpdate(update)).is_err() {
                    break;
                }
            }
            cp.write(&mut c, &mut cs, now);
            exchange(&mut c, &mut s);
            sp.read(&mut s, &mut ss, &mut buf);
            while let Some(e) = ss.poll_event() {
                match e {
                    Event::Message(Message::RequestUpdate(u)) => {
                        let answer = RequestOk { request_id: ss.update_answer_id(&u), ..Default::default() };
                        let _ = ss.send(Message::RequestOk(answer));
                    }
                    Event::Cancelled { request_id } => {
                        assert_eq!(request_id, rid);
                        cancelled = true;
                    }
                    _ => {}
                }
            }
            sp.write(&mut s, &mut ss, now);
            if cancelled {
                break;
            }
        }
        assert!(cancelled, "{version:?}");
        assert_eq!(sp.dropped_requests(), 1, "{version:?}");
        assert!(sp.queued_bytes() <= REQUEST_QUEUE_LIMIT, "{version:?}");
        // The client hears RESET_STREAM with EXCESSIVE_LOAD on its request stream.
        exchange(&mut c, &mut s);
        let mut reset = None;
        loop {
            match c.stream_recv(0, &mut buf) {
                Ok(_) => continue,
                Err(quiche::Error::StreamReset(code)) => reset = Some(code),
                Err(_) => {}
            }
            break;
        }
        assert_eq!(reset, Some(0x9), "{version:?}");
    }
}

/// A peer that gives no credit for our control stream while control messages for it pile up
/// (on a draft-14 or draft-16 relay, every answer goes there): once more than
/// [`CONTROL_QUEUE_LIMIT`] bytes wait beyond QUIC flow control, the session is closed with
/// CONTROL_MESSAGE_TIMEOUT and the queue stops growing. A peer that reads is never closed.
#[test]
fn a_peer_that_does_not_read_its_control_stream_is_closed() {
    let mut buf = vec![0u8; 65_536];
    // (Drafts 18 to 22 answer on request streams, bounded per stream above; the close is the
    // same code for their control stream.)
    for version in [Version::Draft14, Version::Draft16] {
        for reads in [false, true] {
            let (mut c, mut s, mut cs, mut ss, mut cp, mut sp) = pair(version, Pump::default());
            let now = Instant::now();
            // MAX_REQUEST_IDs: control messages, of about 7 bytes. Each round writes about
            // 70 KB; 50 rounds are well past the client's 1 MiB window and the limit.
            let mut piled = 0;
            for _ in 0..50 {
                for _ in 0..10_000 {
                    ss.grant_requests(1).unwrap();
                }
                piled += usize::from(sp.write(&mut s, &mut ss, now).control_piled);
                exchange(&mut c, &mut s);
                if reads {
                    cp.read(&mut c, &mut cs, &mut buf);
                    while cs.poll_event().is_some() {}
                }
                if ss.is_closed() {
                    break;
                }
            }
            if reads {
                assert!(!ss.is_closed(), "{version:?}: a peer that reads stays");
                continue;
            }
            assert!(ss.is_closed(), "{version:?}: closed");
            assert_eq!(piled, 1, "{version:?}: the write that closed it says so");
            assert!(sp.queued_bytes() <= CONTROL_QUEUE_LIMIT + 80_000, "{version:?}: {}", sp.queued_bytes());
            // CONNECTION_CLOSE with the application code CONTROL_MESSAGE_TIMEOUT.
            assert!(!sp.write(&mut s, &mut ss, now).control_piled, "{version:?}: said once");
            exchange(&mut c, &mut s);
            let close = c.peer_error().expect("the client sees the close");
            assert!(close.is_app && close.error_code == 0x11, "{version:?}: {close:?}");
        }
    }
}

/// A subscriber that reads nothing: the server's queue grows past QUIC flow control until
/// the backlog limit, then its oldest data streams are reset (CANCELLED) and forgotten;
/// the control stream is never touched.
#[test]
fn backlog_over_the_limit_resets_the_oldest_data_streams() {
    for version in Version::ALL {
        let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, Pump::with_backlog_limit(1 << 20));
        let mut buf = vec![0u8; 65_536];

        // 24 streams of 1 MB: quiche takes what the client's 16 MB window allows.
        let (mut streams, mut reported) = (Vec::new(), Vec::new());
        for group in 0..24 {
            let id = subgroup(&mut ss, group);
            for object_id in 0..16 {
                let (o, p) = object(object_id, 64 * 1024);
                ss.send_object(id, &o, p).unwrap();
            }
            streams.push(id);
            reported.extend(sp.write(&mut s, &mut ss, Instant::now()).shed);
        }
        assert!(sp.shed_streams() > 0, "{version:?}: nothing shed");
        assert!(sp.queued_bytes() <= 1 << 20, "{version:?}: {} bytes queued", sp.queued_bytes());
        // Shed streams are the oldest of those still queued; the session forgot them.
        let shed: Vec<StreamId> =
            streams.iter().copied().filter(|&id| ss.finish_data_stream(id).is_err()).collect();
        assert_eq!(shed.len() as u64, sp.shed_streams(), "{version:?}");
        reported.sort();
        assert_eq!(reported, shed, "{version:?}: each write returned the streams it shed");
        assert!(shed.windows(2).all(|w| w[0] < w[1]));
        assert!(!ss.is_local_data_stream(StreamId(if version.request_streams() { 3 } else { 1 })));

        // The client hears RESET_STREAM with CANCELLED for each of them.
        exchange(&mut c, &mut s);
        for &id in &shed {
            let mut reset = None;
            loop {
                match c.stream_recv(id.0, &mut buf) {
                    Ok(_) => continue,
                    Err(quiche::Error::StreamReset(code)) => reset = Some(code),
                    Err(_) => {}
                }
                break;
            }
            assert_eq!(reset, Some(RESET_BACKLOG), "{version:?}: stream {id}");
        }
    }
}

/// A peer that stops reading: once its connection window (MAX_DATA) is full, quiche marks
/// the connection blocked at every `stream_send` past it and sends DATA_BLOCKED in the
/// next packet, which the peer acknowledges, which makes the next write: writing at every
/// ACK, a pump that offered quiche its bytes regardless would keep a DATA_BLOCKED / ACK
/// ping-pong going for as long as the peer stalls (about 1000 packets a second each way on
/// loopback). The pump does not offer bytes quiche has no room for: DATA_BLOCKED goes out
/// once for the limit.
#[test]
fn a_peer_that_stops_reading_is_told_data_blocked_once() {
    let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(Version::Draft16, Pump::with_backlog_limit(64 << 20));
    // 20 streams of 1 MiB (each stream's own window): more than the client's 16 MiB.
    for group in 0..20 {
        let id = subgroup(&mut ss, group);
        for object_id in 0..16 {
            let (o, p) = object(object_id, 64 * 1024);
            ss.send_object(id, &o, p).unwrap();
        }
    }
    let mut rounds = 0;
    while s.stats().data_blocked_sent_count == 0 {
        sp.write(&mut s, &mut ss, Instant::now());
        exchange(&mut c, &mut s);
        rounds += 1;
        assert!(rounds < 200, "the client's window never filled");
    }
    let blocked = s.stats().data_blocked_sent_count;
    let sent = s.stats().sent;
    for _ in 0..50 {
        sp.write(&mut s, &mut ss, Instant::now());
        exchange(&mut c, &mut s);
    }
    assert!(sp.queued_bytes() > 1 << 20, "the rest waits: {} bytes", sp.queued_bytes());
    assert_eq!(s.stats().data_blocked_sent_count, blocked, "DATA_BLOCKED again for the same limit");
    assert!(s.stats().sent - sent <= 2, "{} packets to a peer that reads nothing", s.stats().sent - sent);
}

/// quiche holds at most `unsent_limit` of subgroup data it has not sent: the rest waits in
/// the pump (where the backlog bound and delivery deadlines reach it), and what quiche
/// sends makes room for as much again. Without the limit quiche takes what its congestion
/// window allows at each ACK, whatever it still holds (here, before any ACK, its initial
/// window of about 13 KB; on a loss-free path, up to the client's flow-control window).
#[test]
fn quiche_holds_at_most_the_unsent_limit_of_subgroup_data() {
    for version in Version::ALL {
        for limit in [Some(4096), None] {
            let pump = Pump::with_backlog_limit(64 << 20);
            let pump = match limit {
                Some(l) => pump.with_unsent_limit(l),
                None => pump,
            };
            let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, pump);
            let id = subgroup(&mut ss, 0);
            for object_id in 0..32 {
                let (o, p) = object(object_id, 32 * 1024);
                ss.send_object(id, &o, p).unwrap();
            }
            // About 1 MiB written; nothing sent yet.
            let mut total = 0;
            while let Some(t) = ss.poll_transmit() {
                if let Transmit::Stream { data, .. } = &t {
                    total += data.len();
                }
                sp.pending_transmit(&mut s, t);
            }
            sp.write(&mut s, &mut ss, Instant::now());
            let handed = total - sp.queued_bytes();
            match limit {
                Some(l) => assert!(handed <= l, "{version:?}: quiche took {handed} bytes"),
                None => assert!(handed > 8192, "{version:?}: quiche took {handed} bytes"),
            }
            // quiche sends, the client acknowledges: the pump hands more.
            let before = sp.queued_bytes();
            exchange(&mut c, &mut s);
            sp.write(&mut s, &mut ss, Instant::now());
            if limit.is_some() {
                assert!(sp.queued_bytes() < before, "{version:?}: nothing more was handed");
            }
        }
    }
}

/// Stream urgency reaches quiche: a high-priority data stream opened after a low-priority
/// one with much more queued goes out first (without it quiche would send the older,
/// lower stream ID first); the mapping keeps every data stream behind control streams.
#[test]
fn more_urgent_data_streams_are_sent_first() {
    assert_eq!(session::data_urgency(0, 0), 128);
    assert_eq!(session::data_urgency(255, 255), 255);
    assert!(session::data_urgency(16, 255) > session::data_urgency(15, 0), "subscriber first");
    assert!(session::data_urgency(128, 0) < session::data_urgency(128, 64));
    for version in Version::ALL {
        let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, Pump::default());
        let mut open = |urgency: u8, len: usize| {
            let id = subgroup(&mut ss, u64::from(urgency));
            ss.set_priority(id, urgency).unwrap();
            let (o, p) = object(0, len);
            ss.send_object(id, &o, p).unwrap();
            ss.finish_data_stream(id).unwrap();
            id
        };
        let low = open(250, 200_000);
        let high = open(130, 1_000);
        sp.write(&mut s, &mut ss, Instant::now());
        // The server's first packet goes to the client, nothing else.
        let mut pkt = vec![0u8; 65_535];
        let (len, _) = s.send(&mut pkt).unwrap();
        let info = quiche::RecvInfo {
            from: s.path_stats().next().unwrap().local_addr,
            to: c.path_stats().next().unwrap().local_addr,
        };
        c.recv(&mut pkt[..len], info).unwrap();
        let readable: Vec<u64> = c.readable().collect();
        assert!(readable.contains(&high.0), "{version:?}: {readable:?}");
        let mut buf = vec![0u8; 65_536];
        let (n, fin) = c.stream_recv(high.0, &mut buf).unwrap();
        assert!(fin && n > 1_000, "{version:?}: the urgent stream whole in the first packet ({n} bytes)");
        assert!(low < high);
    }
}

/// Descending group order: among streams of equal urgency the newest goes to quiche
/// first, so under congestion it is the older stream whose bytes wait in the Pump
/// (quiche still orders what it holds by stream ID; the Pump decides what it holds).
/// Ascending (the default) is the other way round.
#[test]
fn descending_group_order_hands_newer_streams_to_quiche_first() {
    for descending in [false, true] {
        let (_c, mut s, _cs, mut ss, _cp, mut sp) = pair(Version::Draft22, Pump::default());
        let mut open = |group: u64, len: usize| {
            let id = subgroup(&mut ss, group);
            ss.set_priority_ordered(id, 130, descending).unwrap();
            let (o, p) = object(0, len);
            ss.send_object(id, &o, p).unwrap();
            ss.finish_data_stream(id).unwrap();
            id
        };
        let older = open(1, 1_000_000);
        let newer = open(2, 1_000_000);
        sp.write(&mut s, &mut ss, Instant::now());
        // Both were written alike; the one quiche has taken nothing of waits whole.
        let left = |id: StreamId| sp.pending.iter().find(|(k, _)| k.2 == id).map_or(0, |(_, q)| q.bytes);
        let (first, waits) = if descending { (newer, older) } else { (older, newer) };
        assert!(left(first) < left(waits), "descending {descending}: {} vs {}", left(first), left(waits));
    }
}

/// Opens a subgroup stream of group `group` on `ss`.
fn subgroup(ss: &mut Session, group: u64) -> StreamId {
    let header = SubgroupHeader {
        track_alias: TrackAlias(1),
        group_id: group,
        subgroup_id: SubgroupId::Zero,
        publisher_priority: Some(128),
        has_properties: false,
        end_of_group: true,
        first_object: false,
    };
    ss.open_subgroup(&header).unwrap()
}

fn object(object_id: u64, len: usize) -> (SubgroupObject, Bytes) {
    let object = SubgroupObject {
        object_id,
        properties: Properties::new(),
        payload_len: len as u64,
        status: ObjectStatus::Normal,
    };
    (object, Bytes::from(vec![5u8; len]))
}

/// What the client reads on stream `id`: its bytes, then FIN (`Ok`) or a reset code.
fn read_stream(c: &mut QuicConnection, id: u64) -> (usize, Result<bool, u64>) {
    let mut buf = vec![0u8; 65_536];
    let mut total = 0;
    loop {
        match c.stream_recv(id, &mut buf) {
            Ok((n, fin)) => {
                total += n;
                if fin {
                    return (total, Ok(true));
                }
            }
            Err(quiche::Error::StreamReset(code)) => return (total, Err(code)),
            Err(_) => return (total, Ok(false)),
        }
    }
}

/// OBJECT_DELIVERY_TIMEOUT: object bytes still queued when their deadline passes are not
/// handed to quiche; their stream is reset with DELIVERY_TIMEOUT and the session forgets
/// it. Objects within their deadline, on other streams, go out whole.
#[test]
fn expired_object_bytes_reset_their_stream() {
    for version in Version::ALL {
        let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, Pump::default());
        let t0 = Instant::now();
        let late = subgroup(&mut ss, 1);
        let (o, p) = object(0, 100);
        ss.send_object_until(late, &o, p, Some(t0 + Duration::from_secs(60))).unwrap();
        let (o, p) = object(1, 100);
        ss.send_object_until(late, &o, p, Some(t0)).unwrap();
        let fine = subgroup(&mut ss, 2);
        let (o, p) = object(0, 100);
        ss.send_object_until(fine, &o, p, Some(t0 + Duration::from_secs(60))).unwrap();
        ss.finish_data_stream(fine).unwrap();

        sp.write(&mut s, &mut ss, t0);
        assert_eq!(sp.timed_out_streams(), 1, "{version:?}");
        assert_eq!(sp.queued_bytes(), 0, "{version:?}: nothing left queued");
        assert!(ss.finish_data_stream(late).is_err(), "{version:?}: the session forgot the stream");
        exchange(&mut c, &mut s);
        assert_eq!(read_stream(&mut c, late.0).1, Err(RESET_DELIVERY_TIMEOUT), "{version:?}");
        let (n, end) = read_stream(&mut c, fine.0);
        assert_eq!(end, Ok(true), "{version:?}");
        assert!(n > 100, "{version:?}: header and object ({n} bytes)");
    }
}

/// An object whose deadline has not passed but falls before quiche can send what it holds
/// ahead of it (measured: what it sent while it held at least half the unsent limit) is
/// not handed over: its stream is reset with DELIVERY_TIMEOUT, as if the deadline had
/// passed. One with time to spare waits its turn. Before any measurement nothing is
/// predicted.
#[test]
fn objects_that_would_leave_after_their_deadline_are_not_handed_to_quiche() {
    for version in Version::ALL {
        let pump = Pump::with_backlog_limit(64 << 20).with_unsent_limit(16 << 10);
        let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, pump);
        let t0 = Instant::now();
        let bulk = subgroup(&mut ss, 0);
        for object_id in 0..64 {
            let (o, p) = object(object_id, 16 << 10);
            ss.send_object(bulk, &o, p).unwrap();
        }
        // An object due in 0.5 s, queued before any rate is known: it waits.
        let early = subgroup(&mut ss, 1);
        let (o, p) = object(0, 100);
        ss.send_object_until(early, &o, p, Some(t0 + Duration::from_millis(500))).unwrap();
        sp.write(&mut s, &mut ss, t0);
        assert_eq!(sp.timed_out_streams(), 0, "{version:?}: no rate measured yet");

        // quiche took its initial window (about 13 KB) and sends 8 packets of it in 0.9 s
        // (less than a stall, `PATH_STALL`): about 12 KB/s, so the 2-3 KB it still holds take
        // about a fifth of a second.
        let mut buf = vec![0u8; 65_535];
        for _ in 0..8 {
            s.send(&mut buf).unwrap();
        }
        let t1 = t0 + Duration::from_millis(900);
        let late = subgroup(&mut ss, 2);
        let (o, p) = object(0, 100);
        ss.send_object_until(late, &o, p, Some(t1 + Duration::from_millis(100))).unwrap();
        let spare = subgroup(&mut ss, 3);
        let (o, p) = object(0, 100);
        ss.send_object_until(spare, &o, p, Some(t1 + Duration::from_secs(60))).unwrap();
        sp.write(&mut s, &mut ss, t1);
        // `early` (its deadline passed) and `late` (it would leave after it) are reset.
        assert_eq!(sp.timed_out_streams(), 2, "{version:?}");
        assert!(ss.finish_data_stream(late).is_err(), "{version:?}: the session forgot `late`");
        assert!(ss.finish_data_stream(spare).is_ok(), "{version:?}: `spare` waits its turn");
        exchange(&mut c, &mut s);
        assert_eq!(read_stream(&mut c, late.0).1, Err(RESET_DELIVERY_TIMEOUT), "{version:?}");
    }
}

/// What is ahead of an object handed now: what quiche holds unsent, at the measured rate, then
/// a round trip (a sender with data waiting has a full window in flight and queued on the
/// path, which the smoothed RTT grows with). The end-to-end effect on a thin path is
/// `tests/impaired.rs`'s.
#[test]
fn an_object_handed_now_arrives_after_what_quiche_holds_and_a_round_trip() {
    let ahead =
        super::queue::Ahead { limit: 16_000, rtt: Duration::from_millis(200), secs_per_byte: 1.0 / 10_000.0 };
    assert_eq!(ahead.delay(16_000), Duration::from_millis(200), "nothing held: a round trip");
    assert_eq!(ahead.delay(6_000), Duration::from_millis(1200), "10 KB held at 10 KB/s, then the round trip");
    assert_eq!(ahead.delay(0), Duration::from_millis(1800));
}

/// SUBGROUP_DELIVERY_TIMEOUT: a finished stream the peer has not acknowledged in full by
/// its deadline is reset with DELIVERY_TIMEOUT; one delivered in time is left alone.
#[test]
fn finished_streams_not_delivered_by_their_deadline_are_reset() {
    for version in Version::ALL {
        let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, Pump::default());
        let t0 = Instant::now();
        let deadline = Some(t0 + Duration::from_secs(1));
        let delivered = subgroup(&mut ss, 1);
        let (o, p) = object(0, 100);
        ss.send_object(delivered, &o, p).unwrap();
        ss.finish_data_stream_by(delivered, deadline).unwrap();
        sp.write(&mut s, &mut ss, t0);
        exchange(&mut c, &mut s); // delivered and acknowledged
        assert_eq!(read_stream(&mut c, delivered.0).1, Ok(true), "{version:?}");
        exchange(&mut c, &mut s);

        let lost = subgroup(&mut ss, 2);
        let (o, p) = object(0, 100);
        ss.send_object(lost, &o, p).unwrap();
        ss.finish_data_stream_by(lost, deadline).unwrap();
        sp.write(&mut s, &mut ss, t0);
        // Its packets never reach the client.
        let mut buf = vec![0u8; 65_535];
        while s.send(&mut buf).is_ok() {}

        sp.write(&mut s, &mut ss, t0 + Duration::from_secs(2));
        assert_eq!(sp.timed_out_streams(), 1, "{version:?}: only the stream not yet delivered");
        exchange(&mut c, &mut s);
        assert_eq!(read_stream(&mut c, lost.0).1, Err(RESET_DELIVERY_TIMEOUT), "{version:?}");
    }
}

/// Datagrams queued together go most urgent first (draft-22 §5.1 "ordering for
/// datagrams"): the client receives them in urgency order, not in the order written.
#[test]
fn datagrams_go_most_urgent_first() {
    for version in Version::ALL {
        let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(version, Pump::default());
        for (object_id, urgency) in [(0u64, 250u8), (1, 130), (2, 200)] {
            let header = wire::model::DatagramHeader {
                track_alias: TrackAlias(1),
                group_id: 0,
                object_id,
                publisher_priority: Some(128),
                properties: Properties::new(),
                end_of_group: false,
                status: None,
            };
            ss.send_datagram_with_urgency(&header, &[object_id as u8; 10], urgency).unwrap();
        }
        sp.write(&mut s, &mut ss, Instant::now());
        exchange(&mut c, &mut s);
        let mut buf = vec![0u8; 1500];
        let mut order = Vec::new();
        while let Ok(n) = c.dgram_recv(&mut buf) {
            order.push(buf[n - 1]); // the payload's last byte is its Object ID
        }
        assert_eq!(order, [1, 2, 0], "{version:?}");
    }
}

/// Each token query parameter of a CONNECT URL becomes a SETUP token, percent-decoded; other
/// parameters and empty values do not.
#[test]
fn url_tokens_become_setup_tokens() {
    let accepted = webtransport::Accepted {
        protocol: "moqt-16".into(),
        negotiated: true,
        authority: "edge".into(),
        path: "/live?x=1&jwt=a.b.c&token=&cat=2D%2B%2f%3D&other=zz&token=v1.k".into(),
    };
    let setup = setup_from_url(&accepted);
    let values: Vec<Bytes> = setup
        .auth_tokens
        .iter()
        .map(|t| match t {
            wire::model::AuthToken::UseValue { value, .. } => value.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(values, ["a.b.c", "2D+/=", "v1.k"].map(|v| Bytes::from_static(v.as_bytes())));
    assert_eq!(
        setup.path.as_deref(),
        Some(&b"/live?x=1&jwt=a.b.c&token=&cat=2D%2B%2f%3D&other=zz&token=v1.k"[..])
    );
    assert_eq!(percent_decode("%zz%4"), b"%zz%4", "not an escape");
}

/// A transport that counts how often its delivered bytes are read.
struct Counting<'a> {
    conn: &'a mut QuicConnection,
    acked_reads: std::cell::Cell<usize>,
}

impl Transport for Counting<'_> {
    fn stream_recv(&mut self, id: u64, out: &mut [u8]) -> quiche::Result<(usize, bool)> {
        self.conn.stream_recv(id, out)
    }
    fn stream_send(&mut self, id: u64, data: &[u8], fin: bool) -> quiche::Result<usize> {
        Transport::stream_send(self.conn, id, data, fin)
    }
    fn stream_send_bytes(&mut self, id: u64, data: Bytes, fin: bool) -> quiche::Result<usize> {
        self.conn.stream_send_bytes(id, data, fin)
    }
    fn stream_capacity(&mut self, id: u64) -> quiche::Result<usize> {
        Transport::stream_capacity(self.conn, id)
    }
    fn stream_priority(&mut self, id: u64, urgency: u8, incremental: bool) -> quiche::Result<()> {
        Transport::stream_priority(self.conn, id, urgency, incremental)
    }
    fn stream_shutdown(&mut self, id: u64, how: quiche::Shutdown, code: u64) -> quiche::Result<()> {
        Transport::stream_shutdown(self.conn, id, how, code)
    }
    fn stream_readable_next(&mut self) -> Option<u64> {
        Transport::stream_readable_next(self.conn)
    }
    fn dgram_send(&mut self, data: &[u8]) -> quiche::Result<()> {
        Transport::dgram_send(self.conn, data)
    }
    fn dgram_recv(&mut self, out: &mut [u8]) -> quiche::Result<usize> {
        Transport::dgram_recv(self.conn, out)
    }
    fn close(&mut self, app: bool, code: u64, reason: &[u8]) -> quiche::Result<()> {
        Transport::close(self.conn, app, code, reason)
    }
    fn sent_bytes(&self) -> u64 {
        self.conn.sent_bytes()
    }
    fn acked_bytes(&self) -> u64 {
        self.acked_reads.set(self.acked_reads.get() + 1);
        self.conn.acked_bytes()
    }
    fn sent_units(&self) -> usize {
        self.conn.sent_units()
    }
    fn rtt(&self) -> Duration {
        self.conn.rtt()
    }
}

/// quiche gathers its connection statistics anew for each read, walking every stream, so a
/// pump reads what its path delivered at most every `DELIVERY_SAMPLE`, not at every write:
/// a second of writes every millisecond reads it about twenty times.
#[test]
fn delivered_bytes_are_sampled_not_read_at_every_write() {
    let (mut c, mut s, _cs, mut ss, _cp, mut sp) = pair(Version::Draft22, Pump::default());
    let start = Instant::now();
    let mut counting = Counting { conn: &mut s, acked_reads: std::cell::Cell::new(0) };
    for ms in 0..1000u64 {
        if ms % 10 == 0 {
            let id = subgroup(&mut ss, ms);
            let (o, p) = object(0, 100);
            ss.send_object(id, &o, p).unwrap();
        }
        sp.write(&mut counting, &mut ss, start + Duration::from_millis(ms));
    }
    let reads = counting.acked_reads.get();
    assert!((19..=21).contains(&reads), "{reads} reads in a second of writes");
    exchange(&mut c, &mut s);
}
