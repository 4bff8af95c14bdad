//! Backpressure on the mesh's data path: what one core forwards to another whose queue is
//! backed up or full (ARCHITECTURE.md, "How an object travels"). Used on both hops that carry
//! objects between cores: a publisher's core to the track's owner, and the owner to each core
//! with subscribers.
//!
//! The unit of loss is the subgroup stream, never an object inside one (draft-22 §7: objects
//! of a multi-object stream are not dropped or reordered):
//!
//! - a stream that opens while the destination is backed up (`Cx::mesh_backed_up`) is not
//!   forwarded there at all, none of its objects, nor its end;
//! - an object that would take the bytes queued toward the destination past the per-pair limit
//!   (`RelayConfig::mesh_queue`) is not forwarded, and its stream is reset there instead
//!   (EXCESSIVE_LOAD): the destination ends it as a reset stream, and what follows of it is not
//!   forwarded either;
//! - a datagram is dropped in either case.
//!
//! Control messages are not data: they always go. Each stream shed is counted
//! (`moq_edge_mesh_shed_streams_total`).

use ahash::HashSet;

use super::msg::{Data, RelayMsg, StreamKey};
use crate::cx::Cx;
use wire::ResetCode;

/// What to do with one item of stream data for one destination core.
#[derive(Debug)]
pub(super) enum Gate {
    Forward,
    /// Not forwarded (its stream is shed there, or a datagram to a core that is behind).
    Drop,
    /// Not forwarded; this goes instead (its stream's end, reset with EXCESSIVE_LOAD).
    Instead(Data),
}

/// Streams not forwarded to a core, by (core, stream), until their end passes by.
#[derive(Debug, Default)]
pub(super) struct Shed(HashSet<(usize, StreamKey)>);

impl Shed {
    /// Whether `data` goes to core `core` (see the module header).
    pub(super) fn gate(&mut self, cx: &mut Cx, core: usize, data: &Data) -> Gate {
        match data {
            Data::StreamOpen { key, .. } if cx.mesh_backed_up(core) => {
                self.0.insert((core, *key));
                cx.stats.mesh_shed_streams += 1;
                Gate::Drop
            }
            Data::StreamOpen { .. } => Gate::Forward,
            Data::Object { key, .. } if !self.0.is_empty() && self.0.contains(&(core, *key)) => Gate::Drop,
            Data::Object { key, payload, .. }
                if !cx.mesh_room(core, RelayMsg::data_weight(payload.len())) =>
            {
                self.0.insert((core, *key));
                cx.stats.mesh_shed_streams += 1;
                Gate::Instead(Data::StreamEnd { key: *key, reset: Some(ResetCode::ExcessiveLoad) })
            }
            Data::Object { .. } => Gate::Forward,
            Data::StreamEnd { key, .. } if !self.0.is_empty() && self.0.remove(&(core, *key)) => Gate::Drop,
            Data::StreamEnd { .. } => Gate::Forward,
            Data::Datagram { payload, .. } => {
                if cx.mesh_backed_up(core) || !cx.mesh_room(core, RelayMsg::data_weight(payload.len())) {
                    Gate::Drop
                } else {
                    Gate::Forward
                }
            }
        }
    }

    /// Whether stream `key` is not forwarded to core `core`.
    pub(super) fn is_shed(&self, core: usize, key: StreamKey) -> bool {
        !self.0.is_empty() && self.0.contains(&(core, key))
    }

    /// Stream `key` ended: it is no longer shed toward any core (a core that left the track
    /// while it was shed there is not asked at its end).
    pub(super) fn forget(&mut self, key: StreamKey) {
        if !self.0.is_empty() {
            self.0.retain(|(_, k)| *k != key);
        }
    }
}
