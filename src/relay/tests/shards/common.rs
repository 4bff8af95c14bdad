//! Shared by the area files: the drafts and their combinations, names, the messages and objects
//! the tests' clients write, and assertions on what they receive.

use bytes::Bytes;
use session::{DataObject, Event, StreamId};
use wire::code;
use wire::model::{
    Fetch, FetchItem, FetchKind, FetchOk, FullTrackName, GroupOrder, KvValue, Location, LocationFilter,
    Message, ObjectStatus, Parameters, Properties, Publish, PublishDone, RequestError, RequestId,
    SetupOptions, SubgroupHeader, SubgroupId, SubgroupObject, Subscribe, SubscribeOk, TrackAlias,
    TrackNamespace,
};
use wire::Version;

use crate::harness::SeenStream;

pub const D16: Version = Version::Draft16;

pub const D18: Version = Version::Draft18;

pub const D20: Version = Version::Draft20;

pub const D22: Version = Version::Draft22;

/// Whether `v` has draft-20's message set and parameter table (draft-20 and draft-22 differ on
/// the control wire only in the form of two parameter values, which the relay never sees).
pub fn since20(v: Version) -> bool {
    matches!(v, D20 | D22)
}

/// Every draft the relay speaks.
pub const DRAFTS: [Version; 4] = [D16, D18, D20, D22];

/// (publisher draft, subscriber draft): every pair, so a publisher on any draft reaches
/// subscribers on any.
pub const COMBOS: [(Version, Version); 16] = [
    (D16, D16),
    (D18, D18),
    (D20, D20),
    (D22, D22),
    (D16, D18),
    (D16, D20),
    (D16, D22),
    (D18, D16),
    (D18, D20),
    (D18, D22),
    (D20, D16),
    (D20, D18),
    (D20, D22),
    (D22, D16),
    (D22, D18),
    (D22, D20),
];

pub const PROTOCOL_VIOLATION: u64 = 0x3;

/// The Track Alias publishers in these tests choose (the relay replaces it with its own).
pub const PUB_ALIAS: TrackAlias = TrackAlias(77);

pub fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields)
}

pub fn track(fields: &[&str], name: &str) -> FullTrackName {
    FullTrackName { namespace: ns(fields), name: Bytes::copy_from_slice(name.as_bytes()) }
}

pub fn subscribe_msg(rid: RequestId, track: &FullTrackName, filter: Option<LocationFilter>) -> Message {
    Message::Subscribe(Subscribe {
        request_id: rid,
        track: track.clone(),
        params: Parameters { location_filter: filter, ..Default::default() },
    })
}

pub fn track_properties() -> Properties {
    let mut p = Properties::new();
    p.push(0x40, KvValue::Int(1234));
    p
}

/// The one SUBSCRIBE_OK client `c` got for `rid` (and no other message).
pub fn subscribe_ok(msgs: &[Message], rid: RequestId) -> SubscribeOk {
    let [Message::SubscribeOk(ok)] = msgs else { panic!("expected SUBSCRIBE_OK for {rid:?}: {msgs:?}") };
    assert_eq!(ok.request_id, rid);
    ok.clone()
}

/// The one REQUEST_ERROR among `msgs`.
pub fn request_error(msgs: &[Message]) -> RequestError {
    let [Message::RequestError(e)] = msgs else { panic!("expected REQUEST_ERROR: {msgs:?}") };
    e.clone()
}

pub fn publish_done(msgs: &[Message]) -> PublishDone {
    let [Message::PublishDone(d)] = msgs else { panic!("expected PUBLISH_DONE: {msgs:?}") };
    d.clone()
}

/// A subgroup header as the publisher writes it. A draft-18 or draft-22 publisher sets
/// FIRST_OBJECT (its streams start at the subgroup's first object).
pub fn header(v: Version, alias: TrackAlias, group: u64, subgroup: u64) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: alias,
        group_id: group,
        subgroup_id: SubgroupId::Explicit(subgroup),
        publisher_priority: Some(9),
        has_properties: true,
        end_of_group: false,
        first_object: v != D16,
    }
}

