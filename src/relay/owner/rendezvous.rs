//! Requests for a track no publisher serves yet, held for one to appear: SUBSCRIBEs that asked
//! to wait (draft-22 RENDEZVOUS_TIMEOUT), and everything asked while the namespace directory is
//! consulted.

use super::*;

/// Requests for a track no publisher serves yet, held for one to appear: SUBSCRIBEs that
/// asked to wait (draft-22 RENDEZVOUS_TIMEOUT), and while the namespace directory is asked
/// (`directory.rs`), SUBSCRIBEs, FETCHes and TRACK_STATUSes.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) name: FullTrackName,
    /// Cores whose SUBSCRIBEs wait.
    pub(super) waiting: Vec<usize>,
    pub(super) until: Instant,
    pub(super) who: Requester,
    /// The largest NEW_GROUP_REQUEST of the held SUBSCRIBEs: it goes upstream once a
    /// publisher appears (draft-22 §9.20.19).
    pub(super) new_group: Option<u64>,
    /// Where the upstream SUBSCRIBE starts: wide enough for every held SUBSCRIBE.
    pub(super) start: UpStart,
    /// A SUBSCRIBE asked to wait for a publisher: time up is TIMEOUT, and a directory miss
    /// leaves the SUBSCRIBEs held (otherwise both are DOES_NOT_EXIST, as without a
    /// directory).
    pub(super) rendezvous: bool,
    /// The directory is being asked about the track's namespace.
    pub(super) lookup: bool,
    pub(super) fetches: Vec<FetchAsk>,
    /// TRACK_STATUS requests: (core, session, request).
    pub(super) statuses: Vec<(usize, ConnId, RequestId)>,
}

impl Held {
    pub(super) fn new(name: FullTrackName, until: Instant, who: Requester) -> Self {
        let (waiting, fetches, statuses) = (Vec::new(), Vec::new(), Vec::new());
        Held {
            name,
            waiting,
            until,
            who,
            new_group: None,
            start: UpStart::Next,
            rendezvous: false,
            lookup: false,
            fetches,
            statuses,
        }
    }
}

impl Owner {
    /// `namespace` was announced: held SUBSCRIBEs it can serve go upstream now.
    pub(crate) fn rendezvous(&mut self, cx: &mut Cx, namespace: &wire::model::TrackNamespace) {
        // Tracks waiting for a lost upstream link under `namespace` try again at once, unless
        // an attempt is on its way (a second SUBSCRIBE for the same track would be refused as
        // a duplicate, and that refusal taken for the attempt's answer).
        // (Only scanned while some track is lost: the heap is empty otherwise.)
        let now = cx.now;
        let mut again = Vec::new();
        let tracks = if self.lost.is_empty() { None } else { Some(self.tracks.iter_mut()) };
        for (alias, t) in tracks.into_iter().flatten().filter(|(_, t)| t.state.lost().is_some()) {
            if let Some(l) = t.state.lost_mut().filter(|_| t.name.namespace.starts_with(namespace)) {
                if l.retry_at > now && !l.asking {
                    l.retry_at = now;
                    again.push(Reverse((now, alias.0)));
                }
            }
        }
        self.lost.extend(again);
        if self.held.is_empty() {
            return;
        }
        let ready: Vec<TrackAlias> = self
            .held
            .iter()
            .filter(|(_, h)| h.name.namespace.starts_with(namespace))
            .map(|(a, _)| *a)
            .collect();
        for alias in ready {
            let Some(h) = self.held.remove(&alias) else { continue };
            let Some(publisher) = cx.namespaces.route(&h.name.namespace, h.who) else {
                self.held.insert(alias, h);
                continue;
            };
            let wanted = Wanted {
                track: h.name,
                waiting: h.waiting,
                who: h.who,
                new_group: h.new_group,
                start: h.start,
            };
            self.start_upstream(cx, alias, publisher, wanted);
            if let Some(t) = self.tracks.get_mut(&alias) {
                t.fetches.extend(h.fetches);
                t.statuses.extend(h.statuses);
            }
        }
    }

