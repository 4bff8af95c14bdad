//! The draft-18 data plane (draft-ietf-moq-transport-18, ALPN `moqt-18`). Its control messages
//! are the shared request-stream codec ([`crate::control`]) with the [`crate::dialect::D18`]
//! differences.

pub mod data;
