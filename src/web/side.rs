//! The HTTP side doors (README.md "HTTP side doors"), for ordinary web code and for a CDN in
//! front of the relay:
//!
//! - `GET /announced[/PREFIX]`: the namespaces this relay can serve at or below `PREFIX`
//!   (fields separated by `/`, each percent-encoded), as JSON.
//! - `GET /fetch/NAMESPACE/TRACK[?group=N]`: the newest cached group of a track, or group
//!   `N`: its objects' payloads one after the other (a catalog, a thumbnail).
//!
//! Both ask the cores (`host::side_door`). With `auth` other than `open`, both need a token
//! that grants subscribe, as for SUBSCRIBE and FETCH: in the query (`token`, `jwt` or `cat`,
//! as in a WebTransport URL) or as `Authorization: Bearer`. `/announced` then lists only what
//! one of the tokens may subscribe to.

use std::borrow::Cow;
use std::time::Duration;

use auth::Right;
use wire::model::{FullTrackName, TrackNamespace};

use super::http::Response;
use super::Sources;

/// How long a request waits for the cores' answer (then 503).
const WAIT: Duration = Duration::from_secs(2);

/// Fields a path may name at most (a namespace has at most 32, and a track name).
const MAX_FIELDS: usize = 33;

/// The answer for a `/announced…` or `/fetch/…` target, or `None` for another path (or when
/// the side doors are not served here).
pub fn respond(path: &[u8], query: &[u8], head: &[u8], sources: &Sources) -> Option<Response> {
    let door = sources.side_door.as_ref()?;
    let (fetch, rest) = if let Some(rest) = path.strip_prefix(b"/fetch/") {
        (true, rest)
    } else if path == b"/announced" {
        (false, &b""[..])
    } else {
        (false, path.strip_prefix(b"/announced/")?)
    };
    let Some(fields) = segments(rest) else {
        return Some(Response::text(400, "bad path: fields are percent-encoded and not empty\n"));
    };
    let grants = match grants(path, query, head, sources) {
        Ok(g) => g,
        Err(r) => return Some(r),
    };
    let allows = |n: &TrackNamespace| {
        grants.as_ref().is_none_or(|g| g.iter().any(|g| g.allows(n, Right::Subscribe, auth::unix_now())))
    };
    let private = grants.is_some();
    if !fetch {
        let prefix = TrackNamespace::from_strs(&fields);
        let Some(list) = door.namespaces(&prefix, WAIT) else { return Some(busy()) };
        let names: Vec<Vec<String>> = list.iter().filter(|n| allows(n)).map(strings).collect();
        let body = serde_json::json!({ "prefix": fields_text(&fields), "namespaces": names }).to_string();
        let cache = if private { "private, max-age=1" } else { "public, max-age=1" };
        return Some(json(200, body.into_bytes()).with("Cache-Control", cache));
    }
    let Some((name, namespace)) = fields.split_last().filter(|(_, ns)| !ns.is_empty()) else {
        return Some(Response::text(400, "a fetch names a namespace and a track: /fetch/NAMESPACE/TRACK\n"));
    };
    let track = FullTrackName { namespace: TrackNamespace::from_strs(namespace), name: name.clone().into() };
    if !allows(&track.namespace) {
        return Some(Response::text(403, "the token does not grant subscribe on this namespace\n"));
    }
    let group = match query_value(query, "group").map(|g| g.parse::<u64>()) {
        None => None,
        Some(Ok(g)) => Some(g),
        Some(Err(_)) => return Some(Response::text(400, "group=N: a group number\n")),
    };
    let Some(answer) = door.group(&track, group, WAIT) else { return Some(busy()) };
    let Some((g, payloads)) = answer else {
        return Some(Response::text(404, "not in this relay's cache\n"));
    };
    let objects = payloads.len();
    let kind = if name.ends_with(b".json") || name.as_slice() == b"catalog" {
        "application/json"
    } else {
        "application/octet-stream"
    };
    // The newest group may still grow: a CDN keeps it a second; an older one is whole.
    let cache = match (group.is_some(), private) {
        (false, false) => "public, max-age=1",
        (false, true) => "private, max-age=1",
        (true, false) => "public, max-age=3600",
        (true, true) => "private, max-age=3600",
    };
    let mut r = Response::new(200, kind, payloads.concat())
        .with("Cache-Control", cache)
        .with("Access-Control-Allow-Origin", "*")
        .with("Access-Control-Expose-Headers", "X-MoQ-Group, X-MoQ-Objects");
    r = r.with("X-MoQ-Group", g.to_string()).with("X-MoQ-Objects", objects.to_string());
    Some(r)
}

