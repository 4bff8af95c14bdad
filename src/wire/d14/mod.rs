//! The draft-14 codec (draft-ietf-moq-transport-14, ALPN `moq-00`, version 0xff00000e).
//!
//! What draft-14 shares with draft-16 is written once, in `d16` and `common`: the control
//! framing, GOAWAY, PUBLISH_DONE, the Setup Parameters (with absolute types), the Subscription
//! Filter and FETCH body of `typed_forms`, and the data plane of `data` (with draft-14's
//! `DataRules`). This module holds what only draft-14 has: its message table and the
//! layouts of the messages whose subscription state is fixed fields (`control`), its
//! Version Specific Parameters (`params`), and its data-plane rules (`data`).

pub mod control;
pub mod data;
pub mod params;
