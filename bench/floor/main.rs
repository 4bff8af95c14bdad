//! `moq-floor`: the floor under any relay's cost per delivered byte on this machine — what
//! the kernel and the crypto alone take for the packets a relay sends in a fan-out, with no
//! QUIC state machine and no MoQT (bench/README.md, "The floor").
//!
//! For each object (at `--rate` per second, paced by sleeping like a relay's timer), the
//! sender thread builds one QUIC-sized packet per subscriber and per 1200 bytes of object
//! (a short header with an 8-byte connection ID and a 4-byte packet number, the payload
//! sealed with AES-128-GCM, the header protected with AES-128 as QUIC does: RFC 9001 §5.3,
//! §5.4), and sends the whole fan-out with one `sendmmsg`, an object larger than a packet as
//! one UDP GSO train per subscriber. A sink thread on another CPU receives on one socket per
//! subscriber and answers one sealed ACK-sized datagram per two packets, which the sender
//! receives (`recvmmsg`) and opens between objects, as a relay processes acknowledgements.
//!
//! Only the sender thread's CPU time counts (user and system, CLOCK_THREAD_CPUTIME_ID, over
//! the measured window): on loopback it includes the kernel's delivery to the receiving
//! sockets, as a relay's does. The result is one JSON object with the field names of
//! moq-bench's `--json` (`delivered_bytes`, `relay_cpu_s`, `objects_per_s`, `lost`), so
//! bench/peers.sh reads it beside the relays'.
//!
//! The system calls (`sendmmsg` with UDP_SEGMENT, `recvmmsg`, affinity, thread CPU time) go
//! through `libc` as the runtime's socket layer does; each `unsafe` block says why it holds.
#![allow(unsafe_code)]

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ring::aead::quic::{HeaderProtectionKey, AES_128};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};

/// Payload bytes per packet (a relay's 1200-byte objects fit one packet each).
const SEGMENT: usize = 1200;
/// Short header: first byte, 8-byte destination connection ID, 4-byte packet number.
const HEADER: usize = 1 + 8 + 4;
const TAG: usize = 16;
/// An ACK frame's worth of payload, sealed like the packets.
const ACK_PAYLOAD: usize = 24;
/// Datagrams taken per `recvmmsg`.
const RECV_BATCH: usize = 64;

/// What one run measures: a fan-out of `subscribers` at `rate` objects per second.
#[derive(Debug, Parser)]
#[command(name = "moq-floor", about = "The kernel-and-crypto floor of a relay's fan-out")]
struct Args {
    #[arg(long, default_value_t = 100)]
    subscribers: usize,
    /// Objects per second.
    #[arg(long, default_value_t = 300)]
    rate: u32,
    /// Bytes per object (split into 1200-byte packets, sent as a GSO train).
    #[arg(long, default_value_t = 1200)]
    object_size: usize,
    /// Seconds measured.
    #[arg(long, default_value_t = 8)]
    duration: u64,
    /// Seconds before the measurement.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Write the result as JSON here (also printed).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// The keys and counters one end uses to seal and open packets.
struct Crypto {
    aead: LessSafeKey,
    hp: HeaderProtectionKey,
}

impl Crypto {
    fn new() -> Crypto {
        // Fixed keys: the cost of AES does not depend on their value.
        let aead =
            LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7; 16]).unwrap_or_else(|_| unreachable()));
        let hp = HeaderProtectionKey::new(&AES_128, &[9; 16]).unwrap_or_else(|_| unreachable());
        Crypto { aead, hp }
    }

    /// Writes packet `pn` carrying `payload` into `out` (header, sealed payload, tag) and
    /// protects its header; returns its length.
    fn seal(&self, pn: u64, payload: &[u8], out: &mut Vec<u8>) -> usize {
        let start = out.len();
        out.push(0x40);
        out.extend_from_slice(&[0xc1; 8]);
        out.extend_from_slice(&(pn as u32).to_be_bytes());
        let body = out.len();
        out.extend_from_slice(payload);
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&pn.to_be_bytes());
        let (head, rest) = out[start..].split_at_mut(body - start);
        let tag = self
            .aead
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&*head), rest)
            .unwrap_or_else(|_| unreachable());
        out.extend_from_slice(tag.as_ref());
        self.toggle_header_protection(&mut out[start..]);
        out.len() - start
    }

    /// Applies (or, the same XOR again, removes) header protection: a mask from a 16-byte
    /// sample of the ciphertext over the first byte's low bits and the packet number.
    fn toggle_header_protection(&self, packet: &mut [u8]) {
        if let Ok(mask) = self.hp.new_mask(&packet[HEADER..HEADER + 16]) {
            packet[0] ^= mask[0] & 0x1f;
            for (b, m) in packet[9..HEADER].iter_mut().zip(&mask[1..5]) {
                *b ^= m;
            }
        }
    }

    /// Opens a sealed datagram (header unprotected, then the payload authenticated).
    fn open(&self, datagram: &mut [u8]) -> bool {
        if datagram.len() < HEADER + TAG + 16 {
            return false;
        }
        self.toggle_header_protection(datagram);
        let pn = u32::from_be_bytes([datagram[9], datagram[10], datagram[11], datagram[12]]);
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&u64::from(pn).to_be_bytes());
        let (head, rest) = datagram.split_at_mut(HEADER);
        self.aead.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(&*head), rest).is_ok()
    }
}

