//! draft-20 control messages: the request-stream codec with the draft-20 dialect. The
//! property tests of `d22_control.rs` round-trip every message through it
//! (`draft_20_round_trip`); these vectors pin the two places draft-20 differs from draft-22 on
//! the wire, laid out by hand from draft-20 §5.1.2, §10.2.9 and §10.2.20, with values large
//! enough that the two forms cannot coincide (with one-byte fields, a draft-20 Length equals
//! the field count, which equals the draft-22 filter type).

mod support;

use bytes::Bytes;
use support::vi64::B;
use wire::control::message_type as mt;
use wire::dialect::{D20, D22};
use wire::model::*;
use wire::{DecodeError, ErrorCode, Version};

const CLIENT_CTL: DecodeContext = DecodeContext::control(Role::Client);
const CLIENT_REQ: DecodeContext = DecodeContext::request(Role::Client, RequestId(4));

fn decode20(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    wire::control::decode_message(&D20, buf, ctx)
}

#[track_caller]
fn assert_violation(r: Result<(Message, usize), DecodeError>) {
    assert!(matches!(r, Err(DecodeError::Invalid { code: ErrorCode::ProtocolViolation, .. })), "{r:?}");
}

fn encode20(m: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    wire::control::encode_message(&D20, m, &mut out).expect("encodes");
    out
}

/// SUBSCRIBE for ("a") "b", Request ID 2, whose only parameter is LOCATION_FILTER with the
/// value bytes `filter`.
fn subscribe_with_filter(filter: &[u8]) -> Vec<u8> {
    B::new().int(2).int(1).lp(b"a").lp(b"b").int(1).int(0x21).raw(filter).frame(mt::SUBSCRIBE)
}

fn subscribe(f: LocationFilter) -> Message {
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::from_static(b"b") };
    let params = Parameters { location_filter: Some(f), ..Parameters::default() };
    Message::Subscribe(Subscribe { request_id: RequestId(2), track, params })
}

/// Each Location Filter form (draft-20 §5.1.2): a Length, then as many vi64 fields as the
/// filter needs; the count says which filter it is.
#[test]
fn location_filter_is_length_and_counted_fields() {
    let start = Location::new(300, 7);
    let cases = [
        // None: no fields.
        (LocationFilter::None, B::new().int(0)),
        // Relative start: StartGroupDelta.
        (LocationFilter::RelativeStart { groups_back: 200 }, B::new().lp(&B::new().int(200).0)),
        // Absolute start: StartGroup, StartObject.
        (LocationFilter::AbsoluteStart { start }, B::new().lp(&B::new().int(300).int(7).0)),
        // Next object: two zeros.
        (LocationFilter::NextObject, B::new().lp(&[0, 0])),
        // To the end of a group: EndGroupDelta relative to StartGroup.
        (
            LocationFilter::AbsoluteStartGroupEnd { start, end_group: 500 },
            B::new().lp(&B::new().int(300).int(7).int(200).0),
        ),
        // To an object: EndObject.
        (
            LocationFilter::AbsoluteRange { start, end: Location::new(500, 900) },
            B::new().lp(&B::new().int(300).int(7).int(200).int(900).0),
        ),
    ];
    for (filter, value) in cases {
        let buf = subscribe_with_filter(&value.0);
        assert_eq!(decode20(&buf, &CLIENT_CTL), Ok((subscribe(filter), buf.len())), "{filter:?}");
        assert_eq!(encode20(&subscribe(filter)), buf, "{filter:?}");
    }
}

/// An open filter from {0, 0} cannot be written as two zeros (that is the next object): it
/// goes as no fields, the unfiltered subscription it selects the same objects as.
#[test]
fn absolute_start_at_zero_is_written_unfiltered() {
    let zero = subscribe(LocationFilter::AbsoluteStart { start: Location::new(0, 0) });
    let buf = encode20(&zero);
    assert_eq!(buf, subscribe_with_filter(&[0]));
    assert_eq!(decode20(&buf, &CLIENT_CTL), Ok((subscribe(LocationFilter::None), buf.len())));
}

/// A filter value with a fifth field, or a field crossing its Length, closes the session; so
/// does a draft-22 typed filter read by a draft-20 peer where its type byte is not a Length
/// that fits (draft-22's Next Object, `05`, read as a Length of five).
#[test]
fn malformed_filters_are_violations() {
    let five = B::new().lp(&B::new().int(1).int(2).int(3).int(4).int(5).0);
    let crossing = B::new().int(1).raw(&B::new().int(300).0);
    for value in [five.0, crossing.0, vec![0x05]] {
        assert_violation(decode20(&subscribe_with_filter(&value), &CLIENT_CTL));
    }
}

