//! The UDP forwarder: clients send to the proxy's listen socket, the proxy relays each
//! client's datagrams to the upstream from a socket of its own (so the upstream sees one
//! address per client, as QUIC needs) and the upstream's answers back to that client, each
//! direction through its own [`Link`].
//!
//! One thread per socket only receives (stamping each datagram with its arrival time) and
//! hands it to the main thread over a channel; the main thread owns the links and sends each
//! datagram when its release time comes, waiting on the channel with a timeout until the next
//! release, so it neither busy-polls nor adds more than the wake-up latency to any delay.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::link::{Link, Schedule, Stats};
use crate::rng::splitmix64;

/// How often the receive threads look at their stop flag, and the longest the main loop waits.
const TICK: Duration = Duration::from_millis(50);

/// What the proxy forwards to, and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    /// Client → upstream.
    pub up: Schedule,
    /// Upstream → client.
    pub down: Schedule,
    /// Client number k (in order of first datagram) draws from seeds derived from (seed, k).
    pub seed: u64,
    /// At most this many clients at once; a new one evicts the least recently heard.
    pub max_clients: usize,
}

enum Event {
    FromClient(SocketAddr, Vec<u8>, Instant),
    FromUpstream(u64, Vec<u8>, Instant),
}

struct Client {
    id: u64,
    socket: UdpSocket,
    up: Link,
    down: Link,
    last_heard: Instant,
    alive: Arc<AtomicBool>,
}

/// The forwarder. [`Proxy::bind`] then [`Proxy::run`].
pub struct Proxy {
    config: Config,
    listen: UdpSocket,
    start: Instant,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    clients: HashMap<SocketAddr, Client>,
    by_id: HashMap<u64, SocketAddr>,
    next_id: u64,
    evicted: u64,
    /// The counters of evicted clients.
    retired: (Stats, Stats),
    stop_readers: Arc<AtomicBool>,
}

impl Proxy {
    /// Binds the listen socket and starts receiving; phases count from now.
    pub fn bind(config: Config) -> io::Result<Proxy> {
        let listen = UdpSocket::bind(config.listen)?;
        let (tx, rx) = mpsc::channel();
        let stop_readers = Arc::new(AtomicBool::new(false));
        let reader = listen.try_clone()?;
        let (stop, to_main) = (stop_readers.clone(), tx.clone());
        let alive = Arc::new(AtomicBool::new(true));
        spawn_reader(reader, stop, alive, move |data, from, at| {
            to_main.send(Event::FromClient(from, data, at))
        })?;
        Ok(Proxy {
            config,
            listen,
            start: Instant::now(),
            tx,
            rx,
            clients: HashMap::new(),
            by_id: HashMap::new(),
            next_id: 0,
            evicted: 0,
            retired: Default::default(),
            stop_readers,
        })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listen.local_addr()
    }

