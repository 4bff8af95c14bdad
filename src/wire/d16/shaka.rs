//! Draft-16 as Shaka Player's MoQT client (5.2, `shaka.msf`, MOQT_IMPLEMENTATION
//! `ShakaPlayer/…`) writes and reads it (ARCHITECTURE.md, "Peer quirks"): draft-16's messages,
//! except where its code still follows draft-14.
//!
//! - Its SUBSCRIBE carries GROUP_ORDER 0 (draft-14's "the publisher's order"), which draft-16
//!   §9.2.2 no longer has (1 or 2): read as no preference.
//! - Its FETCH is draft-14's layout (Subscriber Priority and Group Order bytes before the
//!   Fetch Type): told apart by the byte where draft-16 has the Fetch Type, which draft-16
//!   never makes 0 and Shaka always does (its priority is 0).
//! - It reads FETCH_OK and fetch streams in draft-14's layout, and SUBSCRIBE_OK without its
//!   Track Properties (it skips no bytes it does not parse: the rest of the message would be
//!   read as the next one). So those go to it that way.
//!
//! Everything else is draft-16's own codec.

use crate::codec::Reader;
use crate::error::{DecodeError, EncodeError};
use crate::model::{DecodeContext, Message, Properties, SubscribeOk};
use crate::varint::Quic;

use crate::common::read_full_track_name;

use super::control::{decode_framed, message_type as t, read_body, read_id};
use super::params::{read_params_as, ParamMessage};

/// Decodes one control message from Shaka at draft-16: `(message, bytes consumed)`.
pub fn decode_message(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    decode_framed(buf, ctx, read_shaka_body)
}

fn read_shaka_body(ty: u64, r: &mut Reader<'_, Quic>, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    match ty {
        t::SUBSCRIBE => Ok(Message::Subscribe(crate::model::Subscribe {
            request_id: read_id(r)?,
            track: read_full_track_name(r)?,
            params: read_params_as(r, ParamMessage::Subscribe, true)?,
        })),
        t::FETCH if draft14_fetch(r)? => Ok(Message::Fetch(crate::d14::control::read_fetch(r)?)),
        _ => read_body(ty, r, ctx),
    }
}

/// Whether the FETCH body in `r` has a 0 where draft-16 puts its Fetch Type (1 to 3).
fn draft14_fetch(r: &Reader<'_, Quic>) -> Result<bool, DecodeError> {
    let mut probe = r.clone();
    read_id(&mut probe)?;
    Ok(probe.int()? == 0)
}

