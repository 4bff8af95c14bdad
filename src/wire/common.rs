//! Structures whose layout every draft shares, differing only in the integer encoding:
//! Location, Track Namespace, Full Track Name, Reason Phrase, Key-Value-Pair lists
//! (properties) and the authorization Token.

use bytes::Bytes;

use super::codec::{Reader, Writer};
use super::error::{DecodeError, EncodeError};
use super::model::limits::*;
use super::model::{AuthToken, FullTrackName, KvValue, Location, Properties, Property, TrackNamespace};
use super::varint::VarInt;

pub fn read_location<V: VarInt>(r: &mut Reader<'_, V>) -> Result<Location, DecodeError> {
    Ok(Location { group: r.int()?, object: r.int()? })
}

pub fn write_location<V: VarInt>(w: &mut Writer<'_, V>, l: Location) -> Result<(), EncodeError> {
    w.int(l.group)?;
    w.int(l.object)
}

/// A Track Namespace with at least `min_fields` fields (1 for a track's namespace, 0 for a
/// prefix or suffix) and at most 32, non-empty fields, at most 4096 bytes in all.
pub fn read_namespace<V: VarInt>(
    r: &mut Reader<'_, V>,
    min_fields: usize,
) -> Result<TrackNamespace, DecodeError> {
    let n = r.int()?;
    if n > MAX_NAMESPACE_FIELDS as u64 || n < min_fields as u64 {
        return Err(DecodeError::violation("track namespace field count out of range"));
    }
    let mut fields = Vec::with_capacity(n as usize);
    let mut total = 0usize;
    for _ in 0..n {
        let f = r.len_prefixed(MAX_FULL_TRACK_NAME, "track namespace longer than 4096 bytes")?;
        if f.is_empty() {
            return Err(DecodeError::violation("empty track namespace field"));
        }
        total += f.len();
        if total > MAX_FULL_TRACK_NAME {
            return Err(DecodeError::violation("track namespace longer than 4096 bytes"));
        }
        fields.push(Bytes::copy_from_slice(f));
    }
    Ok(TrackNamespace(fields))
}

pub fn write_namespace<V: VarInt>(w: &mut Writer<'_, V>, ns: &TrackNamespace) -> Result<(), EncodeError> {
    if ns.0.len() > MAX_NAMESPACE_FIELDS {
        return Err(EncodeError::OutOfRange("more than 32 namespace fields"));
    }
    if ns.0.iter().any(|f| f.is_empty()) {
        return Err(EncodeError::OutOfRange("empty namespace field"));
    }
    if ns.byte_len() > MAX_FULL_TRACK_NAME {
        return Err(EncodeError::OutOfRange("namespace longer than 4096 bytes"));
    }
    w.int(ns.0.len() as u64)?;
    for f in &ns.0 {
        w.len_prefixed(f)?;
    }
    Ok(())
}

/// Track Namespace (>= 1 field), Track Name Length, Track Name; 4096 bytes in all.
pub fn read_full_track_name<V: VarInt>(r: &mut Reader<'_, V>) -> Result<FullTrackName, DecodeError> {
    let namespace = read_namespace(r, 1)?;
    let name = read_track_name(r, namespace.byte_len())?;
    Ok(FullTrackName { namespace, name })
}

/// A Track Name that, with a namespace of `ns_len` bytes, stays within 4096 bytes.
pub fn read_track_name<V: VarInt>(r: &mut Reader<'_, V>, ns_len: usize) -> Result<Bytes, DecodeError> {
    let name = r.len_prefixed(MAX_FULL_TRACK_NAME - ns_len, "full track name longer than 4096 bytes")?;
    Ok(Bytes::copy_from_slice(name))
}

pub fn write_full_track_name<V: VarInt>(w: &mut Writer<'_, V>, t: &FullTrackName) -> Result<(), EncodeError> {
    write_namespace(w, &t.namespace)?;
    write_track_name(w, t.namespace.byte_len(), &t.name)
}

pub fn write_track_name<V: VarInt>(
    w: &mut Writer<'_, V>,
    ns_len: usize,
    name: &[u8],
) -> Result<(), EncodeError> {
    if ns_len + name.len() > MAX_FULL_TRACK_NAME {
        return Err(EncodeError::OutOfRange("full track name longer than 4096 bytes"));
    }
    w.len_prefixed(name)
}

pub fn read_reason<V: VarInt>(r: &mut Reader<'_, V>) -> Result<Bytes, DecodeError> {
    Ok(Bytes::copy_from_slice(r.len_prefixed(MAX_REASON_PHRASE, "reason phrase longer than 1024 bytes")?))
}

