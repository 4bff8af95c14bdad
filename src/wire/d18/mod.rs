//! The draft-18 codec (draft-ietf-moq-transport-18, ALPN `moqt-18`).
//!
//! draft-18 has draft-22's framing and integers (vi64, SETUP on unidirectional control streams,
//! a bidirectional stream per request, typed Message Parameters), so much of it matches the
//! `d22` codec; it keeps draft-16's FETCH (Fetch Type, joining fetches, "end plus one" End
//! Locations) and Subscription Filter, and has its own parameter and message tables.
//! ARCHITECTURE.md lists the differences.

pub mod control;
pub mod data;
pub mod params;