/// Appends `msg` as Shaka reads it at draft-16.
pub fn encode_message(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    match msg {
        Message::SubscribeOk(m) if !m.track_properties.is_empty() => {
            let bare = SubscribeOk { track_properties: Properties::new(), ..m.clone() };
            super::control::encode_message(&Message::SubscribeOk(bare), out)
        }
        Message::FetchOk(_) => crate::d14::control::encode_message(msg, out),
        _ => super::control::encode_message(msg, out),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{
        FetchEnd, FetchKind, FetchOk, GroupOrder, KvValue, Location, LocationFilter, Role, TrackNamespace,
    };

    /// Shaka 5.2.12's draft-16 SUBSCRIBE for `live/catalog`: FORWARD 1, SUBSCRIBER_PRIORITY 0,
    /// SUBSCRIPTION_FILTER Largest Object, GROUP_ORDER 0 (delta-coded types 0x10, 0x20, 0x21,
    /// 0x22), as its `buffer_control_writer.js` writes it.
    const SUBSCRIBE: &[u8] =
        b"\x03\x00\x19\x00\x01\x04live\x07catalog\x04\x10\x01\x10\x00\x01\x01\x02\x01\x00";
    /// Its FETCH (only with `useFetchCatalog`): draft-14's layout, group 0 of `live/catalog`.
    const FETCH: &[u8] = b"\x16\x00\x17\x02\x00\x00\x01\x01\x04live\x07catalog\x00\x00\x00\x00\x00";

    fn ctx() -> DecodeContext {
        DecodeContext::control(Role::Client)
    }

    #[test]
    fn its_subscribe_with_group_order_0_is_read_as_no_preference() {
        let (msg, used) = decode_message(SUBSCRIBE, &ctx()).unwrap();
        assert_eq!(used, SUBSCRIBE.len());
        let Message::Subscribe(s) = msg else { panic!("{msg:?}") };
        assert_eq!(s.track.name.as_ref(), b"catalog");
        assert_eq!(s.params.group_order, None);
        assert_eq!(s.params.forward, Some(true));
        assert_eq!(s.params.location_filter, Some(LocationFilter::NextObject));
        // The same bytes from any other draft-16 peer: GROUP_ORDER must be 1 or 2.
        let err = super::super::control::decode_message(SUBSCRIBE, &ctx()).unwrap_err();
        assert!(err.to_string().contains("GROUP_ORDER"), "{err}");
        // Its other values are still checked.
        let mut three = SUBSCRIBE.to_vec();
        *three.last_mut().unwrap() = 3;
        assert!(decode_message(&three, &ctx()).is_err());
        let mut two = SUBSCRIBE.to_vec();
        *two.last_mut().unwrap() = 2;
        let Message::Subscribe(s) = decode_message(&two, &ctx()).unwrap().0 else { panic!() };
        assert_eq!(s.params.group_order, Some(GroupOrder::Descending));
    }

    #[test]
    fn its_draft14_layout_fetch_is_read() {
        let (msg, used) = decode_message(FETCH, &ctx()).unwrap();
        assert_eq!(used, FETCH.len());
        let Message::Fetch(f) = msg else { panic!("{msg:?}") };
        assert_eq!(f.request_id.0, 2);
        let FetchKind::Standalone { track } = &f.kind else { panic!("{:?}", f.kind) };
        assert_eq!(track.namespace, TrackNamespace::from_strs(&["live"]));
        assert_eq!(
            f.params.location_filter,
            Some(LocationFilter::AbsoluteStartGroupEnd { start: Location::new(0, 0), end_group: 0 })
        );
        // From any other draft-16 peer it is an unknown Fetch Type.
        let err = super::super::control::decode_message(FETCH, &ctx()).unwrap_err();
        assert!(err.to_string().contains("Fetch Type"), "{err}");
        // A draft-16 FETCH from Shaka (were it to write one) is still read as draft-16's.
        let mut d16 = Vec::new();
        let fetch = crate::model::Fetch { request_id: crate::model::RequestId(4), ..f.clone() };
        super::super::control::encode_message(&Message::Fetch(fetch.clone()), &mut d16).unwrap();
        let Message::Fetch(back) = decode_message(&d16, &ctx()).unwrap().0 else { panic!() };
        assert_eq!(back.request_id.0, 4);
    }

    #[test]
    fn what_it_reads_goes_in_its_layout() {
        let ok = FetchOk {
            request_id: crate::model::RequestId(2),
            end_of_track: false,
            end_location: FetchEnd::Group(0),
            ..Default::default()
        };
        let (mut ours, mut d14) = (Vec::new(), Vec::new());
        encode_message(&Message::FetchOk(ok.clone()), &mut ours).unwrap();
        crate::d14::control::encode_message(&Message::FetchOk(ok), &mut d14).unwrap();
        assert_eq!(ours, d14, "FETCH_OK in draft-14's layout: a Group Order byte first");
        let mut props = Properties::new();
        props.push(0x4, KvValue::Int(1));
        let sub = SubscribeOk { track_properties: props, ..Default::default() };
        let (mut ours, mut bare) = (Vec::new(), Vec::new());
        encode_message(&Message::SubscribeOk(sub.clone()), &mut ours).unwrap();
        let plain = SubscribeOk { track_properties: Properties::new(), ..sub };
        super::super::control::encode_message(&Message::SubscribeOk(plain), &mut bare).unwrap();
        assert_eq!(ours, bare, "SUBSCRIBE_OK without Track Properties");
    }
}
