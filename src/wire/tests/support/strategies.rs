//! proptest strategies for the version-neutral model, shared by the wire test files
//! (`use support::strategies::*;`).

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use wire::model::*;

/// Integers that exercise every encoded length of both integer encodings, up to `max`.
pub fn int_upto(max: u64) -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        0..64u64,
        64..16384u64,
        (0..=max).prop_map(|v| v),
        Just(max),
        (0u32..64).prop_map(move |s| (1u64 << s).min(max)),
    ]
}

/// Any u64 a QUIC varint can carry (draft-16).
pub fn int62() -> impl Strategy<Value = u64> + Clone {
    int_upto((1 << 62) - 1)
}

/// Any u64 (draft-22 vi64).
pub fn int64() -> impl Strategy<Value = u64> + Clone {
    int_upto(u64::MAX)
}

pub fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

pub fn nonempty_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 1..=max.max(1)).prop_map(Bytes::from)
}

/// A namespace of `min..=max` fields (spec limits hold when `max <= 32`).
pub fn namespace(min: usize, max: usize) -> impl Strategy<Value = TrackNamespace> {
    vec(nonempty_bytes(24), min..=max).prop_map(TrackNamespace)
}

pub fn full_track_name() -> impl Strategy<Value = FullTrackName> {
    (namespace(1, 6), bytes(32)).prop_map(|(namespace, name)| FullTrackName { namespace, name })
}

pub fn location(int: impl Strategy<Value = u64> + Clone) -> impl Strategy<Value = Location> {
    (int.clone(), int).prop_map(|(group, object)| Location { group, object })
}

pub fn auth_token(int: impl Strategy<Value = u64> + Clone) -> impl Strategy<Value = AuthToken> {
    prop_oneof![
        int.clone().prop_map(|alias| AuthToken::Delete { alias }),
        (int.clone(), int.clone(), bytes(40)).prop_map(|(alias, token_type, value)| AuthToken::Register {
            alias,
            token_type,
            value
        }),
        int.clone().prop_map(|alias| AuthToken::UseAlias { alias }),
        (int, bytes(40)).prop_map(|(token_type, value)| AuthToken::UseValue { token_type, value }),
    ]
}

/// A Key-Value-Pair value matching the parity of `ty`.
pub fn kv_for(ty: u64, int: impl Strategy<Value = u64> + 'static) -> BoxedStrategy<KvValue> {
    if ty.is_multiple_of(2) {
        int.prop_map(KvValue::Int).boxed()
    } else {
        bytes(40).prop_map(KvValue::Bytes).boxed()
    }
}

/// Properties with arbitrary (known and unknown) types, parity-correct values.
pub fn properties(int: impl Strategy<Value = u64> + Clone + 'static) -> impl Strategy<Value = Properties> {
    let ty = prop_oneof![0..0x80u64, 0x3800..0x4000u64, int.clone()];
    vec(ty.prop_flat_map(move |t| (Just(t), kv_for(t, int.clone()))), 0..5)
        .prop_map(|kvs| kvs.into_iter().collect())
}
