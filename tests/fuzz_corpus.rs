//! The fuzz targets' corpora under plain `cargo test` (the `relay` target's is replayed by
//! `src/relay/tests/shards/fuzz.rs`). Every file of `fuzz/corpus/session/` goes through the target's own
//! driver (`fuzz/src/session_driver.rs`, included by path), which panics when an invariant
//! breaks; every input of `fuzz/packs/{control,data,draft18}.pack` (what `cargo fuzz cmin` kept
//! of a fuzzing run, see fuzz/README.md) through its target's body (`fuzz/src/codec_driver.rs`).
//! The session `seed-*` files are written by [`seeds`] below (a real client session's bytes,
//! every draft) and checked to be what it writes; `MOQ_WRITE_SEEDS=1 cargo test --test fuzz_corpus` rewrites them. Files a fuzzer
//! adds (other names) are replayed as they are.
#![allow(clippy::unwrap_used)]

/// The draft table the drivers' inputs select from.
#[path = "../fuzz/src/drafts.rs"]
#[allow(dead_code)]
mod drafts;

#[path = "../fuzz/src/session_driver.rs"]
#[allow(dead_code)] // what only the fuzz target uses
mod session_driver;

#[path = "../fuzz/src/codec_driver.rs"]
mod codec_driver;

#[path = "../fuzz/src/pack.rs"]
mod pack;

use std::path::PathBuf;

use bytes::Bytes;
use moq_edge::session::{Session, SessionConfig, StreamId, Transmit};
use moq_edge::wire::model::{
    DatagramHeader, FullTrackName, Message, ObjectStatus, Publish, RequestId, Role, SetupOptions,
    SubgroupHeader, SubgroupId, SubgroupObject, Subscribe, TrackAlias, TrackNamespace,
};
use moq_edge::wire::Version;
use session_driver::{Action, Driver};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/session")
}

/// A client session whose transmits become actions on a [`Driver`]'s server, and the
/// server's transmits go back to the client: the actions are a valid exchange.
struct Recorder {
    version: Version,
    client: Session,
    driver: Driver,
    actions: Vec<Action>,
}

impl Recorder {
    fn new(version: Version) -> Recorder {
        let setup = SetupOptions { path: Some(Bytes::from_static(b"/moq")), ..Default::default() };
        let client = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let mut r = Recorder { version, client, driver: Driver::new(version), actions: Vec::new() };
        r.flush();
        r
    }

    /// The action that carries client transmit `t` to the server.
    fn action(&self, t: &Transmit) -> Option<Action> {
        let (control, first_bidi, first_uni) = Driver::streams(self.version);
        let k = |id: StreamId, first: u64| u8::try_from((id.0 - first) / 4).unwrap();
        let uni = |id: StreamId| id.is_uni();
        Some(match t {
            Transmit::Stream { id, data, fin, .. } if id.0 == control => {
                Action::Control { data: data.to_vec(), fin: *fin }
            }
            Transmit::Stream { id, data, fin, .. } if uni(*id) => {
                Action::Uni { k: k(*id, first_uni), data: data.to_vec(), fin: *fin }
            }
            Transmit::Stream { id, data, fin, .. } => {
                Action::Bidi { k: k(*id, first_bidi), data: data.to_vec(), fin: *fin }
            }
            Transmit::Reset { id, code } => Action::Reset {
                uni: uni(*id),
                k: k(*id, if uni(*id) { first_uni } else { first_bidi }),
                code: *code as u8,
            },
            // On the client's own request stream, or one of the server's (1 + 4k, 3 + 4k).
            Transmit::StopSending { id, code } if id.0 & 1 == 0 => {
                Action::StopSending { uni: false, mine: true, k: k(*id, first_bidi), code: *code as u8 }
            }
            Transmit::StopSending { id, code } => Action::StopSending {
                uni: uni(*id),
                mine: false,
                k: k(*id, if uni(*id) { 3 } else { 1 }),
                code: *code as u8,
            },
            Transmit::Datagram { data, .. } => Action::Datagram(data.to_vec()),
            Transmit::Close { .. }
            | Transmit::Priority { .. }
            | Transmit::DeliverBy { .. }
            | Transmit::Hold { .. } => return None,
        })
    }

    /// Applies `a` to the server, and its answers to the client.
    fn act(&mut self, a: Action) {
        let back = self.driver.step(&a);
        self.actions.push(a);
        for t in back {
            match t {
                Transmit::Stream { id, data, fin, .. } => self.client.on_stream_data(id, &data, fin),
                Transmit::Reset { id, code } => self.client.on_stream_reset(id, code),
                Transmit::StopSending { id, code } => self.client.on_stop_sending(id, code),
                Transmit::Datagram { data, .. } => self.client.on_datagram(data),
                _ => {}
            }
        }
        self.flush();
    }

