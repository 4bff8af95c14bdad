//! Admission to the web listener: how many connections it serves at once, in all and per
//! client address. The per-address share is what keeps the page, `/certificate.sha256` and
//! new WebSocket viewers reachable while one address holds slow connections open: it can take
//! its share and no more, however many it opens (ARCHITECTURE.md, "Web listener").

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Who a client is for the share: an IPv4 address, or an IPv6 /64 (one subscriber's
/// allocation: a host picks any address in it, so counting whole addresses would give it
/// 2^64 shares). An IPv4-mapped IPv6 address is its IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Client {
    V4(u32),
    V6Prefix(u64),
}

impl Client {
    pub(super) fn of(ip: IpAddr) -> Client {
        match ip {
            IpAddr::V4(v4) => Client::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client::V4(u32::from(v4)),
                None => Client::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

/// Why a connection was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Every slot is taken (503).
    Full,
    /// The client's share is taken (429).
    ClientFull,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_client: HashMap<Client, usize>,
}

/// The slots of one listener. Taken on the accepting thread, given back when a connection's
/// [`Slot`] drops (on its own thread), so the counts sit behind a mutex held for a map
/// update: this is the web listener's thread pool, not a core.
pub(super) struct Slots {
    max_total: usize,
    max_per_client: usize,
    counts: Mutex<Counts>,
}

impl Slots {
    pub(super) fn new(max_total: usize, max_per_client: usize) -> Arc<Slots> {
        Arc::new(Slots { max_total, max_per_client, counts: Mutex::new(Counts::default()) })
    }

    /// A slot for a connection from `ip`, if the listener and the client's share have room.
    pub(super) fn take(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refused> {
        let client = Client::of(ip);
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if c.total >= self.max_total {
            return Err(Refused::Full);
        }
        let mine = c.per_client.entry(client).or_insert(0);
        if *mine >= self.max_per_client {
            return Err(Refused::ClientFull);
        }
        *mine += 1;
        c.total += 1;
        Ok(Slot { slots: self.clone(), client })
    }

    /// Connections served now (all clients).
    #[cfg(test)]
    pub(super) fn in_use(&self) -> usize {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner).total
    }

    fn give_back(&self, client: Client) {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_client.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                c.per_client.remove(&client);
            }
        }
    }
}

/// One connection's place; given back when dropped.
pub(super) struct Slot {
    slots: Arc<Slots>,
    client: Client,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.give_back(self.client);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_client_takes_its_share_and_others_still_get_in() {
        let slots = Slots::new(10, 3);
        let mine: Vec<Slot> = (0..3).map(|_| slots.take(ip("192.0.2.1")).unwrap()).collect();
        assert_eq!(slots.take(ip("192.0.2.1")).err(), Some(Refused::ClientFull));
        // The same address written as IPv4-mapped IPv6 is the same client.
        assert_eq!(slots.take(ip("::ffff:192.0.2.1")).err(), Some(Refused::ClientFull));
        let other = slots.take(ip("192.0.2.2")).unwrap();
        assert_eq!(slots.in_use(), 4);
        drop(mine);
        assert_eq!(slots.in_use(), 1);
        assert!(slots.take(ip("192.0.2.1")).is_ok());
        drop(other);
    }

    #[test]
    fn an_ipv6_slash_64_is_one_client() {
        let slots = Slots::new(10, 2);
        let _a = slots.take(ip("2001:db8:1:2::1")).unwrap();
        let _b = slots.take(ip("2001:db8:1:2:ffff::9")).unwrap();
        assert_eq!(slots.take(ip("2001:db8:1:2::77")).err(), Some(Refused::ClientFull));
        assert!(slots.take(ip("2001:db8:1:3::1")).is_ok());
    }

    #[test]
    fn the_total_bounds_every_client_together() {
        let slots = Slots::new(4, 3);
        let held: Vec<Slot> = ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"]
            .iter()
            .map(|a| slots.take(ip(a)).unwrap())
            .collect();
        assert_eq!(slots.take(ip("198.51.100.5")).err(), Some(Refused::Full));
        drop(held);
        assert_eq!(slots.in_use(), 0);
        assert!(slots.counts.lock().unwrap().per_client.is_empty(), "no entry outlives its slots");
    }
}
