//! The `relay` fuzz target's driver, shared with the relay crate's relay-shard tests
//! (`src/relay/tests/shards/fuzz.rs` includes it by path) so that the committed corpus replays under
//! plain `cargo test`.
//!
//! A fuzz input is a configuration byte followed by actions that clients take against a relay of
//! one to three simulated cores (the relay-shard harness, `src/relay/tests/shards/harness.rs`: real
//! `RelayShard`s and client `Session`s, a FIFO mesh per core pair, a simulated clock): connect
//! in any draft, announce, subscribe, PUBLISH, accept the relay's upstream SUBSCRIBE, open
//! subgroup streams, write objects, FIN or reset them, datagrams, FETCH, cancel a request,
//! REQUEST_UPDATE, raw bytes on a stream, disconnect, time steps, and a core that stops taking
//! (or takes again) what another core sends it. The requests name a handful of tracks, so
//! that publishers and subscribers meet.
//!
//! After every action it checks (ARCHITECTURE.md, "Malformed and abusive input"):
//! - nothing panics (the harness also asserts that every relay-side session's output reached
//!   its client);
//! - an action of one client never makes the relay close another client's session;
//! - no client that only used its session's API (no raw bytes) closes its connection: the
//!   relay never sends a well-behaved client anything its session rejects.
//!
//! At the end every client goes away, every core catches up and the clock runs past every
//! linger and grace period; then no core may hold a session, track, subscription or upstream.
//!
//! It uses only the layer crates, `std` and the harness (`crate::harness`, `crate::common`), which both
//! crates include by path.

use std::time::Duration;

use relay::RelayConfig;
use wire::model::{
    DatagramHeader, FetchKind, FullTrackName, Location, LocationFilter, Message, ObjectStatus, Parameters,
    Properties, PublishNamespace, RequestId, RequestUpdate, SetupOptions, SubgroupObject, SubscribeOk,
    TrackAlias,
};

use crate::common::{fetch_msg, header, ns, publish_as, subscribe_msg, track};
use crate::harness::{messages, ClientId, Relay};
use session::StreamId;

/// Actions taken from one input at most (each runs the relay until it is quiet).
pub const MAX_ACTIONS: usize = 96;
/// Client connections at most.
pub const MAX_CLIENTS: usize = 8;
/// The mesh limit of the "small" configuration (bit 2 of the configuration byte).
pub const SMALL_MESH: usize = 4096;

/// One thing a client, the clock or a core does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A client connects to core `core % cores` in draft `draft % 3`.
    Connect { core: u8, draft: u8 },
    /// PUBLISH_NAMESPACE of namespace `ns % 4`.
    Announce { c: u8, ns: u8 },
    /// SUBSCRIBE to track `t` (see [`track_of`]).
    Subscribe { c: u8, t: u8 },
    /// PUBLISH of track `t`, with a Track Alias of its own.
    Publish { c: u8, t: u8 },
    /// The client answers the oldest SUBSCRIBE the relay sent it: SUBSCRIBE_OK with a Track
    /// Alias of its own, or REQUEST_ERROR.
    Accept { c: u8, ok: bool },
    /// A subgroup stream for the client's `a`-th Track Alias, group `group`.
    Open { c: u8, a: u8, group: u8 },
    /// The next object on the client's `s`-th open stream, `len × 16` bytes.
    Put { c: u8, s: u8, len: u8 },
    /// FIN (or reset) of the client's `s`-th open stream.
    End { c: u8, s: u8, reset: bool },
    /// An object datagram for the client's `a`-th Track Alias.
    Datagram { c: u8, a: u8, group: u8 },
    /// A standalone FETCH of track `t` from group `start`.
    Fetch { c: u8, t: u8, start: u8 },
    /// The client ends its `r`-th request (UNSUBSCRIBE, or its stream's end).
    Cancel { c: u8, r: u8 },
    /// REQUEST_UPDATE of its `r`-th request, FORWARD `forward`.
    Update { c: u8, r: u8, forward: bool },
    /// Raw bytes on the client's `k`-th bidirectional (or unidirectional) stream, straight
    /// into the relay's session: the client is hostile from then on.
    Raw { c: u8, uni: bool, k: u8, data: Vec<u8>, fin: bool },
    /// The client's connection goes away.
    Disconnect { c: u8 },
    /// The clock moves `tenths` × 100 ms.
    Wait { tenths: u8 },
    /// Core `dst` stops taking what core `src` sends it (`on`), or catches up.
    Stall { src: u8, dst: u8, on: bool },
}

