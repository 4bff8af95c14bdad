//! The host's side of what leads upward from a core: its links to parent relays (added,
//! routed, moved after a GOAWAY, closed) and the cluster's namespace directory (what this
//! core asks of it, and its answers). The links' own state is `links.rs`; the directory's
//! `directory.rs` (ARCHITECTURE.md, "Upstream links").

use bytes::Bytes;
use session::{Session, SessionCode};
use wire::model::TrackNamespace;

use crate::msg::{ConnId, SessionRef};
use crate::namespaces::Via;
use crate::{directory, RelayShard};

impl RelayShard {
    /// `Input::Link`.
    pub(crate) fn add_link(
        &mut self,
        conn: ConnId,
        mut session: Session,
        routes: Vec<TrackNamespace>,
        replaces: Option<ConnId>,
        directory: bool,
    ) {
        self.links.add(conn, routes, replaces);
        if directory {
            self.links.mark_directory(conn);
        }
        session.set_log_id(self.cx.core, conn.0);
        self.sessions.insert(conn, session);
        self.sessions.mark_link(conn);
    }

    /// Whether session `conn` is an upstream link of this core.
    pub fn is_link(&self, conn: ConnId) -> bool {
        self.sessions.is_link(conn)
    }

    /// Links whose parent sent GOAWAY since the last call, with its New Session URI (empty:
    /// the same parent).
    pub fn take_link_goaways(&mut self) -> Vec<(ConnId, Bytes)> {
        self.links.take_goaways()
    }

    /// Whether link `conn` was replaced and carries no subscription any more, neither ours
    /// nor the parent's (its subscribers move too, and it ends them on the old link): time to
    /// close it.
    pub fn link_moved_out(&self, conn: ConnId) -> bool {
        self.links.moved(conn) && !self.ingest.has_upstreams(conn) && self.fanout.subscriptions(conn) == 0
    }

    /// Closes link `conn` (its tracks moved to its replacement); false when it was closed
    /// already.
    pub fn close_link(&mut self, conn: ConnId) -> bool {
        match self.sessions.get_mut(conn) {
            Some(s) if !s.is_closed() => {
                s.close(SessionCode::NoError, "moved to the new session");
                true
            }
            _ => false,
        }
    }

    /// What this core asks of the namespace directory since the last call (`directory.rs`).
    pub fn take_directory(&mut self) -> Vec<directory::DirectoryAsk> {
        self.note_published();
        for (prefix, on) in self.discovery.take_watches() {
            self.cx.directory.watch(&prefix, on);
        }
        self.cx.directory.take()
    }

    /// What the event hooks report since the last call: this core's sessions' announcements
    /// and PUBLISHes, in order (empty unless `RelayConfig::events`).
    pub fn take_events(&mut self) -> Vec<directory::RelayEvent> {
        self.note_published();
        self.cx.directory.take_events()
    }

    /// PUBLISHes begun and ended reach the directory's record.
    fn note_published(&mut self) {
        for (track, on) in self.ingest.take_published() {
            self.cx.directory.published(track, on);
        }
    }

    /// `Input::DirectoryAnswer`.
    pub(crate) fn directory_answer(&mut self, namespace: &TrackNamespace, found: bool) {
        self.cx.directory.answered(namespace);
        if !found {
            let cx = &mut self.cx;
            self.owner.directory_miss(cx, namespace);
        }
    }

    /// `Input::RemoteNamespace` (it routes nothing: a SUBSCRIBE to it is looked up).
    pub(crate) fn remote_namespace(&mut self, namespace: TrackNamespace, on: bool) {
        let changed = if on {
            self.cx.namespaces.insert(namespace.clone(), SessionRef::REMOTE, Via::Remote)
        } else {
            self.cx.namespaces.remove(&namespace, SessionRef::REMOTE)
        };
        if changed {
            self.discovery.changed(&mut self.sessions, &namespace, on);
        }
    }

    /// `Input::LinkRoute`. A link not set up yet takes the routes its slot gives when it is
    /// (`add_link`).
    pub(crate) fn link_route(&mut self, conn: ConnId, prefix: TrackNamespace, on: bool) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        if on {
            if let Some(rid) = self.links.add_route(cx, conn, prefix.clone()) {
                self.ingest.add_route(sessions, conn, rid, prefix);
            }
        } else if let Some(rid) = self.links.remove_route(conn, &prefix) {
            self.ingest.withdraw_namespace(cx, sessions, conn, rid);
        }
    }

    /// Whether link `conn` carries nothing: no subscription of ours, none of the parent's.
    pub fn link_idle(&self, conn: ConnId) -> bool {
        !self.ingest.has_upstreams(conn) && self.fanout.subscriptions(conn) == 0
    }

    /// Upstream links of this core whose session is set up.
    pub fn links_up(&self) -> usize {
        self.links.up()
    }
}
