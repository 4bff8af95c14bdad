//! A live publisher for the transport tests (`tests/webtransport.rs`, `tests/websocket.rs`):
//! `GROUPS` groups of `PER_GROUP` objects on one track, on its own thread, once told to go.
#![allow(dead_code)]

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::{Publisher, Relay};
use moq_edge::wire::model::{FullTrackName, TrackNamespace};
use moq_edge::wire::Version;

pub const GROUPS: u64 = 4;
pub const PER_GROUP: u64 = 5;

pub fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// Track `name` in the one-field namespace `ns`.
pub fn track(ns: &str, name: &str) -> FullTrackName {
    FullTrackName {
        namespace: TrackNamespace::from_strs(&[ns]),
        name: Bytes::copy_from_slice(name.as_bytes()),
    }
}

/// Announces `t`'s namespace on `relay` and serves the relay's SUBSCRIBE until told to go
/// (the returned sender), then publishes `GROUPS` groups of `PER_GROUP` objects made by
/// `payload` (as datagrams, cut to 900 bytes, when asked) and closes. Returns once the
/// namespace is announced.
pub fn publish(
    relay: Relay,
    version: Version,
    t: FullTrackName,
    datagrams: bool,
    payload: fn(u64, u64) -> Bytes,
) -> (thread::JoinHandle<()>, mpsc::Sender<()>) {
    let (ready_tx, ready) = mpsc::channel();
    let (go_tx, go) = mpsc::channel();
    let handle = thread::spawn(move || {
        let mut p = Publisher::connect(relay, version, deadline()).unwrap();
        p.add_track(t.clone());
        p.announce(t.namespace.clone(), deadline()).unwrap();
        ready_tx.send(()).unwrap();
        // Serving the relay's SUBSCRIBE meanwhile, until every subscriber is in.
        let end = deadline();
        while go.try_recv().is_err() {
            assert!(Instant::now() < end, "never told to go");
            p.pump(Instant::now() + Duration::from_millis(5)).unwrap();
        }
        assert!(p.core().active(&t) > 0, "the relay subscribed");
        for group in 0..GROUPS {
            let objects: Vec<Bytes> = (0..PER_GROUP).map(|o| payload(group, o)).collect();
            if datagrams {
                // Datagrams may be lost under load; these are few and small on loopback.
                let objects: Vec<Bytes> = objects.iter().map(|b| b.slice(..b.len().min(900))).collect();
                p.send_datagrams(&t, group, &objects).unwrap();
            } else {
                p.send_group(&t, group, &objects).unwrap();
            }
            p.pump(Instant::now() + Duration::from_millis(5)).unwrap();
        }
        p.pump(Instant::now() + Duration::from_millis(500)).unwrap();
        p.close().unwrap();
    });
    ready.recv().unwrap();
    (handle, go_tx)
}
