//! `client`: what the tests and the bench harness use to talk to the relay.
//!
//! Today this is [`quic`], a synchronous QUIC client driver (quiche over plain
//! `std::net::UdpSocket`s) that drives one or many connections from one thread. The MoQT
//! client (publisher and subscriber, on the `wire` and `session` layers) builds on it.

pub mod quic;

pub use quic::{drive_many, raw_exchange, ClientError, Exchange, QuicConn};