/// The same SUBSCRIBE is different bytes at draft-20 and draft-22, and each decodes only as
/// its own draft's (the Location Filter Type byte of draft-22 is no Length in draft-20).
#[test]
fn draft_20_and_draft_22_filters_differ() {
    let msg = subscribe(LocationFilter::AbsoluteStart { start: Location::new(300, 7) });
    let mut at22 = Vec::new();
    wire::control::encode_message(&D22, &msg, &mut at22).expect("encodes");
    let at20 = encode20(&msg);
    assert_ne!(at20, at22);
    assert_ne!(decode20(&at22, &CLIENT_CTL).map(|(m, _)| m), Ok(msg.clone()));
    assert_eq!(Version::Draft20.decode_message(&at20, &CLIENT_CTL), Ok((msg, at20.len())));
}

/// TRACK_NAMESPACE_PREFIX (0x34) in REQUEST_UPDATE is a length-prefixed value in draft-20
/// (§10.2 lists no bare Track Namespace encoding); draft-22 writes the namespace bare.
#[test]
fn namespace_prefix_has_a_length() {
    let ns = B::new().int(2).lp(b"live").lp(b"cams");
    let buf = B::new().int(6).int(1).int(0x34).lp(&ns.0).frame(mt::REQUEST_UPDATE);
    let expected = Message::RequestUpdate(RequestUpdate {
        request_id: RequestId(6),
        existing_request_id: RequestId(4),
        params: Parameters {
            track_namespace_prefix: Some(TrackNamespace::from_strs(&["live", "cams"])),
            ..Parameters::default()
        },
    });
    assert_eq!(decode20(&buf, &CLIENT_REQ), Ok((expected.clone(), buf.len())));
    assert_eq!(encode20(&expected), buf);
    let mut at22 = Vec::new();
    wire::control::encode_message(&D22, &expected, &mut at22).expect("encodes");
    assert_eq!(at22.len() + 1, buf.len(), "draft-22: the same without the Length");
}

/// draft-20 FETCH has no Fetch Type (removed in draft-20): the Request ID, the track, then the
/// parameters, the range in LOCATION_FILTER; FETCH_OK's End Location is inclusive; GOAWAY has
/// no Request ID; PUBLISH_STATE_NOTIFY exists; 0x1E (draft-18's PUBLISH_OK) is reserved.
#[test]
fn draft_20_shares_draft_22_messages() {
    let range = B::new().lp(&B::new().int(300).int(0).int(2).int(9).0);
    let fetch = B::new().int(8).int(1).lp(b"a").lp(b"b").int(1).int(0x21).raw(&range.0).frame(mt::FETCH);
    let (m, _) = decode20(&fetch, &CLIENT_CTL).expect("decodes");
    let Message::Fetch(f) = m else { panic!("{m:?}") };
    assert!(matches!(f.kind, FetchKind::Standalone { .. }));
    assert_eq!(
        f.params.location_filter,
        Some(LocationFilter::AbsoluteRange { start: Location::new(300, 0), end: Location::new(302, 9) })
    );
    // End Of Track, End Location, no parameters, no Track Properties (they fill the rest).
    let ok = B::new().raw(&[0]).int(302).int(9).int(0).frame(mt::FETCH_OK);
    let (m, _) = decode20(&ok, &CLIENT_REQ).expect("decodes");
    let Message::FetchOk(ok) = m else { panic!("{m:?}") };
    assert_eq!(ok.end_location, FetchEnd::Object(Location::new(302, 9)));
    let goaway = GoAway { new_session_uri: Bytes::new(), timeout_ms: 5, request_id: Some(RequestId(2)) };
    let mut out = Vec::new();
    assert!(wire::control::encode_message(&D20, &Message::GoAway(goaway), &mut out).is_err());
    let notify = B::new().int(0).frame(mt::PUBLISH_STATE_NOTIFY);
    assert!(matches!(decode20(&notify, &CLIENT_REQ), Ok((Message::PublishStateNotify(_), _))));
    let old_publish_ok = B::new().int(0).int(0).frame(mt::PUBLISH_OK);
    assert_violation(decode20(&old_publish_ok, &CLIENT_REQ));
}

/// The ALPN and the data plane: `moqt-20`, and draft-22's data streams (a subgroup header
/// written at draft-20 is draft-22's bytes).
#[test]
fn alpn_and_data_plane() {
    assert_eq!(Version::from_alpn(b"moqt-20"), Some(Version::Draft20));
    let h = SubgroupHeader {
        track_alias: TrackAlias(9),
        group_id: 3,
        subgroup_id: SubgroupId::Zero,
        publisher_priority: Some(1),
        has_properties: false,
        end_of_group: false,
        first_object: false,
    };
    let (mut at20, mut at22) = (Vec::new(), Vec::new());
    Version::Draft20.encode_subgroup_header(&h, &mut at20).expect("encodes");
    Version::Draft22.encode_subgroup_header(&h, &mut at22).expect("encodes");
    assert_eq!(at20, at22);
}
