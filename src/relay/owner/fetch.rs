//! FETCH and TRACK_STATUS, answered from the cache once the track's End Location is known, and
//! the upstream fetches for what the cache lacks.

use super::*;

/// The Location just before `l`.
pub(super) fn before(l: Location) -> Option<Location> {
    match (l.group, l.object) {
        (_, o) if o > 0 => Some(Location::new(l.group, o - 1)),
        (0, _) => None,
        (g, _) => Some(Location::new(g - 1, LAST_OBJECT)),
    }
}

/// How long a FETCH waits for objects fetched upstream when it names no FILL_TIMEOUT, and the
/// most it may wait when it does.
pub(super) const DEFAULT_FILL_WAIT: Duration = Duration::from_secs(2);

pub(super) const MAX_FILL_WAIT: Duration = Duration::from_secs(10);

/// Payload bytes one upstream fetch may bring (the answer is held until it is complete).
pub(super) const MAX_UPSTREAM_FETCH_BYTES: usize = 32 << 20;

/// A FETCH waiting for the objects its owner's cache lacks.
#[derive(Debug)]
pub(super) struct UpstreamFetch {
    pub(super) alias: TrackAlias,
    pub(super) publisher: SessionRef,
    /// Who waits for it.
    pub(super) answer: Answer,
    /// The upstream fetch covers the range's start through this Location.
    pub(super) gap: Location,
    pub(super) upstream: Vec<Piece>,
    pub(super) bytes: usize,
}

/// What an upstream fetch completes.
#[derive(Debug)]
pub(super) enum Answer {
    /// A FETCH: its answer without its pieces yet, and what the cache holds of the rest of
    /// the range.
    Fetch { ask: FetchAsk, data: FetchData, cached: Vec<Piece> },
    /// A subscription's backfill ([`Owner::backfill`]): the cache is read when the fetch is
    /// over, so the answer still holds every object forwarded before it.
    Backfill(Backfill),
}

impl Owner {
    /// A FETCH (or fill) of `track`, owned here: answered from the cache once the End Location
    /// is known (draft-16 §9.16 "FETCH_OK MUST NOT be sent until the End Location is known";
    /// draft-22 §3.2), i.e. once the upstream is Established.
    pub(crate) fn fetch(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        track: FullTrackName,
        ask: FetchAsk,
        who: Requester,
    ) {
        let full = self.tracks.len() >= cx.config.max_tracks_per_shard;
        match self.tracks.get_mut(&alias) {
            Some(t) if t.name != track => self.fetch_error(
                cx,
                alias,
                &ask,
                RequestErrorCode::InternalError,
                Bytes::from_static(b"alias collision"),
            ),
            Some(t) if matches!(t.source, Source::Pending { .. }) => t.fetches.push(ask),
            Some(_) => self.answer_fetch(cx, alias, ask),
            None if full => {
                let reason = Bytes::from_static(b"relay track limit reached");
                self.fetch_error(cx, alias, &ask, RequestErrorCode::InternalError, reason)
            }
            None => {
                // Not relayed now: subscribe it upstream like a SUBSCRIBE would (the End
                // Location comes with SUBSCRIBE_OK); then what the empty cache lacks is
                // fetched upstream. The subscription lingers and ends, or serves a
                // subscriber that follows.
                let Some(publisher) = cx.namespaces.route(&track.namespace, who) else {
                    if let Some(h) = self.hold_for_directory(cx, alias, &track, who) {
                        return h.fetches.push(ask);
                    }
                    let reason = Bytes::from_static(b"no publisher for this track");
                    return self.fetch_error(cx, alias, &ask, RequestErrorCode::DoesNotExist, reason);
                };
                let epoch = cx.new_epoch();
                let source = Source::Pending { publisher, epoch };
                let mut t = Track::new(track.clone(), source, Vec::new(), TrackInfo::default());
                t.fetches.push(ask);
                t.who = who;
                self.tracks.insert(alias, t);
                cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
            }
        }
    }

    /// The upstream became Established: answer the FETCHes and TRACK_STATUSes that waited.
    pub(super) fn answer_waiting_fetches(&mut self, cx: &mut Cx, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let info = t.info.clone();
        for (core, conn, rid) in std::mem::take(&mut t.statuses) {
            cx.send(core, FanoutMsg::StatusAnswer { conn, rid, answer: Ok(info.clone()) });
        }
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        for ask in std::mem::take(&mut t.fetches) {
            self.answer_fetch(cx, alias, ask);
        }
    }