    /// The namespace directory knows no relay serving `namespace`: what was held only for
    /// that answer gets the answer it would have had without a directory (DOES_NOT_EXIST);
    /// SUBSCRIBEs that asked to wait for a publisher go on waiting.
    pub(crate) fn directory_miss(&mut self, cx: &mut Cx, namespace: &wire::model::TrackNamespace) {
        let missed: Vec<TrackAlias> = self
            .held
            .iter()
            .filter(|(_, h)| h.lookup && h.name.namespace == *namespace)
            .map(|(a, _)| *a)
            .collect();
        for alias in missed {
            let Some(h) = self.held.get_mut(&alias) else { continue };
            h.lookup = false;
            let (fetches, statuses) = (std::mem::take(&mut h.fetches), std::mem::take(&mut h.statuses));
            let waiting = if h.rendezvous { Vec::new() } else { std::mem::take(&mut h.waiting) };
            if h.waiting.is_empty() {
                self.held.remove(&alias);
            }
            self.held_gone(cx, alias, waiting, fetches, statuses, RequestErrorCode::DoesNotExist);
        }
    }

    /// Answers held requests that found no publisher: SUBSCRIBEs of cores `waiting` with
    /// `code`, FETCHes and TRACK_STATUSes with DOES_NOT_EXIST.
    pub(super) fn held_gone(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        waiting: Vec<usize>,
        fetches: Vec<FetchAsk>,
        statuses: Vec<(usize, ConnId, RequestId)>,
        code: RequestErrorCode,
    ) {
        let reason = match code {
            RequestErrorCode::Timeout => Bytes::from_static(b"no publisher appeared in time"),
            _ => Bytes::from_static(b"no publisher for this track"),
        };
        for core in waiting {
            cx.send(core, FanoutMsg::SubscribeError { alias, code, reason: reason.clone() });
        }
        for ask in fetches {
            self.fetch_error(cx, alias, &ask, RequestErrorCode::DoesNotExist, reason.clone());
        }
        for (core, conn, rid) in statuses {
            let answer = Err((RequestErrorCode::DoesNotExist, reason.clone()));
            cx.send(core, FanoutMsg::StatusAnswer { conn, rid, answer });
        }
    }

    /// Upstream route `via` (a link) to `prefix` appeared: tracks under it that come from
    /// another link, and for which it is now the best route (a namespace the directory says
    /// moved to another relay, or a longer prefix), move to it without a gap (see
    /// [`Move`]).
    pub(crate) fn route_added(&mut self, cx: &mut Cx, prefix: &wire::model::TrackNamespace, via: SessionRef) {
        let movable: Vec<(TrackAlias, SessionRef)> = self
            .tracks
            .iter()
            .filter(|(_, t)| {
                matches!(t.source, Source::Subscribed { .. })
                    && t.handover.moving.is_none()
                    && t.state.lost().is_none()
                    && t.extra.is_empty()
                    && t.source.publisher() != via
                    && t.name.namespace.starts_with(prefix)
                    && cx.namespaces.route(&t.name.namespace, t.who) == Some(via)
            })
            .map(|(a, t)| (*a, t.source.publisher()))
            .collect();
        for (alias, from) in movable {
            self.move_track(cx, alias, from);
        }
    }

    /// Held SUBSCRIBEs whose rendezvous time is up: REQUEST_ERROR TIMEOUT.
    pub(super) fn rendezvous_expired(&mut self, cx: &mut Cx) {
        while let Some(alias) = pop_due(&mut self.held_until, cx.now) {
            let alias = TrackAlias(alias);
            if self.held.get(&alias).is_none_or(|h| h.until > cx.now) {
                continue;
            }
            let Some(h) = self.held.remove(&alias) else { continue };
            let code = if h.rendezvous { RequestErrorCode::Timeout } else { RequestErrorCode::DoesNotExist };
            self.held_gone(cx, alias, h.waiting, h.fetches, h.statuses, code);
        }
    }

    /// Where a FETCH or TRACK_STATUS for `track`, which nothing here serves, waits: with the
    /// requests already held for it, or while the namespace directory is asked. `None`:
    /// it is answered now.
    pub(super) fn hold_for_directory(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        track: &FullTrackName,
        who: Requester,
    ) -> Option<&mut Held> {
        if self.held.get(&alias).is_some_and(|h| h.name == *track && h.lookup) {
            return self.held.get_mut(&alias);
        }
        if self.held.contains_key(&alias)
            || !cx.directory.resolves(who)
            || !cx.directory.lookup(&track.namespace)
        {
            return None;
        }
        let mut held = Held::new(track.clone(), cx.now + crate::directory::DIRECTORY_WAIT, who);
        held.lookup = true;
        Some(self.hold(alias, held))
    }

    /// Holds requests for `alias` until `held.until` at the latest (`rendezvous_expired`).
    pub(super) fn hold(&mut self, alias: TrackAlias, held: Held) -> &mut Held {
        self.held_until.push(Reverse((held.until, alias.0)));
        self.held.entry(alias).or_insert(held)
    }
}
