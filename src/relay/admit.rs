//! What a request must pass before a role sees it: the right its namespace needs (tokens),
//! admission while the core is over its load threshold, and what a REQUEST_UPDATE may change.

use super::*;
use crate::msg::ConnId;

/// The right a request needs, on which namespace (a joining FETCH has the right of the
/// subscription it joins; responses and updates need none).
pub(super) fn needs_right(
    msg: &Message,
) -> Option<(RequestId, &Parameters, &wire::model::TrackNamespace, Right)> {
    use wire::model::FetchKind;
    Some(match msg {
        Message::PublishNamespace(m) => (m.request_id, &m.params, &m.namespace, Right::Publish),
        Message::Publish(m) => (m.request_id, &m.params, &m.track.namespace, Right::Publish),
        Message::Subscribe(m) | Message::TrackStatus(m) => {
            (m.request_id, &m.params, &m.track.namespace, Right::Subscribe)
        }
        Message::Fetch(m) => match &m.kind {
            FetchKind::Standalone { track } => (m.request_id, &m.params, &track.namespace, Right::Subscribe),
            _ => return None,
        },
        // Namespace subscriptions: `discovery_right`.
        _ => return None,
    })
}

/// A namespace subscription's request, parameters and prefix (SUBSCRIBE_NAMESPACE,
/// SUBSCRIBE_TRACKS): it needs the subscribe right somewhere under its prefix, and sees only
/// what its tokens grant (`auth::SessionAuth::authorize_discovery`).
pub(super) fn discovery_right(
    msg: &Message,
) -> Option<(RequestId, &Parameters, &wire::model::TrackNamespace)> {
    match msg {
        Message::SubscribeNamespace(m) => Some((m.request_id, &m.params, &m.prefix)),
        Message::SubscribeTracks(m) => Some((m.request_id, &m.params, &m.prefix)),
        _ => None,
    }
}

/// A request was refused (and answered, or its session closed).
#[derive(Debug)]
pub(super) struct Refused;