const CONNECT: u8 = 0;
const ANNOUNCE: u8 = 1;
const SUBSCRIBE: u8 = 2;
const PUBLISH: u8 = 3;
const ACCEPT: u8 = 4;
const OPEN: u8 = 5;
const PUT: u8 = 6;
const END: u8 = 7;
const DATAGRAM: u8 = 8;
const FETCH: u8 = 9;
const CANCEL: u8 = 10;
const UPDATE: u8 = 11;
const RAW: u8 = 12;
const DISCONNECT: u8 = 13;
const WAIT: u8 = 14;
const STALL: u8 = 15;

/// The relay an input runs against, from byte 0: its low two bits the cores (1 to 3), bit 2
/// a small mesh limit ([`SMALL_MESH`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub cores: usize,
    pub small_mesh: bool,
}

impl Setup {
    fn byte(self) -> u8 {
        (self.cores as u8 - 1) | if self.small_mesh { 4 } else { 0 }
    }
}

/// Reads an input: byte 0 is the [`Setup`]; then each action is an op byte (low 4 bits the
/// kind, bit 4 its flag: OK, reset, unidirectional, FIN, FORWARD or "on"), its argument bytes,
/// and for [`Action::Raw`] a length byte and up to that many bytes.
pub fn decode(input: &[u8]) -> (Setup, Vec<Action>) {
    let Some((&b, mut rest)) = input.split_first() else {
        return (Setup { cores: 1, small_mesh: false }, Vec::new());
    };
    let setup = Setup { cores: 1 + usize::from(b & 3) % 3, small_mesh: b & 4 != 0 };
    let mut actions = Vec::new();
    while !rest.is_empty() && actions.len() < MAX_ACTIONS {
        let op = byte(&mut rest);
        let flag = op & 16 != 0;
        let mut arg = || byte(&mut rest);
        let action = match op & 15 {
            CONNECT => Action::Connect { core: arg(), draft: arg() },
            ANNOUNCE => Action::Announce { c: arg(), ns: arg() },
            SUBSCRIBE => Action::Subscribe { c: arg(), t: arg() },
            PUBLISH => Action::Publish { c: arg(), t: arg() },
            ACCEPT => Action::Accept { c: arg(), ok: flag },
            OPEN => Action::Open { c: arg(), a: arg(), group: arg() },
            PUT => Action::Put { c: arg(), s: arg(), len: arg() },
            END => Action::End { c: arg(), s: arg(), reset: flag },
            DATAGRAM => Action::Datagram { c: arg(), a: arg(), group: arg() },
            FETCH => Action::Fetch { c: arg(), t: arg(), start: arg() },
            CANCEL => Action::Cancel { c: arg(), r: arg() },
            UPDATE => Action::Update { c: arg(), r: arg(), forward: flag },
            RAW => {
                let (c, k, len) = (arg(), arg(), arg());
                let n = usize::from(len).min(rest.len());
                let (data, tail) = rest.split_at(n);
                rest = tail;
                Action::Raw { c, uni: op & 32 != 0, k, data: data.to_vec(), fin: flag }
            }
            DISCONNECT => Action::Disconnect { c: arg() },
            WAIT => Action::Wait { tenths: arg() },
            _ => Action::Stall { src: arg(), dst: arg(), on: flag },
        };
        actions.push(action);
    }
    (setup, actions)
}

