//! The UDP socket of one core: created with SO_REUSEPORT beside the other cores' sockets,
//! drained in batches (`recvmmsg`, with UDP_GRO when the kernel offers it), written in GSO
//! trains (`sendmsg` with UDP_SEGMENT), and steered by a classic BPF reuseport program that
//! sends short-header QUIC packets to the core named in their connection ID.
//!
//! glommio's `UdpSocket` has no control-message support, so the core awaits readiness through
//! glommio (an awaited `peek`) and then drains this raw non-blocking socket directly; see
//! ARCHITECTURE.md ("UDP I/O"). All `unsafe` here is libc socket calls on buffers this module
//! owns; each block says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::unix::io::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Largest UDP payload we accept (a GRO super-datagram can be this large).
pub const MAX_UDP_PAYLOAD: usize = 65_535;
/// Datagrams pulled by one `recvmmsg`.
pub const RECV_BATCH: usize = 16;
/// Segments in one GSO train (the kernel's limit is 64).
pub const MAX_GSO_SEGMENTS: usize = 64;

/// Creates a UDP socket bound to `addr` with SO_REUSEPORT, large buffers, and
/// (best effort) UDP_GRO. Returns the socket and whether GRO is on.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<(Socket, bool)> {
    let domain = if addr.is_ipv6() { Domain::IPV6 } else { Domain::IPV4 };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    socket.set_reuse_port(true)?;
    // The socket stays in blocking mode: io_uring (glommio's readiness `peek`) would otherwise
    // complete at once with EAGAIN instead of waiting. Our own calls pass MSG_DONTWAIT.
    // The kernel caps these at net.core.{r,w}mem_max (see perf/ and deploy/): a smaller
    // buffer costs drops under bursts, not correctness, so it is reported, not refused.
    const BUF: usize = 8 << 20;
    let recv = socket.set_recv_buffer_size(BUF).and_then(|()| socket.recv_buffer_size());
    let send = socket.set_send_buffer_size(BUF).and_then(|()| socket.send_buffer_size());
    for (which, got) in [("receive", recv), ("send", send)] {
        match got {
            // Linux reports double what it grants (its bookkeeping share).
            Ok(n) if n >= BUF => {}
            Ok(n) => {
                tracing::debug!(%addr, which, bytes = n, wanted = BUF, "UDP socket buffer capped by the kernel")
            }
            Err(e) => tracing::debug!(%addr, which, error = %e, "UDP socket buffer size not set"),
        }
    }
    socket.bind(&SockAddr::from(addr))?;
    let gro = setsockopt_int(socket.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
    // Best effort: the kernel's receive time of each datagram ([`Received::rx_ns`]), so a core
    // can tell how long its input waited in the socket before it read it.
    if let Err(e) = setsockopt_int(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1) {
        tracing::debug!(%addr, error = %e, "no receive timestamps: input wait is not measured");
    }
    Ok((socket, gro))
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    setsockopt(fd, level, name, &value)
}

/// `setsockopt` with a plain-old-data value.
fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live reference for the duration of the call and its size is passed;
    // the kernel copies the bytes. `fd` is a socket this module opened.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Attaches the reuseport steering program to the group `socket` belongs to (attach once, on
/// the first socket; the kernel applies it to the whole group). The program returns, as the
/// index of the socket to deliver to:
/// - for a short-header packet (first byte's top bit clear), byte 1 of the UDP payload — the
///   first byte of the Destination Connection ID, which our CIDs set to the owning shard
///   (`cid.rs`); shards bind in order, so socket index == shard;
/// - for a long-header packet, an out-of-range index, which makes the kernel fall back to its
///   4-tuple hash (Initials have client-chosen CIDs; later long-header packets of a connection
///   come from the same 4-tuple and hash to the core that accepted it).
///
/// An index beyond the group (a forged shard byte) also falls back to the hash, and the core
/// that receives such a packet hands it over the mesh or answers it.
pub fn attach_steering(socket: &Socket) -> io::Result<()> {
    const BPF_LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const BPF_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const BPF_RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    let mut program = [
        libc::sock_filter { code: BPF_LD_B_ABS, jt: 0, jf: 0, k: 0 }, // A = payload[0]
        libc::sock_filter { code: BPF_JSET_K, jt: 0, jf: 1, k: 0x80 }, // long header?
        libc::sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: u32::MAX }, // yes: kernel hash
        libc::sock_filter { code: BPF_LD_B_ABS, jt: 0, jf: 0, k: 1 }, // A = DCID[0] = shard
        libc::sock_filter { code: BPF_RET_A, jt: 0, jf: 0, k: 0 },    // deliver to shard A
    ];
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
    // `prog` points at `program`, both alive across the call; the kernel copies them.
    setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ATTACH_REUSEPORT_CBPF, &prog)
}

