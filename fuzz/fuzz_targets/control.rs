//! Control messages of every draft: arbitrary bytes never panic the decoder; whatever decodes
//! re-encodes and decodes to the same message. The first byte picks draft, role and stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_edge::wire::model::{DecodeContext, Message, RequestId, Role};
use moq_edge::wire::Version;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else { return };
    let version = Version::ALL[usize::from(selector) % Version::ALL.len()];
    let mode = selector / Version::ALL.len() as u8;
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
});