/// Why a REQUEST_UPDATE was not applied.
#[derive(Debug)]
pub(crate) enum UpdateError {
    /// A parameter not valid for the request: the session is closed (PROTOCOL_VIOLATION).
    Invalid(&'static str),
    /// REQUEST_ERROR with this code (a subscription is then ended with UPDATE_FAILED).
    Refused(RequestErrorCode, &'static str),
}

/// The request `msg` starts, when it carries range filters (SUBSCRIBE, FETCH,
/// SUBSCRIBE_TRACKS; draft-22 §3.3.2).
pub(super) fn range_filtered(msg: &Message) -> Option<RequestId> {
    let (rid, params) = match msg {
        Message::Subscribe(m) => (m.request_id, &m.params),
        Message::Fetch(m) => (m.request_id, &m.params),
        Message::SubscribeTracks(m) => (m.request_id, &m.params),
        _ => return None,
    };
    params.range_filters.iter().any(|f| f.set.is_some()).then_some(rid)
}

/// Checks that `params` carries only parameters named in `allowed` (draft-22 §9.5 lists
/// them per request kind; draft-16 requests take the same subsets).
pub(crate) fn update_allows(params: &Parameters, allowed: &[&str]) -> Result<(), UpdateError> {
    let present: [(&str, bool); 16] = [
        ("AUTHORIZATION_TOKEN", !params.auth_tokens.is_empty()),
        ("OBJECT_DELIVERY_TIMEOUT", params.object_delivery_timeout.is_some()),
        ("RENDEZVOUS_TIMEOUT", params.rendezvous_timeout.is_some()),
        ("SUBGROUP_DELIVERY_TIMEOUT", params.subgroup_delivery_timeout.is_some()),
        ("EXPIRES", params.expires.is_some()),
        ("LARGEST_OBJECT", params.largest_object.is_some()),
        ("FILL_TIMEOUT", params.fill_timeout.is_some()),
        ("FORWARD", params.forward.is_some()),
        ("SUBSCRIBER_PRIORITY", params.subscriber_priority.is_some()),
        ("LOCATION_FILTER", params.location_filter.is_some()),
        ("GROUP_ORDER", params.group_order.is_some()),
        ("FILL_PARAMETERS", params.fill_parameters.is_some()),
        ("RANGE_FILTER", !params.range_filters.is_empty()),
        ("NEW_GROUP_REQUEST", params.new_group_request.is_some()),
        ("TRACK_NAMESPACE_PREFIX", params.track_namespace_prefix.is_some()),
        ("INCLUDE_PROPERTIES", params.include_properties.is_some()),
    ];
    match present.iter().find(|(name, on)| *on && !allowed.contains(name)) {
        Some(_) => Err(UpdateError::Invalid("a parameter this request cannot take")),
        None => Ok(()),
    }
}

impl RelayShard {
    /// The request `msg` makes, when it is new downstream work the core refuses because it is
    /// over its admission threshold (counted).
    pub(super) fn admission_refused(&mut self, msg: &Message) -> Option<RequestId> {
        if !self.over_load() {
            return None;
        }
        let s = &mut self.cx.stats;
        let (rid, counter) = match msg {
            Message::Subscribe(m) => (m.request_id, &mut s.admission_subscribes),
            Message::Fetch(m) => (m.request_id, &mut s.admission_fetches),
            Message::SubscribeNamespace(m) => (m.request_id, &mut s.admission_namespaces),
            Message::SubscribeTracks(m) => (m.request_id, &mut s.admission_namespaces),
            _ => return None,
        };
        *counter += 1;
        Some(rid)
    }

    /// Whether session `conn` may make request `rid` needing `right` on `namespace`: always
    /// in open mode (`Ok(None)`); otherwise a token (SETUP's or the request's) must grant it,
    /// and `Ok(Some(t))` says until when (the shard's clock). Answers REQUEST_ERROR
    /// (UNAUTHORIZED, MALFORMED_AUTH_TOKEN, EXPIRED_AUTH_TOKEN) or closes the session (token
    /// alias misuse) when not.
    pub(super) fn authorized(
        &mut self,
        conn: ConnId,
        rid: RequestId,
        params: &Parameters,
        namespace: &wire::model::TrackNamespace,
        right: Right,
    ) -> Result<Option<Instant>, Refused> {
        if self.sessions.is_link(conn) {
            return Ok(None); // our configured parent: trusted like the configuration
        }
        let checked = self.sessions.check_auth(&self.cx, conn, params, namespace, right);
        self.refuse_unless(conn, rid, checked)
    }

    /// Whether namespace subscription `rid` of session `conn` under `prefix` is authorized
    /// (`Ok(None)`: open mode, or a link), until when, and what it may see; otherwise it is
    /// refused as [`RelayShard::authorized`] refuses.
    pub(super) fn authorized_discovery(
        &mut self,
        conn: ConnId,
        rid: RequestId,
        params: &Parameters,
        prefix: &wire::model::TrackNamespace,
    ) -> Result<Option<(Instant, auth::Scope)>, Refused> {
        if self.sessions.is_link(conn) {
            return Ok(None);
        }
        let checked = self.sessions.check_discovery(&self.cx, conn, params, prefix);
        self.refuse_unless(conn, rid, checked)
    }

    /// `checked`'s value, or its refusal carried out: REQUEST_ERROR, or the session closed.
    fn refuse_unless<T>(
        &mut self,
        conn: ConnId,
        rid: RequestId,
        checked: Result<T, Denied>,
    ) -> Result<T, Refused> {
        match checked {
            Ok(v) => Ok(v),
            Err(Denied::Request(code, why)) => {
                self.sessions.answer_error(conn, rid, code, why, true);
                Err(Refused)
            }
            Err(Denied::Session(code, why)) => {
                self.sessions.close(conn, code, why);
                Err(Refused)
            }
        }
    }
}
