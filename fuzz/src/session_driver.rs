//! The `session` fuzz target's driver, shared with the main crate's `tests/fuzz_corpus.rs`
//! (included there by path) so that the committed corpus replays under plain `cargo test`.
//!
//! A fuzz input is a draft selector byte followed by actions a hostile client takes against a
//! server [`Session`]: control-stream bytes, bytes on several request and data streams, FIN,
//! resets, STOP_SENDING, datagrams, time steps, and the server answering a request. After
//! every action the driver checks the session's invariants (ARCHITECTURE.md, "Malformed and
//! abusive input"): a close carries a session termination code and reaches the transport,
//! nothing happens after it, and what the session buffers stays within its limits.
//!
//! Only `moq_edge` and `std` are used, so the file compiles in both crates.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use moq_edge::session::{DataLimits, Event, Session, SessionConfig, StreamId, Transmit};
use moq_edge::wire::model::{Message, PublishOk, RequestOk, Role, SetupOptions, SubscribeOk, TrackAlias};
use moq_edge::wire::{RequestErrorCode, Version};

/// Streams of each kind the actions address (ids `first + 4k`, k < this).
pub const STREAMS: u8 = 16;

/// One thing the peer (or the clock, or the server application) does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Bytes on the peer's control stream (draft-16 bidirectional 0, draft-18/22 uni 2).
    Control { data: Vec<u8>, fin: bool },
    /// Bytes on the peer's k-th bidirectional request stream.
    Bidi { k: u8, data: Vec<u8>, fin: bool },
    /// Bytes on the peer's k-th unidirectional data stream (after the control stream).
    Uni { k: u8, data: Vec<u8>, fin: bool },
    /// The peer resets its k-th stream (`uni`: a data stream, else a request stream).
    Reset { uni: bool, k: u8, code: u8 },
    /// The peer sends STOP_SENDING on its own k-th request stream (`mine`), or on the k-th
    /// stream the server opened (`uni`: a data stream, else a request stream).
    StopSending { uni: bool, mine: bool, k: u8, code: u8 },
    /// One datagram.
    Datagram(Vec<u8>),
    /// The clock moves `tenths` × 100 ms.
    Wait { tenths: u8 },
    /// The server answers the oldest request it has not answered: OK or an error.
    Answer { ok: bool },
}

impl Action {
    const CONTROL: u8 = 0;
    const BIDI: u8 = 1;
    const UNI: u8 = 2;
    const RESET: u8 = 3;
    const STOP: u8 = 4;
    const DATAGRAM: u8 = 5;
    const WAIT: u8 = 6;
    const ANSWER: u8 = 7;
}

/// Reads actions from `input`: byte 0 picks the draft; then each action is an op byte (its
/// low 3 bits the kind, bit 3 FIN or OK or "unidirectional", bit 4 "the peer's own stream"),
/// an argument byte where the kind has one, and for byte-carrying kinds a length byte and up
/// to that many bytes.
pub fn decode(input: &[u8]) -> (Version, Vec<Action>) {
    let Some((&selector, mut rest)) = input.split_first() else {
        return (crate::drafts::DRAFTS[0], Vec::new());
    };
    let version = crate::drafts::pick(selector);
    let mut actions = Vec::new();
    while !rest.is_empty() {
        let op = byte(&mut rest);
        let flag = op & 8 != 0;
        let action = match op & 7 {
            Action::CONTROL => {
                let len = byte(&mut rest);
                Action::Control { data: bytes(&mut rest, len), fin: flag }
            }
            Action::BIDI | Action::UNI => {
                let k = byte(&mut rest) % STREAMS;
                let len = byte(&mut rest);
                let data = bytes(&mut rest, len);
                if op & 7 == Action::BIDI {
                    Action::Bidi { k, data, fin: flag }
                } else {
                    Action::Uni { k, data, fin: flag }
                }
            }
            Action::RESET => Action::Reset { uni: flag, k: byte(&mut rest) % STREAMS, code: byte(&mut rest) },
            Action::STOP => Action::StopSending {
                uni: flag,
                mine: op & 16 != 0,
                k: byte(&mut rest) % STREAMS,
                code: byte(&mut rest),
            },
            Action::DATAGRAM => {
                let len = byte(&mut rest);
                Action::Datagram(bytes(&mut rest, len))
            }
            Action::WAIT => Action::Wait { tenths: byte(&mut rest) },
            _ => Action::Answer { ok: flag },
        };
        actions.push(action);
    }
    (version, actions)
}

/// The next byte of `rest` (0 once it is empty).
fn byte(rest: &mut &[u8]) -> u8 {
    let Some((&b, tail)) = rest.split_first() else { return 0 };
    *rest = tail;
    b
}

