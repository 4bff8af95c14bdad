//! Arbitrary input: never a panic, bounded output, and the same result however it is split.

use std::time::Instant;

use proptest::prelude::*;

use super::{client_record, params_frame, small_config, FRAMINGS, VERSIONS};
use crate::{Connection, Framing, Role, Version};

/// Feeds `input` to a fresh server in the given pieces; returns its output and final state.
fn run(version: Version, framing: Framing, input: &[u8], cuts: &[usize]) -> (Vec<u8>, bool, Option<u64>) {
    let now = Instant::now();
    let config = small_config();
    let mut s = Connection::new(version, framing, Role::Server, &config, now);
    let mut out = Vec::new();
    let mut at = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(input.len());
    for end in ends {
        if end < at {
            continue;
        }
        let _ = s.recv(&input[at..end], now);
        at = end;
        assert!(s.out.len() <= config.max_output + (64 << 10) + 4096, "output unbounded");
        let _ = s.stream_readable_next();
        if let Some(b) = s.take_output(usize::MAX) {
            out.extend_from_slice(&b);
        }
    }
    (out, s.is_closed(), s.local_error().map(|e| e.error_code))
}

fn arb_input() -> impl Strategy<Value = (usize, usize, bool, Vec<u8>, Vec<usize>)> {
    (
        0..3usize,
        0..2usize,
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..600),
        proptest::collection::vec(any::<usize>(), 0..8),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes(input in arb_input()) {
        let (v, f, with_params, tail, cuts) = input;
        let (version, framing) = (VERSIONS[v], FRAMINGS[f]);
        // Half the cases start with valid parameters, to get past the first frame.
        let mut bytes = if with_params {
            client_record(version, framing, &params_frame(version, &small_config()))
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(&tail);
        let whole = run(version, framing, &bytes, &[]);
        let split = run(version, framing, &bytes, &cuts);
        prop_assert_eq!(whole, split);
    }

    /// Valid records of arbitrary frame bytes (masked, framed), so the frame decoder sees them.
    #[test]
    fn arbitrary_frames(v in 0..3usize, f in 0..2usize, frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..6)) {
        let (version, framing) = (VERSIONS[v], FRAMINGS[f]);
        let mut bytes = client_record(version, framing, &params_frame(version, &small_config()));
        for fr in &frames {
            bytes.extend_from_slice(&client_record(version, framing, fr));
        }
        let whole = run(version, framing, &bytes, &[]);
        let bytewise: Vec<usize> = (0..bytes.len()).collect();
        let split = run(version, framing, &bytes, &bytewise);
        prop_assert_eq!(whole, split);
    }
}
