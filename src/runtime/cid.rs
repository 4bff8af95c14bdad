//! Server connection IDs and stateless resets.
//!
//! Every connection ID this server issues is [`CID_LEN`] bytes: byte 0 is the owning
//! [`ShardId`], bytes 1..16 come from the system CSPRNG. A packet that the kernel hands to the
//! wrong core is recognised from its destination CID alone ([`shard_of`]) and forwarded over the
//! mesh to its owner.
//!
//! **This layout is shared with the reuseport BPF steering program** (`runtime::udp`): for a
//! short-header packet the DCID starts right after the first byte, so the program reads byte 1
//! of the UDP payload as the shard index. Changing the layout (shard byte position or CID
//! length) means changing that program too.
//!
//! Stateless reset tokens (RFC 9000 §10.3) are an HMAC of the CID under a key derived from the
//! node secret, so any process that holds the secret can reset a connection whose state it lost
//! (after a restart) without storing anything per connection.

use std::sync::atomic::{AtomicU64, Ordering};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// One core's shard of connections (and of relay state). Cores are limited to 256 because the
/// shard index is one byte of every connection ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub u8);

impl ShardId {
    /// The shard's position in per-core arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shard{}", self.0)
    }
}

/// Length of every server-chosen connection ID: 1 shard byte + 15 random bytes (120 bits, so
/// random collisions are negligible and IDs are unlinkable).
pub const CID_LEN: usize = 16;

/// Shortest stateless reset: 5 unpredictable bytes (first byte included) + 16-byte token
/// (RFC 9000 §10.3).
pub const MIN_STATELESS_RESET_LEN: usize = 21;

/// Longest stateless reset we send. RFC 9000 §10.3 asks that a reset answering a packet of 43
/// bytes or less be one byte shorter than it; above that any length below the trigger is
/// allowed, and 43 bytes already looks like a short-header packet carrying a 20-byte CID, a
/// packet number and an AEAD tag. Staying small also keeps resets useless for amplification.
pub const MAX_STATELESS_RESET_LEN: usize = 43;

/// Derives an HMAC-SHA256 key from the node secret for one purpose. It is one block of
/// HKDF-Expand (RFC 5869) with the secret as PRK: `HMAC(secret, label || 0x01)`, so keys for
/// different labels are independent.
pub(crate) fn derive_key(secret: &[u8; 32], label: &[u8]) -> hmac::Key {
    let prk = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut ctx = hmac::Context::with_key(&prk);
    ctx.update(label);
    ctx.update(&[0x01]);
    hmac::Key::new(hmac::HMAC_SHA256, ctx.sign().as_ref())
}

/// A fresh random node secret (for `RuntimeConfig::secret == None`). Fails only when the
/// operating system's CSPRNG does.
pub fn generate_secret(rng: &dyn SecureRandom) -> Result<[u8; 32], ring::error::Unspecified> {
    let mut secret = [0u8; 32];
    rng.fill(&mut secret)?;
    Ok(secret)
}

/// Issues server connection IDs that carry their owning shard.
pub struct CidGenerator {
    rng: SystemRandom,
    /// Only used if the system CSPRNG ever fails (see [`CidGenerator::new_cid`]).
    fallback: AtomicU64,
}

impl Default for CidGenerator {
    fn default() -> Self {
        Self::new()
    }
}

impl CidGenerator {
    /// A generator drawing from the system's random source.
    pub fn new() -> Self {
        CidGenerator { rng: SystemRandom::new(), fallback: AtomicU64::new(0) }
    }

    /// A new connection ID owned by `shard`: `[shard, 15 random bytes]`.
    ///
    /// The system CSPRNG does not fail on supported platforms (and BoringSSL aborts the process
    /// if it does, so TLS would be gone anyway). Should `fill` still report an error, the ID is
    /// built from a per-generator counter and the clock instead: still unique within this
    /// generator and still routed correctly, only predictable.
    pub fn new_cid(&self, shard: ShardId) -> quiche::ConnectionId<'static> {
        let mut cid = vec![0u8; CID_LEN];
        cid[0] = shard.0;
        if self.rng.fill(&mut cid[1..]).is_err() {
            let n = self.fallback.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            cid[1..9].copy_from_slice(&n.to_be_bytes());
            cid[9..16].copy_from_slice(&nanos.to_be_bytes()[1..]);
        }
        quiche::ConnectionId::from_vec(cid)
    }
}

/// The shard that owns a server connection ID; `None` for IDs this server did not issue
/// (wrong length), e.g. the client-chosen DCID of a first Initial.
pub fn shard_of(dcid: &[u8]) -> Option<ShardId> {
    if dcid.len() == CID_LEN {
        Some(ShardId(dcid[0]))
    } else {
        None
    }
}

