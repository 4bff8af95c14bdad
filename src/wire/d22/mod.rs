//! The draft-22 data plane (draft-ietf-moq-transport-22, ALPN `moqt-22`), also draft-20's
//! (whose data streams and datagrams draft-22 did not change). Control messages: the shared
//! request-stream codec ([`crate::control`]) with [`crate::dialect::D22`] or
//! [`crate::dialect::D20`].

pub mod data;