pub fn write_reason<V: VarInt>(w: &mut Writer<'_, V>, reason: &[u8]) -> Result<(), EncodeError> {
    if reason.len() > MAX_REASON_PHRASE {
        return Err(EncodeError::OutOfRange("reason phrase longer than 1024 bytes"));
    }
    w.len_prefixed(reason)
}

/// Reads one Key-Value-Pair whose type is `prev + delta`: `(type, value)`.
pub fn read_kv<V: VarInt>(r: &mut Reader<'_, V>, prev: u64) -> Result<(u64, KvValue), DecodeError> {
    let delta = r.int()?;
    let ty = prev.checked_add(delta).ok_or(DecodeError::violation("key-value type overflows"))?;
    let value = if ty % 2 == 0 {
        KvValue::Int(r.int()?)
    } else {
        let len = r.int()?;
        if len > MAX_KV_VALUE as u64 {
            return Err(DecodeError::violation("key-value value longer than 65535 bytes"));
        }
        KvValue::Bytes(Bytes::copy_from_slice(r.bytes(len as usize)?))
    };
    Ok((ty, value))
}

/// Writes one Key-Value-Pair as a delta from `prev`.
pub fn write_kv<V: VarInt>(
    w: &mut Writer<'_, V>,
    prev: u64,
    ty: u64,
    value: &KvValue,
) -> Result<(), EncodeError> {
    let delta = ty.checked_sub(prev).ok_or(EncodeError::OutOfRange("key-value types not ascending"))?;
    w.int(delta)?;
    match value {
        KvValue::Int(v) if ty.is_multiple_of(2) => w.int(*v),
        KvValue::Bytes(b) if ty % 2 == 1 => {
            if b.len() > MAX_KV_VALUE {
                return Err(EncodeError::OutOfRange("key-value value longer than 65535 bytes"));
            }
            w.len_prefixed(b)
        }
        _ => Err(EncodeError::OutOfRange("key-value parity does not match value kind")),
    }
}

/// How a Key-Value-Pair list codes its types: each as a delta from the previous pair's type
/// (draft-16 §1.4.2 and later), or each absolute (draft-14 §1.4.2), in any order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvTypes {
    /// Delta-coded types, so a list is in non-decreasing type order.
    Delta,
    /// Absolute types (draft-14).
    Absolute,
}

impl KvTypes {
    /// The type the next pair's is coded against, after a pair of type `ty`.
    pub const fn base_after(self, ty: u64) -> u64 {
        match self {
            KvTypes::Delta => ty,
            KvTypes::Absolute => 0,
        }
    }
}

/// A Key-Value-Pair list filling all of `r` (Track Properties at the end of a message, or the
/// body of an Object Properties field), delta-coded. Running short inside is a formatting
/// error.
pub fn read_properties<V: VarInt>(r: &mut Reader<'_, V>) -> Result<Properties, DecodeError> {
    read_properties_as(r, KvTypes::Delta)
}

/// [`read_properties`] with the types coded as `kv` says; an absolute list may come in any
/// order and is kept sorted by type (pairs of one type in the order they came).
pub fn read_properties_as<V: VarInt>(r: &mut Reader<'_, V>, kv: KvTypes) -> Result<Properties, DecodeError> {
    let mut props = Properties::new();
    let mut prev = 0u64;
    while !r.is_empty() {
        let (ty, value) = read_kv(r, prev)
            .map_err(|e| e.within_length("truncated key-value pair"))
            .map_err(as_kv_format)?;
        match kv {
            KvTypes::Delta => props.push_sorted(Property { ty, value }),
            KvTypes::Absolute => props.push(ty, value),
        }
        prev = kv.base_after(ty);
    }
    Ok(props)
}

fn as_kv_format(e: DecodeError) -> DecodeError {
    match e {
        DecodeError::Invalid { reason, .. } => DecodeError::kv_format(reason),
        other => other,
    }
}

/// Writes `props` delta-coded.
pub fn write_properties<V: VarInt>(w: &mut Writer<'_, V>, props: &Properties) -> Result<(), EncodeError> {
    write_properties_as(w, props, KvTypes::Delta)
}

/// Writes `props` (in type order) with the types coded as `kv` says.
pub fn write_properties_as<V: VarInt>(
    w: &mut Writer<'_, V>,
    props: &Properties,
    kv: KvTypes,
) -> Result<(), EncodeError> {
    let mut prev = 0u64;
    for p in props.iter() {
        write_kv(w, prev, p.ty, &p.value)?;
        prev = kv.base_after(p.ty);
    }
    Ok(())
}