/// Object `id` with a payload derived from its location (every object distinct).
pub fn object(group: u64, id: u64) -> (SubgroupObject, Bytes) {
    let payload = Bytes::from(format!("g{group}-o{id}-{}", "x".repeat((id as usize * 37) % 200)));
    let mut properties = Properties::new();
    if id.is_multiple_of(2) {
        properties.push(0x42, KvValue::Int(group * 100 + id));
        properties.push(0x43, KvValue::Bytes(Bytes::from_static(b"meta")));
    }
    (
        SubgroupObject {
            object_id: id,
            properties,
            payload_len: payload.len() as u64,
            status: ObjectStatus::Normal,
        },
        payload,
    )
}

/// The PUBLISH_DONE a publisher sends for `rid`.
pub fn done_msg(rid: RequestId, stream_count: u64) -> Message {
    Message::PublishDone(PublishDone {
        request_id: rid,
        status_code: code::TRACK_ENDED,
        stream_count,
        reason: Bytes::from_static(b"bye"),
    })
}

/// What a subscriber of `alias` (draft `sv`) should see for a stream the publisher (draft
/// `pv`) wrote with `h`; `from_first`: the subscriber got the stream from its first object.
pub fn expected_header(
    h: &SubgroupHeader,
    alias: TrackAlias,
    sv: Version,
    from_first: bool,
) -> SubgroupHeader {
    SubgroupHeader { track_alias: alias, first_object: h.first_object && from_first && sv != D16, ..*h }
}

pub fn assert_stream(
    seen: &SeenStream,
    rid: RequestId,
    header: SubgroupHeader,
    objects: &[(SubgroupObject, Bytes)],
    end: Option<Option<u64>>,
) {
    assert_eq!(seen.request_id, rid);
    assert_eq!(seen.header, header);
    let ids = |o: &[(SubgroupObject, Bytes)]| o.iter().map(|o| o.0.object_id).collect::<Vec<_>>();
    assert_eq!(ids(&seen.objects), ids(objects), "objects on stream {}", seen.stream);
    for (got, want) in seen.objects.iter().zip(objects) {
        assert_eq!(got.0, want.0);
        assert_eq!(&got.1[..], &want.1[..], "payload of object {}", want.0.object_id);
    }
    assert_eq!(seen.end, end, "end of stream {}", seen.stream);
}

/// PUBLISH of `track`; a draft-22 publisher also states its GROUP_ORDER (draft-16 and draft-18
/// PUBLISH have no such parameter).
pub fn publish_msg(v: Version, rid: RequestId, track: &FullTrackName, largest: Option<Location>) -> Message {
    let group_order = since20(v).then_some(GroupOrder::Ascending);
    Message::Publish(Publish {
        request_id: rid,
        track: track.clone(),
        track_alias: PUB_ALIAS,
        params: Parameters {
            largest_object: largest,
            forward: Some(true),
            group_order,
            ..Default::default()
        },
        track_properties: Properties::new(),
    })
}

/// The Forward State the relay set for PUBLISH `rid`, from what the publisher got: draft-16
/// PUBLISH_OK carries FORWARD, and so does draft-18's, a REQUEST_OK (§10.5); draft-20 and
/// draft-22 PUBLISH_OK (a REQUEST_OK) cannot, so the PUBLISH's own state (1 in these tests) holds unless
/// a REQUEST_UPDATE follows it.
pub fn publish_answer(pv: Version, msgs: &[Message], rid: RequestId) -> bool {
    match (pv, msgs) {
        (D16, [Message::PublishOk(ok)]) if ok.request_id == rid => ok.params.forward.unwrap_or(true),
        (D18, [Message::RequestOk(ok)]) if ok.request_id == rid => ok.params.forward.unwrap_or(true),
        (D20 | D22, [Message::RequestOk(ok)]) if ok.request_id == rid => true,
        (D20 | D22, [Message::RequestOk(ok), Message::RequestUpdate(u)])
            if ok.request_id == rid && u.existing_request_id == rid =>
        {
            u.params.forward.unwrap_or(true)
        }
        _ => panic!("expected PUBLISH_OK for {rid:?}: {msgs:?}"),
    }
}

