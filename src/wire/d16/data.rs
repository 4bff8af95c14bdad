//! draft-16 data (being written).
