//! How downstream subscriptions end: the track's end or loss upstream, UNSUBSCRIBE, streams
//! lost or shed, authorization that runs out, a closed session; each with its PUBLISH_DONE and
//! its streams reset or finished.

use super::*;
use crate::cx::unheeded;
use crate::msg::ConnId;

impl Fanout {
    /// The owner lost the track's upstream: new subscriptions wait (see `SubTrack::lost`).
    pub(crate) fn upstream_lost(&mut self, alias: TrackAlias) {
        if let Some(st) = self.tracks.get_mut(&alias).filter(|st| st.live) {
            st.lost = true;
        }
    }

    /// The track ended upstream: PUBLISH_DONE to every subscription, with its Stream Count.
    pub(crate) fn track_done(
        &mut self,
        now: Instant,
        sessions: &mut Sessions,
        alias: TrackAlias,
        status: DoneStatus,
        reason: Bytes,
    ) {
        if !self.tracks.get(&alias).is_some_and(|st| st.live) {
            // Not for this core's current SUBSCRIBE (still unanswered): it was sent to an
            // earlier one that has since unsubscribed; the owner answers the current one.
            return;
        }
        let Some(st) = self.tracks.remove(&alias) else { return };
        for sub in st.subs {
            self.forget_sub(sessions, sub.conn, sub.rid);
            if !sub.established {
                // Waiting while the upstream was lost (`SubTrack::lost`): never answered, so
                // refused rather than ended.
                let why = String::from_utf8_lossy(&reason).into_owned();
                sessions.answer_error(sub.conn, sub.rid, RequestErrorCode::InternalError, &why, true);
                continue;
            }
            let Some(s) = sessions.get_mut(sub.conn) else { continue };
            // A malformed track's streams are reset with that code too (draft-22 §12.1).
            let reset = if status == DoneStatus::MalformedTrack {
                ResetCode::MalformedTrack
            } else {
                ResetCode::InternalError
            };
            for id in sub.open.iter().filter_map(|(_, d)| d.stream()) {
                unheeded(s.reset_stream(id, reset), "reset");
            }
            // Its streams reach the subscriber first (`Session::publish_done_after`).
            let streams = sub.losses.recent.ids().collect();
            let done = (status, sub.streams, reason.clone());
            debug!(conn = %sub.conn, rid = sub.rid.0, ?status, streams = sub.streams, "PUBLISH_DONE");
            if let Err(e) = s.publish_done_after(sub.rid, done, streams, now + PUBLISH_DONE_HOLD) {
                debug!(conn = %sub.conn, error = %e, "PUBLISH_DONE not sent");
            }
        }
    }

    pub(super) fn forget_sub(&mut self, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        self.by_req.remove(&(conn, rid));
        sessions.forget_holder(conn, rid, Holder::Subscription);
        self.per_session.remove(conn, rid);
    }

    /// UNSUBSCRIBE (draft-16) or a cancelled request stream (draft-22): the subscription's
    /// open streams are reset; the last subscription of a track on this core tells the owner.
    pub(crate) fn unsubscribe(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId, rid: RequestId) {
        self.remove_sub(cx, sessions, conn, rid, ResetCode::Cancelled);
    }

    /// Data streams of session `conn` that its transport reset (shed from its backlog, or
    /// out of time): they are no longer open; a subscription that lost
    /// `too_far_behind_streams` within [`SHED_WINDOW`] that way with none of its streams
    /// taken whole meanwhile or within the freshness budget before (`streams_finished`),
    /// not counting those lost to its own smaller delivery timeouts, ends with PUBLISH_DONE
    /// TOO_FAR_BEHIND. Streams
    /// lost while the core is overloaded do not count: then every subscriber falls behind
    /// because the relay does, and ending their subscriptions would turn an overload that
    /// costs some groups into one that delivers nothing. Nor do those lost while the session's
    /// path delivered nothing (`PathState::Stalled`): an outage, after which the subscriber
    /// resumes at the live edge.
    pub(crate) fn streams_lost(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        streams: &[StreamId],
        (how, path): (StreamLoss, PathState),
    ) {
        let limit = cx.config.too_far_behind_streams.max(1);
        let now = cx.now;
        let progress = cx.config.max_lag.unwrap_or(THIN_PATH_PROGRESS);
        let mut behind = Vec::new();
        let Fanout { tracks, per_session, visits, .. } = self;
        for &(rid, alias) in per_session.of(conn) {
            let Some(st) = tracks.get_mut(&alias) else { continue };
            let track_timeouts = st.timeouts;
            if let Some(sub) = st.subs.get_mut(conn, rid) {
                *visits += 1;
                let (lost, superseded) = sub.losses.recent.take(streams);
                // Newest group first (Group Order descending, draft-22 §5.1.2): an older
                // group's stream that waited behind a newer one until its time ran out was
                // lost to the subscriber's own order, at the live edge, not to lag.
                let lost = if sub.descending { lost - superseded } else { lost };
                sub.open.retain(|(_, d)| d.stream().is_none_or(|id| !streams.contains(&id)));
                // A stream that ran out of a delivery timeout smaller than the freshness
                // budget was lost to the subscriber's (or publisher's) own choice, not to lag.
                let own = sub.timeouts.with(track_timeouts).object;
                let own_choice = how == StreamLoss::Lag
                    && own.is_some_and(|t| cx.config.max_lag.is_none_or(|lag| t < lag));
                let thin = sub.losses.thin(now, progress);
                if lost == 0 || own_choice || thin || cx.overloaded() || path == PathState::Stalled {
                    continue;
                }
                if sub.losses.count(lost, now) >= limit {
                    behind.push(sub.rid);
                }
            }
        }
        for rid in behind {
            cx.stats.too_far_behind += 1;
            self.end_sub(cx, sessions, conn, rid, Ending::TooFarBehind);
        }
    }