fn json(status: u16, body: Vec<u8>) -> Response {
    Response::new(status, "application/json", body).with("Access-Control-Allow-Origin", "*")
}

fn busy() -> Response {
    Response::text(503, "the relay did not answer in time\n").with("Retry-After", "1")
}

/// The path's fields, percent-decoded; `None` when one is empty (`a//b`) or there are too
/// many. An empty path has none.
fn segments(rest: &[u8]) -> Option<Vec<Vec<u8>>> {
    let rest = rest.strip_suffix(b"/").unwrap_or(rest);
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let fields: Vec<Vec<u8>> =
        rest.split(|b| *b == b'/').map(|f| percent_encoding::percent_decode(f).collect()).collect();
    (fields.len() <= MAX_FIELDS && fields.iter().all(|f| !f.is_empty())).then_some(fields)
}

fn strings(namespace: &TrackNamespace) -> Vec<String> {
    namespace.fields().iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect()
}

fn fields_text(fields: &[Vec<u8>]) -> Vec<String> {
    fields.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect()
}

/// The value of query parameter `name`, decoded.
fn query_value(query: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(query).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// What the request's tokens grant: `Ok(None)` when the relay needs no token; else the
/// grants of its valid tokens (with `auth = "http"`, what the platform's service answers on
/// them), or 401 when there are none.
fn grants(
    path: &[u8],
    query: &[u8],
    head: &[u8],
    sources: &Sources,
) -> Result<Option<Vec<auth::Grant>>, Response> {
    let Some(ring) = &sources.auth else { return Ok(None) };
    let keys = ring.keys();
    let now = auth::unix_now();
    let from_query = url::form_urlencoded::parse(query)
        .filter(|(k, v)| moqt::URL_TOKEN_PARAMS.contains(&k.as_ref()) && !v.is_empty())
        .map(|(_, v)| Cow::Owned(v.into_owned()));
    let text = String::from_utf8_lossy(head);
    let from_header = text.split("\r\n").skip(1).filter_map(|line| {
        let (n, v) = line.split_once(':')?;
        let v = v.trim();
        let scheme = v.get(..7)?;
        (n.trim().eq_ignore_ascii_case("authorization") && scheme.eq_ignore_ascii_case("bearer "))
            .then(|| Cow::Owned(v[7..].trim().to_string()))
    });
    let tokens: Vec<Cow<'_, str>> = from_query.chain(from_header).collect();
    let found: Vec<auth::Grant> = match &sources.admission {
        Some(service) => {
            let action = if path.starts_with(b"/fetch/") { "fetch" } else { "announced" };
            let tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
            match service.decide(action, &tokens, &String::from_utf8_lossy(path)) {
                relay::admission::Verdict::Allow(g) => vec![g],
                relay::admission::Verdict::Deny => Vec::new(),
            }
        }
        None => tokens.iter().filter_map(|t| keys.verify(t.as_bytes(), now).ok()).collect(),
    };
    if found.is_empty() {
        return Err(Response::text(
            401,
            "a token that grants subscribe is needed (?token=, ?jwt=, ?cat= or Authorization: Bearer)\n",
        )
        .with("WWW-Authenticate", "Bearer"));
    }
    Ok(Some(found))
}
