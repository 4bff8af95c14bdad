//! draft-14 Version Specific Parameters (§9.2.1): Key-Value-Pairs with absolute types
//! (§1.4.2). Only three are defined: DELIVERY TIMEOUT (0x02, §9.2.1.2), AUTHORIZATION TOKEN
//! (0x03, §9.2.1.1, repeatable) and MAX CACHE DURATION (0x04, §9.2.1.3). Unknown parameters,
//! and known ones in a message their definition does not name, are ignored (§9.2, §9.2.1); a
//! repeated DELIVERY TIMEOUT or MAX CACHE DURATION is a PROTOCOL_VIOLATION (§9.2: receivers
//! "SHOULD check").
//!
//! Subscription state (priority, group order, forward, filter, expires, largest) travels in
//! fixed fields of the messages, not here; `super::control` maps those.

use crate::codec::{Reader, Writer};
use crate::common::{read_kv, read_token, KvTypes};
use crate::d16::params::{set_once, token_bytes, write_kv_list};
use crate::error::{DecodeError, EncodeError};
use crate::model::{AuthToken, KvValue};
use crate::varint::Quic;

/// draft-14 Version Specific Parameter code points (§9.2.1).
pub mod param_type {
    /// DELIVERY TIMEOUT (§9.2.1.2), milliseconds.
    pub const DELIVERY_TIMEOUT: u64 = 0x02;
    /// AUTHORIZATION TOKEN (§9.2.1.1), repeatable.
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// MAX CACHE DURATION (§9.2.1.3), milliseconds.
    pub const MAX_CACHE_DURATION: u64 = 0x04;
}

/// The draft-14 messages that carry parameters; each parameter's definition names the
/// messages it "MAY appear in".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamMessage {
    Subscribe,
    SubscribeOk,
    SubscribeUpdate,
    Publish,
    PublishOk,
    Fetch,
    FetchOk,
    TrackStatus,
    TrackStatusOk,
    PublishNamespace,
    SubscribeNamespace,
}

impl ParamMessage {
    /// The parameters this message may carry (§9.2.1.1-3). The DELIVERY TIMEOUT sentence
    /// names TRACK_STATUS, TRACK_STATUS_OK, PUBLISH, PUBLISH_OK, SUBSCRIBE, SUBSCRIBE_OK and
    /// SUBSCRIBE_UPDATE; AUTHORIZATION TOKEN every request; MAX CACHE DURATION PUBLISH,
    /// SUBSCRIBE_OK, FETCH_OK and TRACK_STATUS_OK.
    pub const fn allowed(self) -> &'static [u64] {
        use param_type::*;
        match self {
            ParamMessage::Subscribe | ParamMessage::SubscribeUpdate | ParamMessage::TrackStatus => {
                &[DELIVERY_TIMEOUT, AUTHORIZATION_TOKEN]
            }
            ParamMessage::SubscribeOk | ParamMessage::TrackStatusOk => {
                &[DELIVERY_TIMEOUT, MAX_CACHE_DURATION]
            }
            ParamMessage::Publish => &[DELIVERY_TIMEOUT, AUTHORIZATION_TOKEN, MAX_CACHE_DURATION],
            ParamMessage::PublishOk => &[DELIVERY_TIMEOUT],
            ParamMessage::Fetch | ParamMessage::PublishNamespace | ParamMessage::SubscribeNamespace => {
                &[AUTHORIZATION_TOKEN]
            }
            ParamMessage::FetchOk => &[MAX_CACHE_DURATION],
        }
    }

    /// Whether this message may carry parameter `ty`.
    pub fn allows(self, ty: u64) -> bool {
        self.allowed().contains(&ty)
    }
}

/// The parameters of one draft-14 message, as the wire has them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Params {
    /// AUTHORIZATION TOKEN, in order.
    pub auth_tokens: Vec<AuthToken>,
    /// DELIVERY TIMEOUT.
    pub delivery_timeout: Option<u64>,
    /// MAX CACHE DURATION.
    pub max_cache_duration: Option<u64>,
}

/// Reads `Number of Parameters` and the parameters of `msg`.
pub fn read_params(r: &mut Reader<'_, Quic>, msg: ParamMessage) -> Result<Params, DecodeError> {
    use param_type::*;
    const DUP: &str = "duplicate message parameter";
    let n = r.count("number of parameters")?;
    let mut p = Params::default();
    for _ in 0..n {
        let (ty, value) = read_kv(r, 0)?;
        if !msg.allows(ty) {
            continue;
        }
        match (ty, value) {
            (DELIVERY_TIMEOUT, KvValue::Int(v)) => set_once(&mut p.delivery_timeout, v, DUP)?,
            (MAX_CACHE_DURATION, KvValue::Int(v)) => set_once(&mut p.max_cache_duration, v, DUP)?,
            (AUTHORIZATION_TOKEN, KvValue::Bytes(b)) => p.auth_tokens.push(read_token::<Quic>(&b)?),
            // The type's parity fixes the value's kind, so a known type cannot arrive otherwise.
            _ => return Err(DecodeError::kv_format("message parameter value of the wrong kind")),
        }
    }
    Ok(p)
}

/// Writes `Number of Parameters` and `p` (absolute types, ascending). A parameter `msg` may
/// not carry is `Unsupported`.
pub fn write_params(w: &mut Writer<'_, Quic>, p: &Params, msg: ParamMessage) -> Result<(), EncodeError> {
    use param_type::*;
    let mut kvs = Vec::new();
    if let Some(v) = p.delivery_timeout {
        kvs.push((DELIVERY_TIMEOUT, KvValue::Int(v)));
    }
    for t in &p.auth_tokens {
        kvs.push((AUTHORIZATION_TOKEN, KvValue::Bytes(token_bytes(t)?)));
    }
    if let Some(v) = p.max_cache_duration {
        kvs.push((MAX_CACHE_DURATION, KvValue::Int(v)));
    }
    match kvs.iter().find(|(ty, _)| !msg.allows(*ty)) {
        Some((DELIVERY_TIMEOUT, _)) => {
            Err(EncodeError::Unsupported("DELIVERY TIMEOUT in this draft-14 message"))
        }
        Some((AUTHORIZATION_TOKEN, _)) => {
            Err(EncodeError::Unsupported("AUTHORIZATION TOKEN in this draft-14 message"))
        }
        Some(_) => Err(EncodeError::Unsupported("MAX CACHE DURATION in this draft-14 message")),
        None => write_kv_list(w, &kvs, KvTypes::Absolute),
    }
}