/// Object Properties: a length, then a delta-coded Key-Value-Pair list of that many bytes.
pub fn read_object_properties<V: VarInt>(r: &mut Reader<'_, V>) -> Result<Properties, DecodeError> {
    read_object_properties_as(r, KvTypes::Delta)
}

/// [`read_object_properties`] with the types coded as `kv` says (draft-14's Extension
/// Headers Length and Extension Headers are absolute).
pub fn read_object_properties_as<V: VarInt>(
    r: &mut Reader<'_, V>,
    kv: KvTypes,
) -> Result<Properties, DecodeError> {
    let len = r.int()?;
    let len = usize::try_from(len).map_err(|_| DecodeError::violation("properties length too large"))?;
    let mut sub = r.sub(len)?;
    read_properties_as(&mut sub, kv)
}

/// Writes Object Properties delta-coded: the length, then the list.
pub fn write_object_properties<V: VarInt>(
    w: &mut Writer<'_, V>,
    props: &Properties,
) -> Result<(), EncodeError> {
    write_object_properties_as(w, props, KvTypes::Delta)
}

/// [`write_object_properties`] with the types coded as `kv` says.
pub fn write_object_properties_as<V: VarInt>(
    w: &mut Writer<'_, V>,
    props: &Properties,
    kv: KvTypes,
) -> Result<(), EncodeError> {
    w.with_len_prefix(|w| write_properties_as(w, props, kv))
}

/// The Token structure of an AUTHORIZATION TOKEN parameter/option value (the whole value).
pub fn read_token<V: VarInt>(value: &[u8]) -> Result<AuthToken, DecodeError> {
    let mut r = Reader::<V>::new(value);
    let bad = |_| DecodeError::kv_format("malformed authorization token");
    let alias_type = r.int().map_err(bad)?;
    let token = match alias_type {
        0 => AuthToken::Delete { alias: r.int().map_err(bad)? },
        1 => {
            let alias = r.int().map_err(bad)?;
            let token_type = r.int().map_err(bad)?;
            AuthToken::Register { alias, token_type, value: Bytes::copy_from_slice(r.rest()) }
        }
        2 => AuthToken::UseAlias { alias: r.int().map_err(bad)? },
        3 => {
            let token_type = r.int().map_err(bad)?;
            AuthToken::UseValue { token_type, value: Bytes::copy_from_slice(r.rest()) }
        }
        _ => return Err(DecodeError::kv_format("unknown authorization token alias type")),
    };
    if matches!(token, AuthToken::Delete { .. } | AuthToken::UseAlias { .. }) && !r.is_empty() {
        return Err(DecodeError::kv_format("trailing bytes in authorization token"));
    }
    Ok(token)
}

pub fn write_token<V: VarInt>(w: &mut Writer<'_, V>, t: &AuthToken) -> Result<(), EncodeError> {
    w.int(t.alias_type())?;
    match t {
        AuthToken::Delete { alias } | AuthToken::UseAlias { alias } => w.int(*alias),
        AuthToken::Register { alias, token_type, value } => {
            w.int(*alias)?;
            w.int(*token_type)?;
            w.bytes(value);
            Ok(())
        }
        AuthToken::UseValue { token_type, value } => {
            w.int(*token_type)?;
            w.bytes(value);
            Ok(())
        }
    }
}

