//! draft-18, control and data plane: arbitrary bytes never panic a decoder nor make it claim
//! more bytes than given; whatever decodes re-encodes and decodes to the same value. The first
//! byte picks the plane and, for control messages, role and stream; for data, the mode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_edge::wire::d18::control::{decode_message, encode_message};
use moq_edge::wire::d18::data::Draft18;
use moq_edge::wire::data::{
    decode_datagram, decode_uni_stream_header, FetchReader, FetchWriter, SubgroupReader, SubgroupWriter,
};
use moq_edge::wire::model::{
    Datagram, DecodeContext, FetchItem, GroupOrder, RequestId, Role, UniStreamHeader,
};

fn payload(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

fn control(selector: u8, buf: &[u8]) {
    let sender = if selector & 2 == 0 { Role::Client } else { Role::Server };
    let ctx = if selector & 4 == 0 {
        DecodeContext::control(sender)
    } else {
        DecodeContext::request(sender, RequestId(u64::from(selector >> 3)))
    };
    if let Ok((msg, used)) = decode_message(buf, &ctx) {
        assert!(used <= buf.len());
        let mut out = Vec::new();
        if encode_message(&msg, &mut out).is_ok() {
            let (again, n) = decode_message(&out, &ctx).expect("re-encoded message decodes");
            assert_eq!(n, out.len());
            // A legacy PUBLISH_OK (0x1E) is written as REQUEST_OK: compare its fields.
            match (&again, &msg) {
                (
                    moq_edge::wire::model::Message::RequestOk(a),
                    moq_edge::wire::model::Message::PublishOk(m),
                ) => {
                    assert_eq!((a.request_id, &a.params), (m.request_id, &m.params));
                }
                _ => assert_eq!(again, msg),
            }
        }
    }
}

fn data(selector: u8, buf: &[u8]) {
    if selector & 2 != 0 {
        if let Ok(Datagram::Object { payload_offset, .. }) = decode_datagram::<Draft18>(buf) {
            assert!(payload_offset <= buf.len());
        }
        return;
    }
    let Ok((header, mut at)) = decode_uni_stream_header::<Draft18>(buf) else { return };
    assert!(at <= buf.len());
    match header {
        UniStreamHeader::Subgroup(h) => {
            let (mut r, mut w, mut check) = (
                SubgroupReader::<Draft18>::new(&h),
                SubgroupWriter::<Draft18>::new(&h),
                SubgroupReader::<Draft18>::new(&h),
            );
            while let Some(rest) = buf.get(at..) {
                let Ok((obj, used)) = r.decode(rest) else { break };
                let mut out = Vec::new();
                if w.encode(&obj, &mut out).is_err() {
                    break;
                }
                assert_eq!(check.decode(&out).expect("re-encoded object decodes").0, obj);
                at = at.saturating_add(used).saturating_add(payload(obj.payload_len));
            }
        }
        UniStreamHeader::Fetch { .. } => {
            let order = if selector & 4 == 0 { GroupOrder::Ascending } else { GroupOrder::Descending };
            let (mut r, mut w, mut check) = (
                FetchReader::<Draft18>::new(order),
                FetchWriter::<Draft18>::new(order),
                FetchReader::<Draft18>::new(order),
            );
            while let Some(rest) = buf.get(at..) {
                let Ok((item, used)) = r.decode(rest) else { break };
                let mut out = Vec::new();
                if w.encode(&item, &mut out).is_err() {
                    break;
                }
                assert_eq!(check.decode(&out).expect("re-encoded item decodes").0, item);
                let len = match &item {
                    FetchItem::Object(o) => payload(o.payload_len),
                    FetchItem::EndOfRange { .. } => 0,
                };
                at = at.saturating_add(used).saturating_add(len);
            }
        }
        UniStreamHeader::Control | UniStreamHeader::Padding => {}
    }
}

fuzz_target!(|data_in: &[u8]| {
    let Some((&selector, buf)) = data_in.split_first() else { return };
    if selector & 1 == 0 {
        control(selector, buf)
    } else {
        data(selector, buf)
    }
});
