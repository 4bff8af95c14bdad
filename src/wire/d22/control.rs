//! draft-22 control (being written).
