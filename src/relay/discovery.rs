//! Namespace discovery on one core: SUBSCRIBE_NAMESPACE (draft-16 §6.1 and §9.28 there,
//! draft-22 §4.2 and §9.15). Every core holds the full namespace table (`namespaces.rs`), so
//! each core answers its own sessions' namespace subscriptions from local state: the current
//! matching namespaces at once, then NAMESPACE / NAMESPACE_DONE as publishers announce and
//! withdraw them (the table's broadcasts reach every core).
//!
//! A namespace announced by several publishers is reported once: NAMESPACE when the first
//! announcement arrives, NAMESPACE_DONE when the last is withdrawn. Only namespaces at or
//! below the subscribed prefix are reported (the message carries the suffix after it).
//!
//! Track discovery: a draft-16 SUBSCRIBE_NAMESPACE whose Subscribe Options ask for PUBLISH,
//! and a draft-22 SUBSCRIBE_TRACKS, get a PUBLISH from the relay for every track under the
//! prefix with an Established upstream (each owner tells every core when one becomes
//! available), now and as they appear, except tracks the session already subscribes to.
//! The subscriber's PUBLISH_OK makes it a subscription like a SUBSCRIBE's (`fanout.rs`).

use crate::msg::ConnId;
use ahash::HashMap;
use std::time::Instant;

use tracing::debug;

use super::fanout::Fanout;
use super::msg::OwnerMsg;
use super::sessions::{Holder, Sessions};
use crate::admit::{update_allows, UpdateError};
use crate::cx::unheeded;
use crate::cx::Cx;
use auth::Scope;
use session::SessionError;
use wire::model::{
    FullTrackName, Location, Message, Parameters, Properties, Publish, PublishSkipped, RequestId,
    SubscribeNamespace, SubscribeOptions, SubscribeTracks, TrackAlias, TrackNamespace,
};
use wire::{DoneStatus, RequestErrorCode};

/// Which request made a namespace subscription (overlap is checked per kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubKind {
    Namespace,
    Tracks,
}

/// The namespace subscription an offer is made for.
#[derive(Debug, Clone)]
struct OfferFor {
    rid: RequestId,
    prefix: TrackNamespace,
    /// A draft-22 SUBSCRIBE_TRACKS (PUBLISH_SKIPPED exists there only).
    tracks: bool,
}

/// A PUBLISH to offer session `conn` for its namespace subscription `via`, with FORWARD
/// `forward`.
#[derive(Debug, Clone)]
struct Offer {
    conn: ConnId,
    forward: bool,
    via: OfferFor,
}

/// One namespace subscription of a session on this core.
#[derive(Debug)]
struct NsSub {
    prefix: TrackNamespace,
    kind: SubKind,
    /// Report namespaces (NAMESPACE / NAMESPACE_DONE).
    namespaces: bool,
    /// Offer tracks (PUBLISH), with this Forward State.
    publishes: Option<bool>,
    /// Until when its token authorizes it (token mode): a subscription it brings (an
    /// accepted PUBLISH) ends then, like any other.
    until: Option<Instant>,
    /// What its tokens let it see under its prefix (token mode; `Scope::All` otherwise).
    scope: Scope,
}