/// The inverse of [`decode`], for writing seeds (raw byte strings over 255 bytes are cut).
pub fn encode(setup: Setup, actions: &[Action]) -> Vec<u8> {
    let mut out = vec![setup.byte()];
    let f = |flag: bool| if flag { 16 } else { 0 };
    for a in actions {
        match a {
            Action::Connect { core, draft } => out.extend([CONNECT, *core, *draft]),
            Action::Announce { c, ns } => out.extend([ANNOUNCE, *c, *ns]),
            Action::Subscribe { c, t } => out.extend([SUBSCRIBE, *c, *t]),
            Action::Publish { c, t } => out.extend([PUBLISH, *c, *t]),
            Action::Accept { c, ok } => out.extend([ACCEPT | f(*ok), *c]),
            Action::Open { c, a, group } => out.extend([OPEN, *c, *a, *group]),
            Action::Put { c, s, len } => out.extend([PUT, *c, *s, *len]),
            Action::End { c, s, reset } => out.extend([END | f(*reset), *c, *s]),
            Action::Datagram { c, a, group } => out.extend([DATAGRAM, *c, *a, *group]),
            Action::Fetch { c, t, start } => out.extend([FETCH, *c, *t, *start]),
            Action::Cancel { c, r } => out.extend([CANCEL, *c, *r]),
            Action::Update { c, r, forward } => out.extend([UPDATE | f(*forward), *c, *r]),
            Action::Raw { c, uni, k, data, fin } => {
                let data = &data[..data.len().min(255)];
                out.extend([RAW | f(*fin) | if *uni { 32 } else { 0 }, *c, *k, data.len() as u8]);
                out.extend_from_slice(data);
            }
            Action::Disconnect { c } => out.extend([DISCONNECT, *c]),
            Action::Wait { tenths } => out.extend([WAIT, *tenths]),
            Action::Stall { src, dst, on } => out.extend([STALL | f(*on), *src, *dst]),
        }
    }
    out
}

/// The next byte of `rest` (0 once it is empty).
fn byte(rest: &mut &[u8]) -> u8 {
    let Some((&b, tail)) = rest.split_first() else { return 0 };
    *rest = tail;
    b
}

/// Track `t`: namespace `fz/<t % 4>`, name `t<(t / 4) % 2>` (eight tracks in four namespaces).
pub fn track_of(t: u8) -> FullTrackName {
    track(&["fz", &(t % 4).to_string()], &format!("t{}", (t / 4) % 2))
}

/// What the driver remembers of one client.
#[derive(Debug, Default)]
struct Client {
    /// The harness's client id.
    id: ClientId,
    /// Requests it made (for Cancel and Update).
    requests: Vec<RequestId>,
    /// SUBSCRIBEs the relay sent it, not answered yet.
    upstream: Vec<RequestId>,
    /// Track Aliases it chose (SUBSCRIBE_OK, PUBLISH), by the order it chose them.
    aliases: Vec<TrackAlias>,
    /// Its open subgroup streams: (stream, next Object ID).
    streams: Vec<(StreamId, u64)>,
    /// It sent raw bytes: what follows may rightly close it.
    hostile: bool,
}

/// One run: the relay, its clients and what the driver knows of them.
pub struct Driver {
    pub relay: Relay,
    clients: Vec<Client>,
    cores: usize,
    next_alias: u64,
}

impl Driver {
    pub fn new(setup: Setup) -> Driver {
        let mut config = RelayConfig::default();
        if setup.small_mesh {
            config.mesh_queue = SMALL_MESH;
        }
        Driver {
            relay: Relay::with_config(setup.cores, config),
            clients: Vec::new(),
            cores: setup.cores,
            next_alias: 100,
        }
    }

    /// Runs one input (see the module header); panics when an invariant breaks.
    pub fn run(input: &[u8]) {
        let (setup, actions) = decode(input);
        let mut d = Driver::new(setup);
        for a in &actions {
            d.act(a);
        }
        d.finish();
    }

    fn client(&self, c: u8) -> Option<usize> {
        let n = self.clients.len();
        (n > 0).then(|| usize::from(c) % n).filter(|&i| !self.relay.clients[self.clients[i].id].gone)
    }

    /// Applies `a`, runs the relay until it is quiet and checks the invariants.
    pub fn act(&mut self, a: &Action) {
        let open_before: Vec<bool> = self.relay.clients.iter().map(|c| !c.gone).collect();
        let actor = self.apply(a);
        self.relay.run_until_quiet();
        self.collect();
        // Only the acting client may have been closed by the relay (time steps and stalls
        // act for no client: a timeout may close anyone).
        if let Some(actor) = actor {
            for (i, c) in self.relay.clients.iter().enumerate() {
                if i != actor && open_before.get(i).copied().unwrap_or(false) {
                    assert_eq!(c.closed_by_relay, None, "{a:?} by client {actor} closed client {i}");
                }
            }
        }
        for c in &self.clients {
            let rc = &self.relay.clients[c.id];
            if !c.hostile {
                assert_eq!(rc.closed_by_client, None, "client {} rejected what the relay sent it", c.id);
            }
        }
    }