/// The next `len` bytes of `rest`, or what is left.
fn bytes(rest: &mut &[u8], len: u8) -> Vec<u8> {
    let n = usize::from(len).min(rest.len());
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    head.to_vec()
}

/// The inverse of [`decode`], for writing seeds: byte strings longer than 255 bytes are cut
/// into several actions on the same stream.
pub fn encode(version: Version, actions: &[Action]) -> Vec<u8> {
    let selector = crate::drafts::selector(version);
    let mut out = vec![selector];
    let with_bytes = |out: &mut Vec<u8>, op: u8, arg: Option<u8>, data: &[u8], fin: bool| {
        let chunks: Vec<&[u8]> = if data.is_empty() { vec![&[][..]] } else { data.chunks(255).collect() };
        let last = chunks.len() - 1;
        for (i, c) in chunks.into_iter().enumerate() {
            out.push(op | if fin && i == last { 8 } else { 0 });
            out.extend(arg);
            out.push(c.len() as u8);
            out.extend_from_slice(c);
        }
    };
    for a in actions {
        match a {
            Action::Control { data, fin } => with_bytes(&mut out, Action::CONTROL, None, data, *fin),
            Action::Bidi { k, data, fin } => with_bytes(&mut out, Action::BIDI, Some(*k), data, *fin),
            Action::Uni { k, data, fin } => with_bytes(&mut out, Action::UNI, Some(*k), data, *fin),
            Action::Reset { uni, k, code } => out.extend([Action::RESET | u8::from(*uni) << 3, *k, *code]),
            Action::StopSending { uni, mine, k, code } => {
                out.extend([Action::STOP | u8::from(*uni) << 3 | u8::from(*mine) << 4, *k, *code])
            }
            Action::Datagram(d) => {
                with_bytes(&mut out, Action::DATAGRAM, None, &d[..d.len().min(255)], false)
            }
            Action::Wait { tenths } => out.extend([Action::WAIT, *tenths]),
            Action::Answer { ok } => out.push(Action::ANSWER | u8::from(*ok) << 3),
        }
    }
    out
}

/// Small limits, so that the memory bounds are reached within a fuzz input's length.
pub fn config() -> SessionConfig {
    SessionConfig {
        max_stream_buffer: 2048,
        max_pre_setup_streams: 4,
        max_request_buffer: 4096,
        max_peer_streams: 8,
        max_requests: 8,
        implementation: None,
        data: DataLimits {
            max_object_size: 1024,
            max_data_streams: 8,
            max_held_streams: 2,
            max_held_bytes: 1024,
            max_buffered_bytes: 4096,
        },
    }
}

/// The most a session built with [`config`] may hold between actions: the control stream's
/// buffer, the request streams' total, each stream of unknown type's partial type varint,
/// and the data plane's total (which one write may exceed by a header's slack before the
/// stream is dropped).
pub fn max_buffered() -> usize {
    let c = config();
    c.max_stream_buffer + c.max_request_buffer + c.max_pre_setup_streams * 16 + c.data.max_buffered_bytes
}

/// What a run reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// SETUP completed.
    pub ready: bool,
    /// The session closed with this code.
    pub closed: Option<u64>,
    /// Events the session produced (requests, objects, ...), Ready and Closed excluded.
    pub events: usize,
}

/// Session termination codes of the three drafts (draft-16 §13.1.1, draft-18 §15.10.1,
/// draft-22 §16.11.1).
fn is_session_code(code: u64) -> bool {
    matches!(code, 0x0..=0x9 | 0x10..=0x1B)
}

/// Runs `input` against a server session, checking the invariants; panics when one breaks.
pub fn run(input: &[u8]) -> Outcome {
    let (version, actions) = decode(input);
    let mut d = Driver::new(version);
    for a in &actions {
        d.step(a);
    }
    d.outcome
}

/// A server session under test and what the driver tracks about it.
pub struct Driver {
    pub session: Session,
    version: Version,
    now: Instant,
    pub outcome: Outcome,
    unanswered: VecDeque<Message>,
    alias: u64,
}

impl Driver {
    pub fn new(version: Version) -> Self {
        let now = Instant::now();
        let mut session = Session::new(version, Role::Server, config(), SetupOptions::default());
        session.set_setup_deadline(now + Duration::from_secs(5));
        // The server's own SETUP (draft-18/22 send it at once) leaves with the first step.
        Driver { session, version, now, outcome: Outcome::default(), unanswered: VecDeque::new(), alias: 0 }
    }

    /// The stream an action addresses: (control, first bidirectional, first unidirectional).
    pub fn streams(version: Version) -> (u64, u64, u64) {
        if !version.request_streams() {
            (0, 4, 2)
        } else {
            (2, 0, 6)
        }
    }