/// One received UDP datagram (or GRO super-datagram) in the batch.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes received (several packets with GRO).
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// The GRO segment size: the datagram is `len / segment` packets of that size (the last
    /// may be shorter). Equal to `len` without GRO.
    pub segment: usize,
    /// When the kernel received it (SO_TIMESTAMPNS: CLOCK_REALTIME, nanoseconds since the Unix
    /// epoch); 0 when the kernel gave no timestamp.
    pub rx_ns: u64,
}

/// Buffers for `recvmmsg`, allocated once per core.
pub struct RecvBatch {
    bufs: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    /// Control buffers; u64 elements keep them aligned for `cmsghdr`.
    cmsgs: Vec<[u64; 8]>,
    hdrs: Vec<libc::mmsghdr>,
    got: Vec<Received>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl RecvBatch {
    /// Buffers for one `recvmmsg` of GRO batches.
    pub fn new() -> Self {
        RecvBatch {
            bufs: vec![0u8; RECV_BATCH * MAX_UDP_PAYLOAD],
            // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs for which all-zero
            // bytes is a valid value.
            addrs: vec![unsafe { zeroed() }; RECV_BATCH],
            iovs: vec![unsafe { zeroed() }; RECV_BATCH],
            cmsgs: vec![[0u64; 8]; RECV_BATCH],
            hdrs: vec![unsafe { zeroed() }; RECV_BATCH],
            got: Vec::with_capacity(RECV_BATCH),
        }
    }

    /// A placeholder with no buffers (what the shard leaves while it holds the real batch).
    pub fn empty() -> Self {
        RecvBatch {
            bufs: Vec::new(),
            addrs: Vec::new(),
            iovs: Vec::new(),
            cmsgs: Vec::new(),
            hdrs: Vec::new(),
            got: Vec::new(),
        }
    }

    /// Receives up to [`RECV_BATCH`] datagrams without blocking. Returns how many; 0 when the
    /// socket is empty.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        if self.hdrs.len() < RECV_BATCH {
            return Ok(0); // the empty placeholder
        }
        for i in 0..RECV_BATCH {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i * MAX_UDP_PAYLOAD..].as_mut_ptr() as *mut libc::c_void,
                iov_len: MAX_UDP_PAYLOAD,
            };
            // SAFETY: msghdr is a plain C struct; all-zero is valid and fields are set below.
            let mut msg: libc::msghdr = unsafe { zeroed() };
            msg.msg_name = &mut self.addrs[i] as *mut libc::sockaddr_storage as *mut libc::c_void;
            msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_iov = &mut self.iovs[i];
            msg.msg_iovlen = 1;
            msg.msg_control = self.cmsgs[i].as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = size_of::<[u64; 8]>() as _;
            self.hdrs[i] = libc::mmsghdr { msg_hdr: msg, msg_len: 0 };
        }
        // SAFETY: every header points into buffers owned by `self`, which outlive the call and
        // are not touched until it returns; the lengths passed are the buffers' lengths.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                RECV_BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        self.got.clear();
        for i in 0..n as usize {
            let hdr = &self.hdrs[i];
            let len = hdr.msg_len as usize;
            let Some(from) = sockaddr_to_std(&self.addrs[i], hdr.msg_hdr.msg_namelen) else { continue };
            let (gro, rx_ns) = control(&hdr.msg_hdr);
            let segment = gro.filter(|&s| s > 0).unwrap_or(len.max(1));
            self.got.push(Received { len, from, segment, rx_ns });
        }
        Ok(self.got.len())
    }

    /// The `i`th datagram of the last batch, and its bytes (mutable: quiche decrypts in place).
    pub fn get(&mut self, i: usize) -> Option<(Received, &mut [u8])> {
        let r = *self.got.get(i)?;
        let start = i * MAX_UDP_PAYLOAD;
        Some((r, &mut self.bufs[start..start + r.len.min(MAX_UDP_PAYLOAD)]))
    }
}