    /// Does `a`; returns the harness id of the client that acted (if any).
    fn apply(&mut self, a: &Action) -> Option<ClientId> {
        let r = &mut self.relay;
        match a {
            Action::Connect { core, draft } => {
                if self.clients.len() >= MAX_CLIENTS {
                    return None;
                }
                let version = crate::drafts::pick(*draft);
                let id = r.connect_with(usize::from(*core) % self.cores, version, SetupOptions::default());
                self.clients.push(Client { id, ..Client::default() });
                Some(id)
            }
            Action::Wait { tenths } => {
                r.advance(Duration::from_millis(100) * u32::from(*tenths));
                None
            }
            Action::Stall { src, dst, on } => {
                let (src, dst) = (usize::from(*src) % self.cores, usize::from(*dst) % self.cores);
                if src != dst {
                    r.stall(src, dst, *on);
                }
                None
            }
            _ => {
                let c = self.client(client_of(a))?;
                self.client_action(c, a);
                Some(self.clients[c].id)
            }
        }
    }

    fn client_action(&mut self, c: usize, a: &Action) {
        let id = self.clients[c].id;
        let version = self.relay.clients[id].version;
        let r = &mut self.relay;
        let me = &mut self.clients[c];
        let pick = |n: usize, i: u8| (n > 0).then(|| usize::from(i) % n);
        match a {
            Action::Announce { ns: n, .. } => {
                let Ok(rid) = r.session(id).next_request_id() else { return };
                let namespace = ns(&["fz", &(n % 4).to_string()]);
                let msg = Message::PublishNamespace(PublishNamespace {
                    request_id: rid,
                    namespace,
                    ..Default::default()
                });
                if r.session(id).send(msg).is_ok() {
                    me.requests.push(rid);
                }
            }
            Action::Subscribe { t, .. } => {
                let Ok(rid) = r.session(id).next_request_id() else { return };
                if r.session(id).send(subscribe_msg(rid, &track_of(*t), None)).is_ok() {
                    me.requests.push(rid);
                }
            }
            Action::Publish { t, .. } => {
                let Ok(rid) = r.session(id).next_request_id() else { return };
                let alias = TrackAlias(self.next_alias);
                self.next_alias += 1;
                if r.session(id).send(publish_as(version, rid, &track_of(*t), alias)).is_ok() {
                    me.requests.push(rid);
                    me.aliases.push(alias);
                }
            }
            Action::Accept { ok, .. } => {
                if me.upstream.is_empty() {
                    return;
                }
                let rid = me.upstream.remove(0);
                let msg = if *ok {
                    let alias = TrackAlias(self.next_alias);
                    self.next_alias += 1;
                    me.aliases.push(alias);
                    Message::SubscribeOk(SubscribeOk {
                        request_id: rid,
                        track_alias: alias,
                        params: Parameters::default(),
                        track_properties: Properties::new(),
                    })
                } else {
                    Message::RequestError(wire::model::RequestError {
                        request_id: rid,
                        error_code: wire::code::DOES_NOT_EXIST,
                        retry_interval: 0,
                        reason: bytes::Bytes::from_static(b"fuzz"),
                        redirect: None,
                    })
                };
                let _ = r.session(id).send(msg);
            }
            Action::Open { a, group, .. } => {
                let Some(i) = pick(me.aliases.len(), *a) else { return };
                let h = header(version, me.aliases[i], u64::from(*group), 0);
                if let Ok(s) = r.session(id).open_subgroup(&h) {
                    me.streams.push((s, 0));
                }
            }
            Action::Put { s, len, .. } => {
                let Some(i) = pick(me.streams.len(), *s) else { return };
                let (stream, next) = me.streams[i];
                let payload = bytes::Bytes::from(vec![0x5a; usize::from(*len) * 16]);
                let object = SubgroupObject {
                    object_id: next,
                    properties: Properties::new(),
                    payload_len: payload.len() as u64,
                    status: ObjectStatus::Normal,
                };
                if r.session(id).send_object(stream, &object, payload).is_ok() {
                    me.streams[i].1 += 1;
                }
            }
            Action::End { s, reset, .. } => {
                let Some(i) = pick(me.streams.len(), *s) else { return };
                let (stream, _) = me.streams.remove(i);
                let _ = if *reset {
                    r.session(id).reset_data_stream(stream, 0)
                } else {
                    r.session(id).finish_data_stream(stream)
                };
            }
            Action::Datagram { a, group, .. } => {
                let Some(i) = pick(me.aliases.len(), *a) else { return };
                let h = DatagramHeader {
                    track_alias: me.aliases[i],
                    group_id: u64::from(*group),
                    object_id: 0,
                    publisher_priority: Some(1),
                    properties: Properties::new(),
                    end_of_group: false,
                    status: None,
                };
                let _ = r.session(id).send_datagram(&h, b"datagram");
            }
            Action::Fetch { t, start, .. } => {
                let Ok(rid) = r.session(id).next_request_id() else { return };
                let from = Location { group: u64::from(*start), object: 0 };
                let filter = LocationFilter::AbsoluteStart { start: from };
                let kind = FetchKind::Standalone { track: track_of(*t) };
                if r.session(id).send(fetch_msg(rid, kind, Some(filter))).is_ok() {
                    me.requests.push(rid);
                }
            }
            Action::Cancel { r: i, .. } => {
                let Some(i) = pick(me.requests.len(), *i) else { return };
                let _ = r.session(id).end_request(me.requests[i]);
            }
            Action::Update { r: i, forward, .. } => {
                let Some(i) = pick(me.requests.len(), *i) else { return };
                let Ok(rid) = r.session(id).next_request_id() else { return };
                let params = Parameters { forward: Some(*forward), ..Default::default() };
                let m = RequestUpdate { request_id: rid, existing_request_id: me.requests[i], params };
                let _ = r.session(id).send(Message::RequestUpdate(m));
            }
            Action::Raw { uni, k, data, fin, .. } => {
                me.hostile = true;
                // Client-initiated bidirectional streams are 0, 4, 8 …; unidirectional 2, 6 ….
                let stream = u64::from(*k % 16) * 4 + if *uni { 2 } else { 0 };
                let t = session::Transmit::Stream {
                    id: StreamId(stream),
                    data: bytes::Bytes::copy_from_slice(data),
                    fin: *fin,
                    expires: None,
                };
                r.deliver_to_relay(id, &t);
            }
            Action::Disconnect { .. } => r.disconnect(id),
            Action::Connect { .. } | Action::Wait { .. } | Action::Stall { .. } => {}
        }
    }

