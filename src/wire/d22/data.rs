//! draft-22 data (being written).
