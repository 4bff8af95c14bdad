//! The `relay` fuzz target's corpus under plain `cargo test`: every file of
//! `fuzz/corpus/relay/` and every input of `fuzz/packs/relay.pack` (what `cargo fuzz cmin`
//! kept of a fuzzing run: `fuzz/src/pack.rs`) goes through the target's own driver
//! (`fuzz/src/relay_driver.rs`, a module of this crate by path), which panics when an invariant
//! breaks. The `seed-*` files are written by [`seeds`] and checked to be what it writes
//! (`MOQ_WRITE_SEEDS=1 cargo test -p moq-edge-relay --test shards fuzz` rewrites them); `regress-*` files are
//! inputs that once broke an invariant.

use std::path::PathBuf;

use crate::pack;
use crate::relay_driver::{encode, Action, Driver, Setup};

/// The repository's top, two floors above the relay crate.
fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus() -> PathBuf {
    repository().join("fuzz/corpus/relay")
}

/// Action shorthands: client `c` (an index into the clients so far).
fn connect(core: u8, draft: u8) -> Action {
    Action::Connect { core, draft }
}
fn put(c: u8, s: u8, len: u8) -> Action {
    Action::Put { c, s, len }
}
fn wait(tenths: u8) -> Action {
    Action::Wait { tenths }
}

/// A publisher on core 0 in `pd`, a subscriber on the last core in `sd`: announce, subscribe,
/// accept, two groups, a FETCH, an update and a cancel.
fn pubsub(pd: u8, sd: u8) -> Vec<Action> {
    vec![
        connect(0, pd),
        Action::Announce { c: 0, ns: 0 },
        connect(2, sd),
        Action::Subscribe { c: 1, t: 0 },
        Action::Accept { c: 0, ok: true },
        Action::Open { c: 0, a: 0, group: 1 },
        put(0, 0, 4),
        put(0, 0, 0),
        put(0, 0, 70),
        Action::End { c: 0, s: 0, reset: false },
        Action::Open { c: 0, a: 0, group: 2 },
        put(0, 0, 1),
        Action::Datagram { c: 0, a: 0, group: 3 },
        Action::Fetch { c: 1, t: 0, start: 0 },
        Action::Update { c: 1, r: 0, forward: false },
        put(0, 0, 2),
        Action::Update { c: 1, r: 0, forward: true },
        Action::End { c: 0, s: 0, reset: true },
        wait(5),
        Action::Cancel { c: 1, r: 0 },
        wait(30),
    ]
}

