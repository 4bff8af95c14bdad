//! Servicing the connections a turn touched: their application runs, then their packets are
//! built into GSO trains (held for send coalescing while the core is busy) and sent in
//! batches.

use super::*;

impl<A: ShardApp> Shard<A> {
    /// Runs the application and writes output for every connection touched this turn.
    pub(super) async fn service_dirty(&mut self, now: Instant) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &idx in &dirty {
            self.service(idx, now).await;
        }
        self.send_batch().await;
        // Reuse the buffer, keeping anything marked while servicing.
        dirty.clear();
        dirty.append(&mut self.dirty);
        self.dirty = dirty;
    }

    pub(super) async fn service(&mut self, idx: usize, now: Instant) {
        let shard = self.id;
        let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) else { return };
        conn.dirty = false;
        if !conn.setup_armed {
            conn.setup_armed = true;
            conn.setup_deadline = Some(now + self.rc.setup_timeout);
        }
        if conn.app.is_none() && conn.quic.is_established() {
            if conn.handshake_counted {
                conn.handshake_counted = false;
                ShardStats::sub(&self.stats[shard.index()].handshakes, 1);
            }
            // The handshake chose one of the ALPNs the application named (TLS offers no other).
            let alpn = conn.quic.application_proto();
            let handle = ConnHandle(u64::from(conn.gen) << 32 | idx as u64);
            let mut app = match conn.outbound {
                Some(tag) => self.app.shard.new_outbound(handle, alpn, tag),
                None => self.app.shard.new_connection(handle, alpn),
            };
            if let Some(at) = conn.setup_deadline {
                app.set_setup_deadline(at);
            }
            conn.app = Some(app);
            // Give the peer spare connection IDs (for migration), each naming this core.
            while conn.quic.scids_left() > 0 {
                let c = self.handshakes.cids.new_cid(shard);
                if conn.quic.new_scid(&c, self.handshakes.reset.token(&c), false).is_err() {
                    break;
                }
                self.table.by_cid.insert(c.clone(), idx);
                conn.cids.push(c);
            }
        }
        if conn.setup_deadline.is_some_and(|at| at <= now) {
            // The application closes its own session if its setup is not done (it was given
            // the deadline); without an application yet (the QUIC handshake has not
            // completed) the core closes the connection.
            conn.setup_deadline = None;
            if conn.app.is_none() {
                let _ = conn.quic.close(false, 0x0, b"setup did not complete in time");
            }
        }
        if let Some(app) = conn.app.as_mut() {
            app.on_io(&mut conn.quic);
        }
        while let Some(retired) = conn.quic.retired_scid_next() {
            self.table.by_cid.remove(&retired);
            conn.cids.retain(|c| *c != retired);
        }
        // A busy core lets a connection's packets gather for up to `send_coalesce` (from the
        // first turn that had something for it) so that they leave as one GSO train; a
        // connection in its handshake or closing sends at once.
        let hold = self.load.coalescing
            && conn.quic.is_established()
            && !conn.quic.is_closed()
            && !conn.quic.is_draining();
        let flush_now = match conn.flush_at {
            _ if !hold => true,
            Some(at) => at <= now,
            None => {
                conn.flush_at = Some(now + self.rc.send_coalesce);
                false
            }
        };
        ShardStats::add(&self.stats[shard.index()].services, 1);
        if flush_now {
            conn.flush_at = None;
            if !self.flush(idx, now).await {
                ShardStats::add(&self.stats[shard.index()].idle_services, 1);
            }
        }
        let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) else { return };
        if conn.quic.is_closed() {
            self.close_conn(idx);
            return;
        }
        // One heap entry per connection at its earliest deadline.
        if let Some(at) = conn.next_deadline() {
            if conn.scheduled.is_none_or(|s| at < s) {
                conn.scheduled = Some(at);
                self.timers.push(Reverse((at, idx)));
            }
        }
    }

    /// Writes what quiche has for connection `idx` as GSO trains: up to 64 datagrams of one
    /// size (the last may be shorter) to one destination. The trains join the turn's
    /// [`SendBatch`], sent when it fills and after the turn's connections are written
    /// ([`Shard::send_batch`]).
    ///
    /// Pacing is honoured at [`PACING_GRANULARITY`]: a packet released (`SendInfo.at`) within
    /// it from now goes now; the first one released later ends the pulling. That one goes too
    /// (quiche has handed it over), and the connection sends nothing more until its release
    /// time (`paced_until`, covered by the connection's timer): release times never decrease,
    /// so the next packet is never sent before the last one's time. (quiche's `send_quantum`
    /// is no train length here: bbr2's is 50 µs of its pacing rate, two packets on most paths,
    /// and the trains it cut all left in the same `sendmmsg`, so it only multiplied the
    /// kernel's per-send work. Nor is a train cut where its packets' release times spread:
    /// every train built in a turn leaves in that turn's `sendmmsg`.)
    ///
    /// `now` is the turn's clock reading; a turn that writes many connections can outlast
    /// the granularity, and quiche stamps a packet it releases at once with its own, later
    /// reading. A packet that looks released for later than the granularity from `now` is
    /// therefore judged again against a fresh reading ([`Release`]): without it, the last
    /// connections written in a long turn were paused for a pacing delay quiche never asked
    /// for. True when it wrote a datagram.
    pub(super) async fn flush(&mut self, idx: usize, now: Instant) -> bool {
        let mut release = Release { now, fresh: false };
        // A packet that could not join the previous train starts the next one; it already
        // lies at the batch's end: (its length, its destination, its release time).
        let mut carried: Option<(usize, SocketAddr, Instant)> = None;
        let mut wrote = false;
        loop {
            if self.batch.is_full() || self.batch.end() > BATCH_FLUSH_BYTES {
                let end = self.batch.end();
                self.send_batch().await;
                if let Some((n, _, _)) = carried {
                    self.batch.buf.copy_within(end..end + n, 0);
                }
            }
            let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) else { return wrote };
            if conn.paced_until.is_some_and(|p| p > release.now) && carried.is_none() {
                return wrote;
            }
            // Without GSO every datagram is its own train.
            let max_segments = if self.gso { MAX_GSO_SEGMENTS } else { 1 };
            let start = self.batch.end();
            let buf = &mut self.batch.buf;
            let (mut len, mut to, mut last_at) = match carried.take() {
                Some((n, to, at)) => (n, Some(to), Some(at)),
                None => (0, None, None),
            };
            // A packet released for later than the granularity from now ends the pulling.
            let mut paced = last_at.is_some_and(|at| release.later(at));
            let mut segment = len;
            let mut segments = usize::from(len > 0);
            let mut finished = false;
            while !paced && segments < max_segments && start + len + MAX_DATAGRAM <= buf.len() {
                let at = start + len;
                match conn.quic.send(&mut buf[at..at + MAX_DATAGRAM]) {
                    Ok((n, info)) => {
                        last_at = Some(info.at);
                        if to.is_none() {
                            to = Some(info.to);
                            segment = n;
                        } else if to != Some(info.to) || n > segment {
                            // It cannot join this train: it starts the next one.
                            carried = Some((n, info.to, info.at));
                            break;
                        }
                        len += n;
                        segments += 1;
                        paced = release.later(info.at);
                        if n < segment {
                            break; // a shorter datagram must be the last of a train
                        }
                    }
                    Err(quiche::Error::Done) => {
                        finished = true;
                        break;
                    }
                    Err(e) => {
                        debug!(error = %e, "quic send");
                        finished = true;
                        break;
                    }
                }
            }
            if let Some(at) = last_at.filter(|&at| release.later(at)) {
                conn.paced_until = Some(at);
            }
            let Some(to) = to else { return wrote };
            if len > 0 {
                wrote = true;
                self.batch.push(Train { start, len, segment, to });
            }
            if carried.is_none() && (finished || paced) {
                return wrote;
            }
        }
    }

    /// Sends the batch's trains, `SEND_BATCH` per `sendmmsg`, and empties it.
    pub(super) async fn send_batch(&mut self) {
        let count = self.batch.trains().len();
        let mut i = 0;
        while i < count {
            match self.batch.send(self.udp.fd, i, self.gso) {
                Ok(n) if n > 0 => {
                    let stats = &self.stats[self.id.index()];
                    for t in &self.batch.trains()[i..i + n] {
                        let datagrams = t.datagrams();
                        ShardStats::add(&stats.datagrams_out, datagrams);
                        ShardStats::add(&stats.bytes_out, t.len as u64);
                        ShardStats::add(&stats.trains_out, 1);
                        if self.gso && datagrams > 1 {
                            ShardStats::add(&stats.gso_sends, 1);
                        }
                    }
                    i += n;
                }
                Err(e) if self.gso && udp::is_gso_unsupported(&e) => {
                    warn!(shard = self.id.0, error = %e, "kernel refused UDP_SEGMENT; sending without GSO");
                    self.gso = false;
                    // The trains already built go out datagram by datagram.
                    for k in i..count {
                        let t = self.batch.trains()[k];
                        self.send_slowly(t).await;
                    }
                    break;
                }
                Ok(_) => {
                    let t = self.batch.trains()[i];
                    self.send_slowly(t).await;
                    i += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let t = self.batch.trains()[i];
                    self.send_slowly(t).await;
                    i += 1;
                }
                Err(e) => {
                    debug!(error = %e, "sendmmsg");
                    ShardStats::add(&self.stats[self.id.index()].dropped, self.batch.trains()[i].datagrams());
                    i += 1;
                }
            }
        }
        self.batch.clear();
    }

    /// Sends one train datagram by datagram through glommio, which awaits writability (the
    /// socket buffer was full, or GSO was refused) instead of spinning.
    pub(super) async fn send_slowly(&mut self, t: Train) {
        let segment = t.segment.max(1);
        let mut off = t.start;
        while off < t.start + t.len {
            let end = (off + segment).min(t.start + t.len);
            let chunk = self.batch.buf[off..end].to_vec();
            match self.udp.socket.send_to(&chunk, t.to).await {
                Ok(_) => {
                    ShardStats::add(&self.stats[self.id.index()].datagrams_out, 1);
                    ShardStats::add(&self.stats[self.id.index()].bytes_out, chunk.len() as u64);
                }
                Err(_) => ShardStats::add(&self.stats[self.id.index()].dropped, 1),
            }
            off = end;
        }
    }
}

