//! draft-18 data plane (draft-ietf-moq-transport-18 §3.4 and §11): unidirectional stream types
//! (§3.4), OBJECT_DATAGRAM (§11.3.1), SUBGROUP_HEADER streams (§11.4.2), FETCH_HEADER streams
//! (§11.4.4) and padding (§11.5), with vi64 integers. The logic lives in
//! [`crate::data`]; the rules are draft-22's but for one: the FIRST_OBJECT bit, Group
//! and Object ID deltas on fetch streams ordered by the fetch's Group Order (§11.4.4.1), the
//! control stream type 0x2F00 and the padding types are all here, while End of Timed-Out Range
//! is not (§11.4.4 defines only 0x8C and 0x10C).

use crate::data::DataRules;
use crate::varint::Vi64;

/// The control stream type (§3.4, §10.3) and the padding types (§11.5) are draft-22's.
pub use crate::d22::data::{CONTROL_STREAM_TYPE, PADDING_DATAGRAM_TYPE, PADDING_STREAM_TYPE};

/// The draft-18 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft18 {}

impl DataRules for Draft18 {
    type V = Vi64;
    const FIRST_OBJECT_BIT: bool = true;
    const FETCH_ID_DELTAS: bool = true;
    const CONTROL_STREAM_TYPE: Option<u64> = Some(CONTROL_STREAM_TYPE);
    const PADDING_STREAM_TYPE: Option<u64> = Some(PADDING_STREAM_TYPE);
    const PADDING_DATAGRAM_TYPE: Option<u64> = Some(PADDING_DATAGRAM_TYPE);
}

crate::data::data_plane!(Draft18, padding);
