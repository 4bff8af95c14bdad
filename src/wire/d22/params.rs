//! draft-22 params (being written).
