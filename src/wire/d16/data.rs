//! draft-16 data plane (draft-ietf-moq-transport-16 §10 "Data Streams and Datagrams"):
//! SUBGROUP_HEADER streams (§10.4.2), OBJECT_DATAGRAM (§10.3.1) and FETCH_HEADER streams
//! (§10.4.4), with QUIC varints. The logic lives in [`crate::data`]; this module fixes
//! the draft-16 rules: no FIRST_OBJECT bit, no End of Timed-Out Range, absolute Group and
//! Object IDs on fetch streams, no padding, and the control stream is not a unidirectional
//! stream type.

use crate::data::DataRules;
use crate::varint::Quic;

/// The draft-16 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft16 {}

impl DataRules for Draft16 {
    type V = Quic;
}

crate::data::data_plane!(Draft16);
