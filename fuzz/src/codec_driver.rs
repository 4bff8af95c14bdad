//! The codec fuzz targets' bodies (`control`, `data`, `draft18`), shared with the main crate's
//! `tests/fuzz_corpus.rs` (included there by path) so that their committed corpora replay under
//! plain `cargo test`. Each checks, on arbitrary input: no panic, consumed lengths within the
//! input, and that whatever decodes re-encodes and decodes to the same value.
//!
//! Only `moq_edge` and `std` are used, so the file compiles in both crates.

use moq_edge::wire::d14::data::Draft14;
use moq_edge::wire::d16::data::Draft16;
use moq_edge::wire::d18::data::Draft18;
use moq_edge::wire::d22::data::Draft22;
use moq_edge::wire::data::{
    decode_datagram, decode_uni_stream_header, DataRules, FetchReader, FetchWriter, SubgroupReader,
    SubgroupWriter,
};
use moq_edge::wire::model::{
    Datagram, DecodeContext, FetchItem, GroupOrder, Message, RequestId, Role, UniStreamHeader,
};
use moq_edge::wire::Version;

/// Control messages of every draft; the first byte picks draft, role and stream.
pub fn control(input: &[u8]) {
    let Some((&selector, buf)) = input.split_first() else { return };
    let version = crate::drafts::pick(selector);
    control_message(version, selector / crate::drafts::DRAFTS.len() as u8, buf);
}

/// One control message of `version`: `mode` bit 0 the sender's role, bit 1 a request stream
/// (its Request ID the rest of `mode`) rather than the control stream.
fn control_message(version: Version, mode: u8, buf: &[u8]) {
    let sender = if mode & 1 == 0 { Role::Client } else { Role::Server };
    let ctx = if mode & 2 == 0 {
        DecodeContext::control(sender)
    } else {
        DecodeContext::request(sender, RequestId(u64::from(mode >> 2)))
    };
    if let Ok((msg, used)) = version.decode_message(buf, &ctx) {
        assert!(used <= buf.len());
        let mut out = Vec::new();
        if version.encode_message(&msg, &mut out).is_ok() {
            let (again, n) = version.decode_message(&out, &ctx).expect("re-encoded message decodes");
            assert_eq!(n, out.len());
            match (&again, &msg) {
                // draft-18's legacy PUBLISH_OK (0x1E) is written as REQUEST_OK.
                (Message::RequestOk(a), Message::PublishOk(m)) => {
                    assert_eq!((a.request_id, &a.params), (m.request_id, &m.params))
                }
                _ => assert_eq!(again, msg),
            }
        }
    }
}

/// The data plane of every draft: stream headers, subgroup objects, fetch items, datagrams.
/// The first byte picks draft and mode.
pub fn data(input: &[u8]) {
    let Some((&selector, buf)) = input.split_first() else { return };
    // The low bit of `mode` is not read by `data_plane`, so the four data planes share its
    // bits 1 and 2.
    let mode = (selector / 4) << 1;
    match selector % 4 {
        0 => data_plane::<Draft16>(mode, buf),
        1 => data_plane::<Draft18>(mode, buf),
        2 => data_plane::<Draft22>(mode, buf),
        _ => data_plane::<Draft14>(mode, buf),
    }
}

/// draft-18 alone, control and data plane: the first byte's bit 0 picks the plane, the rest
/// role and stream (control) or mode (data).
pub fn draft18(input: &[u8]) {
    let Some((&selector, buf)) = input.split_first() else { return };
    if selector & 1 == 0 {
        control_message(Version::Draft18, selector >> 1, buf)
    } else {
        data_plane::<Draft18>(selector, buf)
    }
}

fn payload(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

fn data_plane<R: DataRules>(selector: u8, buf: &[u8]) {
    if selector & 2 != 0 {
        if let Ok(Datagram::Object { payload_offset, .. }) = decode_datagram::<R>(buf) {
            assert!(payload_offset <= buf.len());
        }
        return;
    }
    let Ok((header, mut at)) = decode_uni_stream_header::<R>(buf) else { return };
    assert!(at <= buf.len());
    match header {
        UniStreamHeader::Subgroup(h) => {
            let (mut r, mut w, mut check) =
                (SubgroupReader::<R>::new(&h), SubgroupWriter::<R>::new(&h), SubgroupReader::<R>::new(&h));
            while let Some(rest) = buf.get(at..) {
                let Ok((obj, used)) = r.decode(rest) else { break };
                let mut out = Vec::new();
                // The writer may refuse what it cannot express compactly (then stop comparing);
                // what it writes must decode to the same object.
                if w.encode(&obj, &mut out).is_err() {
                    break;
                }
                assert_eq!(check.decode(&out).expect("re-encoded object decodes").0, obj);
                at = at.saturating_add(used).saturating_add(payload(obj.payload_len));
            }
        }
        UniStreamHeader::Fetch { .. } => {
            let order = if selector & 4 == 0 { GroupOrder::Ascending } else { GroupOrder::Descending };
            let (mut r, mut w, mut check) =
                (FetchReader::<R>::new(order), FetchWriter::<R>::new(order), FetchReader::<R>::new(order));
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