/// The seeds: each scenario as an input.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (pd, sd) in [(0, 0), (1, 1), (2, 2), (0, 2), (2, 1)] {
        let setup = Setup { cores: 3, small_mesh: false };
        out.push((format!("seed-pubsub-d{pd}-d{sd}"), encode(setup, &pubsub(pd, sd))));
    }
    // Two publishers of one track (PUBLISH), merged for two subscribers on other cores.
    let merge = vec![
        connect(0, 2),
        connect(1, 1),
        connect(2, 0),
        connect(1, 2),
        Action::Subscribe { c: 2, t: 5 },
        Action::Publish { c: 0, t: 5 },
        Action::Publish { c: 1, t: 5 },
        Action::Subscribe { c: 3, t: 5 },
        Action::Open { c: 0, a: 0, group: 0 },
        Action::Open { c: 1, a: 0, group: 0 },
        put(0, 0, 3),
        put(1, 0, 3),
        put(0, 0, 3),
        Action::End { c: 0, s: 0, reset: false },
        Action::Disconnect { c: 1 },
        wait(40),
    ];
    out.push(("seed-merge".into(), encode(Setup { cores: 3, small_mesh: false }, &merge)));
    // A core that stops taking mesh messages with a small mesh limit: long streams, both ways.
    let mut stall = vec![
        connect(0, 0),
        connect(1, 2),
        Action::Announce { c: 0, ns: 0 },
        Action::Announce { c: 0, ns: 1 },
        Action::Subscribe { c: 1, t: 0 },
        Action::Subscribe { c: 1, t: 1 },
        Action::Accept { c: 0, ok: true },
        Action::Accept { c: 0, ok: true },
        Action::Open { c: 0, a: 0, group: 0 },
        Action::Open { c: 0, a: 1, group: 0 },
        put(0, 0, 1),
        put(0, 1, 1),
        Action::Stall { src: 0, dst: 1, on: true },
        Action::Stall { src: 1, dst: 0, on: true },
    ];
    for i in 0..12 {
        stall.push(put(0, i % 2, 40));
    }
    stall.extend([
        Action::Open { c: 0, a: 0, group: 1 },
        put(0, 2, 5),
        Action::Datagram { c: 0, a: 1, group: 2 },
        Action::Stall { src: 0, dst: 1, on: false },
        Action::Stall { src: 1, dst: 0, on: false },
        put(0, 2, 5),
        Action::End { c: 0, s: 2, reset: false },
        wait(10),
    ]);
    out.push(("seed-stalled-core".into(), encode(Setup { cores: 2, small_mesh: true }, &stall)));
    // A hostile client: bytes of its own on the control stream and on request and data streams.
    let hostile = vec![
        connect(0, 0),
        connect(1, 2),
        Action::Announce { c: 0, ns: 2 },
        Action::Subscribe { c: 1, t: 2 },
        Action::Raw { c: 1, uni: true, k: 3, data: vec![0x04, 0x01, 0x02, 0x03], fin: false },
        Action::Raw { c: 1, uni: false, k: 2, data: vec![0x03, 0x00, 0x05, 0xff, 0xff], fin: true },
        Action::Raw { c: 0, uni: false, k: 0, data: vec![0x40, 0x15, 0x00, 0x01], fin: false },
        Action::Accept { c: 0, ok: false },
        wait(50),
    ];
    out.push(("seed-hostile".into(), encode(Setup { cores: 2, small_mesh: false }, &hostile)));
    out
}

#[test]
fn relay_seeds_are_committed() {
    pack::check_seeds(&corpus(), seeds());
}

#[test]
fn relay_corpus_replays_through_the_fuzz_driver() {
    let files = pack::committed_files(&corpus());
    assert!(files.len() > seeds().len(), "{} files", files.len());
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let outcome = std::panic::catch_unwind(|| Driver::run(&bytes));
        assert!(outcome.is_ok(), "{} broke an invariant (see the panic above)", f.display());
    }
    let inputs = pack::load(&pack::fuzz_dir(&repository().to_string_lossy()), "relay");
    assert!(inputs.len() >= 1000, "{} inputs in the relay pack", inputs.len());
    for (n, input) in inputs.iter().enumerate() {
        let outcome = std::panic::catch_unwind(|| Driver::run(input));
        assert!(outcome.is_ok(), "relay pack input {n} broke an invariant (see the panic above)");
    }
}

/// The seeds reach what they are for: objects delivered across cores, the mesh limit shedding
/// streams, the hostile client closed and nobody else.
#[test]
fn relay_seeds_reach_the_relay_paths_they_name() {
    let find = |name: &str| seeds().into_iter().find(|(n, _)| n == name).unwrap().1;
    let mut d = Driver::new(Setup { cores: 3, small_mesh: false });
    let (_, actions) = crate::relay_driver::decode(&find("seed-pubsub-d0-d2"));
    for a in &actions[..9] {
        d.act(a);
    }
    let objects = d.relay.shards.iter().map(|s| s.stats().objects_out).sum::<u64>();
    assert_eq!(objects, 3, "the first group's objects reached the subscriber");

    let (setup, actions) = crate::relay_driver::decode(&find("seed-stalled-core"));
    let mut d = Driver::new(setup);
    for a in &actions {
        d.act(a);
    }
    let shed = d.relay.shards.iter().map(|s| s.stats().mesh_shed_streams).sum::<u64>();
    assert!(shed >= 1, "the small mesh limit shed streams toward the stuck core");
    d.finish();

    let (setup, actions) = crate::relay_driver::decode(&find("seed-hostile"));
    let mut d = Driver::new(setup);
    for a in &actions {
        d.act(a);
    }
    let closed: Vec<bool> = d.relay.clients.iter().map(|c| c.closed_by_relay.is_some()).collect();
    assert_eq!(closed, vec![true, true], "both hostile clients were closed");
    d.finish();
}
