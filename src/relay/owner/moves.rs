//! Moving a track to a new upstream without a gap (a parent's GOAWAY): the new subscription
//! runs beside the old one until it catches up (`handover.rs`).

use super::*;

impl Owner {
    /// The parent of upstream link `from` is going away and the link's replacement is up
    /// (its routes in the namespace table): every track this shard has from `from` moves to
    /// what the routes now name. A SUBSCRIBE not answered yet is simply sent again there; an
    /// Established one gets a second subscription, and moves at a group boundary (see
    /// [`Move`]) while the old one still delivers.
    pub(crate) fn upstream_moved(&mut self, cx: &mut Cx, from: SessionRef) {
        let on_link: Vec<TrackAlias> = self
            .tracks
            .iter()
            .filter(|(_, t)| {
                t.source.publisher() == from && t.handover.moving.is_none() && t.state.lost().is_none()
            })
            .map(|(a, _)| *a)
            .collect();
        for alias in on_link {
            self.move_track(cx, alias, from);
        }
    }

    pub(super) fn move_track(&mut self, cx: &mut Cx, alias: TrackAlias, from: SessionRef) {
        let Some(t) = self.tracks.get(&alias) else { return };
        let (old, track) = (t.source, t.name.clone());
        let Some(publisher) = cx.namespaces.route(&track.namespace, t.who).filter(|p| *p != from) else {
            return; // no other way to the track: it stays until the old link closes
        };
        let epoch = cx.new_epoch();
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        match old {
            Source::Subscribed { .. } => {
                t.handover.from = Some(from);
                t.handover.moving = Some(Move::subscription(publisher, epoch));
            }
            Source::Pending { .. } => {
                t.source = Source::Pending { publisher, epoch };
                t.asked = UpStart::Next;
                cx.send(old.publisher().core, IngestMsg::UpstreamStop { alias, epoch: old.epoch() });
            }
            Source::Published { .. } => return,
        }
        cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
    }

    /// Tracks whose move was refused try again while they are still on the old link (its
    /// parent may not have heard of the track yet: its publisher is moving too).
    pub(super) fn moves_tick(&mut self, cx: &mut Cx) {
        while let Some(alias) = pop_due(&mut self.moves, cx.now) {
            let alias = TrackAlias(alias);
            let Some(t) = self.tracks.get(&alias) else { continue };
            match t.handover.from {
                Some(from)
                    if t.handover.moving.is_none()
                        && t.state.lost().is_none()
                        && t.source.publisher() == from =>
                {
                    self.move_track(cx, alias, from)
                }
                _ => {}
            }
        }
    }

    /// The track's move is complete: the new subscription is its source. `stop_old`: the
    /// old subscription is still there (its streams all ended) and is cancelled; otherwise
    /// it is gone (its link closed, or it ended), and if no group came from the new one yet,
    /// the first is the one after the last group forwarded.
    pub(super) fn move_finish(&mut self, cx: &mut Cx, alias: TrackAlias, stop_old: bool) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let old = t.source;
        let Some((m, cut)) = t.handover.finish(old.epoch()) else { return };
        let (publisher, epoch) = (m.publisher, m.epoch);
        t.source = match m.ok {
            true => Source::Subscribed { publisher, epoch },
            false => Source::Pending { publisher, epoch },
        };
        t.asked = UpStart::Next;
        tracing::debug!(alias = alias.0, cut, "track moved to its new upstream");
        cx.stats.tracks_moved += 1;
        if stop_old {
            cx.send(old.publisher().core, IngestMsg::UpstreamStop { alias, epoch: old.epoch() });
        }
    }
}