    /// TRACK_STATUS (draft-16 §9.18, draft-22 §9.13): answered with what a SUBSCRIBE_OK would
    /// carry. A track the relay does not relay now is subscribed upstream like a SUBSCRIBE
    /// would be (the subscription then lingers and ends, or serves a subscriber that follows).
    pub(crate) fn status(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        track: FullTrackName,
        (from, conn, rid): (usize, ConnId, RequestId),
        who: Requester,
    ) {
        let fail = |code: RequestErrorCode, reason: &'static [u8]| FanoutMsg::StatusAnswer {
            conn,
            rid,
            answer: Err((code, Bytes::from_static(reason))),
        };
        let full = self.tracks.len() >= cx.config.max_tracks_per_shard;
        match self.tracks.get_mut(&alias) {
            Some(t) if t.name != track => {
                cx.send(from, fail(RequestErrorCode::InternalError, b"track alias collision"))
            }
            Some(t) if matches!(t.source, Source::Pending { .. }) => t.statuses.push((from, conn, rid)),
            Some(t) => {
                let answer = Ok(t.info.clone());
                cx.send(from, FanoutMsg::StatusAnswer { conn, rid, answer });
            }
            None if full => {
                cx.send(from, fail(RequestErrorCode::InternalError, b"relay track limit reached"))
            }
            None => {
                let Some(publisher) = cx.namespaces.route(&track.namespace, who) else {
                    if let Some(h) = self.hold_for_directory(cx, alias, &track, who) {
                        return h.statuses.push((from, conn, rid));
                    }
                    return cx
                        .send(from, fail(RequestErrorCode::DoesNotExist, b"no publisher for this track"));
                };
                let epoch = cx.new_epoch();
                let mut t = Track::new(
                    track.clone(),
                    Source::Pending { publisher, epoch },
                    Vec::new(),
                    TrackInfo::default(),
                );
                t.statuses.push((from, conn, rid));
                t.who = who;
                self.tracks.insert(alias, t);
                cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
            }
        }
    }

    pub(super) fn fetch_error(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        ask: &FetchAsk,
        code: RequestErrorCode,
        reason: Bytes,
    ) {
        let msg = FanoutMsg::FetchAnswer {
            alias,
            conn: ask.conn,
            rid: ask.rid,
            fill: ask.fill,
            answer: Err((code, reason)),
        };
        cx.send(ask.from, msg);
    }

    /// Resolves the range against the Largest Object (draft-16 FETCH_OK End Location rules,
    /// draft-22 §9.12) and collects the cached objects in it. What the cache cannot vouch
    /// for (before [`TrackCache::known_from`](super::cache::TrackCache::known_from)) is
    /// reported as unknown; ranges are ascending-only for that marker.
    pub(super) fn answer_fetch(&mut self, cx: &mut Cx, alias: TrackAlias, ask: FetchAsk) {
        self.cache.expire(alias, cx.now);
        let Some(t) = self.tracks.get(&alias) else { return };
        let Some(largest) = t.info.largest else {
            let reason = Bytes::from_static(b"no objects published yet");
            return self.fetch_error(cx, alias, &ask, RequestErrorCode::InvalidRange, reason);
        };
        let start = match ask.start {
            FetchStart::At(l) => l,
            FetchStart::GroupsBack(n) => Location::new((largest.group + 1).saturating_sub(n), 0),
        };
        let cache = self.cache.track(alias);
        let (mut end, mut whole_group) = match ask.end {
            FetchBound::Largest => (largest, None),
            FetchBound::Object(e) => (e.min(largest), None),
            FetchBound::Group(g) if g < largest.group => {
                (cache.and_then(|c| c.last_in_group(g)).unwrap_or(Location::new(g, 0)), Some(g))
            }
            FetchBound::Group(_) => (largest, None),
        };
        if let Some(cap) = ask.cap.filter(|&c| c < end) {
            (end, whole_group) = (cap, None);
        }
        if start > largest || end < start {
            let reason = Bytes::from_static(b"the range is empty or after the largest object");
            return self.fetch_error(cx, alias, &ask, RequestErrorCode::InvalidRange, reason);
        }
        let known = cache.map(|c| c.known_from());
        let unknown_until = match known {
            _ if ask.descending => None,
            None => Some(end),
            Some(k) if start < k => before(k).map(|b| b.min(end)),
            Some(_) => None,
        };
        let from = known.map_or(start, |k| k.max(start));
        let cached: Vec<Piece> = match cache {
            Some(c) if from <= end => c.range(from, end, ask.descending, cx.now),
            _ => Vec::new(),
        }
        .into_iter()
        .map(|(at, o)| Piece::Object(at, o))
        .collect();
        let data = FetchData {
            end,
            whole_group,
            properties: t.info.properties.clone(),
            descending: ask.descending,
            pieces: Vec::new(),
        };
        let Some(gap) = unknown_until else {
            cx.stats.fetch_hits += 1;
            return self.fetch_reply(cx, alias, ask, FetchData { pieces: cached, ..data });
        };
        cx.stats.fetch_misses += 1;
        // What the cache lacks is fetched upstream (draft-22 §3.2.3), within FILL_TIMEOUT.
        let wait = ask.fill_timeout.unwrap_or(DEFAULT_FILL_WAIT).min(MAX_FILL_WAIT);
        let established = matches!(t.source, Source::Subscribed { .. } | Source::Published { .. });
        if !established || wait.is_zero() {
            let kind = if wait.is_zero() { RangeEnd::TimedOut } else { RangeEnd::Unknown };
            let pieces = std::iter::once(Piece::Gap(kind, gap)).chain(cached).collect();
            return self.fetch_reply(cx, alias, ask, FetchData { pieces, ..data });
        }
        let (publisher, track) = (t.source.publisher(), t.name.clone());
        let id = self.next_fetch;
        self.next_fetch += 1;
        let deadline = cx.now + wait;
        self.fetch_deadlines.push(Reverse((deadline, id)));
        let answer = Answer::Fetch { ask, data, cached };
        let pending = UpstreamFetch { alias, publisher, answer, gap, upstream: Vec::new(), bytes: 0 };
        self.fetching.insert(id, pending);
        let msg = UpFetchMsg::Start(UpFetchStart { alias, id, track, publisher, start, end: gap });
        cx.send(publisher.core, msg);
    }

    /// Sends the answer of a FETCH to the core that asked.
    pub(super) fn fetch_reply(&mut self, cx: &mut Cx, alias: TrackAlias, ask: FetchAsk, data: FetchData) {
        let msg =
            FanoutMsg::FetchAnswer { alias, conn: ask.conn, rid: ask.rid, fill: ask.fill, answer: Ok(data) };
        cx.send(ask.from, msg);
    }

    /// The next item of upstream fetch `id`; past [`MAX_UPSTREAM_FETCH_BYTES`] the fetch is
    /// answered with what it has (the rest unknown).
    pub(crate) fn upstream_fetch_item(&mut self, cx: &mut Cx, id: u64, piece: Piece) {
        let Some(f) = self.fetching.get_mut(&id) else { return };
        let at = match &piece {
            Piece::Object(at, o) => {
                f.bytes += o.payload.len();
                *at
            }
            Piece::Gap(_, at) => *at,
        };
        if at <= f.gap {
            f.upstream.push(piece);
        }
        if f.bytes > MAX_UPSTREAM_FETCH_BYTES {
            let publisher = f.publisher;
            cx.send(publisher.core, UpFetchMsg::Cancel { id, publisher });
            self.upstream_fetch_done(cx, id, Some(RangeEnd::Unknown));
        }
    }

    /// Upstream fetch `id` is over: complete (`None`), or not (the rest of its range is a gap
    /// of kind `rest`: unknown when it failed, timed out when FILL_TIMEOUT ran out). The
    /// FETCH is answered: what came from upstream, the gap, then what the cache holds.
    pub(crate) fn upstream_fetch_done(&mut self, cx: &mut Cx, id: u64, rest: Option<RangeEnd>) {
        let Some(f) = self.fetching.remove(&id) else { return };
        let mut pieces = f.upstream;
        if let Some(kind) = rest {
            let last = pieces.last().map(|p| match p {
                Piece::Object(at, _) | Piece::Gap(_, at) => *at,
            });
            if last.is_none_or(|l| l < f.gap) {
                pieces.push(Piece::Gap(kind, f.gap));
            }
        }
        match f.answer {
            Answer::Fetch { ask, data, cached } => {
                pieces.extend(cached);
                self.fetch_reply(cx, f.alias, ask, FetchData { pieces, ..data });
            }
            Answer::Backfill(b) => {
                let fetched = pieces
                    .into_iter()
                    .filter_map(|p| match p {
                        Piece::Object(at, o) => Some((at, o)),
                        Piece::Gap(..) => None,
                    })
                    .collect();
                self.backfill_answer(cx, f.alias, b, fetched);
            }
        }
    }

    /// Upstream fetches whose FILL_TIMEOUT ran out.
    pub(super) fn fetch_timeouts(&mut self, cx: &mut Cx) {
        while let Some(id) = pop_due(&mut self.fetch_deadlines, cx.now) {
            let Some(publisher) = self.fetching.get(&id).map(|f| f.publisher) else { continue };
            cx.send(publisher.core, UpFetchMsg::Cancel { id, publisher });
            self.upstream_fetch_done(cx, id, Some(RangeEnd::TimedOut));
        }
    }
}
