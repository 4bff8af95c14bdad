//! `wire`: the MoQT codecs, sans-IO. No I/O, clocks or logging; no panics on any input;
//! decoders never read past what they are given and report "need more bytes" distinctly.
//!
//! - [`model`]: the version-neutral types every layer above uses.
//! - [`d14`]: draft-ietf-moq-transport-14 (ALPN `moq-00`), QUIC varints; what
//!   it shares with draft-16 is [`d16`]'s.
//! - [`d16`]: draft-ietf-moq-transport-16 (ALPN `moqt-16`), QUIC varints.
//! - [`control`], [`params`]: the control codec of the request-stream drafts, 18, 20 and 22
//!   (ALPNs `moqt-18`, `moqt-20`, `moqt-22`), `vi64` integers, written once; [`dialect`] is
//!   the table of where each differs.
//! - [`d18`], [`d22`]: the data-plane rules of draft-18 and draft-22 (draft-20's are
//!   draft-22's).
//! - [`typed_forms`]: the Subscription Filter and typed FETCH that drafts 16 and 18 share.
//! - [`data`]: data-plane logic shared by the dialects (each fixes its rules).
//! - [`Version`]: the ALPN table and one entry point per operation, dispatching by draft.
//!
//! # One model, a codec per draft
//!
//! The relay never sees a draft number: it sees `Message`, `Parameters`, `SubgroupObject`,
//! `FetchItem`, the typed codes of `codes.rs` and the session's verbs. Where the drafts differ, the
//! model takes the richer form and the codec of the other draft converts or refuses
//! (`EncodeError::Unsupported`), so the session can map the operation instead.
//!
//! Drafts 18, 20 and 22 share their control codec (`control.rs`, `params.rs`); a `Dialect`
//! (`dialect.rs`) holds the ways a draft differs: the form of parameter 0x21, whether
//! TRACK_NAMESPACE_PREFIX has a Length, draft-18's FETCH (Fetch Type, "end + 1"), draft-18's GOAWAY
//! Request ID and PUBLISH_OK type, whether PUBLISH_STATE_NOTIFY and the two limit Setup Options
//! exist, and which parameter table applies. Draft-20 is draft-22 on the wire except:
//!
//! | point | draft-20 | draft-22 |
//! |---|---|---|
//! | LOCATION_FILTER 0x21 | a Length, then 0 to 4 vi64s whose count gives the form (an open filter from {0, 0} is written as none: it selects the same objects) | a Location Filter Type, then its fields, no Length |
//! | TRACK_NAMESPACE_PREFIX 0x34 | length-prefixed (§10.2 lists no bare namespace encoding; aiomoqt reads it so) | a bare Track Namespace |
//!
//! | difference | model | draft-16 | draft-18 | draft-22 |
//! |---|---|---|---|---|
//! | integers | `u64` | QUIC varint | vi64, non-minimal accepted | vi64, non-minimal accepted |
//! | setup | `ClientSetup` / `ServerSetup` | 0x20 / 0x21 | SETUP 0x2F00 on a uni stream; fewer options | SETUP 0x2F00, role from `DecodeContext` |
//! | responses | carry `request_id` | on the wire | on the request stream | on the request stream (`DecodeContext.request_id`) |
//! | GOAWAY | `GoAway { timeout_ms, request_id }` | URI only | URI, Timeout, Request ID on the control stream | URI, Timeout |
//! | PUBLISH_OK | `PublishOk` | 0x1E | REQUEST_OK with the subscription parameters | REQUEST_OK with EXPIRES |
//! | parameters | typed `Parameters` | Key-Value-Pairs; not allowed ones ignored (§9.2) | typed encodings, not allowed = PROTOCOL_VIOLATION; its own table | typed encodings (§9.20); not allowed = PROTOCOL_VIOLATION |
//! | subscription filter | `LocationFilter` | four SUBSCRIPTION_FILTER types | the same four, AbsoluteRange with an End Group Delta | LOCATION_FILTER, six forms |
//! | FETCH range | `FetchKind` and the filter | Fetch Type, "end + 1", joining fetches | as draft-16 | LOCATION_FILTER; fill parameters instead of joining |
//! | fetch streams | `FetchItem` | absolute IDs | deltas by Group Order | deltas; End of Timed-Out Range |
//! | SUBGROUP_HEADER | `first_object` | no FIRST_OBJECT bit | FIRST_OBJECT bit; padding | FIRST_OBJECT bit; padding |
//!
//! Draft-14 against draft-16: the same integers and GOAWAY; setup carries a version list /
//! the selected version (0xff00000e, ALPN `moq-00`); one answer message per request kind
//! (`ControlCodec::encode_response`); SUBSCRIBE_UPDATE with fixed fields and no answer; subscription
//! state as fixed fields (§9.7-§9.17) with the later drafts' defaults for what the model leaves
//! out; only three message parameters, with absolute Key-Value-Pair types (`common::KvTypes`);
//! no FIRST_OBJECT or default priority bits; the fixed fetch object layout (`data/fetch_fixed.rs`),
//! where a Does Not Exist object stands for an End of Range; PUBLISH_NAMESPACE_DONE, _CANCEL and
//! UNSUBSCRIBE_NAMESPACE name a namespace; error codes per answer message
//! (`RequestErrorCode::code_for` with the `RequestKind`).
//!
//! # Decoding rules and limits
//!
//! Every decoder returns the value and the bytes consumed, `NeedMore` (call again with more), or
//! `Invalid` with the session error code the draft demands and a static reason. Inside a
//! length-delimited body running out of bytes is `Invalid`. Stream readers keep prior fields and
//! commit only on success. Payloads are never copied: object decoders return `payload_len`.
//! Limits: a control message body of 65,535 bytes; 1 to 32 namespace fields (0 for a prefix), not
//! empty; a Full Track Name of 4096 bytes; a Reason Phrase of 1024; a GOAWAY URI of 8192; a
//! Key-Value-Pair value of 65,535. Checks that need session state (PATH from a server, objects
//! after End of Group, the per-kind REQUEST_UPDATE parameter sets, a `NeedMore` from a datagram)
//! are the session's.
//!
//! # Where the spec text is unclear
//!
//! | point | choice | why |
//! |---|---|---|
//! | draft-22 LOCATION_FILTER layout | Filter Type then fields, no Length | the §9.20.9 figure; §3.4's "zero-length" filter is type 0x00 |
//! | End of Range items | Group and Object only, no payload length | §11.4.1.2 names only those; an End of Range is not an object |
//! | End of Range IDs in drafts 18 and 22 | absolute | deltas could not express a range ending in the prior object's group |
//! | a Track Namespace of 0 fields | allowed for tracks in drafts 18 and 22, refused in 16 | each draft's §2.4.1; written to draft-16 it is `OutOfRange` |
//! | draft-16 §10.5 example | lengths 21/33 kept, value padded | the example shows a 14-byte string with length 21 |
//! | draft-18 TRACK_STATUS parameters | AUTHORIZATION TOKEN only | §10.14 excludes those related to delivery |
//! | REQUEST_ERROR-level faults inside parameters | decoded as they are | the codec cannot answer a request; the session answers INVALID_FILTER |

#![warn(unreachable_pub)]

pub mod codec;
pub mod codes;
pub mod common;
pub mod control;
pub mod d14;
pub mod d16;
pub mod d18;
pub mod d22;
pub mod data;
pub mod dialect;
pub mod error;
pub mod model;
pub mod params;
mod streams;
pub mod typed_forms;
pub mod varint;
mod version;

pub use codes::{code, DoneStatus, RequestErrorCode, ResetCode, SessionCode};
pub use error::{DecodeError, EncodeError, ErrorCode};
pub use streams::{FetchReader, FetchWriter, SubgroupReader, SubgroupWriter};
pub use varint::{Quic, VarInt, Vi64};
pub use version::{ControlCodec, Version};
