//! The keys a platform plugs in with: event hooks (`events_url`, `events_file`,
//! `events_queue`) and who may do what (`auth`, with `auth = "http"` the service's
//! `auth_url` and `auth_failure`).

use std::net::SocketAddr;

use anyhow::bail;

use super::{resolve_auth, Directory, Settings};
use crate::host::admission::{AdmissionConfig, FailurePolicy};
use crate::host::events::{EventsConfig, Sink};

/// The event hooks (`events_url` or `events_file`, `events_queue`), named by the directory's
/// `advertise` URL when there is one, else by the listen address.
pub(super) fn resolve_events(
    s: &Settings,
    directory: Option<&Directory>,
    listen: SocketAddr,
) -> anyhow::Result<Option<EventsConfig>> {
    let url = s.events.events_url.clone().filter(|u| !u.is_empty());
    let path = s.events.events_file.clone().filter(|p| !p.as_os_str().is_empty());
    let sink = match (url, path) {
        (Some(_), Some(_)) => bail!("config keys `events_url` and `events_file`: one sink at a time"),
        (Some(u), None) => {
            match url::Url::parse(&u) {
                Ok(p) if matches!(p.scheme(), "http" | "https") && p.host().is_some() => {}
                _ => bail!("config key `events_url`: {u:?} is not an http:// or https:// URL"),
            }
            Sink::Url(u)
        }
        (None, Some(p)) if p.as_os_str() == "-" => Sink::Stdout,
        (None, Some(p)) => Sink::File(p),
        (None, None) => return Ok(None),
    };
    let queue = s.events.events_queue.unwrap_or(10_000);
    if queue == 0 {
        bail!("config key `events_queue`: must be at least 1");
    }
    let relay = directory.map(|d| d.advertise.clone()).unwrap_or_else(|| format!("moqt://{listen}"));
    Ok(Some(EventsConfig { sink, queue, relay }))
}

/// Who may do what: the key ring requests are checked with, and the platform's admission
/// (`auth = "http"`: a ring that verifies no token, since the service's grants decide).
pub(super) fn resolve_access(
    s: &Settings,
) -> anyhow::Result<(Option<auth::KeyRing>, Option<AdmissionConfig>)> {
    Ok(match resolve_admission(s)? {
        Some(a) => (Some(auth::KeyRing::fixed(auth::Keys::default())), Some(a)),
        None => (resolve_auth(s)?, None),
    })
}

/// `auth = "http"`: the service's URL and the failure policy; `None` for another mode.
fn resolve_admission(s: &Settings) -> anyhow::Result<Option<AdmissionConfig>> {
    let mode = s.access.auth.clone().unwrap_or_default();
    let url = s.access.auth_url.clone().filter(|u| !u.is_empty());
    if mode != "http" {
        if url.is_some() {
            bail!("config key `auth_url`: only with `auth = \"http\"`");
        }
        return Ok(None);
    }
    let Some(url) = url else { bail!("config key `auth_url`: `auth = \"http\"` needs the service's URL") };
    match url::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
        _ => bail!("config key `auth_url`: {url:?} is not an http:// or https:// URL"),
    }
    let failure = match s.access.auth_failure.as_deref().unwrap_or("allow-known") {
        "deny" => FailurePolicy::Deny,
        "allow-known" => FailurePolicy::AllowKnown,
        other => bail!("config key `auth_failure`: {other:?} is not one of deny, allow-known"),
    };
    Ok(Some(AdmissionConfig { url, failure }))
}
