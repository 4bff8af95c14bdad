//! The upstream's answers, its loss and its end: SUBSCRIBE_OK tells every waiting core, an
//! error or PUBLISH_DONE ends the track (or hands it to a further publisher), a lost link keeps
//! the subscribers while the relay subscribes again.

use super::*;

impl Owner {
    pub(crate) fn upstream_ok(&mut self, cx: &mut Cx, alias: TrackAlias, epoch: Epoch, info: TrackInfo) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if let Some(i) = t.extra.iter().position(|s| s.epoch() == epoch) {
            let Source::Pending { publisher, epoch } = t.extra[i] else { return };
            if matches!(t.source, Source::Pending { .. }) {
                // The first publisher to answer makes the track Established: it becomes the
                // source, the one asked first waits among the others.
                t.extra[i] = std::mem::replace(&mut t.source, Source::Pending { publisher, epoch });
            } else {
                t.extra[i] = Source::Subscribed { publisher, epoch };
                if let Some(l) = info.largest {
                    t.info.largest = Some(max_location(t.info.largest, l));
                }
                if !t.forward {
                    cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: false });
                }
                return;
            }
        }
        if let Some(m) = t.handover.moving.as_mut().filter(|m| m.epoch == epoch) {
            m.ok = true;
            if let Some(l) = info.largest {
                t.info.largest = Some(max_location(t.info.largest, l));
            }
            if !t.forward {
                let publisher = m.publisher;
                cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: false });
            }
            return;
        }
        let Source::Pending { publisher, epoch: e } = t.source else { return };
        if e != epoch {
            return;
        }
        t.source = Source::Subscribed { publisher, epoch };
        let was_lost = t.state.recovered();
        t.info.properties = info.properties;
        t.info.group_order = info.group_order;
        if let Some(l) = info.largest {
            t.info.largest = Some(max_location(t.info.largest, l));
        }
        // A start some groups back from the publisher's largest is a Location now that the
        // largest is known: the groups from there come on the subscription itself.
        if let (UpStart::GroupsBack(n), Some(l)) = (t.asked, info.largest) {
            t.asked = UpStart::At(Location { group: l.group.saturating_add(1).saturating_sub(n), object: 0 });
        }
        if was_lost {
            // Established again: the cores that kept their subscribers answer the ones that
            // arrived meanwhile.
            for &core in &t.cores {
                cx.send(core, FanoutMsg::SubscribeOk { alias, info: t.info.clone(), open: Vec::new() });
            }
        }
        let waiting_new_group = t.new_group.waiting.take();
        self.release_waiting(cx, alias);
        self.set_idle(cx, alias);
        self.answer_waiting_fetches(cx, alias);
        self.announce(cx, alias);
        if let Some(value) = waiting_new_group {
            self.new_group(cx, alias, value);
        }
    }

    /// Tells every core that `alias` has an Established upstream (once).
    pub(super) fn announce(&mut self, cx: &mut Cx, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.state.announced() {
            return;
        }
        t.state.mark_announced();
        let (track, properties) = (t.name.clone(), t.info.properties.clone());
        for core in 0..cx.cores {
            let msg =
                DiscoveryMsg::TrackAvailable { alias, track: track.clone(), properties: properties.clone() };
            cx.send(core, msg);
        }
    }

    /// Removes track `alias` and its cache; FETCHes still waiting for it get `code`.
    pub(super) fn remove(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        code: RequestErrorCode,
        reason: &Bytes,
    ) -> Option<Track> {
        let mut t = self.tracks.remove(&alias)?;
        self.cache.remove_track(alias);
        if let Some(m) = t.handover.moving.take() {
            cx.send(m.publisher.core, IngestMsg::UpstreamStop { alias, epoch: m.epoch });
        }
        for s in std::mem::take(&mut t.extra) {
            cx.send(s.publisher().core, IngestMsg::UpstreamStop { alias, epoch: s.epoch() });
        }
        if t.state.announced() {
            for core in 0..cx.cores {
                cx.send(core, DiscoveryMsg::TrackGone { alias });
            }
        }
        for ask in std::mem::take(&mut t.fetches) {
            self.fetch_error(cx, alias, &ask, code, reason.clone());
        }
        for (core, conn, rid) in std::mem::take(&mut t.statuses) {
            cx.send(core, FanoutMsg::StatusAnswer { conn, rid, answer: Err((code, reason.clone())) });
        }
        Some(t)
    }

    pub(crate) fn upstream_error(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        epoch: Epoch,
        code: RequestErrorCode,
        reason: Bytes,
    ) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.drop_extra(epoch) {
            return;
        }
        if t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch) {
            // The new parent does not have the track (yet): it stays with the old one, and
            // tries again soon (or comes back through the lost-link path if that closes).
            t.abandon_move();
            return self.moves.push(Reverse((cx.now + UPSTREAM_RETRY, alias.0)));
        }
        if !matches!(t.source, Source::Pending { epoch: e, .. } if e == epoch) {
            return;
        }
        if t.promote() {
            return; // another publisher of the namespace may have the track
        }
        if let Some(l) = t.state.lost_mut().filter(|l| l.until > cx.now) {
            // Subscribing again after a lost link: the parent may not know the track yet
            // (its publisher reconnecting too); try again until the grace period ends.
            l.retry_at = cx.now + UPSTREAM_RETRY;
            l.asking = false;
            let next = Reverse((l.retry_at, alias.0));
            self.lost.push(next);
            return;
        }
        let Some(t) = self.remove(cx, alias, code, &reason) else { return };
        for core in t.cores {
            cx.send(
                core,
                FanoutMsg::TrackDone { alias, status: DoneStatus::InternalError, reason: reason.clone() },
            );
        }
        for core in t.waiting {
            cx.send(core, FanoutMsg::SubscribeError { alias, code, reason: reason.clone() });
        }
    }

    /// The track is malformed (draft-22 §12.1): every subscription ends with PUBLISH_DONE
    /// MALFORMED_TRACK, waiting SUBSCRIBEs and FETCHes get it as an error, the upstream is
    /// stopped and the cache dropped.
    pub(super) fn malformed(&mut self, cx: &mut Cx, alias: TrackAlias, why: &'static str) {
        tracing::info!(alias = alias.0, why, "malformed track");
        let reason = Bytes::from(format!("malformed track: {why}"));
        let Some(t) = self.remove(cx, alias, RequestErrorCode::MalformedTrack, &reason) else { return };
        cx.stats.malformed_tracks += 1;
        let (publisher, epoch) = (t.source.publisher(), t.source.epoch());
        cx.send(publisher.core, IngestMsg::UpstreamStop { alias, epoch });
        for core in t.cores {
            cx.send(
                core,
                FanoutMsg::TrackDone { alias, status: DoneStatus::MalformedTrack, reason: reason.clone() },
            );
        }
        for core in t.waiting {
            cx.send(
                core,
                FanoutMsg::SubscribeError {
                    alias,
                    code: RequestErrorCode::MalformedTrack,
                    reason: reason.clone(),
                },
            );
        }
    }

    /// The upstream link that fed the track closed. Its open streams were already reset
    /// downstream (ingest sent their ends); subscribers stay while the relay routes and
    /// subscribes again (when the link, or another, is back), for up to
    /// [`UPSTREAM_LOST_GRACE`]; new subscribers wait for that SUBSCRIBE_OK.
    pub(crate) fn upstream_lost(&mut self, cx: &mut Cx, alias: TrackAlias, epoch: Epoch) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.drop_extra(epoch) {
            return;
        }
        if t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch) {
            return t.abandon_move();
        }
        if t.source.epoch() != epoch {
            return;
        }
        if t.handover.moving.is_some() {
            // The old link closed first: the track is the new subscription's from here.
            return self.move_finish(cx, alias, false);
        }
        if t.promote() {
            return; // another publisher of the track carries on
        }
        if t.cores.is_empty() && t.waiting.is_empty() {
            let reason = Bytes::from_static(b"the upstream relay went away");
            return self.upstream_done(cx, alias, epoch, DoneStatus::InternalError, reason);
        }
        t.source = Source::Pending { publisher: t.source.publisher(), epoch };
        t.streams.clear();
        for &core in &t.cores {
            cx.send(core, FanoutMsg::UpstreamLost { alias });
        }
        let until = cx.now + UPSTREAM_LOST_GRACE;
        t.state.set_lost(LostUpstream { until, retry_at: cx.now + UPSTREAM_RETRY, asking: false });
        self.lost.push(Reverse((cx.now + UPSTREAM_RETRY, alias.0)));
    }

    /// Tracks whose upstream was lost: subscribe again when due; end them when the grace period is over. The
    /// heap holds one entry per scheduled look at a track (stale ones are skipped).
    pub(super) fn lost_tick(&mut self, cx: &mut Cx) {
        let now = cx.now;
        while let Some(alias) = pop_due(&mut self.lost, now) {
            let alias = TrackAlias(alias);
            let Some((lost, name, who)) =
                self.tracks.get(&alias).and_then(|t| t.state.lost().map(|l| (*l, t.name.clone(), t.who)))
            else {
                continue;
            };
            if lost.until <= now {
                let reason = Bytes::from_static(b"the upstream relay is unreachable");
                let Some(t) = self.remove(cx, alias, RequestErrorCode::InternalError, &reason) else {
                    continue;
                };
                for core in t.cores {
                    let status = DoneStatus::InternalError;
                    cx.send(core, FanoutMsg::TrackDone { alias, status, reason: reason.clone() });
                }
                for core in t.waiting {
                    let code = RequestErrorCode::InternalError;
                    cx.send(core, FanoutMsg::SubscribeError { alias, code, reason: reason.clone() });
                }
                continue;
            }
            if lost.retry_at > now {
                continue; // a stale entry: the track has a later one
            }
            let publisher = cx.namespaces.route(&name.namespace, who);
            let epoch = cx.new_epoch();
            let Some(t) = self.tracks.get_mut(&alias) else { continue };
            let Some(l) = t.state.lost_mut() else { continue };
            match publisher {
                Some(publisher) => {
                    // The answer (UpstreamOk / UpstreamError) decides what follows; the grace
                    // period still ends the track if none comes.
                    l.retry_at = lost.until;
                    l.asking = true;
                    t.source = Source::Pending { publisher, epoch };
                    t.asked = UpStart::Next;
                    self.lost.push(Reverse((lost.until, alias.0)));
                    let track = name;
                    cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
                }
                None => {
                    l.retry_at = now + UPSTREAM_RETRY;
                    self.lost.push(Reverse((now + UPSTREAM_RETRY, alias.0)));
                    // Another relay of the cluster may serve it now: the route the directory
                    // gives wakes the track (`rendezvous`).
                    if cx.directory.resolves(who) {
                        cx.directory.lookup(&name.namespace);
                    }
                }
            }
        }
    }

    pub(crate) fn upstream_done(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        epoch: Epoch,
        status: DoneStatus,
        reason: Bytes,
    ) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.drop_extra(epoch) {
            return; // one of several publishers: the others go on
        }
        if t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch) {
            return t.abandon_move();
        }
        if t.source.epoch() != epoch {
            return;
        }
        if t.handover.moving.is_some() {
            // The old upstream ended it (its relay going away): the new one carries on, and
            // ends the track if it ends too.
            return self.move_finish(cx, alias, false);
        }
        if t.promote() {
            return; // another publisher of the track carries on
        }
        let Some(t) = self.remove(cx, alias, RequestErrorCode::DoesNotExist, &reason) else { return };
        for core in t.cores {
            cx.send(core, FanoutMsg::TrackDone { alias, status, reason: reason.clone() });
        }
        for core in t.waiting {
            let reason = Bytes::from_static(b"the track ended upstream");
            cx.send(core, FanoutMsg::SubscribeError { alias, code: RequestErrorCode::DoesNotExist, reason });
        }
    }
}
