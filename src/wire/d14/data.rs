//! draft-14 data plane (draft-ietf-moq-transport-14 §10 "Data Streams and Datagrams"):
//! SUBGROUP_HEADER streams (§10.4.2), OBJECT_DATAGRAM (§10.3.1) and FETCH_HEADER streams
//! (§10.4.4), with QUIC varints. The logic lives in [`crate::data`]; this module fixes the
//! draft-14 rules: draft-16's, less the DEFAULT_PRIORITY bit (SUBGROUP_HEADER 0x10-0x15 and
//! 0x18-0x1D, OBJECT_DATAGRAM 0x00-0x07 and 0x20-0x21), with Extension Headers of absolute
//! types, Object Status Does Not Exist (0x1), and the fixed-field fetch object layout.

use crate::common::KvTypes;
use crate::data::DataRules;
use crate::varint::Quic;

/// The draft-14 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft14 {}

impl DataRules for Draft14 {
    type V = Quic;
    const DEFAULT_PRIORITY: bool = false;
    const KV: KvTypes = KvTypes::Absolute;
    const DOES_NOT_EXIST: bool = true;
    const FETCH_FIXED_FIELDS: bool = true;
}

crate::data::data_plane!(Draft14);
