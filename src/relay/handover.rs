//! How the owner moves a track from one upstream link to its replacement without a gap or a
//! duplicate (make-before-break, draft-22 §7.4.1 for the relay's own upstream) when the
//! parent sends GOAWAY. (Several publishers of a track are merged instead: `merge.rs`.) Each
//! group comes from one source, whole: the groups the old source has started are taken from it to their end; the new
//! source's first group that the old one has not started (the cut) and every later group come
//! from the new one. Once the old source's last forwarded stream ends, it is stopped.
//!
//! The owner keeps one [`Handover`] per track; it decides which upstream data is forwarded
//! ([`Handover::admit`]) and what the track's source is once the move completes.

use ahash::HashSet;

use super::msg::{Data, Epoch, SessionRef, StreamKey};

/// A move under way: the new source's subscription (or PUBLISH) and what it has given.
#[derive(Debug)]
pub(super) struct Move {
    pub publisher: SessionRef,
    pub epoch: Epoch,
    /// Its SUBSCRIBE_OK came (objects before it are not taken).
    pub ok: bool,
    pub cut: Option<u64>,
    /// The largest group taken from it.
    pub top: Option<u64>,
    /// Its streams that are forwarded, and those that are not.
    pub streams: HashSet<StreamKey>,
    dropped: HashSet<StreamKey>,
}

impl Move {
    /// A move to a new upstream subscription (`epoch`, on `publisher`), answered later.
    pub(crate) fn subscription(publisher: SessionRef, epoch: Epoch) -> Box<Move> {
        let (streams, dropped) = (HashSet::default(), HashSet::default());
        Box::new(Move { publisher, epoch, ok: false, cut: None, top: None, streams, dropped })
    }
}

/// One track's moves between sources (see the module header).
#[derive(Debug, Default)]
pub(super) struct Handover {
    /// The move under way.
    pub moving: Option<Box<Move>>,
    /// The link whose replacement the track is moving to (tried again while the new parent
    /// refuses it).
    pub from: Option<SessionRef>,
    /// Streams of the current source that are not forwarded (their group is another
    /// source's), until they end.
    dropped: HashSet<StreamKey>,
    /// Groups below this came from an earlier source: the current one's (the epoch) are not
    /// forwarded.
    floor: Option<(Epoch, u64)>,
    /// The largest group forwarded from the current source (the epoch).
    top: Option<(Epoch, u64)>,
}

impl Handover {
    /// The largest group forwarded from the current source, `epoch`.
    pub(crate) fn top_group(&self, epoch: Epoch) -> Option<u64> {
        self.top.filter(|(e, _)| *e == epoch).map(|(_, g)| g)
    }

    /// The move failed (its subscription refused, ended or lost): the track stays with its
    /// source `epoch`. Groups the new source had started are not taken from the old one.
    pub(crate) fn abandon(&mut self, epoch: Epoch) {
        let Some(m) = self.moving.take() else { return };
        if m.cut.is_some() {
            let next = [self.top_group(epoch), m.top].into_iter().flatten().max().map_or(0, |g| g + 1);
            self.floor = Some((epoch, next));
            self.top = Some((epoch, next.saturating_sub(1)));
        }
    }

    /// The move is complete: its new source takes over from `epoch`. Returns the move and
    /// its cut (if no group came from the new source yet, the group after the last one
    /// forwarded).
    pub(crate) fn finish(&mut self, epoch: Epoch) -> Option<(Box<Move>, u64)> {
        let mut m = self.moving.take()?;
        let top = self.top_group(epoch);
        let cut = m.cut.or_else(|| top.map(|g| g + 1)).unwrap_or(0);
        self.floor = Some((m.epoch, cut));
        self.top = [top, m.top].into_iter().flatten().max().map(|g| (m.epoch, g));
        self.dropped = std::mem::take(&mut m.dropped);
        self.from = None;
        Some((m, cut))
    }

    /// A new source replaces the old one at once (no move): the move under way, if any, is
    /// dropped (and returned), and nothing of the new source is held back.
    pub(crate) fn replace(&mut self) -> Option<Box<Move>> {
        self.dropped.clear();
        self.moving.take()
    }

    /// Whether the move under way has its cut and every stream `open` of the track is one it
    /// forwards: the old source's last forwarded stream ended.
    pub(crate) fn old_source_done<'a>(&self, mut open: impl Iterator<Item = &'a StreamKey>) -> bool {
        self.moving.as_ref().is_some_and(|m| m.cut.is_some() && open.all(|k| m.streams.contains(k)))
    }

    /// Whether `data`, from the current source `epoch` or (`from_move`) the moving one, is
    /// forwarded: each group comes from one source; a stream not forwarded has none of its
    /// objects forwarded.
    pub(crate) fn admit(&mut self, epoch: Epoch, from_move: bool, data: &Data) -> bool {
        let (key, group) = match data {
            Data::StreamOpen { key, header } => (Some(*key), header.group_id),
            Data::Datagram { header, .. } => (None, header.group_id),
            Data::Object { key, .. } | Data::StreamEnd { key, .. } => {
                if self.moving.is_none() && self.dropped.is_empty() {
                    return true;
                }
                let end = matches!(data, Data::StreamEnd { .. });
                let dropped = match self.moving.as_mut() {
                    Some(m) if from_move => {
                        if end {
                            m.streams.remove(key);
                        }
                        &mut m.dropped
                    }
                    _ => &mut self.dropped,
                };
                return !if end { dropped.remove(key) } else { dropped.contains(key) };
            }
        };
        let top = self.top_group(epoch);
        let take = match self.moving.as_mut() {
            Some(m) if from_move => {
                let take = m.ok
                    && match m.cut {
                        Some(cut) => group >= cut,
                        None if top.is_none_or(|top| top < group) => {
                            m.cut = Some(group);
                            true
                        }
                        None => false,
                    };
                if take {
                    m.top = Some(m.top.map_or(group, |t| t.max(group)));
                }
                if let Some(key) = key {
                    if take {
                        m.streams.insert(key)
                    } else {
                        m.dropped.insert(key)
                    };
                }
                return take;
            }
            m => {
                let floor = self.floor.filter(|(e, _)| *e == epoch).map_or(0, |(_, f)| f);
                group >= floor && m.and_then(|m| m.cut).is_none_or(|cut| group < cut)
            }
        };
        if take {
            self.top = Some((epoch, top.map_or(group, |t| t.max(group))));
        } else if let Some(key) = key {
            self.dropped.insert(key);
        }
        take
    }
}