/// Keys of a fixed length and algorithms ring supports cannot fail to build.
fn unreachable() -> ! {
    eprintln!("moq-floor: ring refused a fixed AES-128 key");
    std::process::exit(2)
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The CPUs this process may run on, in order (the sender takes the first, the sink the
/// second; one CPU: both on it).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as in `pin_to_cpu`; sched_getaffinity fills the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        let cpus: Vec<usize> =
            (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
        if cpus.is_empty() {
            vec![0]
        } else {
            cpus
        }
    }
}

/// Sets a socket buffer size (best effort: the kernel caps it at its maximum).
fn set_buffer(sock: &UdpSocket, option: libc::c_int, bytes: usize) {
    let v = bytes as libc::c_int;
    // SAFETY: a valid fd and a pointer to an int of the given length.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Counters the sink shares with the sender.
#[derive(Default)]
struct Sink {
    packets: AtomicU64,
    payload_bytes: AtomicU64,
    stop: AtomicBool,
}

/// Receives on every subscriber socket; answers one sealed ACK-sized datagram per two packets
/// to `sender`.
fn run_sink(sockets: Vec<UdpSocket>, sender: SocketAddr, counters: Arc<Sink>, cpu: usize) {
    pin_to_cpu(cpu);
    let crypto = Crypto::new();
    let mut buf = vec![0u8; 65_536];
    let mut ack = Vec::with_capacity(128);
    let (mut received, mut acked) = (0u64, 0u64);
    while !counters.stop.load(Ordering::Relaxed) {
        let mut idle = true;
        for s in &sockets {
            while let Ok(n) = s.recv(&mut buf) {
                idle = false;
                // A GSO train arrives as one datagram per segment on loopback.
                received += 1;
                counters.packets.fetch_add(1, Ordering::Relaxed);
                counters.payload_bytes.fetch_add(n.saturating_sub(HEADER + TAG) as u64, Ordering::Relaxed);
                if received % 2 == 0 {
                    ack.clear();
                    crypto.seal(acked, &[0u8; ACK_PAYLOAD], &mut ack);
                    acked += 1;
                    if let Err(e) = s.send_to(&ack, sender) {
                        if e.kind() != io::ErrorKind::WouldBlock {
                            eprintln!("moq-floor: sink: {e}");
                        }
                    }
                }
            }
        }
        if idle {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// One `sendmmsg` of `trains` (one per subscriber: its packets back to back in `bufs`, of
/// `segment` bytes each but the last) to `dests`; a train of several packets goes as one GSO
/// datagram. Returns the messages the kernel took.
fn send_fanout(fd: i32, dests: &[libc::sockaddr_in], bufs: &mut [Vec<u8>], segment: u16, gso: bool) -> usize {
    let mut iovs: Vec<libc::iovec> =
        bufs.iter_mut().map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }).collect();
    // One control message per datagram when it is a GSO train: UDP_SEGMENT = segment size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
    let mut control = vec![0u8; space * dests.len()];
    let mut msgs: Vec<libc::mmsghdr> = Vec::with_capacity(dests.len());
    for (i, dest) in dests.iter().enumerate() {
        // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the call.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_name = (dest as *const libc::sockaddr_in).cast_mut().cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        if gso {
            let c = &mut control[i * space..(i + 1) * space];
            h.msg_control = c.as_mut_ptr().cast();
            h.msg_controllen = space;
            // SAFETY: the control buffer holds one cmsg of a u16.
            unsafe {
                let cm = libc::CMSG_FIRSTHDR(&h);
                (*cm).cmsg_level = libc::SOL_UDP;
                (*cm).cmsg_type = libc::UDP_SEGMENT;
                (*cm).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(cm).cast::<u16>(), segment);
            }
        }
        msgs.push(libc::mmsghdr { msg_hdr: h, msg_len: 0 });
    }
    let mut sent = 0;
    while sent < msgs.len() {
        // SAFETY: `msgs[sent..]` are valid mmsghdrs whose buffers live until the call returns.
        let n = unsafe { libc::sendmmsg(fd, msgs[sent..].as_mut_ptr(), (msgs.len() - sent) as u32, 0) };
        if n <= 0 {
            break;
        }
        sent += n as usize;
    }
    sent
}

/// Receives and opens the ACK-sized datagrams waiting on `fd`, `RECV_BATCH` per `recvmmsg`.
fn drain_acks(fd: i32, crypto: &Crypto, bufs: &mut [[u8; 256]]) -> u64 {
    let mut opened = 0;
    loop {
        let mut iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: a zeroed msghdr is valid.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_iov = iov;
                h.msg_iovlen = 1;
                libc::mmsghdr { msg_hdr: h, msg_len: 0 }
            })
            .collect();
        // SAFETY: valid mmsghdrs over `bufs`.
        let n = unsafe {
            libc::recvmmsg(fd, msgs.as_mut_ptr(), msgs.len() as u32, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if n <= 0 {
            return opened;
        }
        let lens: Vec<usize> = msgs[..n as usize].iter().map(|m| m.msg_len as usize).collect();
        for (b, len) in bufs.iter_mut().zip(lens) {
            if crypto.open(&mut b[..len]) {
                opened += 1;
            }
        }
    }
}

fn sockaddr(addr: SocketAddr) -> libc::sockaddr_in {
    let SocketAddr::V4(v4) = addr else { unreachable() };
    // SAFETY: a zeroed sockaddr_in is valid.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = v4.port().to_be();
    sa.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) };
    sa
}