/// From a received message's control data: the UDP_GRO segment size, and the kernel's
/// receive time (SCM_TIMESTAMPNS, nanoseconds since the Unix epoch; 0 when absent).
fn control(msg: &libc::msghdr) -> (Option<usize>, u64) {
    let (mut gro, mut rx_ns) = (None, 0);
    // SAFETY: `msg` was filled by recvmmsg, so its control buffer and length are consistent;
    // the CMSG_* macros stay within msg_controllen, and each cmsg's data is read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
            if level == libc::SOL_UDP && kind == libc::UDP_GRO {
                let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                gro = usize::try_from(std::ptr::read_unaligned(data)).ok();
            } else if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                let (secs, nanos) =
                    (u64::try_from(ts.tv_sec).unwrap_or(0), u64::try_from(ts.tv_nsec).unwrap_or(0));
                rx_ns = secs.saturating_mul(1_000_000_000).saturating_add(nanos);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    (gro, rx_ns)
}

fn sockaddr_to_std(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    // SAFETY: the kernel wrote a socket address of `len` bytes into `storage`.
    let addr = unsafe { SockAddr::new(*storage, len) };
    addr.as_socket()
}

/// Sends `buf` to `to`: as one GSO train of `segment`-sized datagrams (the last may be shorter)
/// when `gso` is set and there is more than one, otherwise as one datagram. Returns the bytes
/// sent. `WouldBlock` means the socket buffer is full; the caller awaits and retries.
pub fn send(fd: RawFd, to: SocketAddr, buf: &[u8], segment: usize, gso: bool) -> io::Result<usize> {
    let addr = SockAddr::from(to);
    let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: msghdr is a plain C struct; all-zero is valid and fields are set below.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = addr.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = addr.len();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // u64 elements: control messages must be aligned for `cmsghdr`.
    let mut control = [0u64; 4];
    if gso && buf.len() > segment {
        // SAFETY: `control` is 32 bytes, 8-byte aligned, enough for one cmsg carrying a u16
        // (CMSG_SPACE(2) = 24); the header and data are written inside it.
        unsafe {
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, segment as u16);
        }
    }
    // SAFETY: every pointer in `msg` refers to locals or `buf`, alive across the call.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One GSO train in a [`SendBatch`]: `len` bytes at `start` of the batch buffer, datagrams of
/// `segment` bytes (the last may be shorter), to `to`.
#[derive(Debug, Clone, Copy)]
pub struct Train {
    /// Where its bytes start in the batch's buffer.
    pub start: usize,
    /// Its bytes.
    pub len: usize,
    /// The size of each datagram but the last.
    pub segment: usize,
    /// The destination.
    pub to: SocketAddr,
}

impl Train {
    /// How many datagrams it is.
    pub fn datagrams(&self) -> u64 {
        self.len.div_ceil(self.segment.max(1)) as u64
    }
}

/// Trains to many destinations written into one buffer during a turn and sent with one
/// `sendmmsg` per [`SEND_BATCH`] trains: the syscall is paid once per batch, not once per
/// connection. Buffers are allocated once per core.
pub struct SendBatch {
    /// The packets; a train in progress may extend past the last queued train.
    pub buf: Vec<u8>,
    trains: Vec<Train>,
    addrs: Vec<SockAddr>,
    iovs: Vec<libc::iovec>,
    cmsgs: Vec<[u64; 4]>,
    hdrs: Vec<libc::mmsghdr>,
}