/// One fetch stream as a client saw it: its items (End of Range markers with an empty payload)
/// and how it ended.
#[derive(Debug)]
pub struct SeenFetch {
    pub request_id: RequestId,
    pub items: Vec<(FetchItem, Bytes)>,
    pub end: Option<Option<u64>>,
}

pub fn fetch_streams(events: &[Event]) -> Vec<SeenFetch> {
    let mut out: Vec<(StreamId, SeenFetch)> = Vec::new();
    for e in events {
        match e {
            Event::Object { stream, request_id, object: DataObject::Fetch(item), payload } => {
                match out.iter_mut().find(|(id, _)| id == stream) {
                    Some((_, f)) => f.items.push((item.clone(), payload.clone())),
                    None => out.push((
                        *stream,
                        SeenFetch {
                            request_id: *request_id,
                            items: vec![(item.clone(), payload.clone())],
                            end: None,
                        },
                    )),
                }
            }
            Event::DataStreamEnd { stream, reset } => {
                if let Some((_, f)) = out.iter_mut().find(|(id, _)| id == stream) {
                    f.end = Some(*reset);
                }
            }
            _ => {}
        }
    }
    out.into_iter().map(|(_, f)| f).collect()
}

/// The objects of a fetch stream: (group, object) and payload; asserts each object's header
/// fields match what the publisher sent (`object(g, o)`, Subgroup ID `subgroup`).
pub fn fetched_objects(f: &SeenFetch, subgroup: u64) -> Vec<(u64, u64)> {
    f.items
        .iter()
        .filter_map(|(item, payload)| match item {
            FetchItem::Object(o) => {
                let (want, want_payload) = object(o.location.group, o.location.object);
                assert_eq!(&payload[..], &want_payload[..], "payload of {:?}", o.location);
                assert_eq!(o.properties, want.properties, "properties of {:?}", o.location);
                assert_eq!((o.subgroup_id, o.publisher_priority), (Some(subgroup), 9));
                Some((o.location.group, o.location.object))
            }
            FetchItem::EndOfRange { .. } => None,
        })
        .collect()
}

pub fn locations(groups: std::ops::Range<u64>, objects: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    groups.flat_map(|g| objects.clone().map(move |o| (g, o))).collect()
}

pub fn fetch_msg(rid: RequestId, kind: FetchKind, filter: Option<LocationFilter>) -> Message {
    Message::Fetch(Fetch {
        request_id: rid,
        kind,
        params: Parameters { location_filter: filter, ..Default::default() },
    })
}

pub fn fetch_ok(msgs: &[Message], rid: RequestId) -> FetchOk {
    let [Message::FetchOk(ok)] = msgs else { panic!("expected FETCH_OK for {rid:?}: {msgs:?}") };
    assert_eq!(ok.request_id, rid);
    ok.clone()
}

pub fn request_ok(msgs: &[Message], ctx: &str) -> wire::model::RequestOk {
    let [Message::RequestOk(ok)] = msgs else { panic!("{ctx}: expected REQUEST_OK: {msgs:?}") };
    ok.clone()
}

/// PUBLISH of `track` with Track Alias `alias`.
pub fn publish_as(v: Version, rid: RequestId, track: &FullTrackName, alias: TrackAlias) -> Message {
    let mut m = publish_msg(v, rid, track, None);
    if let Message::Publish(p) = &mut m {
        p.track_alias = alias;
    }
    m
}

/// SETUP options of a parent relay that names moq-edge node `node`.
pub fn parent_setup(node: u64) -> SetupOptions {
    SetupOptions { implementation: Some(relay::links::implementation(node)), ..Default::default() }
}
