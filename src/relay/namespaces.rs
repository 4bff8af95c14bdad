//! The namespace table: which sessions published which namespaces (PUBLISH_NAMESPACE). Every
//! core keeps a full copy, updated by broadcast, so the owner shard of any track can route a
//! SUBSCRIBE to a publisher without asking another core. Announcements are rare next to
//! objects; a broadcast per announcement is cheap.

use super::msg::SessionRef;
use wire::model::TrackNamespace;

/// Where a namespace entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A PUBLISH_NAMESPACE of a session (a publisher, or a downstream relay forwarding one);
    /// `node` is that peer's relay node ID when it is a moq-edge relay.
    Announced { node: Option<u64> },
    /// A route of an upstream link (configuration): tracks under it are subscribed from the
    /// parent relay `node`.
    Upstream { node: u64 },
    /// Registered in the namespace directory by another relay of the cluster: discovery
    /// reports it, but it routes nothing (a request for it is looked up in the directory).
    Remote,
    /// Announced at the parent relay an upstream link leads to, as the parent answered the
    /// link's SUBSCRIBE_NAMESPACE: discovery reports it, so that a viewer on this edge finds a
    /// broadcast published further up; it routes nothing (the link's route covers it).
    Parent,
}

/// Whether namespace discovery reports entries that came this way.
fn discovered(via: &Via) -> bool {
    matches!(via, Via::Announced { .. } | Via::Remote | Via::Parent)
}

/// Who asks for a track, for the loop rules of [`NamespaceTable::route`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Requester {
    /// The request came from an upstream link: it may only go to announcing sessions.
    pub from_upstream: bool,
    /// The requesting peer's relay node ID, when it is a moq-edge relay: never routed to a
    /// link whose parent is that node (A → B → A).
    pub node: Option<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct NamespaceTable {
    /// In announcement order; the newest matching entry wins a tie.
    entries: Vec<(TrackNamespace, SessionRef, Via)>,
}

impl NamespaceTable {
    /// Adds an entry; true when it is an announcement (here or, `Via::Remote`, at another
    /// relay of the cluster) and `namespace` was not known that way before (upstream routes
    /// are not announcements: discovery does not see them). A remote entry is kept once.
    pub(crate) fn insert(&mut self, namespace: TrackNamespace, publisher: SessionRef, via: Via) -> bool {
        if via == Via::Remote && self.entries.iter().any(|(n, _, v)| *n == namespace && *v == Via::Remote) {
            return false;
        }
        let first =
            discovered(&via) && !self.entries.iter().any(|(n, _, v)| *n == namespace && discovered(v));
        self.entries.push((namespace, publisher, via));
        first
    }

    /// Removes one entry of `namespace` by `publisher`; true when it was the last
    /// announcement of `namespace` (here or remote).
    pub(crate) fn remove(&mut self, namespace: &TrackNamespace, publisher: SessionRef) -> bool {
        let Some(i) = self.entries.iter().rposition(|(n, p, _)| n == namespace && *p == publisher) else {
            return false;
        };
        let (_, _, via) = self.entries.remove(i);
        discovered(&via) && !self.entries.iter().any(|(n, _, v)| n == namespace && discovered(v))
    }

    /// Every announced namespace at or below `prefix`, each once, in announcement order.
    pub(crate) fn distinct_under(&self, prefix: &TrackNamespace) -> Vec<TrackNamespace> {
        let mut seen = ahash::HashSet::default();
        self.entries
            .iter()
            .filter(|(n, _, v)| discovered(v) && n.starts_with(prefix) && seen.insert(n))
            .map(|(n, _, _)| n.clone())
            .collect()
    }

    /// The publisher for a track in `namespace`: the longest matching prefix; on a tie an
    /// announcement before an upstream route, then the newest. Upstream routes are skipped
    /// for a request from an upstream link and for a request from the very relay the link
    /// leads to (loops).
    pub(crate) fn route(&self, namespace: &TrackNamespace, who: Requester) -> Option<SessionRef> {
        self.best(namespace, |via| match via {
            Via::Announced { .. } => true,
            Via::Upstream { node } => !who.from_upstream && who.node != Some(*node),
            Via::Remote | Via::Parent => false,
        })
    }

    /// Every announcer of `namespace` or of a prefix of it other than `first`, each session
    /// once, newest first: a relay subscribes to every matching publisher (draft-22 §7.6),
    /// `first` being the one [`NamespaceTable::route`] chose. Routes to upstream links are not
    /// publishers: they are configuration.
    pub(crate) fn other_announcers(&self, namespace: &TrackNamespace, first: SessionRef) -> Vec<SessionRef> {
        let mut out: Vec<SessionRef> = Vec::new();
        for (n, p, via) in self.entries.iter().rev() {
            let announced = matches!(via, Via::Announced { .. });
            if announced && *p != first && namespace.starts_with(n) && !out.contains(p) {
                out.push(*p);
            }
        }
        out
    }

