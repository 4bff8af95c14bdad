//! draft-22 control messages: arbitrary bytes never panic the decoder; whatever decodes
//! re-encodes and decodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_edge::wire::d22::control::{decode_message, encode_message};
use moq_edge::wire::model::{DecodeContext, RequestId, Role};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else { return };
    let sender = if selector & 1 == 0 { Role::Client } else { Role::Server };
    let ctx = if selector & 2 == 0 {
        DecodeContext::control(sender)
    } else {
        DecodeContext::request(sender, RequestId(u64::from(selector >> 2)))
    };
    if let Ok((msg, used)) = decode_message(buf, &ctx) {
        assert!(used <= buf.len());
        let mut out = Vec::new();
        if encode_message(&msg, &mut out).is_ok() {
            let (again, n) = decode_message(&out, &ctx).expect("re-encoded message decodes");
            assert_eq!(n, out.len());
            assert_eq!(again, msg);
        }
    }
});
