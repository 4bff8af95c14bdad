//! PUBLISH: a publisher's track taken in as the track's source, or merged with the sources
//! already there (draft-22 §7.3).

use super::*;

impl Owner {
    /// A PUBLISH for `track`: it becomes (or replaces) the track's upstream, and its
    /// PUBLISH_OK asks for objects at once (`publish_forward = always`) or only when someone
    /// is subscribed (`on-demand`).
    pub(crate) fn published(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        epoch: Epoch,
        info: TrackInfo,
    ) {
        let existing = self.tracks.get(&alias).map(|t| (t.name == track, t.source));
        match existing {
            Some((false, _)) => {
                let reason = Bytes::from_static(b"track alias collision");
                cx.send(
                    publisher.core,
                    IngestMsg::PublishRefused { alias, epoch, code: RequestErrorCode::InternalError, reason },
                );
            }
            Some((true, old))
                if self.tracks.get(&alias).is_some_and(|t| t.handover.moving.is_none())
                    && !matches!(old, Source::Pending { .. }) =>
            {
                self.add_publisher(cx, alias, publisher, epoch, info)
            }
            Some((true, old)) => self.replace_source(cx, alias, old, publisher, epoch, info),
            None => self.first_publisher(cx, alias, track, publisher, epoch, info),
        }
    }

    /// Another publisher of a live track (draft-22 §7.3: redundant publishers, a publisher
    /// reconnecting or moving to this relay, §7.6.1): both are kept, and what they send is
    /// merged (`merge.rs`): each object once, each subgroup on one downstream stream. When one
    /// ends, the track goes on with the others; viewers see no gap and no object twice.
    fn add_publisher(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        publisher: SessionRef,
        epoch: Epoch,
        info: TrackInfo,
    ) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.extra.len() + 1 >= MAX_PUBLISHERS {
            let reason = Bytes::from_static(b"too many publishers of this track");
            let code = RequestErrorCode::ExcessiveLoad;
            return cx.send(publisher.core, IngestMsg::PublishRefused { alias, epoch, code, reason });
        }
        if t.merge.is_none() {
            let open = t.streams.iter().map(|(k, (h, sub, last))| (*k, h.group_id, *sub, *last));
            t.merge = Some(Box::new(Merge::new(open)));
        }
        if let Some(l) = info.largest {
            t.info.largest = Some(max_location(t.info.largest, l));
        }
        let forward = t.wants_publish(cx);
        t.extra.push(Source::Published { publisher, epoch, forward });
        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward });
    }

    /// A PUBLISH while a move is already under way, or while the old source is not
    /// Established: the newest source wins; the old upstream ends, its open streams end here.
    fn replace_source(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        old: Source,
        publisher: SessionRef,
        epoch: Epoch,
        info: TrackInfo,
    ) {
        cx.send(old.publisher().core, IngestMsg::UpstreamStop { alias, epoch: old.epoch() });
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let moving = t.handover.replace();
        let ended: Vec<StreamKey> = t.streams.drain().map(|(k, _)| k).collect();
        let newer = !t.fetches.is_empty();
        let cores = t.cores.clone();
        let wants = t.wants_publish(cx);
        t.source = Source::Published { publisher, epoch, forward: wants };
        // The old publisher's stream-level promises end with its streams (the cache,
        // and with it one payload per object, stays).
        t.shape = Shape::default();
        t.info.properties = info.properties;
        t.info.group_order = info.group_order;
        if let Some(l) = info.largest {
            t.info.largest = Some(max_location(t.info.largest, l));
        }
        for key in ended {
            for &core in &cores {
                let data = Data::StreamEnd { key, reset: Some(ResetCode::Cancelled) };
                let msg = FanoutMsg::Downstream { alias, data };
                cx.send(core, msg);
            }
        }
        if let Some(m) = moving {
            cx.send(m.publisher.core, IngestMsg::UpstreamStop { alias, epoch: m.epoch });
        }
        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: wants });
        self.release_waiting(cx, alias);
        if newer {
            self.answer_waiting_fetches(cx, alias);
        }
        self.announce(cx, alias);
    }

    /// The first PUBLISH of a track: it becomes the track's source, and serves the SUBSCRIBEs
    /// held for it.
    fn first_publisher(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        epoch: Epoch,
        info: TrackInfo,
    ) {
        if self.tracks.len() >= cx.config.max_tracks_per_shard {
            let reason = Bytes::from_static(b"relay track limit reached");
            let msg =
                IngestMsg::PublishRefused { alias, epoch, code: RequestErrorCode::InternalError, reason };
            return cx.send(publisher.core, msg);
        }
        // A SUBSCRIBE held for this track is served by the PUBLISH.
        let (waiting, held_new_group) = match self.held.remove(&alias) {
            Some(h) if h.name == track => (h.waiting, h.new_group),
            _ => (Vec::new(), None),
        };
        let forward = !waiting.is_empty() || always_forward(cx);
        let source = Source::Published { publisher, epoch, forward };
        self.tracks.insert(alias, Track::new(track, source, waiting, info));
        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward });
        self.release_waiting(cx, alias);
        self.announce(cx, alias);
        if let Some(value) = held_new_group {
            // A held SUBSCRIBE's request, by the rules for an Established track.
            self.new_group(cx, alias, value);
        }
    }
}
