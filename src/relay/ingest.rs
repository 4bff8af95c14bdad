//! The publisher side of a shard: namespaces its sessions publish, the upstream subscriptions
//! it holds on them (SUBSCRIBEs the relay sent, PUBLISHes it accepted), and their data
//! streams. Each upstream stream gets a [`StreamKey`]; its objects go to the track's owner in
//! arrival order with the publisher's Track Alias replaced by the relay's.
//!
//! A PUBLISH_DONE from upstream is passed on only once the streams it counts have ended here
//! (or after [`RelayConfig::done_wait`](super::RelayConfig)), so no subscriber is told "done"
//! while objects are still on their way.

use crate::msg::ConnId;
use ahash::{HashMap, HashSet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::debug;

use super::msg::{Data, Epoch, IngestMsg, OwnerMsg, SessionRef, StreamKey, TrackInfo, UpStart};
use super::namespaces::Via;
use super::sessions::{Holder, Sessions};
use super::shed::{Gate, Shed};
use crate::cx::unheeded;
use crate::cx::Cx;
use session::{DataObject, SessionError, StreamId};
use wire::model::{
    DatagramHeader, FullTrackName, Message, Parameters, Publish, PublishDone, PublishNamespace, PublishOk,
    RequestError, RequestId, RequestUpdate, SubgroupId, Subscribe, SubscribeOk, TrackAlias, TrackNamespace,
};
use wire::{DoneStatus, RequestErrorCode, ResetCode};

#[derive(Debug)]
enum UpstreamKind {
    /// A SUBSCRIBE the relay sent; `established` after SUBSCRIBE_OK; `forward` is the Forward
    /// State it last asked for (SUBSCRIBE says 1; REQUEST_UPDATE changes it).
    Subscribe { established: bool, forward: bool },
    /// A PUBLISH the relay received; `answered` once PUBLISH_OK went out.
    Publish { answered: bool, forward: bool },
}

#[derive(Debug)]
struct Upstream {
    alias: TrackAlias,
    epoch: Epoch,
    kind: UpstreamKind,
    open_streams: u64,
    streams_seen: u64,
    /// PUBLISH_DONE received and held: status, reason, Stream Count, give up waiting at.
    done: Option<(DoneStatus, Bytes, u64, Instant)>,
    /// A REQUEST_UPDATE waits for the publisher to answer an earlier one (its
    /// MAX_REQUEST_UPDATES, draft-22 §9.1.7); the Forward State in `kind` is what it will ask.
    update_blocked: bool,
    /// A PUBLISH: its track (whose namespace a token in the publisher's REQUEST_UPDATE must
    /// grant).
    published: Option<FullTrackName>,
    /// Our SUBSCRIBE: its track's namespace (what a token renewing it must grant).
    subscribed: Option<TrackNamespace>,
    /// A PUBLISH whose namespace was registered in the namespace directory (one not from a
    /// link): unregistered when it ends.
    registered: bool,
    /// Our SUBSCRIBE through an upstream link whose SUBSCRIBE_OK said when it EXPIRES: when
    /// to renew it.
    renew: Option<Instant>,
}

#[derive(Debug, Default)]
pub(crate) struct Ingest {
    ups: HashMap<(ConnId, RequestId), Upstream>,
    by_epoch: HashMap<Epoch, (ConnId, RequestId)>,
    /// Upstream data streams: (session, stream id) → (session's request, key).
    streams: HashMap<(ConnId, StreamId), (RequestId, StreamKey)>,
    /// Streams not forwarded (further) to their track's owner core because the mesh to it
    /// was backed up or full (`shed.rs`).
    shed: Shed,
    next_stream: u64,
    namespaces: HashMap<(ConnId, RequestId), TrackNamespace>,
    /// Announcements not yet applied by every core: cores still to confirm.
    announcing: HashMap<(ConnId, RequestId), usize>,
    /// Namespaces each link's parent lists (`Via::Parent` entries of the namespace table).
    parent: HashMap<ConnId, HashSet<TrackNamespace>>,
    /// Sessions' counts of namespaces and upstream subscriptions (limits).
    per_session: HashMap<ConnId, (usize, usize)>,
    /// Namespaces announced by this core's sessions: the sum of `per_session`'s first counts
    /// (a metric, read after every turn).
    announced: usize,
    /// PUBLISHes begun (true) and ended, by namespace, for the namespace directory
    /// (`RelayShard::take_directory`).
    published_log: Vec<(FullTrackName, bool)>,
    /// When upstreams' timers (a held PUBLISH_DONE's `done_wait`, a renewal) are due, soonest
    /// first, so that a tick visits only what is due, not every track; an entry whose
    /// upstream is gone or whose timer moved is skipped when it comes due.
    timers: BinaryHeap<Reverse<(Instant, ConnId, RequestId)>>,
    /// Upstreams a tick looked at, ever (tests hold it to the due ones).
    visits: u64,
}

impl Ingest {
    /// PUBLISHes begun and ended since the last call (see `published_log`).
    pub(super) fn take_published(&mut self) -> Vec<(FullTrackName, bool)> {
        std::mem::take(&mut self.published_log)
    }

    pub(crate) fn len(&self) -> usize {
        self.ups.len()
    }

    /// The namespaces of this core's sessions' PUBLISHes (not links'), once per PUBLISH.
    pub(crate) fn published_namespaces(&self) -> impl Iterator<Item = &TrackNamespace> {
        self.ups.values().filter(|u| u.registered).filter_map(|u| u.published.as_ref()).map(|t| &t.namespace)
    }

    /// Namespaces announced by this core's sessions.
    pub(crate) fn announced(&self) -> usize {
        self.announced
    }

    /// The namespace of PUBLISH `rid` of session `conn`, while it stands.
    pub(crate) fn published(&self, conn: ConnId, rid: RequestId) -> Option<&TrackNamespace> {
        self.ups.get(&(conn, rid)).and_then(|u| u.published.as_ref()).map(|t| &t.namespace)
    }

    /// Upstreams the ticks looked at so far (see `timers`).
    pub(crate) fn visits(&self) -> u64 {
        self.visits
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }
}

/// The lifetime of a token this relay mints to renew its own upstream subscription.
const RENEWED_TOKEN_TTL: Duration = Duration::from_secs(3600);

/// When to renew a subscription that expires in `left`: at three quarters of it, and at
/// least a second before it expires.
fn renew_after(left: Duration) -> Duration {
    (left * 3 / 4).min(left.saturating_sub(Duration::from_secs(1)))
}

impl Ingest {
    /// A message for the publisher side of this core.
    pub(super) fn on_msg(&mut self, cx: &mut Cx, sessions: &mut Sessions, msg: IngestMsg) {
        use IngestMsg as M;
        match msg {
            M::UpstreamSubscribe { alias, track, publisher, epoch, new_group, start } => {
                self.upstream_subscribe(cx, sessions, alias, track, (publisher, epoch), (new_group, start))
            }
            M::NewGroup { alias: _, epoch, value } => self.new_group(sessions, epoch, value),
            M::UpstreamStop { alias: _, epoch } => self.upstream_stop(sessions, epoch),
            M::PublishForward { alias: _, epoch, forward } => self.publish_forward(sessions, epoch, forward),
            M::PublishRefused { alias: _, epoch, code, reason } => {
                self.publish_refused(sessions, epoch, code, reason)
            }
            M::NamespaceKnown { conn, rid } => self.namespace_known(sessions, conn, rid),
        }
    }

    pub(super) fn publish_namespace(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        m: PublishNamespace,
    ) {
        let count = self.per_session.entry(conn).or_default();
        if count.0 >= cx.config.max_namespaces_per_session {
            return sessions.answer_error(
                conn,
                m.request_id,
                RequestErrorCode::InternalError,
                "too many namespaces",
                true,
            );
        }
        count.0 += 1;
        self.announced += 1;
        let rid = m.request_id;
        self.namespaces.insert((conn, rid), m.namespace.clone());
        sessions.register(conn, rid, Holder::Namespace);
        // REQUEST_OK once every core has the namespace (`Ingest::namespace_known`).
        self.announcing.insert((conn, rid), cx.cores);
        let publisher = cx.me(conn);
        let via = Via::Announced { node: sessions.requester(conn).node };
        cx.namespace_announced(&m.namespace, publisher, rid, via);
    }

    /// Link `conn` serves `namespace` (a route): withdrawn with the link's other namespaces
    /// when its session closes.
    pub(super) fn add_route(
        &mut self,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        namespace: TrackNamespace,
    ) {
        self.namespaces.insert((conn, rid), namespace);
        sessions.register(conn, rid, Holder::Namespace);
    }

    /// One more core applied announcement `rid` of session `conn`.
    pub(super) fn namespace_known(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        let Some(left) = self.announcing.get_mut(&(conn, rid)) else { return };
        *left -= 1;
        if *left > 0 {
            return;
        }
        self.announcing.remove(&(conn, rid));
        sessions.answer_ok(conn, rid, Parameters::default());
    }

    pub(super) fn withdraw_namespace(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
    ) {
        let Some(namespace) = self.namespaces.remove(&(conn, rid)) else { return };
        sessions.forget(conn, rid);
        self.announcing.remove(&(conn, rid));
        if let Some(c) = self.per_session.get_mut(&conn).filter(|c| c.0 > 0) {
            c.0 -= 1;
            self.announced -= 1;
        }
        let publisher = cx.me(conn);
        cx.namespace_withdrawn(&namespace, publisher);
    }

    /// The owner wants `track` from session `publisher` (on this core), from `start`.
    pub(super) fn upstream_subscribe(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        alias: TrackAlias,
        track: FullTrackName,
        (publisher, epoch): (SessionRef, Epoch),
        (new_group, start): (Option<u64>, UpStart),
    ) {
        let owner = cx.owner_of(alias);
        let conn = publisher.conn;
        let refuse = |code: RequestErrorCode, why: &'static str| OwnerMsg::UpstreamError {
            alias,
            epoch,
            code,
            reason: Bytes::from_static(why.as_bytes()),
        };
        let Some(s) = sessions.get_mut(conn) else {
            return cx.send(owner, refuse(RequestErrorCode::DoesNotExist, "the publisher went away"));
        };
        let rid = match s.next_request_id() {
            Ok(r) => r,
            Err(_) => {
                return cx.send(
                    owner,
                    refuse(RequestErrorCode::InternalError, "publisher allows no more requests"),
                )
            }
        };
        // A start the publisher's draft cannot express (a relative start of several groups to
        // a draft-16 publisher) asks for everything: the subscriber's window still applies.
        let location_filter = start.filter().filter(|&f| s.carries_filter(f));
        debug!(%conn, rid = rid.0, ?location_filter, alias = alias.0, "upstream SUBSCRIBE");
        let params = Parameters {
            forward: Some(true),
            location_filter,
            new_group_request: new_group,
            ..Parameters::default()
        };
        let namespace = track.namespace.clone();
        if let Err(e) = s.send(Message::Subscribe(Subscribe { request_id: rid, track, params })) {
            debug!(%conn, error = %e, "upstream SUBSCRIBE not sent");
            return cx.send(owner, refuse(RequestErrorCode::InternalError, "upstream SUBSCRIBE failed"));
        }
        let up = Upstream {
            alias,
            epoch,
            kind: UpstreamKind::Subscribe { established: false, forward: true },
            open_streams: 0,
            streams_seen: 0,
            done: None,
            update_blocked: false,
            published: None,
            registered: false,
            subscribed: Some(namespace),
            renew: None,
        };
        self.ups.insert((conn, rid), up);
        self.by_epoch.insert(epoch, (conn, rid));
        sessions.register(conn, rid, Holder::Upstream);
    }

    pub(super) fn subscribe_ok(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        m: SubscribeOk,
    ) {
        let Some(up) = self.ups.get_mut(&(conn, m.request_id)) else { return };
        let UpstreamKind::Subscribe { established, .. } = &mut up.kind else { return };
        if *established {
            return;
        }
        *established = true;
        let info = TrackInfo {
            largest: m.params.largest_object,
            properties: m.track_properties,
            group_order: m.params.group_order,
        };
        let (alias, epoch) = (up.alias, up.epoch);
        // An upstream link's subscription that EXPIRES is renewed before it does (with a token
        // this relay mints: it shares its keys with its parents), so viewers are not ended
        // with PUBLISH_DONE EXPIRED when the link's token runs out.
        let renewable = sessions.is_link(conn) && cx.config.auth.is_some();
        if let Some(ms) = m.params.expires.filter(|&ms| ms > 0 && renewable) {
            let at = cx.now + renew_after(Duration::from_millis(ms));
            if let Some(up) = self.ups.get_mut(&(conn, m.request_id)) {
                up.renew = Some(at);
                self.timers.push(Reverse((at, conn, m.request_id)));
            }
        }
        cx.send(cx.owner_of(alias), OwnerMsg::UpstreamOk { alias, epoch, info });
    }

    pub(super) fn request_error(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        m: RequestError,
    ) {
        let key = (conn, m.request_id);
        if !matches!(
            self.ups.get(&key),
            Some(Upstream { kind: UpstreamKind::Subscribe { established: false, .. }, .. })
        ) {
            // An answer to one of our REQUEST_UPDATEs (draft-22 sends it on the SUBSCRIBE's
            // stream); a failed update is followed by PUBLISH_DONE UPDATE_FAILED.
            return self.update_answered(sessions, conn, m.request_id);
        }
        let Some(code) = sessions.get(conn).map(|s| s.peer_request_error_of(m.request_id, m.error_code))
        else {
            return;
        };
        let Some((up, _)) = self.remove_upstream(sessions, key) else { return };
        let msg = OwnerMsg::UpstreamError { alias: up.alias, epoch: up.epoch, code, reason: m.reason };
        cx.send(cx.owner_of(up.alias), msg);
    }

    pub(super) fn publish(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId, m: Publish) {
        let count = self.per_session.entry(conn).or_default();
        if count.1 >= cx.config.max_subscriptions_per_session {
            let code = RequestErrorCode::ExcessiveLoad;
            return sessions.answer_error(conn, m.request_id, code, "too many tracks", true);
        }
        count.1 += 1;
        let alias = cx.key.alias(&m.track);
        let epoch = cx.new_epoch();
        let up = Upstream {
            alias,
            epoch,
            // The Forward State the PUBLISH set (absent = 1); draft-22 PUBLISH_OK cannot
            // change it.
            kind: UpstreamKind::Publish { answered: false, forward: m.params.forward.unwrap_or(true) },
            open_streams: 0,
            streams_seen: 0,
            update_blocked: false,
            done: None,
            published: Some(m.track.clone()),
            registered: !sessions.is_link(conn),
            subscribed: None,
            renew: None,
        };
        if up.registered {
            self.published_log.push((m.track.clone(), true));
        }
        self.ups.insert((conn, m.request_id), up);
        self.by_epoch.insert(epoch, (conn, m.request_id));
        sessions.register(conn, m.request_id, Holder::Upstream);
        let info = TrackInfo {
            largest: m.params.largest_object,
            properties: m.track_properties,
            group_order: m.params.group_order,
        };
        let publisher = cx.me(conn);
        cx.send(cx.owner_of(alias), OwnerMsg::Published { alias, track: m.track, publisher, epoch, info });
    }

    /// The owner's answer to a PUBLISH (PUBLISH_OK), or a later change of its Forward State
    /// (REQUEST_UPDATE).
    pub(super) fn publish_forward(&mut self, sessions: &mut Sessions, epoch: Epoch, forward: bool) {
        let Some(&(conn, rid)) = self.by_epoch.get(&epoch) else { return };
        let Some(up) = self.ups.get_mut(&(conn, rid)) else { return };
        let params = Parameters { forward: Some(forward), ..Parameters::default() };
        let (answered, current) = match &mut up.kind {
            UpstreamKind::Publish { answered, forward } => (answered, forward),
            UpstreamKind::Subscribe { established: true, forward: current } => {
                if *current == forward {
                    return;
                }
                *current = forward;
                return self.send_update(sessions, conn, rid, forward);
            }
            UpstreamKind::Subscribe { established: false, .. } => return,
        };
        let Some(s) = sessions.get_mut(conn) else { return };
        let result = if !*answered && s.publish_ok_has_forward() {
            *answered = true;
            s.send(Message::PublishOk(PublishOk { request_id: rid, params }))
        } else if !*answered {
            // draft-22 PUBLISH_OK (REQUEST_OK) carries no FORWARD (§9.3): answer, then change
            // the Forward State the PUBLISH set with REQUEST_UPDATE (§3.1.1) when it differs.
            *answered = true;
            let ok = Parameters::default();
            let changed = *current != forward;
            *current = forward;
            let sent = s.send(Message::PublishOk(PublishOk { request_id: rid, params: ok }));
            if sent.is_ok() && changed {
                return self.send_update(sessions, conn, rid, forward);
            }
            sent
        } else if *current != forward {
            *current = forward;
            return self.send_update(sessions, conn, rid, forward);
        } else {
            Ok(())
        };
        *current = forward;
        if let Err(e) = result {
            debug!(%conn, error = %e, "PUBLISH answer not sent");
        }
    }

    /// REQUEST_UPDATE FORWARD `forward` of upstream request `rid`; while the publisher's
    /// MAX_REQUEST_UPDATES are all outstanding it waits, and the latest Forward State goes
    /// out when one is answered (`Ingest::update_answered`).
    fn send_update(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId, forward: bool) {
        let Some(s) = sessions.get_mut(conn) else { return };
        let params = Parameters { forward: Some(forward), ..Parameters::default() };
        let sent = s.next_request_id().and_then(|request_id| {
            s.send(Message::RequestUpdate(RequestUpdate { request_id, existing_request_id: rid, params }))
        });
        match sent {
            Ok(()) => {}
            Err(SessionError::UpdatesBlocked { .. }) => {
                if let Some(up) = self.ups.get_mut(&(conn, rid)) {
                    up.update_blocked = true;
                }
            }
            Err(e) => debug!(%conn, error = %e, "REQUEST_UPDATE not sent"),
        }
    }

    /// REQUEST_UPDATE NEW_GROUP_REQUEST `value` of upstream `epoch` (draft-22 §9.20.19: the
    /// owner decided it goes).
    pub(super) fn new_group(&mut self, sessions: &mut Sessions, epoch: Epoch, value: u64) {
        let Some(&(conn, rid)) = self.by_epoch.get(&epoch) else { return };
        let Some(s) = sessions.get_mut(conn) else { return };
        let params = Parameters { new_group_request: Some(value), ..Parameters::default() };
        let sent = s.next_request_id().and_then(|request_id| {
            s.send(Message::RequestUpdate(RequestUpdate { request_id, existing_request_id: rid, params }))
        });
        if let Err(e) = sent {
            debug!(%conn, error = %e, "NEW_GROUP_REQUEST not sent");
        }
    }

    /// The publisher answered one of our REQUEST_UPDATEs of `rid` (REQUEST_OK or
    /// REQUEST_ERROR): a waiting one goes now.
    pub(super) fn update_answered(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        let Some(up) = self.ups.get_mut(&(conn, rid)) else { return };
        if !std::mem::take(&mut up.update_blocked) {
            return;
        }
        let forward = match up.kind {
            UpstreamKind::Subscribe { forward, .. } | UpstreamKind::Publish { forward, .. } => forward,
        };
        self.send_update(sessions, conn, rid, forward);
    }

    pub(super) fn publish_refused(
        &mut self,
        sessions: &mut Sessions,
        epoch: Epoch,
        code: RequestErrorCode,
        reason: Bytes,
    ) {
        let Some(&(conn, rid)) = self.by_epoch.get(&epoch) else { return };
        self.remove_upstream(sessions, (conn, rid));
        let reason = String::from_utf8_lossy(&reason).into_owned();
        sessions.answer_error(conn, rid, code, &reason, true);
    }

    /// The owner no longer wants upstream `epoch`: UNSUBSCRIBE (draft-16) or cancel its
    /// request stream (draft-22).
    pub(super) fn upstream_stop(&mut self, sessions: &mut Sessions, epoch: Epoch) {
        let Some(&(conn, rid)) = self.by_epoch.get(&epoch) else { return };
        self.remove_upstream(sessions, (conn, rid));
        if let Some(s) = sessions.get_mut(conn) {
            if let Err(e) = s.send(Message::Unsubscribe(rid)) {
                debug!(%conn, error = %e, "upstream UNSUBSCRIBE not sent");
            }
        }
    }

    pub(super) fn publish_done(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        m: PublishDone,
    ) {
        let deadline = cx.now + cx.config.done_wait;
        let Some(status) = sessions.get(conn).map(|s| s.peer_done_status(m.status_code)) else {
            return;
        };
        let Some(up) = self.ups.get_mut(&(conn, m.request_id)) else { return };
        up.done = Some((status, m.reason, m.stream_count, deadline));
        self.timers.push(Reverse((deadline, conn, m.request_id)));
        self.try_finish(cx, sessions, (conn, m.request_id), false);
    }

    /// The publisher cancelled one of its requests (draft-22 reset / STOP_SENDING).
    pub(super) fn cancelled(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        if let Some(up) = self.ups.get_mut(&(conn, rid)) {
            let reason = Bytes::from_static(b"the publisher cancelled the subscription");
            up.done = Some((DoneStatus::InternalError, reason, 0, cx.now));
            self.try_finish(cx, sessions, (conn, rid), true);
        }
    }

    /// Passes a held PUBLISH_DONE on once its streams have all ended (or `force`).
    fn try_finish(&mut self, cx: &mut Cx, sessions: &mut Sessions, key: (ConnId, RequestId), force: bool) {
        let Some(up) = self.ups.get(&key) else { return };
        let Some((_, _, count, _)) = &up.done else { return };
        let complete =
            up.open_streams == 0 && (wire::model::stream_count_unknown(*count) || up.streams_seen >= *count);
        if !complete && !force {
            return;
        }
        let Some((up, open)) = self.remove_upstream(sessions, key) else { return };
        let Some((status, reason, _, _)) = up.done else { return };
        let owner = cx.owner_of(up.alias);
        let (alias, epoch) = (up.alias, up.epoch);
        // Streams still open upstream end here (reset: their objects will not come).
        for k in open {
            let data = Data::StreamEnd { key: k, reset: Some(ResetCode::SessionClosed) };
            to_owner(&mut self.shed, cx, alias, epoch, data);
        }
        cx.send(owner, OwnerMsg::UpstreamDone { alias, epoch, status, reason });
        if let Some(s) = sessions.get_mut(key.0) {
            unheeded(s.end_request(key.1), "end request"); // our side of the request's stream ends too
                                                           //WOKEN (key.0);
        }
    }

    /// Forgets upstream `key` (session, request) and its open streams, whose keys it returns
    /// with it (the session discards their later bytes once the request is gone).
    fn remove_upstream(
        &mut self,
        sessions: &mut Sessions,
        key: (ConnId, RequestId),
    ) -> Option<(Upstream, Vec<StreamKey>)> {
        let up = self.ups.remove(&key)?;
        self.by_epoch.remove(&up.epoch);
        if let (true, Some(track)) = (up.registered, &up.published) {
            self.published_log.push((track.clone(), false));
        }
        sessions.forget(key.0, key.1);
        if let UpstreamKind::Publish { .. } = up.kind {
            if let Some(c) = self.per_session.get_mut(&key.0) {
                c.1 = c.1.saturating_sub(1);
            }
        }
        let mut open = Vec::new();
        self.streams.retain(|k, v| {
            let mine = k.0 == key.0 && v.0 == key.1;
            if mine {
                open.push(v.1);
            }
            !mine
        });
        Some((up, open))
    }

    pub(super) fn object(
        &mut self,
        cx: &mut Cx,
        conn: ConnId,
        stream: StreamId,
        rid: RequestId,
        object: DataObject,
        payload: Bytes,
    ) {
        // Fetch items are the upstream fetches' (`upfetch.rs`); the shard routes only these.
        let DataObject::Subgroup { header, object } = object else { return };
        let Some(up) = self.ups.get_mut(&(conn, rid)) else { return };
        let (alias, epoch) = (up.alias, up.epoch);
        let key = match self.streams.get(&(conn, stream)) {
            Some(&(_, key)) => key,
            None => {
                up.open_streams += 1;
                up.streams_seen += 1;
                self.next_stream += 1;
                let key = StreamKey { core: cx.core, seq: self.next_stream };
                self.streams.insert((conn, stream), (rid, key));
                let mut header = header;
                header.track_alias = alias;
                if header.subgroup_id == SubgroupId::FirstObject {
                    header.subgroup_id = SubgroupId::Explicit(object.object_id);
                }
                to_owner(&mut self.shed, cx, alias, epoch, Data::StreamOpen { key, header });
                key
            }
        };
        cx.stats.objects_in += 1;
        cx.stats.bytes_in += payload.len() as u64;
        let data = Data::Object { key, object, payload, received: cx.received() };
        to_owner(&mut self.shed, cx, alias, epoch, data);
    }

    pub(super) fn stream_end(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        stream: StreamId,
        reset: Option<u64>,
    ) {
        let Some((rid, key)) = self.streams.remove(&(conn, stream)) else { return };
        let reset = reset.map(|c| sessions.get(conn).map_or(ResetCode::Other(c), |s| s.peer_reset(c)));
        let Some(up) = self.ups.get_mut(&(conn, rid)) else { return };
        up.open_streams = up.open_streams.saturating_sub(1);
        let (alias, epoch) = (up.alias, up.epoch);
        to_owner(&mut self.shed, cx, alias, epoch, Data::StreamEnd { key, reset });
        self.try_finish(cx, sessions, (conn, rid), false);
    }

    pub(super) fn datagram(
        &mut self,
        cx: &mut Cx,
        conn: ConnId,
        rid: RequestId,
        mut header: DatagramHeader,
        payload: Bytes,
    ) {
        let Some(up) = self.ups.get(&(conn, rid)) else { return };
        let (alias, epoch) = (up.alias, up.epoch);
        header.track_alias = alias;
        cx.stats.objects_in += 1;
        cx.stats.bytes_in += payload.len() as u64;
        let data = Data::Datagram { header, payload, received: cx.received() };
        to_owner(&mut self.shed, cx, alias, epoch, data);
    }

    /// Held PUBLISH_DONEs whose wait is over.
    /// Renews the upstream subscriptions whose time has come: REQUEST_UPDATE with a freshly
    /// minted token for the track's namespace (the parent extends EXPIRES to its expiry), and
    /// the next renewal before that.
    fn renew(&mut self, cx: &mut Cx, sessions: &mut Sessions, due: &[(ConnId, RequestId)]) {
        let now = cx.now;
        for &(conn, rid) in due {
            let Some(up) = self.ups.get_mut(&(conn, rid)) else { continue };
            let next = now + renew_after(RENEWED_TOKEN_TTL);
            up.renew = Some(next);
            self.timers.push(Reverse((next, conn, rid)));
            let (Some(keys), Some(ns)) =
                (cx.config.auth.as_ref().map(auth::KeyRing::keys), up.subscribed.clone())
            else {
                continue;
            };
            let claims = auth::Claims {
                ns: ns.fields().iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect(),
                publish: false,
                subscribe: true,
                exp: cx.unix_secs() + RENEWED_TOKEN_TTL.as_secs(),
            };
            let Some(token) = keys.mint(&claims) else { continue };
            let token = wire::model::AuthToken::UseValue { token_type: 0, value: Bytes::from(token) };
            let Some(s) = sessions.get_mut(conn) else { continue };
            let params = Parameters { auth_tokens: vec![token], ..Parameters::default() };
            let sent = s.next_request_id().and_then(|request_id| {
                s.send(Message::RequestUpdate(RequestUpdate { request_id, existing_request_id: rid, params }))
            });
            if let Err(e) = sent {
                debug!(%conn, error = %e, "upstream renewal not sent");
            }
        }
    }

    pub(super) fn tick(&mut self, cx: &mut Cx, sessions: &mut Sessions) {
        let (mut renew, mut finish) = (Vec::new(), Vec::new());
        while let Some(&Reverse((at, conn, rid))) = self.timers.peek() {
            if at > cx.now {
                break;
            }
            self.timers.pop();
            self.visits += 1;
            // Stale entries (the upstream is gone, or its timer moved) are skipped.
            let Some(up) = self.ups.get(&(conn, rid)) else { continue };
            if up.renew == Some(at) {
                renew.push((conn, rid));
            }
            if up.done.as_ref().is_some_and(|d| d.3 == at) {
                finish.push((conn, rid));
            }
        }
        self.renew(cx, sessions, &renew);
        for key in finish {
            self.try_finish(cx, sessions, key, true);
        }
    }

    /// Whether the relay has an upstream subscription on session `conn`.
    pub(super) fn has_upstreams(&self, conn: ConnId) -> bool {
        self.ups.keys().any(|(c, _)| *c == conn)
    }

    /// The parent at the end of link `conn` lists `namespace` (`on`) or no longer does, in
    /// answer to the link's SUBSCRIBE_NAMESPACE `rid`: every core's namespace table hears it
    /// as a `Via::Parent` entry, which discovery reports. At most
    /// `max_namespaces_per_session` of them per link.
    pub(super) fn parent_namespace(
        &mut self,
        cx: &mut Cx,
        conn: ConnId,
        rid: RequestId,
        namespace: TrackNamespace,
        on: bool,
    ) {
        let listed = self.parent.entry(conn).or_default();
        let publisher = cx.me(conn);
        if on {
            if listed.len() >= cx.config.max_namespaces_per_session {
                tracing::warn!(%conn, "the parent lists more namespaces than a session may announce; ignored");
                return;
            }
            if listed.insert(namespace.clone()) {
                cx.namespace_announced(&namespace, publisher, rid, Via::Parent);
            }
        } else if listed.remove(&namespace) {
            cx.namespace_withdrawn(&namespace, publisher);
        }
    }

    /// A publisher's session is gone: its namespaces are withdrawn, its tracks end.
    pub(super) fn session_closed(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId) {
        let publisher = cx.me(conn);
        for namespace in self.parent.remove(&conn).unwrap_or_default() {
            cx.namespace_withdrawn(&namespace, publisher);
        }
        let namespaces: Vec<RequestId> =
            self.namespaces.keys().filter(|(c, _)| *c == conn).map(|(_, r)| *r).collect();
        for rid in namespaces {
            self.withdraw_namespace(cx, sessions, conn, rid);
        }
        let ups: Vec<RequestId> = self.ups.keys().filter(|(c, _)| *c == conn).map(|(_, r)| *r).collect();
        if sessions.is_link(conn) {
            // An upstream link: its tracks wait for it (or another route) to come back.
            for rid in ups {
                let Some((up, open)) = self.remove_upstream(sessions, (conn, rid)) else { continue };
                let (alias, epoch) = (up.alias, up.epoch);
                for k in open {
                    let data = Data::StreamEnd { key: k, reset: Some(ResetCode::SessionClosed) };
                    to_owner(&mut self.shed, cx, alias, epoch, data);
                }
                cx.send(cx.owner_of(alias), OwnerMsg::UpstreamLost { alias, epoch });
            }
            self.streams.retain(|k, _| k.0 != conn);
            if let Some((namespaces, _)) = self.per_session.remove(&conn) {
                self.announced -= namespaces;
            }
            return;
        }
        for rid in ups {
            if let Some(up) = self.ups.get_mut(&(conn, rid)) {
                let reason = Bytes::from_static(b"the publisher's session closed");
                up.done = Some((DoneStatus::InternalError, reason, 0, cx.now));
            }
            self.try_finish(cx, sessions, (conn, rid), true);
        }
        self.streams.retain(|k, _| k.0 != conn);
        self.per_session.remove(&conn);
    }
}

/// Sends `data` of upstream subscription `epoch` to the track's owner core, through the mesh's
/// backpressure (`shed.rs`).
fn to_owner(shed: &mut Shed, cx: &mut Cx, alias: TrackAlias, epoch: Epoch, data: Data) {
    let owner = cx.owner_of(alias);
    let data = match shed.gate(cx, owner, &data) {
        Gate::Forward => data,
        Gate::Drop => return,
        Gate::Instead(reset) => reset,
    };
    cx.send(owner, OwnerMsg::Upstream { alias, epoch, data });
}