/// Trains per `sendmmsg`.
pub const SEND_BATCH: usize = 64;

impl SendBatch {
    /// A batch whose buffer holds `bytes` (at least one whole train beyond the flush mark).
    pub fn new(bytes: usize) -> Self {
        SendBatch {
            buf: vec![0u8; bytes],
            trains: Vec::with_capacity(SEND_BATCH),
            addrs: Vec::with_capacity(SEND_BATCH),
            iovs: Vec::with_capacity(SEND_BATCH),
            cmsgs: vec![[0u64; 4]; SEND_BATCH],
            hdrs: Vec::with_capacity(SEND_BATCH),
        }
    }

    /// Where the next train starts.
    pub fn end(&self) -> usize {
        self.trains.last().map_or(0, |t| t.start + t.len)
    }

    /// Adds a train (its bytes already in the buffer).
    pub fn push(&mut self, train: Train) {
        self.trains.push(train);
    }

    /// The trains so far.
    pub fn trains(&self) -> &[Train] {
        &self.trains
    }

    /// Whether it holds as many trains as one `sendmmsg` takes.
    pub fn is_full(&self) -> bool {
        self.trains.len() >= SEND_BATCH
    }

    /// Empties it.
    pub fn clear(&mut self) {
        self.trains.clear();
    }

    /// Sends trains `from..` with one `sendmmsg` (non-blocking). Returns how many were sent
    /// (at least one), or the error of the first one (`WouldBlock`: the socket buffer is full).
    pub fn send(&mut self, fd: RawFd, from: usize, gso: bool) -> io::Result<usize> {
        let trains = self.trains.get(from..).unwrap_or(&[]);
        if trains.is_empty() {
            return Ok(0);
        }
        self.addrs.clear();
        self.iovs.clear();
        self.hdrs.clear();
        for t in trains {
            self.addrs.push(SockAddr::from(t.to));
            let data = &self.buf[t.start..t.start + t.len];
            self.iovs.push(libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() });
        }
        for (i, t) in trains.iter().enumerate() {
            // SAFETY: mmsghdr is a plain C struct; all-zero is valid and fields are set below.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_name = self.addrs[i].as_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_namelen = self.addrs[i].len();
            h.msg_hdr.msg_iov = &mut self.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            if gso && t.len > t.segment {
                let control = &mut self.cmsgs[i];
                // SAFETY: `control` is 32 bytes, 8-byte aligned, enough for one cmsg carrying a
                // u16 (CMSG_SPACE(2) = 24); the header and data are written inside it.
                unsafe {
                    h.msg_hdr.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                    h.msg_hdr.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
                    let cmsg = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                    (*cmsg).cmsg_level = libc::SOL_UDP;
                    (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, t.segment as u16);
                }
            }
            self.hdrs.push(h);
        }
        // SAFETY: every pointer in `hdrs` refers to `addrs`, `iovs`, `cmsgs` or `buf`, all
        // alive and unmoved across the call; the count is the vector's length.
        let n = unsafe {
            libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), self.hdrs.len() as libc::c_uint, libc::MSG_DONTWAIT)
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// True for the errors with which a kernel or device refuses UDP_SEGMENT (then fall back to
/// plain sends for the rest of the core's life).
pub fn is_gso_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(libc::ENOPROTOOPT)
    )
}

/// CPU time consumed by the calling thread.
pub fn thread_cpu_time() -> std::time::Duration {
    // SAFETY: clock_gettime writes one timespec into the local.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: as above; CLOCK_THREAD_CPUTIME_ID is always available on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The CPUs this process may run on (its affinity mask: systemd CPUAffinity=, taskset, a
/// container's cpuset), in ascending order; `None` when the mask cannot be read.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size into it.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: pid 0 is this thread; the size passed is the set's own.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET only reads the set, for indices below CPU_SETSIZE.
    let cpus: Vec<usize> =
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
    (!cpus.is_empty()).then_some(cpus)
}