    /// Applies one action and checks the invariants; returns what the server transmitted.
    pub fn step(&mut self, action: &Action) -> Vec<Transmit> {
        let (control, first_bidi, first_uni) = Self::streams(self.version);
        let s = &mut self.session;
        match action {
            Action::Control { data, fin } => s.on_stream_data(StreamId(control), data, *fin),
            Action::Bidi { k, data, fin } => {
                s.on_stream_data(StreamId(first_bidi + 4 * u64::from(*k)), data, *fin)
            }
            Action::Uni { k, data, fin } => {
                s.on_stream_data(StreamId(first_uni + 4 * u64::from(*k)), data, *fin)
            }
            Action::Reset { uni, k, code } => {
                let first = if *uni { first_uni } else { first_bidi };
                s.on_stream_reset(StreamId(first + 4 * u64::from(*k)), u64::from(*code));
            }
            Action::StopSending { uni, mine, k, code } => {
                // The server's own streams: bidirectional 1 + 4k, unidirectional 3 + 4k.
                let first = match (*mine, *uni) {
                    (true, _) => first_bidi,
                    (false, true) => 3,
                    (false, false) => 1,
                };
                s.on_stop_sending(StreamId(first + 4 * u64::from(*k)), u64::from(*code));
            }
            Action::Datagram(d) => s.on_datagram(d.clone().into()),
            Action::Wait { tenths } => {
                self.now += Duration::from_millis(100 * u64::from(*tenths));
                s.on_timeout(self.now);
            }
            Action::Answer { ok } => {
                if let Some(m) = self.unanswered.pop_front() {
                    // The session may refuse (the request ended meanwhile): not an invariant.
                    let _ = answer(s, m, *ok, &mut self.alias);
                }
            }
        }
        self.check()
    }

    /// Drains the session and checks the invariants after one action.
    fn check(&mut self) -> Vec<Transmit> {
        let s = &mut self.session;
        let outcome = &mut self.outcome;
        let was_closed = outcome.closed.is_some();
        let mut close_sent = None;
        let mut sent = Vec::new();
        while let Some(t) = s.poll_transmit() {
            assert!(!was_closed, "a transmit after the session closed: {t:?}");
            if let Transmit::Close { code, .. } = t {
                assert!(close_sent.is_none(), "two closes");
                close_sent = Some(code);
            }
            sent.push(t);
        }
        while let Some(e) = s.poll_event() {
            assert!(!was_closed, "an event after the session closed: {e:?}");
            match e {
                Event::Ready { .. } => {
                    assert!(!outcome.ready, "Ready twice");
                    outcome.ready = true;
                }
                Event::Closed { code, .. } => {
                    assert!(is_session_code(code), "close with {code:#x}, not a session termination code");
                    assert_eq!(close_sent, Some(code), "Closed without the matching Close transmit");
                    outcome.closed = Some(code);
                }
                Event::Message(m) => {
                    outcome.events += 1;
                    if self.unanswered.len() < 64 {
                        self.unanswered.push_back(m);
                    }
                }
                _ => outcome.events += 1,
            }
        }
        assert_eq!(s.is_closed(), outcome.closed.is_some(), "is_closed disagrees with the events");
        assert!(outcome.ready == s.is_ready() || outcome.closed.is_some(), "is_ready disagrees with Ready");
        let usage = s.usage();
        assert!(usage.buffered_bytes <= max_buffered(), "buffered {usage:?} over {}", max_buffered());
        let c = config();
        // Request streams (the peer's; the server opens none here), data streams, streams of
        // unknown type.
        let max_streams = c.max_peer_streams + c.data.max_data_streams + c.max_pre_setup_streams;
        assert!(usage.streams <= max_streams, "streams {usage:?} over {max_streams}");
        sent
    }
}

fn answer(
    s: &mut Session,
    m: Message,
    ok: bool,
    alias: &mut u64,
) -> Result<(), moq_edge::session::SessionError> {
    let rid = match &m {
        Message::Subscribe(r) | Message::TrackStatus(r) => r.request_id,
        Message::Publish(r) => r.request_id,
        Message::Fetch(r) => r.request_id,
        Message::PublishNamespace(r) => r.request_id,
        Message::SubscribeNamespace(r) => r.request_id,
        Message::SubscribeTracks(r) => r.request_id,
        _ => return Ok(()),
    };
    if !ok {
        return s.request_error(rid, RequestErrorCode::DoesNotExist, "fuzz");
    }
    *alias += 1;
    let reply = match m {
        Message::Subscribe(_) => Message::SubscribeOk(SubscribeOk {
            request_id: rid,
            track_alias: TrackAlias(*alias),
            ..Default::default()
        }),
        Message::Publish(_) => Message::PublishOk(PublishOk { request_id: rid, ..Default::default() }),
        _ => Message::RequestOk(RequestOk { request_id: rid, ..Default::default() }),
    };
    s.send(reply)
}