/// The destination connection ID of a short-header (1-RTT) packet, which carries no length:
/// the [`CID_LEN`] bytes after the first byte. `None` for long-header packets (top bit set),
/// packets without the fixed bit (0x40; not QUIC v1) and packets too short to hold a CID.
pub fn short_header_dcid(packet: &[u8]) -> Option<&[u8]> {
    let first = *packet.first()?;
    if first & 0x80 != 0 || first & 0x40 == 0 {
        return None;
    }
    packet.get(1..1 + CID_LEN)
}

/// Key for stateless reset tokens, derived from the node secret.
///
/// The token a connection advertises in its transport parameters is set per `accept`:
/// quiche's `Config::set_stateless_reset_token(Some(key.token(&scid)))` right before
/// `quiche::accept` (the token is a `Config` field), and each additional CID issued with
/// `Connection::new_scid` gets `key.token(&cid)`.
///
/// Only the shard that owns a CID may answer a packet for it with a stateless reset, and only
/// when it has no connection with that CID: the reset reveals the token of the CID it answers,
/// so a core that answered for another core's live connection would hand out that
/// connection's reset token.
pub struct ResetKey {
    key: hmac::Key,
}

impl ResetKey {
    /// The reset key for a node secret (distinct from the retry token key of the same secret).
    pub fn new(secret: &[u8; 32]) -> Self {
        ResetKey { key: derive_key(secret, b"moq-edge stateless reset v1") }
    }

    /// The stateless reset token of `cid`: the first 16 bytes of HMAC-SHA256(key, cid), read
    /// big-endian (quiche writes the `u128` big-endian on the wire and compares it that way).
    pub fn token(&self, cid: &[u8]) -> u128 {
        let tag = hmac::sign(&self.key, cid);
        let mut t = [0u8; 16];
        t.copy_from_slice(&tag.as_ref()[..16]);
        u128::from_be_bytes(t)
    }

    /// Writes a stateless reset answering a `trigger_len`-byte packet addressed to `dcid` into
    /// `out` and returns its length.
    ///
    /// Layout (RFC 9000 §10.3): first byte `0b01xxxxxx` (short-header form, fixed bit, random
    /// low bits), random bytes, the 16-byte token last. Length is
    /// `min(trigger_len - 1, MAX_STATELESS_RESET_LEN)`: always smaller than the trigger so two
    /// endpoints can never reset each other in a loop (§10.3.3). `None` when that length is
    /// below [`MIN_STATELESS_RESET_LEN`] (the trigger was 21 bytes or less), when `out` is too
    /// small, or when the RNG fails.
    pub fn stateless_reset(
        &self,
        dcid: &[u8],
        trigger_len: usize,
        rng: &dyn SecureRandom,
        out: &mut [u8],
    ) -> Option<usize> {
        let len = trigger_len.checked_sub(1)?.min(MAX_STATELESS_RESET_LEN);
        if len < MIN_STATELESS_RESET_LEN {
            return None;
        }
        let out = out.get_mut(..len)?;
        let (unpredictable, token) = out.split_at_mut(len - 16);
        rng.fill(unpredictable).ok()?;
        unpredictable[0] = 0x40 | (unpredictable[0] & 0x3f);
        token.copy_from_slice(&self.token(dcid).to_be_bytes());
        Some(len)
    }

