//! Subscribers of a track and the one upstream subscription they share: the first
//! subscriber anywhere makes the owner subscribe upstream, later ones are answered from its
//! state, and the upstream ends a linger after the last one leaves.

use super::*;

impl Owner {
    /// How long a track nobody wants keeps its upstream: none while the relay drains (no new
    /// subscriber is coming, and the upstream's end lets the parent's drain finish).
    pub(super) fn linger(&self, cx: &Cx) -> Duration {
        if cx.draining() {
            Duration::ZERO
        } else {
            cx.config.linger
        }
    }

    pub(super) fn set_idle(&mut self, cx: &mut Cx, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.cores.is_empty() && t.waiting.is_empty() && t.idle_since.is_none() {
            t.idle_since = Some(cx.now);
            self.idle.push(Reverse((cx.now + self.linger(cx), alias.0)));
        }
    }

    /// Answers every waiting core: the upstream is Established.
    pub(super) fn release_waiting(&mut self, cx: &mut Cx, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let waiting = std::mem::take(&mut t.waiting);
        let info = t.info.clone();
        let open: Vec<_> = t.streams.iter().map(|(k, (h, _, _))| (*k, *h)).collect();
        for core in waiting {
            if !t.cores.contains(&core) {
                t.cores.push(core);
            }
            let msg = FanoutMsg::SubscribeOk { alias, info: info.clone(), open: open.clone() };
            cx.send(core, msg);
        }
    }

