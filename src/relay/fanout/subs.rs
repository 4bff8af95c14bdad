//! The subscriptions of one track on this core, and each session's subscriptions on this core:
//! indexes, so that what concerns one subscription or one session (a stream of theirs ends,
//! their session closes, an update) visits that subscription or that session's subscriptions,
//! never every track's or every session's on the core.

use ahash::HashMap;

use super::LocalSub;
use crate::msg::ConnId;
use wire::model::{RequestId, TrackAlias};

/// A track's subscriptions, in a vector (what an object fans out to, in order) with an index
/// by (session, Request ID).
#[derive(Debug, Default)]
pub(super) struct Subs {
    list: Vec<LocalSub>,
    at: HashMap<(ConnId, RequestId), usize>,
}

impl Subs {
    pub(super) fn push(&mut self, sub: LocalSub) {
        self.at.insert((sub.conn, sub.rid), self.list.len());
        self.list.push(sub);
    }

    /// Where subscription `rid` of session `conn` is.
    pub(super) fn position(&self, conn: ConnId, rid: RequestId) -> Option<usize> {
        self.at.get(&(conn, rid)).copied()
    }

    pub(super) fn get_mut(&mut self, conn: ConnId, rid: RequestId) -> Option<&mut LocalSub> {
        let i = self.position(conn, rid)?;
        self.list.get_mut(i)
    }

    /// Removes subscription `rid` of session `conn` (the last one takes its place).
    pub(super) fn remove(&mut self, conn: ConnId, rid: RequestId) -> Option<LocalSub> {
        let i = self.at.remove(&(conn, rid))?;
        let sub = self.list.swap_remove(i);
        if let Some(moved) = self.list.get(i) {
            self.at.insert((moved.conn, moved.rid), i);
        }
        Some(sub)
    }
}

impl Subs {
    /// A list of one subscription.
    pub(super) fn one(sub: LocalSub) -> Subs {
        let mut subs = Subs::default();
        subs.push(sub);
        subs
    }
}

impl IntoIterator for Subs {
    type Item = LocalSub;
    type IntoIter = std::vec::IntoIter<LocalSub>;

    fn into_iter(self) -> Self::IntoIter {
        self.list.into_iter()
    }
}

impl std::ops::Deref for Subs {
    type Target = [LocalSub];

    fn deref(&self) -> &[LocalSub] {
        &self.list
    }
}

impl std::ops::DerefMut for Subs {
    fn deref_mut(&mut self) -> &mut [LocalSub] {
        &mut self.list
    }
}

/// Each session's subscriptions on this core: (Request ID, the track's alias).
#[derive(Debug, Default)]
pub(super) struct PerSession(HashMap<ConnId, Vec<(RequestId, TrackAlias)>>);

impl PerSession {
    /// How many subscriptions session `conn` has here.
    pub(super) fn count(&self, conn: ConnId) -> usize {
        self.0.get(&conn).map_or(0, Vec::len)
    }

    pub(super) fn add(&mut self, conn: ConnId, rid: RequestId, alias: TrackAlias) {
        self.0.entry(conn).or_default().push((rid, alias));
    }

    pub(super) fn remove(&mut self, conn: ConnId, rid: RequestId) {
        let Some(list) = self.0.get_mut(&conn) else { return };
        if let Some(i) = list.iter().position(|(r, _)| *r == rid) {
            list.swap_remove(i);
        }
        if list.is_empty() {
            self.0.remove(&conn);
        }
    }

    /// Session `conn`'s subscriptions.
    pub(super) fn of(&self, conn: ConnId) -> &[(RequestId, TrackAlias)] {
        self.0.get(&conn).map_or(&[], Vec::as_slice)
    }
}
