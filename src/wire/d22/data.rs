//! draft-22 data plane (draft-ietf-moq-transport-22 §6.4.1 and §11): unidirectional stream
//! types (§6.4.1), OBJECT_DATAGRAM (§11.2.1), SUBGROUP_HEADER streams (§11.3.1), FETCH_HEADER
//! streams (§11.4.1) and padding (§11.5), with vi64 integers. The logic lives in
//! [`crate::data`]; this module fixes the draft-22 rules: the FIRST_OBJECT bit, End of
//! Timed-Out Range (0x20C), Group/Object ID deltas on fetch streams ordered by the fetch's
//! Group Order, the control stream type 0x2F00 and the padding types.

use crate::data::DataRules;
use crate::varint::Vi64;

/// Unidirectional stream type of the control stream; also the SETUP message type (§6.4.1, §9.1).
pub const CONTROL_STREAM_TYPE: u64 = 0x2F00;
/// Padding stream type (§11.5.1).
pub const PADDING_STREAM_TYPE: u64 = 0x132B_3E28;
/// Padding datagram type (§11.5.2).
pub const PADDING_DATAGRAM_TYPE: u64 = 0x132B_3E29;

/// The draft-22 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft22 {}

impl DataRules for Draft22 {
    type V = Vi64;
    const FIRST_OBJECT_BIT: bool = true;
    const TIMED_OUT_RANGE: bool = true;
    const FETCH_ID_DELTAS: bool = true;
    const CONTROL_STREAM_TYPE: Option<u64> = Some(CONTROL_STREAM_TYPE);
    const PADDING_STREAM_TYPE: Option<u64> = Some(PADDING_STREAM_TYPE);
    const PADDING_DATAGRAM_TYPE: Option<u64> = Some(PADDING_DATAGRAM_TYPE);
}

crate::data::data_plane!(Draft22, padding);