    /// Forwards until `stop` is set or `until` passes, writing a JSON line of counters to
    /// `report` every `stats_every` (if any) and once at the end.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        until: Option<Instant>,
        stats_every: Option<Duration>,
        report: &mut dyn Write,
    ) -> io::Result<()> {
        let mut next_stats = stats_every.map(|every| self.start + every);
        loop {
            let now = Instant::now();
            if stop.load(Ordering::Relaxed) || until.is_some_and(|u| now >= u) {
                break;
            }
            self.release(now);
            if let (Some(at), Some(every)) = (next_stats, stats_every) {
                if now >= at {
                    writeln!(report, "{}", self.stats_json(now))?;
                    report.flush()?;
                    next_stats = Some(at + every);
                }
            }
            let mut wake = now + TICK;
            for c in self.clients.values() {
                for t in [c.up.next_release(), c.down.next_release()].into_iter().flatten() {
                    wake = wake.min(t);
                }
            }
            for t in [next_stats, until].into_iter().flatten() {
                wake = wake.min(t);
            }
            match self.rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(event) => {
                    self.handle(event)?;
                    while let Ok(event) = self.rx.try_recv() {
                        self.handle(event)?;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        writeln!(report, "{}", self.stats_json(Instant::now()))?;
        report.flush()
    }

    /// The counters summed over all clients (evicted ones included): (up, down).
    pub fn stats(&self) -> (Stats, Stats) {
        let (mut up, mut down) = self.retired;
        for c in self.clients.values() {
            up.add(c.up.stats());
            down.add(c.down.stats());
        }
        (up, down)
    }

    /// `{"t_s":..,"clients":..,"evicted":..,"up":{..},"down":{..}}`.
    fn stats_json(&self, now: Instant) -> String {
        let (up, down) = self.stats();
        format!(
            "{{\"t_s\":{:.3},\"clients\":{},\"evicted\":{},\"up\":{},\"down\":{}}}",
            now.duration_since(self.start).as_secs_f64(),
            self.clients.len(),
            self.evicted,
            up.to_json(),
            down.to_json()
        )
    }

    /// Sends everything due by `now`. Send errors (an ICMP unreachable reported late, a full
    /// buffer) lose that datagram, as the network would.
    fn release(&mut self, now: Instant) {
        for (addr, c) in self.clients.iter_mut() {
            while let Some(d) = c.up.poll(now) {
                let _ = c.socket.send(&d);
            }
            while let Some(d) = c.down.poll(now) {
                let _ = self.listen.send_to(&d, addr);
            }
        }
    }

    fn handle(&mut self, event: Event) -> io::Result<()> {
        match event {
            Event::FromClient(from, data, at) => {
                if !self.clients.contains_key(&from) {
                    self.admit(from, at)?;
                }
                if let Some(c) = self.clients.get_mut(&from) {
                    c.last_heard = at;
                    c.up.push(at, data);
                }
            }
            Event::FromUpstream(id, data, at) => {
                if let Some(c) = self.by_id.get(&id).and_then(|a| self.clients.get_mut(a)) {
                    c.down.push(at, data);
                }
            }
        }
        Ok(())
    }

    /// A new client: its own upstream socket and links, evicting the least recently heard
    /// client if the map is full.
    fn admit(&mut self, from: SocketAddr, at: Instant) -> io::Result<()> {
        if self.clients.len() >= self.config.max_clients.max(1) {
            let oldest = self.clients.iter().min_by_key(|(_, c)| c.last_heard).map(|(a, _)| *a);
            if let Some(c) = oldest.and_then(|a| self.clients.remove(&a)) {
                c.alive.store(false, Ordering::Relaxed);
                self.by_id.remove(&c.id);
                self.retired.0.add(c.up.stats());
                self.retired.1.add(c.down.stats());
                self.evicted += 1;
            }
        }
        let unspecified: SocketAddr = match self.config.upstream {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(unspecified)?;
        socket.connect(self.config.upstream)?;
        let id = self.next_id;
        self.next_id += 1;
        let alive = Arc::new(AtomicBool::new(true));
        let (reader, to_main) = (socket.try_clone()?, self.tx.clone());
        let stop = self.stop_readers.clone();
        spawn_reader(reader, stop, alive.clone(), move |data, _, at| {
            to_main.send(Event::FromUpstream(id, data, at))
        })?;
        let seed = |dir: u64| {
            let mut x = self.config.seed ^ (id << 1 | dir).wrapping_mul(0xD1B5_4A32_D192_ED03);
            splitmix64(&mut x)
        };
        let up = Link::new(self.config.up.clone(), seed(0), self.start);
        let down = Link::new(self.config.down.clone(), seed(1), self.start);
        self.by_id.insert(id, from);
        self.clients.insert(from, Client { id, socket, up, down, last_heard: at, alive });
        Ok(())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop_readers.store(true, Ordering::Relaxed);
    }
}

/// Receives on `socket` until `stop` is set, `alive` is cleared or `deliver` fails, stamping
/// each datagram with its arrival time. The thread owns its handle on the socket: the socket
/// closes when both it and the proxy's handle are gone.
fn spawn_reader<F>(
    socket: UdpSocket,
    stop: Arc<AtomicBool>,
    alive: Arc<AtomicBool>,
    mut deliver: F,
) -> io::Result<()>
where
    F: FnMut(Vec<u8>, SocketAddr, Instant) -> Result<(), mpsc::SendError<Event>> + Send + 'static,
{
    socket.set_read_timeout(Some(TICK))?;
    thread::Builder::new().name("moq-impair-rx".into()).spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) && alive.load(Ordering::Relaxed) {
            match socket.recv_from(&mut buf) {
                Ok((n, from)) => {
                    if deliver(buf[..n].to_vec(), from, Instant::now()).is_err() {
                        return;
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                // ICMP errors surface here on connected sockets; nothing to do but go on.
                Err(_) => thread::sleep(Duration::from_millis(1)),
            }
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::Settings;

    /// A fake upstream that echoes every datagram to its sender.
    fn echo() -> SocketAddr {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = s.local_addr().unwrap();
        thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        });
        addr
    }

    /// Starts a proxy to `upstream`; returns its address and what stops it and hands it back.
    fn start(
        upstream: SocketAddr,
        settings: Settings,
        max_clients: usize,
    ) -> (SocketAddr, impl FnOnce() -> (Proxy, String)) {
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream,
            up: Schedule::constant(settings.clone()),
            down: Schedule::constant(settings),
            seed: 1,
            max_clients,
        };
        let mut proxy = Proxy::bind(config).unwrap();
        let addr = proxy.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut out = Vec::new();
            proxy.run(&flag, None, None, &mut out).unwrap();
            (proxy, String::from_utf8(out).unwrap())
        });
        (addr, move || {
            stop.store(true, Ordering::Relaxed);
            handle.join().unwrap()
        })
    }

    fn client() -> UdpSocket {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c
    }

    #[test]
    fn datagrams_go_through_and_come_back() {
        let (addr, stop) = start(echo(), Settings::default(), 8);
        let c = client();
        let mut buf = [0u8; 2048];
        for i in 0..200u32 {
            let msg = [i.to_be_bytes().as_slice(), &[7u8; 996]].concat();
            c.send_to(&msg, addr).unwrap();
            let (n, from) = c.recv_from(&mut buf).unwrap();
            assert_eq!((from, &buf[..n]), (addr, msg.as_slice()));
        }
        let (proxy, report) = stop();
        let (up, down) = proxy.stats();
        assert_eq!((up.packets_in, up.delivered, up.dropped()), (200, 200, 0));
        assert_eq!((down.packets_in, down.delivered, down.bytes_delivered), (200, 200, 200_000));
        assert!(report.starts_with("{\"t_s\":") && report.contains("\"clients\":1"), "{report}");
        assert_eq!(report.lines().count(), 1);
    }

    #[test]
    fn delay_applies_both_ways_and_clients_are_kept_apart() {
        // A lower bound only: the round trip through a 15 ms each-way link is never under 30 ms.
        let settings = Settings { delay: Duration::from_millis(15), ..Settings::default() };
        let (addr, stop) = start(echo(), settings, 1);
        let (a, b) = (client(), client());
        let mut buf = [0u8; 64];
        for (c, msg) in [(&a, b"from a"), (&b, b"from b"), (&a, b"from a")] {
            let sent = Instant::now();
            c.send_to(msg, addr).unwrap();
            let (n, _) = c.recv_from(&mut buf).unwrap();
            assert!(sent.elapsed() >= Duration::from_millis(30));
            assert_eq!(&buf[..n], msg);
        }
        let (proxy, report) = stop();
        // One client at a time: b evicted a, then a evicted b; counters survive eviction.
        assert!(report.contains("\"evicted\":2"), "{report}");
        assert_eq!(proxy.stats().1.delivered, 3);
    }

    #[test]
    fn reports_every_period_and_at_the_end() {
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: echo(),
            up: Schedule::default(),
            down: Schedule::default(),
            seed: 1,
            max_clients: 1,
        };
        let mut proxy = Proxy::bind(config).unwrap();
        let (stop, mut out) = (AtomicBool::new(false), Vec::new());
        let until = Instant::now() + Duration::from_millis(250);
        proxy.run(&stop, Some(until), Some(Duration::from_millis(100)), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        // Periodic reports (how many depends on the machine's clock and load: no timing
        // threshold here), then the final one.
        assert!(!out.is_empty(), "at least the final report");
        assert!(out.lines().all(|l| l.starts_with("{\"t_s\":") && l.ends_with("}}")), "{out}");
    }
}
