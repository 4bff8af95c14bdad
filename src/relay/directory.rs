//! The relay's side of the namespace directory (config `directory`; ARCHITECTURE.md
//! "Namespace directory"). The directory itself is a Redis client off the cores; a core only
//! says what it needs ([`DirectoryAsk`], taken by the runtime) and hears back answers
//! (`Input::DirectoryAnswer`), routes (the link of the relay that has a namespace takes it as
//! a route, `Input::LinkRoute`) and, for discovery, namespaces announced at other relays
//! (`Input::RemoteNamespace`).
//!
//! - Register: an announcement by a session of this core that is not a link (a publisher, or
//!   a downstream relay), and a PUBLISH of a track, register the namespace; its withdrawal,
//!   or the end of that PUBLISH, unregisters it (the directory counts them across cores).
//! - Resolve: the owner of a track that no local publisher and no route serves asks, once per
//!   namespace at a time, and holds the request meanwhile ([`DIRECTORY_WAIT`]); a request
//!   from another relay or down a link is never resolved here (the directory names the relay
//!   that has the publisher, so one hop is enough, and no request goes round in a loop).
//! - Discovery: the prefixes of this core's namespace subscriptions are watched.
//!
//! The same registrations, told as [`RelayEvent`]s in the order they happen, are what the
//! event hooks report (config `events_url`/`events_file`, ARCHITECTURE.md "Event hooks"):
//! they are kept when hooks are configured, with or without a directory.

use crate::msg::ConnId;
use ahash::{HashMap, HashSet};
use std::time::Duration;

use super::namespaces::Requester;
use wire::model::{FullTrackName, TrackNamespace};

/// How long a request waits for the directory's answer and the link it leads to.
pub const DIRECTORY_WAIT: Duration = Duration::from_secs(2);

/// What a core asks of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectoryAsk {
    /// This relay serves this namespace now.
    Register(TrackNamespace),
    /// It no longer does.
    Unregister(TrackNamespace),
    /// Which relay serves this namespace (the answer comes back to this core).
    Lookup(TrackNamespace),
    /// A namespace subscription's prefix is watched (`on`) or no longer.
    Watch {
        /// The prefix.
        prefix: TrackNamespace,
        /// Watched from now on, or no longer.
        on: bool,
    },
}

/// A broadcast's life at this core, for the event hooks: what registers and unregisters a
/// namespace in the directory, with the track of a PUBLISH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayEvent {
    /// A session of this core (not a link) announced `namespace` (`on`), or withdrew it or
    /// closed.
    Namespace {
        /// The namespace.
        namespace: TrackNamespace,
        /// Announced, or withdrawn.
        on: bool,
    },
    /// A PUBLISH of `track` by a session of this core (not a link) began (`on`) or ended.
    Track {
        /// The track.
        track: FullTrackName,
        /// Began, or ended.
        on: bool,
    },
}

/// Lookups of one core waiting for their answer at most (more are answered as misses).
const MAX_LOOKUPS: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct Directory {
    enabled: bool,
    out: Vec<DirectoryAsk>,
    /// Lookups sent and not answered yet.
    looking: HashSet<TrackNamespace>,
    /// Announcements of this core's sessions registered: (namespace, session).
    announced: HashSet<(TrackNamespace, ConnId)>,
    /// Prefixes of this core's namespace subscriptions, counted.
    watched: HashMap<TrackNamespace, u32>,
    /// The event hooks' record since the last take, when hooks are configured.
    events: Option<Vec<RelayEvent>>,
}

impl Directory {
    /// `enabled`: a directory is configured; `events`: event hooks are.
    pub(crate) fn new(enabled: bool, events: bool) -> Self {
        Directory { enabled, events: events.then(Vec::new), ..Directory::default() }
    }

    /// Whether a request by `who` is resolved through the directory (see the module header).
    pub(crate) fn resolves(&self, who: Requester) -> bool {
        self.enabled && !who.from_upstream && who.node.is_none()
    }

    /// Asks which relay serves `namespace`; false when it cannot be asked (too many lookups
    /// under way): the request gets its answer as for a miss.
    pub(crate) fn lookup(&mut self, namespace: &TrackNamespace) -> bool {
        if self.looking.contains(namespace) {
            return true;
        }
        if self.looking.len() >= MAX_LOOKUPS {
            return false;
        }
        self.looking.insert(namespace.clone());
        self.out.push(DirectoryAsk::Lookup(namespace.clone()));
        true
    }

    /// The lookup of `namespace` was answered.
    pub(crate) fn answered(&mut self, namespace: &TrackNamespace) {
        self.looking.remove(namespace);
    }

    /// Session `conn` of this core announced `namespace`.
    pub(crate) fn announced(&mut self, namespace: &TrackNamespace, conn: ConnId) {
        let kept = self.enabled || self.events.is_some();
        if !kept || !self.announced.insert((namespace.clone(), conn)) {
            return;
        }
        if self.enabled {
            self.out.push(DirectoryAsk::Register(namespace.clone()));
        }
        if let Some(events) = &mut self.events {
            events.push(RelayEvent::Namespace { namespace: namespace.clone(), on: true });
        }
    }

