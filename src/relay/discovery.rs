//! Namespace discovery on one core: SUBSCRIBE_NAMESPACE (draft-16 §6.1 and §9.28 there,
//! draft-22 §4.2 and §9.15). Every core holds the full namespace table (`namespaces.rs`), so
//! each core answers its own sessions' namespace subscriptions from local state: the current
//! matching namespaces at once, then NAMESPACE / NAMESPACE_DONE as publishers announce and
//! withdraw them (the table's broadcasts reach every core).
//!
//! A namespace announced by several publishers is reported once: NAMESPACE when the first
//! announcement arrives, NAMESPACE_DONE when the last is withdrawn. Only namespaces at or
//! below the subscribed prefix are reported (the message carries the suffix after it).

use crate::hash::HashMap;

use tracing::debug;

use super::{code, session, update_allows, RelayShard, UpdateError};
use crate::wire::model::{Message, Parameters, RequestId, RequestOk, SubscribeNamespace, TrackNamespace};

/// One namespace subscription of a session on this core.
#[derive(Debug)]
struct NsSub {
    prefix: TrackNamespace,
}

#[derive(Debug, Default)]
pub struct Discovery {
    subs: HashMap<(u64, RequestId), NsSub>,
    per_session: HashMap<u64, usize>,
}

impl Discovery {
    pub fn has(&self, conn: u64, rid: RequestId) -> bool {
        self.subs.contains_key(&(conn, rid))
    }
}

/// Two prefixes overlap when one is a prefix of the other (draft-16 §9.28, draft-22 §4.2:
/// "shares a common prefix with an established namespace subscription").
fn overlaps(a: &TrackNamespace, b: &TrackNamespace) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn suffix(namespace: &TrackNamespace, prefix: &TrackNamespace) -> TrackNamespace {
    TrackNamespace(namespace.fields()[prefix.fields().len()..].to_vec())
}

impl RelayShard {
    pub(super) fn discovery_subscribe(&mut self, conn: u64, m: SubscribeNamespace) {
        let rid = m.request_id;
        let overlap =
            self.discovery.subs.iter().any(|((c, _), s)| *c == conn && overlaps(&s.prefix, &m.prefix));
        if overlap {
            return self.answer_error(
                conn,
                rid,
                code::PREFIX_OVERLAP,
                "overlaps a namespace subscription",
                true,
            );
        }
        let count = self.discovery.per_session.entry(conn).or_default();
        if *count >= self.config.max_namespaces_per_session {
            return self.answer_error(
                conn,
                rid,
                code::EXCESSIVE_LOAD,
                "too many namespace subscriptions",
                true,
            );
        }
        *count += 1;
        let Some(s) = session(&mut self.sessions, &mut self.woken, conn) else { return };
        let ok = Message::RequestOk(RequestOk {
            request_id: rid,
            params: Parameters::default(),
            track_properties: Default::default(),
        });
        if let Err(e) = s.send(ok) {
            debug!(conn, error = %e, "SUBSCRIBE_NAMESPACE answer not sent");
            return;
        }
        for namespace in self.namespaces.distinct_under(&m.prefix) {
            if let Err(e) = s.send_on(rid, Message::Namespace(suffix(&namespace, &m.prefix))) {
                debug!(conn, error = %e, "NAMESPACE not sent");
                break;
            }
        }
        self.discovery.subs.insert((conn, rid), NsSub { prefix: m.prefix });
    }

    /// The subscriber cancelled (draft-16: FIN or reset of the stream; draft-22: reset or
    /// STOP_SENDING).
    pub(super) fn discovery_cancelled(&mut self, conn: u64, rid: RequestId) {
        if self.discovery.subs.remove(&(conn, rid)).is_some() {
            if let Some(c) = self.discovery.per_session.get_mut(&conn) {
                *c = c.saturating_sub(1);
            }
        }
    }

    /// REQUEST_UPDATE of a namespace subscription (draft-22 §9.5.2): a new
    /// TRACK_NAMESPACE_PREFIX, not overlapping the session's others. Returns the old prefix
    /// (for [`Self::discovery_updated`], once REQUEST_OK is sent).
    pub(super) fn discovery_update(
        &mut self,
        conn: u64,
        rid: RequestId,
        params: &crate::wire::model::Parameters,
    ) -> Result<Option<TrackNamespace>, UpdateError> {
        update_allows(params, &["AUTHORIZATION_TOKEN", "TRACK_NAMESPACE_PREFIX"])?;
        let Some(prefix) = params.track_namespace_prefix.clone() else { return Ok(None) };
        let overlap = self
            .discovery
            .subs
            .iter()
            .any(|((c, r), s)| *c == conn && *r != rid && overlaps(&s.prefix, &prefix));
        if overlap {
            return Err(UpdateError::Refused(code::PREFIX_OVERLAP, "overlaps a namespace subscription"));
        }
        let Some(sub) = self.discovery.subs.get_mut(&(conn, rid)) else { return Ok(None) };
        Ok(Some(std::mem::replace(&mut sub.prefix, prefix)))
    }

    /// After an accepted prefix update: NAMESPACE for what the new prefix adds (suffixes
    /// relative to it).
    pub(super) fn discovery_updated(&mut self, conn: u64, rid: RequestId, old: &TrackNamespace) {
        let Some(sub) = self.discovery.subs.get(&(conn, rid)) else { return };
        let prefix = sub.prefix.clone();
        let Some(s) = session(&mut self.sessions, &mut self.woken, conn) else { return };
        for namespace in self.namespaces.distinct_under(&prefix) {
            if namespace.starts_with(old) {
                continue;
            }
            if let Err(e) = s.send_on(rid, Message::Namespace(suffix(&namespace, &prefix))) {
                debug!(conn, error = %e, "NAMESPACE not sent");
                break;
            }
        }
    }

    pub(super) fn discovery_session_closed(&mut self, conn: u64) {
        self.discovery.subs.retain(|(c, _), _| *c != conn);
        self.discovery.per_session.remove(&conn);
    }

    /// `namespace` became known on this core (`appeared`) or was withdrawn by its last
    /// publisher: tell the matching namespace subscriptions.
    pub(super) fn discovery_changed(&mut self, namespace: &TrackNamespace, appeared: bool) {
        for ((conn, rid), sub) in &self.discovery.subs {
            if !namespace.starts_with(&sub.prefix) {
                continue;
            }
            let Some(s) = session(&mut self.sessions, &mut self.woken, *conn) else { continue };
            let suffix = suffix(namespace, &sub.prefix);
            let msg = if appeared { Message::Namespace(suffix) } else { Message::NamespaceDone(suffix) };
            if let Err(e) = s.send_on(*rid, msg) {
                debug!(conn, error = %e, "NAMESPACE / NAMESPACE_DONE not sent");
            }
        }
    }
}
