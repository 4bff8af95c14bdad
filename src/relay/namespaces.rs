//! The namespace table: which sessions published which namespaces (PUBLISH_NAMESPACE). Every
//! core keeps a full copy, updated by broadcast, so the owner shard of any track can route a
//! SUBSCRIBE to a publisher without asking another core. Announcements are rare next to
//! objects; a broadcast per announcement is cheap.

use super::msg::SessionRef;
use crate::wire::model::TrackNamespace;

#[derive(Debug, Default)]
pub struct NamespaceTable {
    /// In announcement order; the newest matching entry wins a tie.
    entries: Vec<(TrackNamespace, SessionRef)>,
}

impl NamespaceTable {
    /// Adds an announcement; true when no one had announced `namespace` before.
    pub fn insert(&mut self, namespace: TrackNamespace, publisher: SessionRef) -> bool {
        let first = !self.entries.iter().any(|(n, _)| *n == namespace);
        self.entries.push((namespace, publisher));
        first
    }

    /// Removes one announcement of `namespace` by `publisher`; true when it was the last
    /// announcement of `namespace`.
    pub fn remove(&mut self, namespace: &TrackNamespace, publisher: SessionRef) -> bool {
        let Some(i) = self.entries.iter().rposition(|(n, p)| n == namespace && *p == publisher) else {
            return false;
        };
        self.entries.remove(i);
        !self.entries.iter().any(|(n, _)| n == namespace)
    }

    /// Every announced namespace at or below `prefix`, each once, in announcement order.
    pub fn distinct_under(&self, prefix: &TrackNamespace) -> Vec<TrackNamespace> {
        let mut seen = crate::hash::HashSet::default();
        self.entries
            .iter()
            .filter(|(n, _)| n.starts_with(prefix) && seen.insert(n))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The publisher for a track in `namespace`: the longest announced prefix, newest first.
    pub fn route(&self, namespace: &TrackNamespace) -> Option<SessionRef> {
        let mut best: Option<(usize, SessionRef)> = None;
        for (n, p) in &self.entries {
            if namespace.starts_with(n) && best.is_none_or(|(len, _)| n.fields().len() >= len) {
                best = Some((n.fields().len(), *p));
            }
        }
        best.map(|(_, p)| p)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(f: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(f)
    }

    #[test]
    fn longest_prefix_then_newest_wins() {
        let (a, b, c) = (
            SessionRef { core: 0, conn: 1 },
            SessionRef { core: 1, conn: 2 },
            SessionRef { core: 0, conn: 3 },
        );
        let mut t = NamespaceTable::default();
        assert_eq!(t.route(&ns(&["x"])), None);
        assert!(t.insert(ns(&["live"]), a));
        assert!(t.insert(ns(&["live", "sports"]), b));
        assert_eq!(t.route(&ns(&["live", "sports", "hd"])), Some(b));
        assert_eq!(t.route(&ns(&["live", "news"])), Some(a));
        assert_eq!(t.route(&ns(&["liv"])), None);
        assert!(!t.insert(ns(&["live", "sports"]), c), "a second announcement of a known namespace");
        assert_eq!(t.route(&ns(&["live", "sports"])), Some(c));
        assert_eq!(t.distinct_under(&ns(&["live"])), vec![ns(&["live"]), ns(&["live", "sports"])]);
        assert_eq!(t.distinct_under(&ns(&["live", "sports"])), vec![ns(&["live", "sports"])]);
        assert!(t.distinct_under(&ns(&["news"])).is_empty());
        assert!(!t.remove(&ns(&["live", "sports"]), c), "b still announces it");
        assert_eq!(t.route(&ns(&["live", "sports"])), Some(b));
        assert!(!t.remove(&ns(&["live", "sports"]), c), "not announced by c any more");
        assert!(t.remove(&ns(&["live", "sports"]), b));
        assert!(t.remove(&ns(&["live"]), a));
        assert!(t.is_empty());
    }
}
