//! `client`: what the tests and the bench harness use to talk to the relay.
//!
//! [`quic`] is a synchronous QUIC client driver (quiche over plain `std::net::UdpSocket`s)
//! that drives one or many connections from one thread; [`moqt`] runs a MoQT session over it
//! with the same sans-IO `Session` and quiche glue as the server.

pub mod moqt;
pub mod quic;

pub use moqt::MoqtClient;
pub use quic::{drive_many, raw_exchange, ClientError, Exchange, QuicConn};
