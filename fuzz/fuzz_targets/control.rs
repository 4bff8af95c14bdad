//! Control messages of every draft: arbitrary bytes never panic the decoder; whatever decodes
//! re-encodes and decodes to the same message. The first byte picks draft, role and stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_edge::wire::model::{DecodeContext, RequestId, Role};
use moq_edge::wire::Version;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else { return };
    let version = if selector & 1 == 0 { Version::Draft16 } else { Version::Draft22 };
    let sender = if selector & 2 == 0 { Role::Client } else { Role::Server };
    let ctx = if selector & 4 == 0 {
        DecodeContext::control(sender)
    } else {
        DecodeContext::request(sender, RequestId(u64::from(selector >> 3)))
    };
    if let Ok((msg, used)) = version.decode_message(buf, &ctx) {
        assert!(used <= buf.len());
        let mut out = Vec::new();
        if version.encode_message(&msg, &mut out).is_ok() {
            let (again, n) = version.decode_message(&out, &ctx).expect("re-encoded message decodes");
            assert_eq!(n, out.len());
            assert_eq!(again, msg);
        }
    }
});
