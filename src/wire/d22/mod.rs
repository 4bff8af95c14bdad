//! The draft-22 codec.

pub mod control;
pub mod data;
pub mod params;
