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
    pub fn insert(&mut self, namespace: TrackNamespace, publisher: SessionRef) {
        self.entries.push((namespace, publisher));
    }

    /// Removes one announcement of `namespace` by `publisher`.
    pub fn remove(&mut self, namespace: &TrackNamespace, publisher: SessionRef) {
        if let Some(i) = self.entries.iter().rposition(|(n, p)| n == namespace && *p == publisher) {
            self.entries.remove(i);
        }
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
        t.insert(ns(&["live"]), a);
        t.insert(ns(&["live", "sports"]), b);
        assert_eq!(t.route(&ns(&["live", "sports", "hd"])), Some(b));
        assert_eq!(t.route(&ns(&["live", "news"])), Some(a));
        assert_eq!(t.route(&ns(&["liv"])), None);
        t.insert(ns(&["live", "sports"]), c);
        assert_eq!(t.route(&ns(&["live", "sports"])), Some(c));
        t.remove(&ns(&["live", "sports"]), c);
        assert_eq!(t.route(&ns(&["live", "sports"])), Some(b));
        t.remove(&ns(&["live", "sports"]), b);
        t.remove(&ns(&["live"]), a);
        assert!(t.is_empty());
    }
}