    /// The upstream link that tracks in `namespace` are subscribed from (ignoring
    /// announcements): where an announcement of `namespace` is forwarded.
    pub(crate) fn upstream_for(&self, namespace: &TrackNamespace) -> Option<SessionRef> {
        self.best(namespace, |via| matches!(via, Via::Upstream { .. }))
    }

    /// The best `allowed` entry covering `namespace`: longest prefix, then an announcement
    /// before a route, then the newest.
    fn best(&self, namespace: &TrackNamespace, allowed: impl Fn(&Via) -> bool) -> Option<SessionRef> {
        let mut best: Option<((usize, bool), SessionRef)> = None;
        for (n, p, via) in &self.entries {
            let rank = (n.fields().len(), matches!(via, Via::Announced { .. }));
            if allowed(via) && namespace.starts_with(n) && best.is_none_or(|(r, _)| rank >= r) {
                best = Some((rank, *p));
            }
        }
        best.map(|(_, p)| p)
    }

    /// Announced namespaces with their announcer's entry (to forward upstream when a link
    /// comes up).
    pub(crate) fn announced(&self) -> impl Iterator<Item = (&TrackNamespace, SessionRef, Option<u64>)> {
        self.entries.iter().filter_map(|(n, p, v)| match v {
            Via::Announced { node } => Some((n, *p, *node)),
            Via::Upstream { .. } | Via::Remote | Via::Parent => None,
        })
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
    fn longest_prefix_then_newest_wins() {
        let (a, b, c) = (
            SessionRef { core: 0, conn: ConnId(1) },
            SessionRef { core: 1, conn: ConnId(2) },
            SessionRef { core: 0, conn: ConnId(3) },
        );
        let mut t = NamespaceTable::default();
        let any = Requester::default();
        let local = Via::Announced { node: None };
        assert_eq!(t.route(&ns(&["x"]), any), None);
        assert!(t.insert(ns(&["live"]), a, local));
        assert!(t.insert(ns(&["live", "sports"]), b, local));
        assert_eq!(t.route(&ns(&["live", "sports", "hd"]), any), Some(b));
        assert_eq!(t.route(&ns(&["live", "news"]), any), Some(a));
        assert_eq!(t.route(&ns(&["liv"]), any), None);
        assert!(!t.insert(ns(&["live", "sports"]), c, local), "a second announcement of a known namespace");
        assert_eq!(t.route(&ns(&["live", "sports"]), any), Some(c));
        assert_eq!(t.distinct_under(&ns(&["live"])), vec![ns(&["live"]), ns(&["live", "sports"])]);
        assert_eq!(t.distinct_under(&ns(&["live", "sports"])), vec![ns(&["live", "sports"])]);
        assert!(t.distinct_under(&ns(&["news"])).is_empty());
        assert!(!t.remove(&ns(&["live", "sports"]), c), "b still announces it");
        assert_eq!(t.route(&ns(&["live", "sports"]), any), Some(b));
        assert!(!t.remove(&ns(&["live", "sports"]), c), "not announced by c any more");
        assert!(t.remove(&ns(&["live", "sports"]), b));
        assert!(t.remove(&ns(&["live"]), a));
        assert!(t.is_empty());
    }

    #[test]
    fn upstream_routes_lose_ties_and_are_never_taken_back_upstream() {
        let (link, publisher, other) = (
            SessionRef { core: 0, conn: ConnId(1) },
            SessionRef { core: 1, conn: ConnId(2) },
            SessionRef { core: 1, conn: ConnId(3) },
        );
        let mut t = NamespaceTable::default();
        let any = Requester::default();
        assert!(
            !t.insert(TrackNamespace::from_strs::<&str>(&[]), link, Via::Upstream { node: 9 }),
            "not an announcement"
        );
        assert!(t.distinct_under(&ns(&[])).is_empty(), "routes are not discovered");
        assert_eq!(t.route(&ns(&["live", "a"]), any), Some(link), "the default route");
        assert_eq!(t.upstream_for(&ns(&["live"])), Some(link));
        assert!(t.insert(ns(&["live"]), publisher, Via::Announced { node: None }));
        assert!(!t.insert(ns(&["live"]), other, Via::Upstream { node: 9 }));
        assert_eq!(t.route(&ns(&["live", "a"]), any), Some(publisher), "an announcement wins a tie");
        assert_eq!(t.route(&ns(&["news"]), Requester { from_upstream: true, node: None }), None);
        assert_eq!(t.route(&ns(&["news"]), Requester { from_upstream: false, node: Some(9) }), None);
        assert_eq!(t.route(&ns(&["news"]), Requester { from_upstream: false, node: Some(8) }), Some(link));
        assert_eq!(
            t.route(&ns(&["live", "a"]), Requester { from_upstream: true, node: None }),
            Some(publisher),
            "a parent's request reaches local publishers"
        );
        assert!(t.remove(&ns(&["live"]), publisher), "the last announcement");
        assert!(!t.remove(&ns(&["live"]), other), "a route");
    }
}