/// RLIMIT_MEMLOCK (soft), in bytes; `None` when unlimited or unknown.
pub fn memlock_limit() -> Option<u64> {
    // SAFETY: getrlimit writes one rlimit into the local.
    let mut r: libc::rlimit = unsafe { zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    (rc == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// RLIMIT_NOFILE (soft): how many file descriptors the process may hold; `None` when
/// unlimited or unknown. (For the web listener, which sizes its connection limit from it.)
pub fn open_files_limit() -> Option<u64> {
    // SAFETY: getrlimit writes one rlimit into the local.
    let mut r: libc::rlimit = unsafe { zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    (rc == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// Blocks until one of `fds` is readable or `timeout` passes; returns how many are ready.
/// (For the synchronous client of the `client` crate, which keeps `unsafe` out of its own code.)
pub fn wait_readable(fds: &mut [libc::pollfd], timeout: std::time::Duration) -> io::Result<usize> {
    // Round up: waking a little late is harmless, waking early spins.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a valid, exclusively borrowed slice of initialised `pollfd`s whose
    // length is passed along; poll(2) writes only their `revents` fields.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(n as usize)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    /// A received datagram carries the kernel's receive time (SO_TIMESTAMPNS), and a datagram
    /// left in the socket for a while reads as that much older.
    #[test]
    fn received_datagrams_carry_the_kernels_receive_time() {
        let (receiver, _) = bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = receiver.local_addr().unwrap().as_socket().unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let wall = || {
            let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
            d.as_nanos() as u64
        };
        let mut batch = RecvBatch::new();
        let receive = |batch: &mut RecvBatch| {
            for _ in 0..100 {
                if batch.recv(receiver.as_raw_fd()).unwrap() > 0 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("nothing received");
        };
        // The kernel turns receive timestamps on for the whole stack a little after the first
        // socket asks (until then it stamps a datagram when it is read): one datagram first.
        sender.send_to(b"warm-up", to).unwrap();
        receive(&mut batch);
        std::thread::sleep(Duration::from_millis(100));
        let before = wall();
        sender.send_to(b"x", to).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        receive(&mut batch);
        let (r, _) = batch.get(0).unwrap();
        let after = wall();
        assert!(r.rx_ns >= before && r.rx_ns <= after, "{before} <= {} <= {after}", r.rx_ns);
        assert!(after - r.rx_ns >= 50_000_000, "it waited 50 ms in the socket");
    }

    /// Trains to two receivers in one batch: a GSO train of three datagrams (the last one
    /// shorter) and single datagrams, all delivered whole and in order.
    #[test]
    fn one_batch_reaches_every_destination() {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        for s in [&a, &b] {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        let (sender, _) = bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut batch = SendBatch::new(64 * 1024);
        let mut put = |bytes: &[u8], segment: usize, to: SocketAddr| {
            let start = batch.end();
            batch.buf[start..start + bytes.len()].copy_from_slice(bytes);
            batch.push(Train { start, len: bytes.len(), segment, to });
        };
        let train: Vec<u8> = (0..250u32).map(|i| (i / 100) as u8 + 1).collect();
        put(&train, 100, a.local_addr().unwrap());
        put(b"to b", 4, b.local_addr().unwrap());
        put(b"again a", 7, a.local_addr().unwrap());
        assert_eq!(batch.trains().iter().map(Train::datagrams).sum::<u64>(), 5);
        let mut sent = 0;
        while sent < 3 {
            sent += batch.send(sender.as_raw_fd(), sent, true).unwrap();
        }
        let mut buf = [0u8; 2000];
        let mut got_a = Vec::new();
        for _ in 0..4 {
            let n = a.recv(&mut buf).unwrap();
            got_a.push(buf[..n].to_vec());
        }
        assert_eq!(got_a, vec![vec![1; 100], vec![2; 100], vec![3; 50], b"again a".to_vec()]);
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"to b");
        batch.clear();
        assert_eq!((batch.end(), batch.trains().len()), (0, 0));
        assert_eq!(batch.send(sender.as_raw_fd(), 0, true).unwrap(), 0);
    }
}
