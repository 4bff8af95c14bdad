//! draft-22 data plane: stream headers, subgroup objects, fetch items and datagrams from
//! arbitrary bytes never panic and never claim more bytes than given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_edge::wire::d22::data::{decode_datagram, decode_uni_stream_header, FetchReader, SubgroupReader};
use moq_edge::wire::model::{Datagram, FetchItem, GroupOrder, UniStreamHeader};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else { return };
    if selector & 1 == 1 {
        if let Ok(Datagram::Object { payload_offset, .. }) = decode_datagram(buf) {
            assert!(payload_offset <= buf.len());
        }
        return;
    }
    let Ok((header, mut at)) = decode_uni_stream_header(buf) else { return };
    assert!(at <= buf.len());
    match header {
        UniStreamHeader::Subgroup(h) => {
            let mut r = SubgroupReader::new(&h);
            while let Ok((obj, used)) = r.decode(&buf[at..]) {
                at = at.saturating_add(used).saturating_add(usize::try_from(obj.payload_len).unwrap_or(usize::MAX));
                if at >= buf.len() {
                    break;
                }
            }
        }
        UniStreamHeader::Fetch { .. } => {
            let order = if selector & 2 == 0 { GroupOrder::Ascending } else { GroupOrder::Descending };
            let mut r = FetchReader::new(order);
            while let Ok((item, used)) = r.decode(&buf[at..]) {
                let payload = match item {
                    FetchItem::Object(o) => usize::try_from(o.payload_len).unwrap_or(usize::MAX),
                    FetchItem::EndOfRange { .. } => 0,
                };
                at = at.saturating_add(used).saturating_add(payload);
                if at >= buf.len() {
                    break;
                }
            }
        }
        UniStreamHeader::Control | UniStreamHeader::Padding => {}
    }
});
