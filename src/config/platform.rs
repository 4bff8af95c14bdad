//! The keys a platform plugs in with: event hooks (`events_url`, `events_file`,
//! `events_queue`) and who may do what (`auth`, with `auth = "http"` the service's
//! `auth_url` and `auth_failure`).

use std::net::SocketAddr;

use anyhow::bail;

use super::{resolve_auth, Cli, Directory, FileConfig};
use crate::host::admission::{AdmissionConfig, FailurePolicy};
use crate::host::events::{EventsConfig, Sink};

/// The event hooks (`events_url` or `events_file`, `events_queue`), named by the directory's
/// `advertise` URL when there is one, else by the listen address.
pub(super) fn resolve_events(
    cli: &Cli,
    file: &FileConfig,
    directory: Option<&Directory>,
    listen: SocketAddr,
) -> anyhow::Result<Option<EventsConfig>> {
    let url = cli.events_url.clone().or(file.events_url.clone()).filter(|u| !u.is_empty());
    let path = cli.events_file.clone().or(file.events_file.clone()).filter(|p| !p.as_os_str().is_empty());
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
    let queue = cli.events_queue.or(file.events_queue).unwrap_or(10_000);
    if queue == 0 {
        bail!("config key `events_queue`: must be at least 1");
    }
    let relay = directory.map(|d| d.advertise.clone()).unwrap_or_else(|| format!("moqt://{listen}"));
    Ok(Some(EventsConfig { sink, queue, relay }))
}

/// Who may do what: the key ring requests are checked with, and the platform's admission
/// (`auth = "http"`: a ring that verifies no token, since the service's grants decide).
pub(super) fn resolve_access(
    cli: &Cli,
    file: &FileConfig,
) -> anyhow::Result<(Option<auth::KeyRing>, Option<AdmissionConfig>)> {
    Ok(match resolve_admission(cli, file)? {
        Some(a) => (Some(auth::KeyRing::fixed(auth::Keys::default())), Some(a)),
        None => (resolve_auth(cli, file)?, None),
    })
}

/// `auth = "http"`: the service's URL and the failure policy; `None` for another mode.
fn resolve_admission(cli: &Cli, file: &FileConfig) -> anyhow::Result<Option<AdmissionConfig>> {
    let mode = cli.auth.clone().or(file.auth.clone()).unwrap_or_default();
    let url = cli.auth_url.clone().or(file.auth_url.clone()).filter(|u| !u.is_empty());
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
    let failure = match cli.auth_failure.as_deref().or(file.auth_failure.as_deref()).unwrap_or("allow-known")
    {
        "deny" => FailurePolicy::Deny,
        "allow-known" => FailurePolicy::AllowKnown,
        other => bail!("config key `auth_failure`: {other:?} is not one of deny, allow-known"),
    };
    Ok(Some(AdmissionConfig { url, failure }))
}
