//! The client's [`Publisher`], [`Subscriber`] and [`Fleet`] over real QUIC, every draft,
//! against a server whose connections run the same state machines as handlers (no relay):
//! a fleet of subscribers on one thread gets a group from a serving publisher; a client
//! publisher announces and publishes to an ingesting subscriber.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::codes::request_error;
use moq_edge::client::{
    ClientError, Fleet, Publisher, PublisherCore, Received, RequestState, SessionCore, Subscriber,
    SubscriberCore,
};
use moq_edge::moqt::{MoqtApp, RequestHandler};
use moq_edge::runtime::app::PerConnection;
use moq_edge::runtime::{self, AppFactory, ConnApp, RuntimeConfig, ServerHandle};
use moq_edge::session::{Event, Session, SessionConfig};
use moq_edge::wire::model::{FullTrackName, RequestId, Role, SetupOptions, TrackNamespace};
use moq_edge::wire::Version;

const DRAFTS: [Version; 5] = Version::ALL;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn track(name: &'static str) -> FullTrackName {
    FullTrackName {
        namespace: TrackNamespace::from_strs(&["live", "q"]),
        name: Bytes::from_static(name.as_bytes()),
    }
}

fn group() -> Vec<Bytes> {
    vec![Bytes::from_static(b"zero"), Bytes::from(vec![7u8; 5000]), Bytes::from_static(b"two")]
}

fn server(factory: impl AppFactory) -> ServerHandle {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    runtime::start(rc, Arc::new(factory)).expect("server starts")
}

fn server_session(alpn: &[u8]) -> Session {
    let version = Version::from_alpn(alpn).expect("a MoQT ALPN");
    Session::new(version, Role::Server, SessionConfig::default(), SetupOptions::default())
}

/// Server side: publishes track "video"; every new subscription gets group 5 at once.
struct ServeGroup {
    core: PublisherCore,
    served: HashSet<RequestId>,
}

impl RequestHandler for ServeGroup {
    fn on_event(&mut self, session: &mut Session, event: Event) {
        self.core.on_event(session, event);
        let new: Vec<RequestId> = self
            .core
            .subscriptions()
            .filter(|(r, d)| d.state == RequestState::Accepted && !self.served.contains(r))
            .map(|(r, _)| r)
            .collect();
        if !new.is_empty() {
            self.core.send_group(session, &track("video"), 5, &group()).unwrap();
            self.served.extend(new);
        }
    }
}

/// A server whose every connection is a [`ServeGroup`].
fn serve_group() -> impl AppFactory {
    PerConnection::new(
        moq_edge::moqt::draft_alpns(&moq_edge::wire::Version::ALL),
        |alpn: &[u8]| -> Box<dyn ConnApp> {
            let mut core = PublisherCore::new();
            core.add_track(track("video"));
            Box::new(MoqtApp::new(server_session(alpn), ServeGroup { core, served: HashSet::new() }))
        },
    )
}

/// Twenty subscribers on one thread subscribe and each gets the group byte-exact; an unknown
/// track is refused with DOES_NOT_EXIST over QUIC too.
#[test]
fn fleet_of_subscribers_receives_a_group() {
    let server = server(serve_group());
    for version in DRAFTS {
        let mut fleet = Fleet::subscribers(server.local_addr(), version, 20, deadline()).unwrap();
        let ids = fleet.subscribe_all(&track("video"), None, deadline()).unwrap();
        fleet
            .drive_until(deadline(), |i, core| core.subscription(ids[i]).unwrap().streams_finished == 1)
            .unwrap_or_else(|e| panic!("{version:?}: {e}"));
        let want: Vec<Received> = group()
            .into_iter()
            .enumerate()
            .map(|(i, payload)| Received {
                group: 5,
                subgroup: 0,
                object: i as u64,
                payload,
                via_datagram: false,
            })
            .collect();
        for (i, core) in fleet.cores().iter().enumerate() {
            assert_eq!(core.received(ids[i]), &want[..], "{version:?}: subscriber {i}");
        }
        assert_eq!(fleet.received_counts(&ids), vec![3; 20]);

        let err = fleet.subscribe_all(&track("nope"), None, deadline()).unwrap_err();
        assert!(
            matches!(err.root(), ClientError::Refused { code, .. } if *code == request_error::DOES_NOT_EXIST),
            "{version:?}: {err}"
        );
        fleet.close().unwrap();

        // One subscriber alone, through `Subscriber`.
        let mut sub = Subscriber::connect(server.local_addr(), version, deadline()).unwrap();
        let rid = sub.subscribe(track("video"), None, deadline()).unwrap();
        sub.pump_until(deadline(), |c| c.received(rid).len() == 3).unwrap();
        assert_eq!(sub.received(rid), &want[..], "{version:?}");
        let err = sub.subscribe(track("nope"), None, deadline()).unwrap_err();
        assert!(matches!(err, ClientError::Refused { code: 0x10, .. }), "{version:?}: {err}");
        sub.close().unwrap();
    }
    server.shutdown().expect("stops");
}