    /// Data streams of session `conn` that its transport took in full while it was losing
    /// others: each subscription one of them belongs to got a subgroup through whole, so
    /// the streams it lost before, and those it loses within the freshness budget after, do
    /// not count toward TOO_FAR_BEHIND. A subscriber on a path thinner than its track loses
    /// some groups (several at once when the path slows) and keeps the live edge; only one
    /// that keeps losing streams with none getting through is too far behind.
    pub(crate) fn streams_finished(&mut self, now: Instant, conn: ConnId, streams: &[StreamId]) {
        let Fanout { tracks, per_session, visits, .. } = self;
        for &(rid, alias) in per_session.of(conn) {
            let Some(sub) = tracks.get_mut(&alias).and_then(|st| st.subs.get_mut(conn, rid)) else {
                continue;
            };
            *visits += 1;
            if sub.losses.recent.take(streams).0 > 0 {
                sub.losses.got_through(now);
            }
        }
    }

    /// Ends subscription `rid` of session `conn` from the relay's side: its open streams are
    /// reset (as in `remove_sub`), then PUBLISH_DONE with its Stream Count, as `why` says.
    pub(super) fn end_sub(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        why: Ending,
    ) {
        let (reset, status, reason) = why.codes();
        let Some(sub) = self.remove_sub(cx, sessions, conn, rid, reset) else { return };
        let Some(s) = sessions.get_mut(conn) else { return };
        if let Err(e) = s.publish_done(rid, status, sub.streams, Bytes::from_static(reason)) {
            debug!(%conn, error = %e, "PUBLISH_DONE not sent");
        }
    }

    /// A REQUEST_UPDATE of subscription `rid` failed: it ends with UPDATE_FAILED (draft-16
    /// §9.11, draft-22 §9.5.1).
    pub(crate) fn update_failed(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
    ) {
        self.end_sub(cx, sessions, conn, rid, Ending::UpdateFailed);
    }

    /// Ends the subscriptions whose authorization ran out: PUBLISH_DONE EXPIRED (draft-22
    /// §12.4; draft-16 §13.1.2), their streams reset (draft-22: EXPIRED_AUTH_TOKEN).
    pub(crate) fn tick(&mut self, cx: &mut Cx, sessions: &mut Sessions) {
        while let Some(&Reverse((at, conn, rid))) = self.expiries.peek() {
            if at > cx.now {
                break;
            }
            self.expiries.pop();
            let current = self.by_req.get(&(conn, rid)).and_then(|alias| {
                let st = self.tracks.get(alias)?;
                st.subs.position(conn, rid).map(|i| st.subs[i].until)
            });
            if current != Some(Some(at)) {
                continue; // gone, or extended since
            }
            self.end_sub(cx, sessions, conn, rid, Ending::Expired);
        }
    }