    /// Carries everything the client queued.
    fn flush(&mut self) {
        while self.client.poll_event().is_some() {}
        while let Some(t) = self.client.poll_transmit() {
            if let Some(a) = self.action(&t) {
                self.act(a);
            }
        }
    }

    fn send(&mut self, m: Message) {
        self.client.send(m).unwrap();
        self.flush();
    }

    fn next_id(&mut self) -> RequestId {
        self.client.next_request_id().unwrap()
    }

    fn publish(&mut self, alias: u64) -> RequestId {
        let rid = self.next_id();
        self.send(Message::Publish(Publish {
            request_id: rid,
            track: track(),
            track_alias: TrackAlias(alias),
            ..Default::default()
        }));
        self.act(Action::Answer { ok: true });
        rid
    }

    fn subgroup(&mut self, alias: u64, fin: bool) {
        let h = SubgroupHeader {
            track_alias: TrackAlias(alias),
            group_id: 3,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: Some(1),
            has_properties: false,
            end_of_group: false,
            first_object: false,
        };
        let id = self.client.open_subgroup(&h).unwrap();
        for (object_id, payload) in [(0u64, &b"hello"[..]), (1, b"world")] {
            let o = SubgroupObject { object_id, payload_len: payload.len() as u64, ..Default::default() };
            self.client.send_object(id, &o, Bytes::copy_from_slice(payload)).unwrap();
        }
        if fin {
            self.client.finish_data_stream(id).unwrap();
        }
        self.flush();
    }

    fn bytes(&self) -> Vec<u8> {
        session_driver::encode(self.version, &self.actions)
    }
}

fn track() -> FullTrackName {
    FullTrackName { namespace: TrackNamespace::from_strs(&["live"]), name: Bytes::from_static(b"v") }
}

fn subscribe(rid: RequestId) -> Message {
    Message::Subscribe(Subscribe { request_id: rid, track: track(), ..Default::default() })
}

/// The seeds: (name, bytes) for every draft.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for v in Version::ALL {
        let name = |s: &str| format!("seed-{}-{s}", v.alpn());
        let setup = Recorder::new(v);
        out.push((name("setup"), setup.bytes()));
        // The client's SETUP one byte at a time.
        let Some(Action::Control { data, .. }) = setup.actions.first().cloned() else { panic!("no SETUP") };
        let bytewise: Vec<Action> =
            data.iter().map(|b| Action::Control { data: vec![*b], fin: false }).collect();
        out.push((name("setup-bytewise"), session_driver::encode(v, &bytewise)));
        // Half a SETUP, then the deadline passes.
        let half = vec![
            Action::Control { data: data[..data.len() / 2].to_vec(), fin: false },
            Action::Wait { tenths: 60 },
        ];
        out.push((name("setup-timeout"), session_driver::encode(v, &half)));

        let mut r = Recorder::new(v);
        let rid = r.next_id();
        r.send(subscribe(rid));
        r.act(Action::Answer { ok: true });
        if !v.request_streams() {
            r.send(Message::Unsubscribe(rid));
        } else {
            r.client.cancel(rid).unwrap();
            r.flush();
        }
        out.push((name("subscribe-ok-cancel"), r.bytes()));

        let mut r = Recorder::new(v);
        let rid = r.next_id();
        r.send(subscribe(rid));
        r.act(Action::Answer { ok: false });
        let rid = r.next_id();
        r.send(Message::TrackStatus(Subscribe { request_id: rid, track: track(), ..Default::default() }));
        r.act(Action::Answer { ok: true });
        out.push((name("subscribe-refused-track-status"), r.bytes()));

        let mut r = Recorder::new(v);
        r.publish(5);
        r.subgroup(5, true);
        r.subgroup(5, false);
        out.push((name("publish-objects"), r.bytes()));

        let mut r = Recorder::new(v);
        r.publish(5);
        let h =
            DatagramHeader { track_alias: TrackAlias(5), group_id: 1, object_id: 2, ..Default::default() };
        r.client.send_datagram(&h, b"payload").unwrap();
        let end = DatagramHeader { object_id: 3, status: Some(ObjectStatus::EndOfTrack), ..h.clone() };
        r.client.send_datagram(&end, b"").unwrap();
        let unknown = DatagramHeader { track_alias: TrackAlias(77), ..h.clone() };
        r.client.send_datagram(&unknown, b"x").unwrap();
        r.flush();
        out.push((name("publish-datagrams"), r.bytes()));

        // Objects before the PUBLISH that names their alias: held, then delivered.
        let mut r = Recorder::new(v);
        r.subgroup(9, true);
        r.publish(9);
        out.push((name("objects-before-alias"), r.bytes()));

        let mut r = Recorder::new(v);
        let rid = r.next_id();
        r.send(subscribe(rid));
        r.act(Action::Reset { uni: false, k: 0, code: 1 });
        r.act(Action::StopSending { uni: true, mine: false, k: 0, code: 1 });
        out.push((name("resets"), r.bytes()));

        let mut r = Recorder::new(v);
        r.act(Action::Control { data: vec![0xFF; 40], fin: false });
        out.push((name("garbage-control"), r.bytes()));

        let mut r = Recorder::new(v);
        for k in 0..12 {
            r.act(Action::Bidi { k, data: vec![0x03], fin: false });
        }
        out.push((name("stream-flood"), r.bytes()));

        let mut r = Recorder::new(v);
        for k in 0..4 {
            r.act(Action::Bidi { k, data: [vec![0x03, 0xFF, 0xFF], vec![0; 1500]].concat(), fin: false });
        }
        out.push((name("partial-message-flood"), r.bytes()));

        let mut r = Recorder::new(v);
        for k in 0..12 {
            r.act(Action::Uni { k, data: vec![0x10], fin: false });
        }
        r.act(Action::Datagram(vec![0xFF; 8]));
        out.push((name("data-stream-flood"), r.bytes()));

        let mut r = Recorder::new(v);
        r.act(Action::Wait { tenths: 100 });
        let rid = r.next_id();
        r.send(subscribe(rid));
        r.act(Action::Control { data: vec![], fin: true });
        out.push((name("control-fin"), r.bytes()));
    }
    out
}