type Sink = Arc<Mutex<Vec<(FullTrackName, Received)>>>;

/// Server side: accepts PUBLISH_NAMESPACE and PUBLISH; subscribes to "video" once a namespace
/// is announced; everything received goes to the shared sink.
struct Ingest {
    core: SubscriberCore,
    subscribed: bool,
    sink: Sink,
}

impl RequestHandler for Ingest {
    fn on_event(&mut self, session: &mut Session, event: Event) {
        self.core.on_event(session, event);
        if !self.subscribed && self.core.namespaces().next().is_some() {
            self.core.subscribe(session, track("video"), None).unwrap();
            self.subscribed = true;
        }
        let ids: Vec<(RequestId, FullTrackName)> =
            self.core.subscriptions().map(|(r, s)| (r, s.track.clone())).collect();
        for (rid, t) in ids {
            let got = self.core.take_received(rid);
            self.sink.lock().unwrap().extend(got.into_iter().map(|r| (t.clone(), r)));
        }
    }
}

/// A server whose every connection is an [`Ingest`] into `sink`.
fn ingest(sink: Sink) -> impl AppFactory {
    PerConnection::new(
        moq_edge::moqt::draft_alpns(&moq_edge::wire::Version::ALL),
        move |alpn: &[u8]| -> Box<dyn ConnApp> {
            let mut core = SubscriberCore::new();
            core.accept_publish(None);
            Box::new(MoqtApp::new(
                server_session(alpn),
                Ingest { core, subscribed: false, sink: sink.clone() },
            ))
        },
    )
}

/// A client publisher announces (the server subscribes back) and publishes a second track;
/// both groups reach the server.
#[test]
fn publisher_announces_and_publishes_over_quic() {
    let sink: Sink = Arc::default();
    let server = server(ingest(sink.clone()));
    for version in DRAFTS {
        sink.lock().unwrap().clear();
        let mut publisher = Publisher::connect(server.local_addr(), version, deadline()).unwrap();
        let video = track("video");
        publisher.add_track(video.clone());
        publisher.announce(video.namespace.clone(), deadline()).unwrap();
        publisher.pump_until(deadline(), |c| c.active(&video) == 1).unwrap();
        assert_eq!(publisher.send_group(&video, 0, &group()).unwrap(), 1);

        let audio = track("audio");
        publisher.publish(audio.clone(), true, deadline()).unwrap();
        assert_eq!(publisher.send_group(&audio, 3, &group()[..2]).unwrap(), 1);

        publisher.pump_until(deadline(), |_| sink.lock().unwrap().len() == 5).unwrap();
        let got = sink.lock().unwrap().clone();
        let of = |t: &FullTrackName| -> Vec<(u64, u64, Bytes)> {
            got.iter()
                .filter(|(tt, _)| tt == t)
                .map(|(_, r)| (r.group, r.object, r.payload.clone()))
                .collect()
        };
        let g = group();
        assert_eq!(
            of(&video),
            vec![(0, 0, g[0].clone()), (0, 1, g[1].clone()), (0, 2, g[2].clone())],
            "{version:?}"
        );
        assert_eq!(of(&audio), vec![(3, 0, g[0].clone()), (3, 1, g[1].clone())], "{version:?}");
        publisher.close().unwrap();
    }
    server.shutdown().expect("stops");
}
