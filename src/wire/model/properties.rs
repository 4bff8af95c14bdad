//! Track and Object Properties (draft-22 §8.4, §10; draft-16 "Extension Headers" §2.5, §12).
//!
//! Kept as the ordered list of Key-Value-Pairs that arrived: unknown types and every byte
//! value are kept exactly as received, so a relay forwards them unmodified. The Immutable
//! Properties (0x0B) value is an opaque byte string and is therefore never re-encoded.

use bytes::Bytes;

use super::params::KvValue;

/// Property type code points (draft-22 §16.8; draft-16 §13.3 uses the same numbers).
pub mod property_type {
    pub const OBJECT_DELIVERY_TIMEOUT: u64 = 0x02;
    pub const MAX_CACHE_DURATION: u64 = 0x04;
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
    pub const IMMUTABLE_PROPERTIES: u64 = 0x0B;
    pub const DEFAULT_PUBLISHER_PRIORITY: u64 = 0x0E;
    pub const DEFAULT_PUBLISHER_GROUP_ORDER: u64 = 0x22;
    pub const DYNAMIC_GROUPS: u64 = 0x30;
    pub const PRIOR_GROUP_ID_GAP: u64 = 0x3C;
    pub const PRIOR_OBJECT_ID_GAP: u64 = 0x3E;
}

/// One property.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Property {
    pub ty: u64,
    pub value: KvValue,
}

/// An ordered list of properties. On the wire types are delta-encoded, so the list is kept in
/// non-decreasing type order; [`Properties::push`] keeps that invariant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Properties(Vec<Property>);

impl Properties {
    pub const fn new() -> Self {
        Properties(Vec::new())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Property> {
        self.0.iter()
    }

    /// Inserts after every property of type <= `ty`, keeping type order.
    pub fn push(&mut self, ty: u64, value: KvValue) {
        let at = self.0.partition_point(|p| p.ty <= ty);
        self.0.insert(at, Property { ty, value });
    }

    /// Used by decoders, which see types in order already.
    pub(crate) fn push_sorted(&mut self, p: Property) {
        debug_assert!(self.0.last().is_none_or(|l| l.ty <= p.ty));
        self.0.push(p);
    }

    /// First integer value of `ty` in the mutable list.
    pub fn int(&self, ty: u64) -> Option<u64> {
        self.0.iter().find_map(|p| match (&p.value, p.ty == ty) {
            (KvValue::Int(v), true) => Some(*v),
            _ => None,
        })
    }

    /// First byte value of `ty` in the mutable list.
    pub fn bytes(&self, ty: u64) -> Option<&Bytes> {
        self.0.iter().find_map(|p| match (&p.value, p.ty == ty) {
            (KvValue::Bytes(v), true) => Some(v),
            _ => None,
        })
    }

    /// The raw Immutable Properties blob, if any.
    pub fn immutable(&self) -> Option<&Bytes> {
        self.bytes(property_type::IMMUTABLE_PROPERTIES)
    }
}

impl FromIterator<(u64, KvValue)> for Properties {
    fn from_iter<I: IntoIterator<Item = (u64, KvValue)>>(iter: I) -> Self {
        let mut p = Properties::new();
        for (ty, value) in iter {
            p.push(ty, value);
        }
        p
    }
}
