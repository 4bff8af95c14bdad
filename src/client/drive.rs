//! The one-thread driver under [`super::drive_many`] (QUIC) and [`super::ws::drive_many`]
//! (QMux over WebSocket): step every connection, write what it queued, then one `poll(2)` over
//! every socket until the earliest timer or the deadline, read what arrived, fire due timers,
//! and step the connections that had news, until each has said it is done.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::quic::ClientError;

/// A connection the driver runs: its sockets, its timer, its output.
pub(crate) trait Polled {
    /// Why it closed, once it has.
    fn close_error(&self) -> Option<ClientError>;
    /// Writes what is queued (after each step); `buf` is scratch space.
    fn send(&mut self, buf: &mut [u8]) -> Result<(), ClientError>;
    /// When its timer is due.
    fn timeout(&self) -> Option<Instant>;
    /// Appends the descriptors of its sockets, in the order `receive` numbers them.
    fn sockets(&self, out: &mut Vec<RawFd>);
    /// Socket `k` is readable: take what it has, without waiting.
    fn receive(&mut self, k: usize, buf: &mut [u8]) -> Result<(), ClientError>;
    /// Fires its timer if due at `now`; true when it did.
    fn on_timer(&mut self, now: Instant) -> bool;
    /// Holds input already read from the socket but not yet taken (TLS's buffer): read again
    /// without waiting.
    fn buffered(&self) -> bool {
        false
    }
}

/// Drives all `conns` until `step(i, conn)` has returned `true` once for each. `step` is called
/// once at the start and then after every batch of I/O (input, a timer) of a connection that
/// is not done yet. Finished connections keep being served (input, timers) until the call
/// returns. Fails when a connection that is not done closes (the error carries its index) or
/// when `deadline` passes; a deadline already past still reads the sockets once (without
/// waiting), fires due timers and steps what that brought before failing.
pub(crate) fn drive<T: Polled>(
    conns: &mut [T],
    deadline: Instant,
    buf: &mut [u8],
    mut step: impl FnMut(usize, &mut T) -> Result<bool, ClientError>,
) -> Result<(), ClientError> {
    let mut done = vec![false; conns.len()];
    let mut remaining = conns.len();
    // Connections with news since their last step, each listed once (`is_dirty`).
    let mut dirty: Vec<usize> = (0..conns.len()).collect();
    let mut is_dirty = vec![true; conns.len()];
    let (mut fds, mut owners, mut raw): (Vec<libc::pollfd>, Vec<usize>, Vec<RawFd>) = Default::default();
    let mut expired = false;
    loop {
        for &i in &dirty {
            is_dirty[i] = false;
            let c = &mut conns[i];
            if !done[i] {
                if step(i, c).map_err(|e| e.at(i))? {
                    done[i] = true;
                    remaining -= 1;
                } else if let Some(e) = c.close_error() {
                    return Err(e.at(i));
                }
            }
            c.send(buf).map_err(|e| e.at(i))?;
        }
        dirty.clear();
        if remaining == 0 {
            return Ok(());
        }
        if expired {
            return Err(ClientError::Deadline);
        }
        let now = Instant::now();
        // Past the deadline the sockets are still read (without waiting) and the timers fired,
        // and what that brought is stepped once more: a caller that calls again and again
        // with deadlines already due (a sender behind its schedule) still receives ACKs.
        expired = now >= deadline;
        let wake = conns.iter().filter_map(Polled::timeout).fold(deadline, Instant::min);
        fds.clear();
        owners.clear();
        for (i, c) in conns.iter().enumerate() {
            raw.clear();
            c.sockets(&mut raw);
            fds.extend(raw.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }));
            owners.extend(raw.iter().map(|_| i));
        }
        let buffered = conns.iter().any(Polled::buffered);
        let wait = if buffered { Duration::ZERO } else { wake.saturating_duration_since(now) };
        if runtime::udp::wait_readable(&mut fds, wait)? > 0 || buffered {
            let mut socket = 0;
            for (k, fd) in fds.iter().enumerate() {
                let i = owners[k];
                socket = if k > 0 && owners[k - 1] == i { socket + 1 } else { 0 };
                if fd.revents != 0 || conns[i].buffered() {
                    conns[i].receive(socket, buf).map_err(|e| e.at(i))?;
                    if !is_dirty[i] {
                        is_dirty[i] = true;
                        dirty.push(i);
                    }
                }
            }
        }
        let now = Instant::now();
        for (i, c) in conns.iter_mut().enumerate() {
            if c.on_timer(now) && !is_dirty[i] {
                is_dirty[i] = true;
                dirty.push(i);
            }
        }
    }
}