#[test]
fn session_seeds_are_committed() {
    pack::check_seeds(&corpus(), seeds());
}

#[test]
fn session_corpus_replays_through_the_fuzz_driver() {
    let files = pack::committed_files(&corpus());
    assert!(files.len() >= 40, "{} files", files.len());
    let (mut ready, mut busy, mut timed_out) = (0, 0, 0);
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let outcome = session_driver::run(&bytes);
        ready += usize::from(outcome.ready);
        busy += usize::from(outcome.ready && outcome.events > 0);
        timed_out += usize::from(outcome.closed == Some(0x11));
    }
    // Coverage gets past SETUP: most seeds complete it and then carry requests or data.
    assert!(ready >= 30 && busy >= 20, "ready {ready}, with events {busy}");
    assert!(timed_out >= 3, "CONTROL_MESSAGE_TIMEOUT in {timed_out}");
    // What a fuzzing run added (minimized, committed as a pack: `fuzz/src/pack.rs`).
    let inputs = pack::load(&pack::fuzz_dir(env!("CARGO_MANIFEST_DIR")), "session");
    assert!(inputs.len() >= 1000, "{} inputs in the session pack", inputs.len());
    for input in &inputs {
        session_driver::run(input);
    }
}

/// A few thousand mutations of the corpus (a fixed xorshift sequence: the same inputs every
/// run) through the driver: a poor man's fuzzing pass for machines without cargo-fuzz.
#[test]
fn mutated_corpus_keeps_the_invariants() {
    let seeds: Vec<Vec<u8>> =
        std::fs::read_dir(corpus()).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize
    };
    for _ in 0..5000 {
        let mut input = seeds[rnd() % seeds.len()].clone();
        for _ in 0..1 + rnd() % 8 {
            let at = rnd() % (input.len() + 1);
            match rnd() % 4 {
                0 if at < input.len() => input[at] = rnd() as u8,
                1 if at < input.len() => input[at] ^= 1 << (rnd() % 8),
                2 if at < input.len() => {
                    input.remove(at);
                }
                _ => {
                    // Splice in the tail of another seed (actions of one draft in another's).
                    let other = &seeds[rnd() % seeds.len()];
                    let from = 1 + rnd() % other.len().max(1);
                    input.splice(at..at, other.get(from..).unwrap_or_default().iter().copied());
                }
            }
        }
        session_driver::run(&input);
    }
}

/// The codec targets' corpora (minimized fuzzing runs, committed as packs: `fuzz/src/pack.rs`)
/// through the targets' bodies.
#[test]
fn codec_corpora_replay_through_their_targets() {
    let fuzz = pack::fuzz_dir(env!("CARGO_MANIFEST_DIR"));
    type Target = (&'static str, fn(&[u8]));
    let targets: [Target; 3] = [
        ("control", codec_driver::control),
        ("data", codec_driver::data),
        ("draft18", codec_driver::draft18),
    ];
    for (name, run) in targets {
        let inputs = pack::load(&fuzz, name);
        assert!(inputs.len() >= 1000, "{name}: {} inputs in its pack", inputs.len());
        for input in &inputs {
            run(input);
        }
    }
}