impl NsSub {
    /// Whether `namespace` is one this subscription reports: under its prefix, and in its
    /// tokens' scope.
    fn covers(&self, namespace: &TrackNamespace) -> bool {
        namespace.starts_with(&self.prefix) && self.scope.covers(namespace)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Discovery {
    subs: HashMap<(ConnId, RequestId), NsSub>,
    per_session: HashMap<ConnId, usize>,
    /// Tracks with an Established upstream anywhere in the relay.
    tracks: HashMap<TrackAlias, (FullTrackName, Properties)>,
    /// Our PUBLISHes not answered yet, with the FORWARD they asked for (the answer's
    /// absent FORWARD keeps it).
    pushes: HashMap<(ConnId, RequestId), Push>,
    /// Offers waiting for the owner's Largest Object (a PUBLISH must carry it, draft-22
    /// §9.8): (session, FORWARD, namespace subscription) per track.
    offering: HashMap<TrackAlias, Vec<Offer>>,
    /// Prefixes of namespace subscriptions that began (true) or ended, for the namespace
    /// directory (`RelayShard::take_directory`).
    watches: Vec<(TrackNamespace, bool)>,
}

/// One of our PUBLISHes waiting for its answer.
#[derive(Debug, Clone, Copy)]
struct Push {
    alias: TrackAlias,
    /// The FORWARD it asked for (an answer without FORWARD keeps it).
    forward: bool,
    /// Its namespace subscription's authorization expiry.
    until: Option<Instant>,
}

/// Two prefixes overlap when one is a prefix of the other (draft-16 §9.28, draft-22 §4.2:
/// "shares a common prefix with an established namespace subscription").
/// A namespace subscriber's PUBLISH_OK: the subscription it makes.
pub(super) struct Accepted {
    pub track: FullTrackName,
    pub params: Parameters,
    pub until: Option<Instant>,
}

fn overlaps(a: &TrackNamespace, b: &TrackNamespace) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn suffix(namespace: &TrackNamespace, prefix: &TrackNamespace) -> TrackNamespace {
    TrackNamespace(namespace.fields()[prefix.fields().len()..].to_vec())
}

impl Discovery {
    /// Namespace subscriptions' prefixes that began or ended since the last call.
    pub(super) fn take_watches(&mut self) -> Vec<(TrackNamespace, bool)> {
        std::mem::take(&mut self.watches)
    }

    pub(super) fn subscribe(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        fanout: &Fanout,
        conn: ConnId,
        m: SubscribeNamespace,
        (until, scope): (Option<Instant>, Scope),
    ) {
        let (namespaces, publishes) = match m.options {
            SubscribeOptions::Namespace => (true, false),
            SubscribeOptions::Publish => (false, true),
            SubscribeOptions::Both => (true, true),
        };
        let publishes = publishes.then_some(m.params.forward.unwrap_or(true));
        let sub = NsSub { prefix: m.prefix, kind: SubKind::Namespace, namespaces, publishes, until, scope };
        self.add(cx, sessions, fanout, conn, m.request_id, sub);
    }

    /// draft-22 SUBSCRIBE_TRACKS (§9.16): PUBLISH for the tracks under the prefix.
    pub(super) fn subscribe_tracks(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        fanout: &Fanout,
        conn: ConnId,
        m: SubscribeTracks,
        (until, scope): (Option<Instant>, Scope),
    ) {
        let publishes = Some(m.params.forward.unwrap_or(true));
        let sub =
            NsSub { prefix: m.prefix, kind: SubKind::Tracks, namespaces: false, publishes, until, scope };
        self.add(cx, sessions, fanout, conn, m.request_id, sub);
    }

    fn add(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        fanout: &Fanout,
        conn: ConnId,
        rid: RequestId,
        sub: NsSub,
    ) {
        let overlap = self
            .subs
            .iter()
            .any(|((c, _), s)| *c == conn && s.kind == sub.kind && overlaps(&s.prefix, &sub.prefix));
        if overlap {
            return sessions.answer_error(
                conn,
                rid,
                RequestErrorCode::PrefixOverlap,
                "overlaps a namespace subscription",
                true,
            );
        }
        let namespaces = if sub.namespaces {
            cx.namespaces.distinct_under(&sub.prefix).iter().filter(|n| sub.covers(n)).count()
        } else {
            0
        };
        let tracks = match sub.publishes {
            Some(_) => self.tracks.values().filter(|(t, _)| sub.covers(&t.namespace)).count(),
            None => 0,
        };
        if namespaces.max(tracks) > cx.config.max_namespace_matches {
            let code = RequestErrorCode::NamespaceTooLarge;
            return sessions.answer_error(conn, rid, code, "the prefix matches too much", true);
        }
        let count = self.per_session.entry(conn).or_default();
        if *count >= cx.config.max_namespaces_per_session {
            return sessions.answer_error(
                conn,
                rid,
                RequestErrorCode::ExcessiveLoad,
                "too many namespace subscriptions",
                true,
            );
        }
        *count += 1;
        if !sessions.answer_ok(conn, rid, Parameters::default()) {
            return;
        }
        sessions.register(conn, rid, Holder::NamespaceSub);
        if sub.namespaces {
            let Some(s) = sessions.get_mut(conn) else { return };
            for namespace in cx.namespaces.distinct_under(&sub.prefix).into_iter().filter(|n| sub.covers(n)) {
                if let Err(e) = s.send_on(rid, Message::Namespace(suffix(&namespace, &sub.prefix))) {
                    debug!(%conn, error = %e, "NAMESPACE not sent");
                    break;
                }
            }
        }
        let offers: Vec<TrackAlias> = match sub.publishes {
            Some(_) => {
                self.tracks.iter().filter(|(_, (t, _))| sub.covers(&t.namespace)).map(|(a, _)| *a).collect()
            }
            None => Vec::new(),
        };
        let forward = sub.publishes.unwrap_or(true);
        let via = OfferFor { rid, prefix: sub.prefix.clone(), tracks: sub.kind == SubKind::Tracks };
        if sub.namespaces {
            self.watches.push((sub.prefix.clone(), true));
        }
        self.subs.insert((conn, rid), sub);
        for alias in offers {
            self.offer(cx, fanout, alias, Offer { conn, forward, via: via.clone() });
        }
    }

    /// A track became available somewhere in the relay: offered to the matching namespace
    /// subscribers on this core.
    pub(super) fn track(
        &mut self,
        cx: &mut Cx,
        fanout: &Fanout,
        alias: TrackAlias,
        track: FullTrackName,
        properties: Properties,
    ) {
        let offers: Vec<Offer> = self
            .subs
            .iter()
            .filter_map(|((conn, rid), s)| {
                let forward = s.publishes?;
                let via = OfferFor { rid: *rid, prefix: s.prefix.clone(), tracks: s.kind == SubKind::Tracks };
                s.covers(&track.namespace).then_some(Offer { conn: *conn, forward, via })
            })
            .collect();
        self.tracks.insert(alias, (track, properties));
        for offer in offers {
            self.offer(cx, fanout, alias, offer);
        }
    }

    pub(super) fn track_gone(&mut self, alias: TrackAlias) {
        self.tracks.remove(&alias);
    }

    /// Sends PUBLISH of `alias` as `offer` says, unless its session already subscribes to it
    /// or has an offer of it outstanding. One that cannot
    /// be made (the session's subscription limit, no Request ID left) is PUBLISH_SKIPPED on a
    /// SUBSCRIBE_TRACKS stream (draft-22 §9.19); draft-16 has no such message.
    fn offer(&mut self, cx: &mut Cx, fanout: &Fanout, alias: TrackAlias, offer: Offer) {
        let conn = offer.conn;
        let offered = self.pushes.iter().any(|((c, _), p)| *c == conn && p.alias == alias);
        let waiting = self.offering.get(&alias).is_some_and(|w| w.iter().any(|o| o.conn == conn));
        if offered || waiting || fanout.session_has(conn, alias) {
            return;
        }
        let asks = self.offering.entry(alias).or_default();
        asks.push(offer);
        if asks.len() == 1 {
            cx.send(cx.owner_of(alias), OwnerMsg::Largest { alias, from: cx.core });
        }
    }

    /// The owner's Largest Object of `alias`: the offers waiting for it go out.
    pub(super) fn largest(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        fanout: &Fanout,
        alias: TrackAlias,
        largest: Option<Location>,
    ) {
        for offer in self.offering.remove(&alias).unwrap_or_default() {
            if fanout.session_has(offer.conn, alias) || !self.subs.contains_key(&(offer.conn, offer.via.rid))
            {
                continue; // subscribed meanwhile, or the namespace subscription is gone
            }
            self.send_offer(cx, sessions, alias, &offer, largest);
        }
    }

    fn send_offer(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        alias: TrackAlias,
        offer: &Offer,
        largest: Option<Location>,
    ) {
        let Offer { conn, forward, ref via } = *offer;
        let Some((track, properties)) = self.tracks.get(&alias).cloned() else { return };
        let pending = self.pushes.keys().filter(|(c, _)| *c == conn).count();
        let Some(s) = sessions.get_mut(conn) else { return };
        let sent = if pending >= cx.config.max_subscriptions_per_session {
            Err(SessionError::Misrouted("too many subscriptions"))
        } else {
            s.next_request_id().and_then(|request_id| {
                let publish = Publish {
                    request_id,
                    track: track.clone(),
                    track_alias: alias,
                    params: Parameters {
                        forward: Some(forward),
                        largest_object: largest,
                        ..Parameters::default()
                    },
                    track_properties: properties,
                };
                s.send(Message::Publish(publish)).map(|()| request_id)
            })
        };
        match sent {
            Ok(rid) => {
                let until = self.subs.get(&(conn, via.rid)).and_then(|s| s.until);
                self.pushes.insert((conn, rid), Push { alias, forward, until });
                sessions.register(conn, rid, Holder::Offer);
            }
            Err(e) => {
                debug!(%conn, error = %e, "PUBLISH not offered");
                if via.tracks {
                    let skipped = PublishSkipped {
                        request_id: via.rid,
                        namespace_suffix: suffix(&track.namespace, &via.prefix),
                        track_name: track.name,
                    };
                    unheeded(s.send_on(via.rid, Message::PublishSkipped(skipped)), "PUBLISH_SKIPPED");
                }
            }
        }
    }

    /// PUBLISH_OK for one of our PUBLISHes: it becomes a subscription (the caller gives it to
    /// the fan-out), unless its track ended meanwhile.
    pub(super) fn publish_ok(
        &mut self,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        params: &Parameters,
    ) -> Option<Accepted> {
        let Push { alias, forward, until } = self.pushes.remove(&(conn, rid))?;
        sessions.forget(conn, rid);
        let Some((track, _)) = self.tracks.get(&alias).cloned() else {
            // The track ended before the answer: nothing to deliver.
            Self::ended_before_ok(sessions, conn, rid);
            return None;
        };
        // The PUBLISH's FORWARD stands unless the answer changes it (draft-22 §9.8: FORWARD=0
        // in the PUBLISH, and an answer without FORWARD, is a paused subscription).
        let params = Parameters { forward: params.forward.or(Some(forward)), ..params.clone() };
        Some(Accepted { track, params, until })
    }

    fn ended_before_ok(sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        let Some(s) = sessions.get_mut(conn) else { return };
        unheeded(
            s.publish_done(rid, DoneStatus::TrackEnded, 0, bytes::Bytes::from_static(b"the track ended")),
            "PUBLISH_DONE",
        );
    }

    /// The subscriber refused (REQUEST_ERROR) or cancelled one of our PUBLISHes: the request
    /// is over, so our side of its stream ends too (draft-22: FIN), and the peer's stream
    /// credit comes back.
    pub(super) fn publish_refused(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        if self.pushes.remove(&(conn, rid)).is_some() {
            sessions.forget(conn, rid);
            if let Some(s) = sessions.get_mut(conn) {
                unheeded(s.end_request(rid), "end request");
            }
        }
    }

    /// The subscriber cancelled (draft-16: FIN or reset of the stream; draft-22: reset or
    /// STOP_SENDING).
    pub(super) fn cancelled(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        if let Some(sub) = self.subs.remove(&(conn, rid)) {
            if sub.namespaces {
                self.watches.push((sub.prefix, false));
            }
            sessions.forget(conn, rid);
            if let Some(c) = self.per_session.get_mut(&conn) {
                *c = c.saturating_sub(1);
            }
        }
    }

    /// REQUEST_UPDATE of a namespace subscription (draft-22 §9.5.2): a new
    /// TRACK_NAMESPACE_PREFIX, not overlapping the session's others. Returns the old prefix
    /// (for [`Self::updated`], once REQUEST_OK is sent).
    pub(super) fn update(
        &mut self,
        conn: ConnId,
        rid: RequestId,
        params: &wire::model::Parameters,
        scope: Option<Scope>,
    ) -> Result<Option<TrackNamespace>, UpdateError> {
        update_allows(params, &["AUTHORIZATION_TOKEN", "TRACK_NAMESPACE_PREFIX"])?;
        let Some(prefix) = params.track_namespace_prefix.clone() else { return Ok(None) };
        let overlap =
            self.subs.iter().any(|((c, r), s)| *c == conn && *r != rid && overlaps(&s.prefix, &prefix));
        if overlap {
            return Err(UpdateError::Refused(
                RequestErrorCode::PrefixOverlap,
                "overlaps a namespace subscription",
            ));
        }
        let Some(sub) = self.subs.get_mut(&(conn, rid)) else { return Ok(None) };
        if sub.namespaces {
            self.watches.push((sub.prefix.clone(), false));
            self.watches.push((prefix.clone(), true));
        }
        if let Some(scope) = scope {
            sub.scope = scope;
        }
        Ok(Some(std::mem::replace(&mut sub.prefix, prefix)))
    }

    /// After an accepted prefix update: NAMESPACE for what the new prefix adds (suffixes
    /// relative to it).
    pub(super) fn updated(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        old: &TrackNamespace,
    ) {
        let Some(sub) = self.subs.get(&(conn, rid)) else { return };
        if !sub.namespaces {
            return;
        }
        let prefix = sub.prefix.clone();
        let Some(s) = sessions.get_mut(conn) else { return };
        for namespace in cx.namespaces.distinct_under(&prefix) {
            if namespace.starts_with(old) || !sub.scope.covers(&namespace) {
                continue;
            }
            if let Err(e) = s.send_on(rid, Message::Namespace(suffix(&namespace, &prefix))) {
                debug!(%conn, error = %e, "NAMESPACE not sent");
                break;
            }
        }
    }

    pub(super) fn session_closed(&mut self, conn: ConnId) {
        let watches = &mut self.watches;
        self.subs.retain(|(c, _), s| {
            if *c == conn && s.namespaces {
                watches.push((s.prefix.clone(), false));
            }
            *c != conn
        });
        for asks in self.offering.values_mut() {
            asks.retain(|o| o.conn != conn);
        }
        self.pushes.retain(|(c, _), _| *c != conn);
        self.per_session.remove(&conn);
    }

    /// `namespace` became known on this core (`appeared`) or was withdrawn by its last
    /// publisher: tell the matching namespace subscriptions.
    pub(super) fn changed(&mut self, sessions: &mut Sessions, namespace: &TrackNamespace, appeared: bool) {
        for ((conn, rid), sub) in &self.subs {
            if !sub.namespaces || !sub.covers(namespace) {
                continue;
            }
            let Some(s) = sessions.get_mut(*conn) else { continue };
            let suffix = suffix(namespace, &sub.prefix);
            let msg = if appeared { Message::Namespace(suffix) } else { Message::NamespaceDone(suffix) };
            if let Err(e) = s.send_on(*rid, msg) {
                debug!(%conn, error = %e, "NAMESPACE / NAMESPACE_DONE not sent");
            }
        }
    }
}