fn main() -> io::Result<()> {
    let args = Args::parse();
    let cpus = allowed_cpus();
    let (sender_cpu, sink_cpu) = (cpus[0], *cpus.get(1).unwrap_or(&cpus[0]));
    let sender = UdpSocket::bind("127.0.0.1:0")?;
    set_buffer(&sender, libc::SO_SNDBUF, 8 << 20);
    set_buffer(&sender, libc::SO_RCVBUF, 8 << 20);
    let mut sinks = Vec::with_capacity(args.subscribers);
    for _ in 0..args.subscribers {
        let s = UdpSocket::bind("127.0.0.1:0")?;
        s.set_nonblocking(true)?;
        set_buffer(&s, libc::SO_RCVBUF, 4 << 20);
        sinks.push(s);
    }
    let dests: Vec<libc::sockaddr_in> =
        sinks.iter().map(|s| s.local_addr().map(sockaddr)).collect::<io::Result<_>>()?;
    let counters = Arc::new(Sink::default());
    let sink = {
        let (counters, to) = (counters.clone(), sender.local_addr()?);
        std::thread::spawn(move || run_sink(sinks, to, counters, sink_cpu))
    };
    pin_to_cpu(sender_cpu);
    let crypto = Crypto::new();
    let segments = args.object_size.div_ceil(SEGMENT).max(1);
    let object = vec![0x5au8; args.object_size];
    let mut bufs: Vec<Vec<u8>> = (0..args.subscribers).map(|_| Vec::with_capacity(segments * 1300)).collect();
    let mut ack_bufs = vec![[0u8; 256]; RECV_BATCH];
    let fd = sender.as_raw_fd();
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let start = Instant::now();
    let measure_at = start + Duration::from_secs(args.warmup);
    let end = measure_at + Duration::from_secs(args.duration);
    let (mut pn, mut k, mut objects, mut acks) = (0u64, 0u32, 0u64, 0u64);
    let mut measured: Option<(Duration, u64, u64)> = None;
    loop {
        let next = start + interval * k;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        k += 1;
        if measured.is_none() && Instant::now() >= measure_at {
            let c = &counters;
            measured = Some((
                thread_cpu(),
                c.packets.load(Ordering::Relaxed),
                c.payload_bytes.load(Ordering::Relaxed),
            ));
            objects = 0;
        }
        if Instant::now() >= end {
            break;
        }
        for b in bufs.iter_mut() {
            b.clear();
            for chunk in object.chunks(SEGMENT) {
                crypto.seal(pn, chunk, b);
                pn += 1;
            }
        }
        let segment = (SEGMENT.min(args.object_size) + HEADER + TAG) as u16;
        send_fanout(fd, &dests, &mut bufs, segment, segments > 1);
        acks += drain_acks(fd, &crypto, &mut ack_bufs);
        objects += 1;
    }
    let cpu_end = thread_cpu();
    std::thread::sleep(Duration::from_millis(200));
    counters.stop.store(true, Ordering::Relaxed);
    let _ = sink.join();
    let (cpu_start, packets_start, bytes_start) = measured.unwrap_or_default();
    let cpu = (cpu_end - cpu_start).as_secs_f64();
    let packets = counters.packets.load(Ordering::Relaxed) - packets_start;
    let bytes = counters.payload_bytes.load(Ordering::Relaxed) - bytes_start;
    let expected = objects * (args.subscribers * segments) as u64;
    let json = format!(
        "{{\"relay\":\"floor\",\"subscribers\":{},\"rate\":{},\"object_size\":{},\"duration_s\":{},\
         \"delivered_bytes\":{bytes},\"relay_cpu_s\":{cpu:.4},\"objects_per_s\":{:.1},\"packets\":{packets},\
         \"packets_expected\":{expected},\"lost\":{},\"acks_opened\":{acks},\"us_per_packet\":{:.3},\
         \"cpu_s_per_gb\":{:.3}}}",
        args.subscribers,
        args.rate,
        args.object_size,
        args.duration,
        objects as f64 * args.subscribers as f64 / args.duration as f64,
        expected.saturating_sub(packets),
        cpu * 1e6 / packets.max(1) as f64,
        cpu / (bytes.max(1) as f64 / 1e9),
    );
    println!("{json}");
    if let Some(path) = args.json {
        std::fs::write(path, format!("{json}\n"))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A sealed packet has the QUIC layout (header, payload, tag), its header protected, and
    /// opens back; a flipped bit fails authentication.
    #[test]
    fn packets_seal_and_open_as_quic_does() {
        let c = Crypto::new();
        let mut p = Vec::new();
        let n = c.seal(7, &[0x5a; SEGMENT], &mut p);
        assert_eq!(n, HEADER + SEGMENT + TAG);
        assert_ne!(&p[9..HEADER], &7u32.to_be_bytes(), "the packet number is protected");
        let mut copy = p.clone();
        assert!(c.open(&mut copy));
        assert_eq!(&copy[9..HEADER], &7u32.to_be_bytes());
        assert_eq!(&copy[HEADER..HEADER + SEGMENT], &[0x5a; SEGMENT][..]);
        p[HEADER + 100] ^= 1;
        assert!(!c.open(&mut p));
    }

    /// The fan-out reaches every subscriber socket, a multi-packet object as a GSO train that
    /// arrives as one datagram per packet.
    #[test]
    fn a_fanout_reaches_every_socket_in_one_sendmmsg() {
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sinks: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let dests: Vec<libc::sockaddr_in> = sinks.iter().map(|s| sockaddr(s.local_addr().unwrap())).collect();
        let c = Crypto::new();
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); 3];
        for b in &mut bufs {
            for (pn, chunk) in [0u8; 2 * SEGMENT + 100].chunks(SEGMENT).enumerate() {
                c.seal(pn as u64, chunk, b);
            }
        }
        let segment = (SEGMENT + HEADER + TAG) as u16;
        assert_eq!(send_fanout(sender.as_raw_fd(), &dests, &mut bufs, segment, true), 3);
        let mut buf = [0u8; 2048];
        for s in &sinks {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let sizes: Vec<usize> = (0..3).map(|_| s.recv(&mut buf).unwrap()).collect();
            assert_eq!(sizes, vec![segment as usize, segment as usize, HEADER + 100 + TAG]);
        }
    }
}
