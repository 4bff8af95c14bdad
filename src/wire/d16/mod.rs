//! The draft-16 codec.

pub mod control;
pub mod data;
pub mod params;
pub mod shaka;
