//! Criterion micro-benchmarks of the wire codec: subgroup object headers (the per-object hot
//! path) and a SUBSCRIBE (the per-request path), drafts 16 and 22. Figures: bench/README.md.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use moq_edge::wire::model::*;
use moq_edge::wire::{d16, d22, Version};

const OBJECTS: usize = 1000;
const PAYLOAD: usize = 1200;

fn header() -> SubgroupHeader {
    SubgroupHeader {
        track_alias: TrackAlias(7),
        group_id: 1234,
        subgroup_id: SubgroupId::Explicit(0),
        publisher_priority: Some(128),
        has_properties: false,
        end_of_group: false,
        first_object: false,
    }
}

fn object(id: u64) -> SubgroupObject {
    SubgroupObject {
        object_id: id,
        properties: Properties::new(),
        payload_len: PAYLOAD as u64,
        status: ObjectStatus::Normal,
    }
}

fn subscribe() -> Message {
    Message::Subscribe(Subscribe {
        request_id: RequestId(42),
        track: FullTrackName {
            namespace: TrackNamespace::from_strs(&["example.com", "meeting=123", "participant=100"]),
            name: Bytes::from_static(b"video-1080p"),
        },
        params: Parameters {
            subscriber_priority: Some(10),
            group_order: Some(GroupOrder::Ascending),
            forward: Some(true),
            location_filter: Some(LocationFilter::NextObject),
            object_delivery_timeout: Some(2000),
            ..Parameters::default()
        },
    })
}

/// One dialect's entry points, so drafts 16 and 22 run the same benchmark bodies.
macro_rules! dialect_benches {
    ($c:expr, $name:literal, $m:ident, $v:expr) => {{
        let h = header();
        // A stream of OBJECTS object headers, each followed by its payload.
        let mut stream = Vec::new();
        let mut w = $m::data::SubgroupWriter::new(&h);
        for i in 0..OBJECTS as u64 {
            w.encode(&object(i), &mut stream).expect("encodes");
            stream.extend_from_slice(&[0u8; PAYLOAD]);
        }
        let mut g = $c.benchmark_group(concat!("subgroup_object/", $name));
        g.throughput(Throughput::Elements(OBJECTS as u64));
        g.bench_function(BenchmarkId::new("write", OBJECTS), |b| {
            let mut out = Vec::with_capacity(16 * OBJECTS);
            b.iter(|| {
                out.clear();
                let mut w = $m::data::SubgroupWriter::new(&h);
                for i in 0..OBJECTS as u64 {
                    w.encode(black_box(&object(i)), &mut out).expect("encodes");
                }
                black_box(out.len())
            })
        });
        g.bench_function(BenchmarkId::new("parse", OBJECTS), |b| {
            b.iter(|| {
                let mut r = $m::data::SubgroupReader::new(&h);
                let mut at = 0usize;
                let mut n = 0u64;
                while at < stream.len() {
                    let (obj, used) = r.decode(black_box(&stream[at..])).expect("decodes");
                    at += used + obj.payload_len as usize;
                    n += obj.object_id;
                }
                black_box(n)
            })
        });
        g.finish();

        let msg = subscribe();
        let mut encoded = Vec::new();
        $v.encode_message(&msg, &mut encoded).expect("encodes");
        let ctx = DecodeContext::control(Role::Client);
        let mut g = $c.benchmark_group(concat!("subscribe/", $name));
        g.bench_function("write", |b| {
            let mut out = Vec::with_capacity(256);
            b.iter(|| {
                out.clear();
                $v.encode_message(black_box(&msg), &mut out).expect("encodes");
                black_box(out.len())
            })
        });
        g.bench_function("parse", |b| {
            b.iter(|| black_box($v.decode_message(black_box(&encoded), &ctx).expect("decodes")))
        });
        g.finish();
    }};
}

fn benches(c: &mut Criterion) {
    dialect_benches!(c, "d16", d16, Version::Draft16);
    dialect_benches!(c, "d22", d22, Version::Draft22);
}

criterion_group!(wire, benches);
criterion_main!(wire);