    /// A connection ID for a connection this core opens (to an upstream relay): `[shard, 7
    /// random bytes, 8 bytes of HMAC over the first 8]`. The server's Initials come back
    /// addressed to it and, being long-header packets, may reach any core; the tag lets that
    /// core tell them from a client's first Initial (whose DCID the client chose) and hand
    /// them to the owning core. `None` when the RNG fails.
    pub fn outbound_cid(
        &self,
        shard: ShardId,
        rng: &dyn SecureRandom,
    ) -> Option<quiche::ConnectionId<'static>> {
        let mut cid = vec![0u8; CID_LEN];
        cid[0] = shard.0;
        rng.fill(&mut cid[1..8]).ok()?;
        let tag = hmac::sign(&self.key, &[b"outbound".as_slice(), &cid[..8]].concat());
        cid[8..].copy_from_slice(&tag.as_ref()[..8]);
        Some(quiche::ConnectionId::from_vec(cid))
    }

    /// Whether `cid` came from [`ResetKey::outbound_cid`] with this key.
    pub fn is_outbound(&self, cid: &[u8]) -> bool {
        if cid.len() != CID_LEN {
            return false;
        }
        let tag = hmac::sign(&self.key, &[b"outbound".as_slice(), &cid[..8]].concat());
        // Constant time: OR of the differences.
        tag.as_ref()[..8].iter().zip(&cid[8..]).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn outbound_cids_are_recognised_and_others_are_not() {
        let rng = SystemRandom::new();
        let key = ResetKey::new(&[7u8; 32]);
        let cid = key.outbound_cid(ShardId(3), &rng).unwrap();
        assert_eq!(shard_of(&cid), Some(ShardId(3)));
        assert!(key.is_outbound(&cid));
        assert!(!ResetKey::new(&[8u8; 32]).is_outbound(&cid), "another node's key");
        assert!(!key.is_outbound(&CidGenerator::new().new_cid(ShardId(3))), "a server CID");
        assert!(!key.is_outbound(&cid[..8]), "a short CID");
    }

    #[test]
    fn shard_byte_round_trips_for_every_shard() {
        let g = CidGenerator::new();
        for s in 0..=u8::MAX {
            let cid = g.new_cid(ShardId(s));
            assert_eq!(cid.len(), CID_LEN);
            assert_eq!(shard_of(&cid), Some(ShardId(s)));
            assert_eq!(ShardId(s).index(), s as usize);
        }
    }

    #[test]
    fn cids_are_random() {
        let g = CidGenerator::new();
        let a = g.new_cid(ShardId(3));
        let b = g.new_cid(ShardId(3));
        assert_ne!(a, b);
        assert_eq!(CID_LEN, 16);
    }

    #[test]
    fn shard_of_rejects_other_lengths() {
        for len in 0..=quiche::MAX_CONN_ID_LEN + 1 {
            let cid = vec![7u8; len];
            let expected = (len == CID_LEN).then_some(ShardId(7));
            assert_eq!(shard_of(&cid), expected, "len {len}");
        }
    }

    #[test]
    fn short_header_dcid_parses_only_short_headers() {
        let g = CidGenerator::new();
        let cid = g.new_cid(ShardId(42));
        let mut short = vec![0x43];
        short.extend_from_slice(&cid);
        short.extend_from_slice(&[0xaa; 30]);
        assert_eq!(short_header_dcid(&short), Some(&cid[..]));
        assert_eq!(short_header_dcid(&short).and_then(shard_of), Some(ShardId(42)));
        // Exactly enough bytes.
        assert_eq!(short_header_dcid(&short[..1 + CID_LEN]), Some(&cid[..]));
        // Too short.
        assert_eq!(short_header_dcid(&short[..CID_LEN]), None);
        assert_eq!(short_header_dcid(&short[..1]), None);
        assert_eq!(short_header_dcid(&[]), None);
        // Long header (Initial).
        let mut long = short.clone();
        long[0] = 0xc3;
        assert_eq!(short_header_dcid(&long), None);
        // Fixed bit clear.
        let mut nofixed = short.clone();
        nofixed[0] = 0x03;
        assert_eq!(short_header_dcid(&nofixed), None);
    }

    #[test]
    fn reset_tokens_are_deterministic_per_key_and_cid() {
        let a = ResetKey::new(&[1; 32]);
        let a2 = ResetKey::new(&[1; 32]);
        let b = ResetKey::new(&[2; 32]);
        let cid1 = [9u8; CID_LEN];
        let cid2 = [8u8; CID_LEN];
        assert_eq!(a.token(&cid1), a2.token(&cid1));
        assert_ne!(a.token(&cid1), a.token(&cid2));
        assert_ne!(a.token(&cid1), b.token(&cid1));
    }

    #[test]
    fn derived_keys_differ_by_label() {
        let secret = [5u8; 32];
        let k1 = derive_key(&secret, b"one");
        let k2 = derive_key(&secret, b"two");
        assert_ne!(hmac::sign(&k1, b"x").as_ref(), hmac::sign(&k2, b"x").as_ref());
    }

    #[test]
    fn stateless_reset_shape() {
        let key = ResetKey::new(&[3; 32]);
        let rng = SystemRandom::new();
        let cid = [4u8; CID_LEN];
        let mut out = [0u8; 1500];
        for trigger in 0..=1500 {
            match key.stateless_reset(&cid, trigger, &rng, &mut out) {
                None => assert!(trigger <= MIN_STATELESS_RESET_LEN, "trigger {trigger}"),
                Some(len) => {
                    assert!(trigger > MIN_STATELESS_RESET_LEN);
                    assert!(len < trigger);
                    assert!(len >= MIN_STATELESS_RESET_LEN);
                    assert!(len <= MAX_STATELESS_RESET_LEN);
                    if trigger <= 44 {
                        assert_eq!(len, trigger - 1);
                    }
                    assert_eq!(out[0] & 0xc0, 0x40, "short header form with fixed bit");
                    assert_eq!(&out[len - 16..len], &key.token(&cid).to_be_bytes());
                }
            }
        }
    }

    #[test]
    fn stateless_reset_needs_room() {
        let key = ResetKey::new(&[3; 32]);
        let rng = SystemRandom::new();
        let mut small = [0u8; 30];
        assert_eq!(key.stateless_reset(&[1; CID_LEN], 1200, &rng, &mut small), None);
        assert_eq!(key.stateless_reset(&[1; CID_LEN], 31, &rng, &mut small), Some(30));
    }

    #[test]
    fn generated_secrets_differ() {
        let rng = SystemRandom::new();
        let a = generate_secret(&rng).unwrap();
        let b = generate_secret(&rng).unwrap();
        assert_ne!(a, b);
    }
}
