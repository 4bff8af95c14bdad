//! draft-16 control (being written).
