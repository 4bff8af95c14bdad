//! The data plane of every draft: stream headers, subgroup objects, fetch items and datagrams
//! from arbitrary bytes never panic and never claim more bytes than given; decoded subgroup
//! objects and fetch items re-encode to the same values. The first byte picks draft and mode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_edge::wire::d16::data::Draft16;
use moq_edge::wire::d18::data::Draft18;
use moq_edge::wire::d22::data::Draft22;
use moq_edge::wire::data::{
    decode_datagram, decode_uni_stream_header, DataRules, FetchReader, FetchWriter, SubgroupReader,
    SubgroupWriter,
};
use moq_edge::wire::model::{Datagram, FetchItem, GroupOrder, UniStreamHeader};

fn payload(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

fn run<R: DataRules>(selector: u8, buf: &[u8]) {
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

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else { return };
    // The low bit of `mode` is not read by `run`, so the three drafts share its bits 1 and 2.
    let mode = (selector / 3) << 1;
    match selector % 3 {
        0 => run::<Draft16>(mode, buf),
        1 => run::<Draft18>(mode, buf),
        _ => run::<Draft22>(mode, buf),
    }
});
