//! Objects from upstream: checked for a malformed track, cached, and forwarded once per
//! subscriber core in the order they arrived.

use super::*;

impl Owner {
    /// Upstream data for `alias`: remembered (open streams, largest location) and sent once
    /// to every core with subscribers.
    pub(crate) fn data(&mut self, cx: &mut Cx, alias: TrackAlias, epoch: Epoch, data: Data) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let from_move = t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch);
        let from_extra = t.extra.iter().any(|s| s.epoch() == epoch);
        if t.source.epoch() != epoch && !from_move && !from_extra {
            return; // a replaced or stopped upstream
        }
        if !from_extra && !t.handover.admit(t.source.epoch(), from_move, &data) {
            return;
        }
        let data = match t.merge.as_mut() {
            Some(m) => {
                let Some(data) = m.admit(data, !t.extra.is_empty()) else { return };
                if t.extra.is_empty() && m.is_idle() {
                    t.merge = None; // one publisher again, its merged subgroups all ended
                }
                data
            }
            None => data,
        };
        if let Err(why) = check_shape(t, &self.cache, alias, &data) {
            return self.malformed(cx, alias, why);
        }
        remember(&mut self.cache, t, alias, epoch, &data);
        let n = t.cores.len();
        let ended = match &data {
            Data::StreamEnd { key, .. } => Some(*key),
            _ => None,
        };
        let mut data = Some(data);
        for i in 0..n {
            let core = t.cores[i];
            let Some(d) = data.as_ref() else { break };
            let data = match t.shed.gate(cx, core, d) {
                Gate::Drop => continue,
                Gate::Instead(reset) => reset,
                // One message per core; the last takes the original (payloads are shared).
                Gate::Forward => match if i + 1 == n { data.take() } else { data.clone() } {
                    Some(data) => data,
                    None => break,
                },
            };
            cx.send(core, FanoutMsg::Downstream { alias, data });
        }
        if let Some(key) = ended {
            // Also toward cores that left the track while the stream was shed to them.
            t.shed.forget(key);
        }
        if t.handover.old_source_done(t.streams.keys()) {
            // The old source's last forwarded stream ended: the move is complete.
            self.move_finish(cx, alias, true);
        }
    }
}

/// What `data` tells the track's state: open streams and their Subgroup IDs, the largest
/// Location, and the objects worth caching (`MAX_CACHE_DURATION` 0: none).
fn remember(cache: &mut Cache, t: &mut Track, alias: TrackAlias, epoch: Epoch, data: &Data) {
    match data {
        Data::StreamOpen { key, header } => {
            let subgroup = match header.subgroup_id {
                SubgroupId::Zero => Some(0),
                SubgroupId::Explicit(id) => Some(id),
                SubgroupId::FirstObject => None,
            };
            t.streams.insert(*key, (*header, subgroup, None));
        }
        Data::Object { key, object, payload, received } => {
            if let Some((h, subgroup, last)) = t.streams.get_mut(key) {
                *last = Some(object.object_id);
                let at = Location { group: h.group_id, object: object.object_id };
                t.info.largest = Some(max_location(t.info.largest, at));
                new_group_seen(&mut t.new_group.sent, t.info.largest);
                let subgroup = *subgroup.get_or_insert(object.object_id);
                let max_age = max_cache_duration(&t.info.properties);
                if object.status == ObjectStatus::Normal && max_age != Some(Duration::ZERO) {
                    let cached = CachedObject {
                        subgroup: Some(subgroup),
                        priority: h.publisher_priority.unwrap_or(DEFAULT_PRIORITY),
                        properties: object.properties.clone(),
                        payload: payload.clone(),
                        expires: max_age.map(|d| *received + d),
                        from: Some(epoch),
                    };
                    cache_put(cache, t, alias, at, cached);
                }
            }
        }
        Data::StreamEnd { key, .. } => {
            t.streams.remove(key);
        }
        Data::Datagram { header, payload, received } => {
            let at = Location { group: header.group_id, object: header.object_id };
            t.info.largest = Some(max_location(t.info.largest, at));
            new_group_seen(&mut t.new_group.sent, t.info.largest);
            let max_age = max_cache_duration(&t.info.properties);
            if header.status.is_none() && max_age != Some(Duration::ZERO) {
                let cached = CachedObject {
                    subgroup: None,
                    priority: header.publisher_priority.unwrap_or(DEFAULT_PRIORITY),
                    properties: header.properties.clone(),
                    payload: payload.clone(),
                    expires: max_age.map(|d| *received + d),
                    from: Some(epoch),
                };
                cache_put(cache, t, alias, at, cached);
            }
        }
    }
}
