//! The draft an input's first byte picks. A fixed table, new drafts appended, so that
//! committed inputs keep their meaning when a draft is added; `Version::ALL` is the server's
//! preference order and changes then.

use wire::Version;

pub const DRAFTS: [Version; 5] =
    [Version::Draft22, Version::Draft18, Version::Draft16, Version::Draft20, Version::Draft14];

/// The draft selector byte `b` picks.
pub fn pick(b: u8) -> Version {
    DRAFTS[usize::from(b) % DRAFTS.len()]
}

/// The selector byte that picks `v` (for the seed writers; not every includer writes seeds).
#[allow(dead_code)]
pub fn selector(v: Version) -> u8 {
    DRAFTS.iter().position(|d| *d == v).unwrap_or(0) as u8
}