    /// The first subscription of `alias` on core `from`. `new_group`: its NEW_GROUP_REQUEST,
    /// included in a new upstream SUBSCRIBE or sent to an Established one (draft-22 §9.20.19).
    /// `start`: where it starts, for a new upstream SUBSCRIBE (see [`UpStart`]).
    pub(crate) fn subscribe(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        track: FullTrackName,
        (from, rendezvous, who): (usize, Duration, Requester),
        new_group: Option<u64>,
        start: UpStart,
    ) {
        if let Some(h) = self.held.get_mut(&alias) {
            if h.name == track && !h.waiting.contains(&from) {
                h.waiting.push(from);
            }
            if h.name == track {
                h.new_group = h.new_group.max(new_group);
                h.start = h.start.wider(start);
                if !rendezvous.is_zero() && !h.rendezvous {
                    h.rendezvous = true;
                    let until = cx.now + rendezvous.min(cx.config.max_rendezvous);
                    if until > h.until {
                        h.until = until;
                        self.held_until.push(Reverse((until, alias.0)));
                    }
                }
            }
            return;
        }
        if let Some(t) = self.tracks.get_mut(&alias) {
            if t.name != track {
                let reason = Bytes::from_static(b"track alias collision");
                return cx.send(
                    from,
                    FanoutMsg::SubscribeError { alias, code: RequestErrorCode::InternalError, reason },
                );
            }
            t.idle_since = None;
            if !t.waiting.contains(&from) && !t.cores.contains(&from) {
                t.waiting.push(from);
            }
            t.paused.retain(|&c| c != from);
            match t.source {
                Source::Pending { .. } => {}
                Source::Subscribed { .. } => {
                    self.release_waiting(cx, alias);
                    self.sync_forward(cx, alias);
                }
                Source::Published { publisher, epoch, forward } => {
                    if !forward {
                        t.source = Source::Published { publisher, epoch, forward: true };
                        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: true });
                    }
                    self.release_waiting(cx, alias);
                    self.sync_forward(cx, alias); // further publishers resume too
                }
            }
            return;
        }
        if self.tracks.len() >= cx.config.max_tracks_per_shard {
            let reason = Bytes::from_static(b"relay track limit reached");
            return cx.send(
                from,
                FanoutMsg::SubscribeError { alias, code: RequestErrorCode::InternalError, reason },
            );
        }
        let Some(publisher) = cx.namespaces.route(&track.namespace, who) else {
            let lookup = cx.directory.resolves(who) && cx.directory.lookup(&track.namespace);
            if !rendezvous.is_zero() || lookup {
                // Hold it until a publisher appears (PUBLISH_NAMESPACE, PUBLISH, or a route
                // the directory leads to) or time is up.
                let wait = if rendezvous.is_zero() {
                    Duration::ZERO
                } else {
                    rendezvous.min(cx.config.max_rendezvous)
                };
                let wait = if lookup { wait.max(crate::directory::DIRECTORY_WAIT) } else { wait };
                let mut held = Held::new(track, cx.now + wait, who);
                (held.waiting, held.new_group, held.start) = (vec![from], new_group, start);
                (held.rendezvous, held.lookup) = (!rendezvous.is_zero(), lookup);
                self.hold(alias, held);
                return;
            }
            let reason = Bytes::from_static(b"no publisher for this track");
            return cx.send(
                from,
                FanoutMsg::SubscribeError { alias, code: RequestErrorCode::DoesNotExist, reason },
            );
        };
        self.start_upstream(
            cx,
            alias,
            publisher,
            Wanted { track, waiting: vec![from], who, new_group, start },
        );
    }

    /// A new track: SUBSCRIBE upstream to `publisher` and every other announcer, for what
    /// its first subscribers asked (`wanted`).
    pub(super) fn start_upstream(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        publisher: SessionRef,
        wanted: Wanted,
    ) {
        let Wanted { track, waiting, who, new_group, start } = wanted;
        let epoch = cx.new_epoch();
        let source = Source::Pending { publisher, epoch };
        let mut t = Track::new(track.clone(), source, waiting, TrackInfo::default());
        t.who = who;
        // Outstanding until the Largest Group increases (draft-22 §9.20.19).
        t.new_group.sent = new_group.map(|v| (v, None));
        t.asked = start;
        // Every other publisher of the namespace too (draft-22 §7.6), merged (`merge.rs`).
        let others = cx.namespaces.other_announcers(&track.namespace, publisher);
        for other in others.into_iter().take(MAX_PUBLISHERS - 1) {
            let epoch = cx.new_epoch();
            t.extra.push(Source::Pending { publisher: other, epoch });
            let (track, publisher) = (track.clone(), other);
            cx.send(
                other.core,
                IngestMsg::UpstreamSubscribe { alias, track, publisher, epoch, new_group: None, start },
            );
        }
        if !t.extra.is_empty() {
            t.merge = Some(Box::default());
        }
        self.tracks.insert(alias, t);
        let msg = IngestMsg::UpstreamSubscribe { alias, track, publisher, epoch, new_group, start };
        cx.send(publisher.core, msg);
    }

    /// NEW_GROUP_REQUEST `value` from a subscriber of `alias` (draft-22 §9.20.19, "Relay
    /// Handling"): sent upstream in a REQUEST_UPDATE when the track is Established, supports
    /// dynamic groups, the value is 0 or beyond the Largest Group, and no request of ours
    /// with a greater or equal value is outstanding. One not yet Established got the value in
    /// its SUBSCRIBE if it was the first; later ones are covered by that SUBSCRIBE's answer.
    pub(crate) fn new_group(&mut self, cx: &mut Cx, alias: TrackAlias, value: u64) {
        if let Some(h) = self.held.get_mut(&alias) {
            // Held for a publisher: the largest value goes in its upstream SUBSCRIBE.
            h.new_group = h.new_group.max(Some(value));
            return;
        }
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if matches!(t.source, Source::Pending { .. }) {
            // Its SUBSCRIBE is already on its way: this one waits for the answer.
            t.new_group.waiting = Some(t.new_group.waiting.map_or(value, |w| w.max(value)));
            return;
        }
        if !dynamic_groups(&t.info.properties) {
            return;
        }
        let largest = t.info.largest.map(|l| l.group);
        if value != 0 && largest.is_some_and(|g| value <= g) {
            return;
        }
        if t.new_group.sent.is_some_and(|(outstanding, _)| outstanding >= value) {
            return;
        }
        t.new_group.sent = Some((value, largest));
        let (core, epoch) = (t.source.publisher().core, t.source.epoch());
        cx.send(core, IngestMsg::NewGroup { alias, epoch, value });
    }

    pub(crate) fn unsubscribe(&mut self, cx: &mut Cx, alias: TrackAlias, from: usize) {
        if let Some(h) = self.held.get_mut(&alias) {
            h.waiting.retain(|&c| c != from);
            // FETCHes and TRACK_STATUSes held with it still wait for their answer.
            if h.waiting.is_empty() && h.fetches.is_empty() && h.statuses.is_empty() {
                self.held.remove(&alias);
            }
            return;
        }
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        t.cores.retain(|&c| c != from);
        t.waiting.retain(|&c| c != from);
        t.paused.retain(|&c| c != from);
        self.set_idle(cx, alias);
        self.sync_forward(cx, alias);
    }

    /// Core `from` paused or resumed all its subscriptions of `alias`.
    pub(crate) fn forward(&mut self, cx: &mut Cx, alias: TrackAlias, from: usize, forward: bool) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        t.paused.retain(|&c| c != from);
        if !forward {
            t.paused.push(from);
        }
        self.sync_forward(cx, alias);
    }

    /// The upstream forwards objects while any core with subscribers has one not paused, and
    /// is paused (REQUEST_UPDATE FORWARD 0) while every one is. With no subscribers at all
    /// the linger decides instead.
    pub(super) fn sync_forward(&mut self, cx: &mut Cx, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.cores.is_empty() && t.waiting.is_empty() {
            return;
        }
        let wanted = t.cores.iter().chain(&t.waiting).any(|c| !t.paused.contains(c));
        // A PUBLISH under the `always` policy keeps forwarding: the relay caches the track.
        let always = always_forward(cx);
        // Further publishers (all PUBLISHes) follow the same rule as a PUBLISH source.
        for s in &mut t.extra {
            if let Source::Published { publisher, epoch, forward } = s {
                if *forward != (wanted || always) {
                    *forward = wanted || always;
                    let msg = IngestMsg::PublishForward { alias, epoch: *epoch, forward: *forward };
                    cx.send(publisher.core, msg);
                }
            }
        }
        let wanted = wanted || (always && matches!(t.source, Source::Published { .. }));
        let epoch = t.source.epoch();
        let publisher = t.source.publisher();
        match &mut t.source {
            Source::Pending { .. } => return,
            Source::Published { forward, .. } if *forward != wanted => *forward = wanted,
            Source::Subscribed { .. } if t.forward != wanted => t.forward = wanted,
            _ => return,
        }
        if let Some(m) = t.handover.moving.as_ref().filter(|m| m.ok) {
            let (core, epoch) = (m.publisher.core, m.epoch);
            cx.send(core, IngestMsg::PublishForward { alias, epoch, forward: wanted });
        }
        if matches!(t.source, Source::Subscribed { .. }) {
            // The other publishers subscribed to follow the same Forward State.
            for s in t.extra.iter().filter(|s| matches!(s, Source::Subscribed { .. })) {
                let msg = IngestMsg::PublishForward { alias, epoch: s.epoch(), forward: wanted };
                cx.send(s.publisher().core, msg);
            }
        }
        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: wanted });
    }
}