/// Frames a control message: Type, 16-bit Length, Body. `body` writes the body.
pub fn write_control<V: VarInt>(
    out: &mut Vec<u8>,
    msg_type: u64,
    body: impl FnOnce(&mut Writer<'_, V>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let mut payload = Vec::with_capacity(64);
    body(&mut Writer::new(&mut payload))?;
    if payload.len() > MAX_CONTROL_BODY {
        return Err(EncodeError::OutOfRange("control message body longer than 65535 bytes"));
    }
    let mut w = Writer::<V>::new(out);
    w.int(msg_type)?;
    w.bytes(&(payload.len() as u16).to_be_bytes());
    w.bytes(&payload);
    Ok(())
}

/// Splits a control message frame off the front of `buf`: `(type, body, total length)`.
/// `NeedMore` until the whole frame is present.
pub fn read_control_frame<V: VarInt>(buf: &[u8]) -> Result<(u64, &[u8], usize), DecodeError> {
    let mut r = Reader::<V>::new(buf);
    let ty = r.int()?;
    let len = r.u16()? as usize;
    let body = r.bytes(len)?;
    Ok((ty, body, r.position()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::varint::{Quic, Vi64};

    fn props_of<V: VarInt>(bytes: &[u8]) -> Result<Properties, DecodeError> {
        read_properties(&mut Reader::<V>::new(bytes))
    }

    #[test]
    fn properties_delta_types_and_values() {
        // Type 4 = 7 (even, varint), then delta 73 -> type 77 (odd) with 3 bytes "abc".
        let p = props_of::<Quic>(&[0x04, 0x07, 0x40, 73, 0x03, b'a', b'b', b'c']).expect("decodes");
        assert_eq!(p.int(4), Some(7));
        assert_eq!(p.bytes(77).map(|b| &b[..]), Some(&b"abc"[..]));
        let mut out = Vec::new();
        write_properties(&mut Writer::<Quic>::new(&mut out), &p).expect("encodes");
        assert_eq!(out, [0x04, 0x07, 0x40, 73, 0x03, b'a', b'b', b'c']);
    }

    #[test]
    fn properties_errors_use_kv_formatting_code() {
        // Truncated value inside a bounded list.
        assert_eq!(
            props_of::<Quic>(&[0x05, 0x04, b'a']),
            Err(DecodeError::kv_format("truncated key-value pair"))
        );
        // Delta type overflowing 2^64-1 (vi64 can carry u64::MAX).
        let mut b = vec![0xff; 9];
        b.push(0x00);
        b.extend_from_slice(&[0x02, 0x00]);
        let err = props_of::<Vi64>(&b).expect_err("overflow");
        assert!(matches!(err, DecodeError::Invalid { code: ErrorCode::KeyValueFormatting, .. }), "{err:?}");
        // A value longer than 2^16-1.
        let err = props_of::<Quic>(&[0x01, 0x80, 0x01, 0x00, 0x00]).expect_err("too long");
        assert!(matches!(err, DecodeError::Invalid { .. }), "{err:?}");
    }

    #[test]
    fn namespace_limits() {
        let ns = |fields: &[&[u8]]| {
            let mut out = Vec::new();
            let mut w = Writer::<Quic>::new(&mut out);
            w.int(fields.len() as u64).expect("int");
            for f in fields {
                w.len_prefixed(f).expect("field");
            }
            out
        };
        let ok = ns(&[b"a", b"bc"]);
        assert_eq!(
            read_namespace(&mut Reader::<Quic>::new(&ok), 1),
            Ok(TrackNamespace::from_strs(&["a", "bc"]))
        );
        let violation = |b: &[u8], min| {
            matches!(
                read_namespace(&mut Reader::<Quic>::new(b), min),
                Err(DecodeError::Invalid { code: ErrorCode::ProtocolViolation, .. })
            )
        };
        assert!(violation(&ns(&[]), 1), "zero fields for a track namespace");
        assert!(!violation(&ns(&[]), 0), "an empty prefix is fine");
        let many: Vec<&[u8]> = vec![b"a"; 33];
        assert!(violation(&ns(&many), 0), "33 fields");
        assert!(violation(&ns(&[b"a", b""]), 1), "empty field");
        let big = vec![b'x'; 2049];
        assert!(violation(&ns(&[&big, &big]), 1), "4098 bytes");
        // Truncation is "need more", not an error.
        assert_eq!(read_namespace(&mut Reader::<Quic>::new(&ok[..3]), 1), Err(DecodeError::NeedMore));
    }

    #[test]
    fn tokens() {
        for t in [
            AuthToken::Delete { alias: 9 },
            AuthToken::Register { alias: 1, token_type: 0, value: Bytes::from_static(b"jwt") },
            AuthToken::UseAlias { alias: 300 },
            AuthToken::UseValue { token_type: 7, value: Bytes::new() },
        ] {
            let mut out = Vec::new();
            write_token(&mut Writer::<Vi64>::new(&mut out), &t).expect("encodes");
            assert_eq!(read_token::<Vi64>(&out), Ok(t));
        }
        assert_eq!(
            read_token::<Quic>(&[0x04]),
            Err(DecodeError::kv_format("unknown authorization token alias type"))
        );
        assert_eq!(
            read_token::<Quic>(&[0x00, 0x01, 0x02]),
            Err(DecodeError::kv_format("trailing bytes in authorization token"))
        );
        assert_eq!(
            read_token::<Quic>(&[0x01, 0x01]),
            Err(DecodeError::kv_format("malformed authorization token"))
        );
    }
}
