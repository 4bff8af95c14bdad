//! `client`: what the tests and the bench harness use to talk to the relay.
//!
//! [`quic`] is a synchronous QUIC client driver (quiche over plain `std::net::UdpSocket`s)
//! that drives one or many connections from one thread; [`moqt`] runs a MoQT session over it
//! with the same sans-IO `Session` and quiche glue as the server. [`publisher`] and
//! [`subscriber`] are MoQT endpoints: sans-IO state machines over a `Session`
//! ([`PublisherCore`], [`SubscriberCore`]) with one thin QUIC driver ([`Driven`]: [`Publisher`],
//! [`Subscriber`]); [`fleet`] drives many of them from one thread; [`stamp`] makes and reads
//! the sequence-numbered, time-stamped payloads of `moq-pub` and `moq-sub`;
//! [`switchover`] is a subscriber that follows GOAWAY to a new relay.
//!
//! The subscriber that follows GOAWAY (`switchover.rs`) subscribes at the new relay, holds the
//! new objects until the old subscription reaches them, then cancels it: no loss or repeat for
//! in-order live tracks.

#![warn(missing_docs, unreachable_pub)]

pub mod cli;
pub mod codes;
mod drive;
pub mod fleet;
pub mod moqt;
pub mod publisher;
pub mod quic;
pub mod stamp;
pub mod subscriber;
pub mod switchover;
pub mod ws;

pub use fleet::{Endpoint, Fleet};
pub use moqt::{Driven, MoqtClient, Origin, Relay, RequestState, SessionCore};
pub use publisher::{Delivery, Ended, Publisher, PublisherCore};
pub use quic::{drive_many, raw_exchange, ClientError, Exchange, QuicConn};
pub use subscriber::{DoneInfo, Received, Subscriber, SubscriberCore, Subscription};
pub use switchover::FollowingSubscriber;