/// Whether a packet's release time (`SendInfo.at`) is later than [`PACING_GRANULARITY`]
/// from now, asked with the turn's clock reading first and, only when that says it is, with
/// a fresh one (kept for the rest of the flush).
struct Release {
    now: Instant,
    fresh: bool,
}

impl Release {
    fn later(&mut self, at: Instant) -> bool {
        if at <= self.now + PACING_GRANULARITY {
            return false;
        }
        if !self.fresh {
            self.fresh = true;
            self.now = Instant::now();
        }
        at > self.now + PACING_GRANULARITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_stamped_after_a_long_turn_began_is_not_paced() {
        // The turn began 5 ms ago; quiche stamps a packet it releases at once with its own
        // clock reading, now.
        let turn = Instant::now() - Duration::from_millis(5);
        let mut release = Release { now: turn, fresh: false };
        assert!(!release.later(Instant::now()), "a packet released at once was taken as paced");
        assert!(release.fresh);
        // A release truly ahead is still paced, against the fresh reading.
        assert!(release.later(Instant::now() + 10 * PACING_GRANULARITY));
        // Within the granularity of the turn's reading: no clock is read.
        let mut release = Release { now: turn, fresh: false };
        assert!(!release.later(turn + PACING_GRANULARITY / 2));
        assert!(!release.fresh);
    }
}
