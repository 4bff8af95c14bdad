//! Relay-assigned Track Aliases: a keyed hash of the Full Track Name, the same
//! on every core, so any core can name a track's owner shard without asking anyone.

use ring::hmac;

use wire::model::{FullTrackName, TrackAlias};

/// The key every core of one relay shares.
#[derive(Clone)]
pub struct AliasKey(hmac::Key);

impl std::fmt::Debug for AliasKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AliasKey(..)")
    }
}

impl AliasKey {
    /// The key every core of the relay derives aliases with.
    pub fn new(secret: &[u8; 32]) -> Self {
        AliasKey(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// The relay's alias for `track`: 62 bits of HMAC-SHA256 over the length-prefixed
    /// namespace fields and name (a varint's range; collisions are as unlikely as 2^-62).
    pub fn alias(&self, track: &FullTrackName) -> TrackAlias {
        let mut ctx = hmac::Context::with_key(&self.0);
        for field in track.namespace.fields() {
            ctx.update(&(field.len() as u64).to_be_bytes());
            ctx.update(field);
        }
        ctx.update(&[0xFF]);
        ctx.update(&track.name);
        let tag = ctx.sign();
        let mut b = [0u8; 8];
        b.copy_from_slice(&tag.as_ref()[..8]);
        TrackAlias(u64::from_be_bytes(b) & ((1 << 62) - 1))
    }
}

/// The shard that owns `alias`.
pub fn owner(alias: TrackAlias, cores: usize) -> usize {
    (alias.0 % cores.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use wire::model::TrackNamespace;

    fn track(ns: &[&str], name: &str) -> FullTrackName {
        FullTrackName {
            namespace: TrackNamespace::from_strs(ns),
            name: Bytes::copy_from_slice(name.as_bytes()),
        }
    }

    #[test]
    fn aliases_are_stable_keyed_and_field_aware() {
        let k = AliasKey::new(&[7; 32]);
        assert_eq!(k.alias(&track(&["a", "b"], "c")), k.alias(&track(&["a", "b"], "c")));
        // Field boundaries matter: ("ab","c") and ("a","bc") differ.
        assert_ne!(k.alias(&track(&["ab"], "c")), k.alias(&track(&["a"], "bc")));
        assert_ne!(k.alias(&track(&["a", "b"], "c")), k.alias(&track(&["ab"], "c")));
        assert_ne!(k.alias(&track(&["a"], "c")), AliasKey::new(&[8; 32]).alias(&track(&["a"], "c")));
        assert!(k.alias(&track(&["x"], "y")).0 < 1 << 62);
        assert!(owner(k.alias(&track(&["x"], "y")), 3) < 3);
    }
}
