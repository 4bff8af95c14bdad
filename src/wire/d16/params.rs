//! draft-16 params (being written).