    /// Session `conn` of this core withdrew `namespace` (or closed).
    pub(crate) fn withdrawn(&mut self, namespace: &TrackNamespace, conn: ConnId) {
        if !self.announced.remove(&(namespace.clone(), conn)) {
            return;
        }
        if self.enabled {
            self.out.push(DirectoryAsk::Unregister(namespace.clone()));
        }
        if let Some(events) = &mut self.events {
            events.push(RelayEvent::Namespace { namespace: namespace.clone(), on: false });
        }
    }

    /// A PUBLISH of `track` began (`on`) or ended on this core.
    pub(crate) fn published(&mut self, track: FullTrackName, on: bool) {
        if self.enabled {
            let namespace = track.namespace.clone();
            self.out.push(if on {
                DirectoryAsk::Register(namespace)
            } else {
                DirectoryAsk::Unregister(namespace)
            });
        }
        if let Some(events) = &mut self.events {
            events.push(RelayEvent::Track { track, on });
        }
    }

    /// The event hooks' record since the last call (empty when hooks are not configured).
    pub(crate) fn take_events(&mut self) -> Vec<RelayEvent> {
        self.events.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A namespace subscription of `prefix` began (`on`) or ended on this core.
    pub(crate) fn watch(&mut self, prefix: &TrackNamespace, on: bool) {
        if !self.enabled {
            return;
        }
        let n = self.watched.entry(prefix.clone()).or_default();
        let was = *n;
        *n = if on { n.saturating_add(1) } else { n.saturating_sub(1) };
        let now = *n;
        if now == 0 {
            self.watched.remove(prefix);
        }
        if (was == 0) != (now == 0) {
            self.out.push(DirectoryAsk::Watch { prefix: prefix.clone(), on });
        }
    }

    pub(crate) fn take(&mut self) -> Vec<DirectoryAsk> {
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::ConnId;

    fn ns(f: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(f)
    }

    #[test]
    fn registrations_and_watches_are_counted_once_per_change() {
        let mut d = Directory::new(true, false);
        d.announced(&ns(&["live"]), ConnId(1));
        d.announced(&ns(&["live"]), ConnId(1));
        d.announced(&ns(&["live"]), ConnId(2));
        d.withdrawn(&ns(&["live"]), ConnId(3));
        d.withdrawn(&ns(&["live"]), ConnId(1));
        d.watch(&ns(&["a"]), true);
        d.watch(&ns(&["a"]), true);
        d.watch(&ns(&["a"]), false);
        d.watch(&ns(&["a"]), false);
        use DirectoryAsk::*;
        assert_eq!(
            d.take(),
            vec![
                Register(ns(&["live"])),
                Register(ns(&["live"])),
                Unregister(ns(&["live"])),
                Watch { prefix: ns(&["a"]), on: true },
                Watch { prefix: ns(&["a"]), on: false },
            ]
        );
        assert!(d.lookup(&ns(&["x"])));
        assert!(d.lookup(&ns(&["x"])), "one lookup per namespace at a time");
        assert_eq!(d.take(), vec![Lookup(ns(&["x"]))]);
        d.answered(&ns(&["x"]));
        assert!(d.lookup(&ns(&["x"])));
        assert_eq!(d.take().len(), 1);
    }

    #[test]
    fn off_it_asks_nothing_and_resolves_only_end_users() {
        let mut d = Directory::new(false, false);
        d.announced(&ns(&["live"]), ConnId(1));
        d.published(FullTrackName { namespace: ns(&["live"]), name: "v".into() }, true);
        d.watch(&ns(&["a"]), true);
        assert!(d.take().is_empty());
        assert!(!d.resolves(Requester::default()));
        let d = Directory::new(true, false);
        assert!(d.resolves(Requester::default()));
        assert!(!d.resolves(Requester { from_upstream: true, node: None }));
        assert!(!d.resolves(Requester { from_upstream: false, node: Some(7) }));
    }

    /// Hooks without a directory: the record, in order, and nothing asked of a directory.
    #[test]
    fn hooks_keep_the_record_without_a_directory() {
        let mut d = Directory::new(false, true);
        let track = FullTrackName { namespace: ns(&["live", "b"]), name: "v".into() };
        d.announced(&ns(&["live"]), ConnId(1));
        d.announced(&ns(&["live"]), ConnId(1));
        d.published(track.clone(), true);
        d.withdrawn(&ns(&["live"]), ConnId(2));
        d.withdrawn(&ns(&["live"]), ConnId(1));
        d.published(track.clone(), false);
        assert!(d.take().is_empty());
        use RelayEvent::*;
        assert_eq!(
            d.take_events(),
            vec![
                Namespace { namespace: ns(&["live"]), on: true },
                Track { track: track.clone(), on: true },
                Namespace { namespace: ns(&["live"]), on: false },
                Track { track, on: false },
            ]
        );
        assert!(d.take_events().is_empty());
        assert!(!d.resolves(Requester::default()));
    }
}