    /// Takes every client's events: the SUBSCRIBEs the relay sent (to accept later).
    fn collect(&mut self) {
        for c in &mut self.clients {
            for m in messages(&self.relay.take_events(c.id)) {
                if let Message::Subscribe(s) = m {
                    c.upstream.push(s.request_id);
                }
            }
        }
    }

    /// Every client goes, every core catches up, the clock passes every linger and grace
    /// period: nothing may be left.
    pub fn finish(&mut self) {
        for c in &self.clients {
            if !self.relay.clients[c.id].gone {
                self.relay.disconnect(c.id);
            }
        }
        for src in 0..self.cores {
            for dst in 0..self.cores {
                self.relay.stall(src, dst, false);
            }
        }
        self.relay.run_until_quiet();
        for _ in 0..12 {
            self.relay.advance(Duration::from_secs(10));
        }
        for (core, shard) in self.relay.shards.iter().enumerate() {
            assert_eq!(shard.session_count(), 0, "core {core}: sessions left");
            assert_eq!(
                shard.state_counts(),
                (0, 0, 0),
                "core {core}: tracks, subscriptions or upstreams left"
            );
        }
    }
}

/// The client byte of a client action.
fn client_of(a: &Action) -> u8 {
    match a {
        Action::Announce { c, .. }
        | Action::Subscribe { c, .. }
        | Action::Publish { c, .. }
        | Action::Accept { c, .. }
        | Action::Open { c, .. }
        | Action::Put { c, .. }
        | Action::End { c, .. }
        | Action::Datagram { c, .. }
        | Action::Fetch { c, .. }
        | Action::Cancel { c, .. }
        | Action::Update { c, .. }
        | Action::Raw { c, .. }
        | Action::Disconnect { c } => *c,
        Action::Connect { .. } | Action::Wait { .. } | Action::Stall { .. } => 0,
    }
}
