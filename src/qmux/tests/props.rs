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

/// One well-formed frame with small field values, so that stream state is reached: mostly the
/// client's streams, with STREAM offsets following what was sent on the stream unless `off`
/// says otherwise (1 in 64).
fn frame_bytes(spec: (u8, u64, u64, u64, bool), sent: &mut std::collections::HashMap<u64, u64>) -> Vec<u8> {
    use crate::frame::{self, put_stream, put_varints};
    let (kind, raw_id, off, len, fin) = spec;
    let id = if raw_id < 20 { (raw_id / 2 % 4) * 4 + (raw_id % 2) * 2 } else { raw_id - 20 };
    let mut b = Vec::new();
    match kind {
        0..=3 => {
            let at = sent.entry(id).or_default();
            let offset = if off % 64 == 0 { off } else { *at };
            let n = len * 50;
            put_stream(&mut b, id, offset, &vec![7; n as usize], fin);
            *at = offset + n;
        }
        4 => put_varints(&mut b, frame::RESET_STREAM, &[id, len, *sent.get(&id).unwrap_or(&0)]),
        5 => put_varints(&mut b, frame::STOP_SENDING, &[id, len]),
        6 => put_varints(&mut b, frame::MAX_STREAM_DATA, &[id, off * 100]),
        7 => put_varints(&mut b, frame::MAX_STREAMS_UNI - (id & 1), &[len]),
        8 => put_varints(&mut b, frame::MAX_DATA, &[off * 1000]),
        _ => frame::put_bytes(&mut b, frame::DATAGRAM_LEN, &vec![1; len as usize]),
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Well-formed frames in any order, the application reading, sending and shutting streams
    /// down in between: never a panic, and a failed `recv` has closed the connection.
    #[test]
    fn arbitrary_stream_frames(
        v in 0..3usize,
        f in 0..2usize,
        specs in proptest::collection::vec(((0..10u8, 0..26u64, 0..3000u64, 0..40u64, any::<bool>()), 0..6u8), 0..60),
    ) {
        let (version, framing) = (VERSIONS[v], FRAMINGS[f]);
        let now = Instant::now();
        let mut s = Connection::new(version, framing, Role::Server, &small_config(), now);
        let _ = s.recv(&client_record(version, framing, &params_frame(version, &small_config())), now);
        let mut buf = [0u8; 700];
        let mut sent = std::collections::HashMap::new();
        for (spec, app) in specs {
            let fr = frame_bytes(spec, &mut sent);
            let r = s.recv(&client_record(version, framing, &fr), now);
            prop_assert!(r.is_ok() || s.local_error().is_some() || s.is_closed());
            let id = u64::from(app) * 3 % 16;
            match app {
                0 => { let _ = s.stream_send(id, &[1; 3000], spec.4); }
                1 => { let _ = s.stream_shutdown(spec.1, crate::Shutdown::Read, 1); }
                2 => { let _ = s.stream_shutdown(spec.1, crate::Shutdown::Write, 2); }
                3 => { let _ = s.take_output(5000); }
                _ => {}
            }
            while let Some(id) = s.stream_readable_next() {
                let _ = s.stream_recv(id, &mut buf);
            }
            let _ = s.stream_capacity(id);
            let _ = s.dgram_recv(&mut buf);
        }
    }
}