    /// Removes subscription `rid` of session `conn`, resetting its open streams with `reset`
    /// (a draft without that code gets CANCELLED, see `ResetCode`). The last subscription of
    /// a track on this core tells the owner.
    pub(super) fn remove_sub(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        reset: ResetCode,
    ) -> Option<LocalSub> {
        let &alias = self.by_req.get(&(conn, rid))?;
        self.forget_sub(sessions, conn, rid);
        let st = self.tracks.get_mut(&alias)?;
        let sub = st.subs.remove(conn, rid)?;
        if let Some(s) = sessions.get_mut(conn) {
            for id in sub.open.iter().filter_map(|(_, d)| d.stream()) {
                unheeded(s.reset_stream(id, reset), "reset");
            }
        }
        // While the owner has not answered this core's SUBSCRIBE, the track stays (empty) and
        // its UNSUBSCRIBE waits for the answer: a new local SUBSCRIBE meanwhile joins it, rather
        // than sending a second SUBSCRIBE that the answer to the first would be taken for (the
        // owner drops this core between the two, and objects in that gap would be lost).
        if st.subs.is_empty() && st.live {
            self.tracks.remove(&alias);
            let from = cx.core;
            cx.send(cx.owner_of(alias), OwnerMsg::Unsubscribe { alias, from });
        }
        for j in &sub.joins {
            self.fetch_fail(
                sessions,
                conn,
                j.rid,
                false,
                RequestErrorCode::InternalError,
                "the joined subscription ended",
            );
        }
        self.sync_forward(cx, alias);
        self.fetch_cancel(sessions, conn, rid); // its fill, if the answer is still on its way
        Some(sub)
    }

    pub(crate) fn session_closed(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId) {
        let rids: Vec<RequestId> = self.per_session.of(conn).iter().map(|(rid, _)| *rid).collect();
        self.visits += rids.len() as u64;
        for rid in rids {
            self.unsubscribe(cx, sessions, conn, rid);
        }
        self.fetch_session_closed(conn);
    }
}

/// What one subscription lost and got through, for the TOO_FAR_BEHIND rule: streams lost
/// (to the session's backlog or to lag) count within a [`SHED_WINDOW`], unless one got
/// through whole within the freshness budget (a thin path at the live edge).
#[derive(Debug, Default)]
pub(super) struct Losses {
    /// The last streams opened for it, finished ones included: a stream shed from the
    /// backlog is usually one the relay already finished (its FIN queued).
    pub(super) recent: RecentStreams,
    /// Streams lost in the window that started at `since`.
    count: u32,
    since: Option<Instant>,
    /// When a stream of it last got through whole after the session began losing streams
    /// (`Fanout::streams_finished`): within the freshness budget of that, it is on a thin
    /// path at the live edge, and what it loses does not count toward TOO_FAR_BEHIND.
    last_whole: Option<Instant>,
}

impl Losses {
    /// Whether a stream got through whole within `progress` before `now`.
    fn thin(&self, now: Instant, progress: Duration) -> bool {
        self.last_whole.is_some_and(|t| now.saturating_duration_since(t) <= progress)
    }

    /// Counts `lost` streams at `now` (a window older than [`SHED_WINDOW`] starts over):
    /// the count in the window.
    fn count(&mut self, lost: u32, now: Instant) -> u32 {
        if self.since.is_none_or(|t| now.saturating_duration_since(t) > SHED_WINDOW) {
            self.since = Some(now);
            self.count = 0;
        }
        self.count += lost;
        self.count
    }

    /// A stream got through whole at `now`: what was lost before does not count.
    fn got_through(&mut self, now: Instant) {
        self.count = 0;
        self.since = None;
        self.last_whole = Some(now);
    }
}

/// Streams remembered per subscription to attribute lost and finished streams.
const RECENT_STREAMS: usize = 64;

/// The last [`RECENT_STREAMS`] data streams opened for a subscription, with their groups.
#[derive(Debug, Default)]
pub(super) struct RecentStreams(VecDeque<(StreamId, u64)>);

impl RecentStreams {
    pub(super) fn push(&mut self, id: StreamId, group: u64) {
        if self.0.len() == RECENT_STREAMS {
            self.0.pop_front();
        }
        self.0.push_back((id, group));
    }

    pub(super) fn ids(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.0.iter().map(|&(id, _)| id)
    }

    /// Forgets `streams`: how many of them were here, and how many of those had a stream of
    /// a newer group (not among `streams`) opened after them.
    pub(super) fn take(&mut self, streams: &[StreamId]) -> (u32, u32) {
        let kept_newest = self.0.iter().filter(|(id, _)| !streams.contains(id)).map(|&(_, g)| g).max();
        let (mut taken, mut superseded) = (0, 0);
        self.0.retain(|&(id, group)| {
            let gone = streams.contains(&id);
            if gone {
                taken += 1;
                superseded += u32::from(kept_newest.is_some_and(|newest| newest > group));
            }
            !gone
        });
        (taken, superseded)
    }
}
