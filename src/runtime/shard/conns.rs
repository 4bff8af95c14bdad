//! The connection table: datagrams routed by connection ID (or handed to the core that owns
//! them), Initials accepted (retry, limits, admission), connections the application asks to
//! open, stateless resets, and closing.

use super::*;

impl<A: ShardApp> Shard<A> {
    /// Routes one received datagram: to another core over the mesh when its connection ID
    /// names that core (never for Initials, whose DCID the client chose), else handles it here.
    pub(super) fn handle_datagram(&mut self, data: &mut [u8], from: SocketAddr) {
        ShardStats::add(&self.stats().datagrams_in, 1);
        ShardStats::add(&self.stats().bytes_in, data.len() as u64);
        let owner = match quiche::Header::from_slice(data, CID_LEN) {
            Ok(hdr) if hdr.ty != quiche::Type::Initial => cid::shard_of(&hdr.dcid),
            // A server's Initial for a connection one of our cores opened.
            Ok(hdr) if self.handshakes.reset.is_outbound(&hdr.dcid) => cid::shard_of(&hdr.dcid),
            _ => None,
        };
        if let Some(owner) = owner.filter(|o| *o != self.id && o.index() < self.rc.cores) {
            ShardStats::add(&self.stats().forwarded_out, 1);
            // Droppable: a full queue means the owner is behind; QUIC recovers the loss.
            let packet = MeshMsg::Packet(Forwarded { data: data.to_vec(), from });
            if self.mesh.endpoint.try_send(owner.index(), packet).is_err() {
                ShardStats::add(&self.stats().dropped, 1);
            }
            return;
        }
        self.handle_owned(data, from);
    }

    /// Handles a datagram that belongs to this core (or to nobody yet).
    pub(super) fn handle_owned(&mut self, data: &mut [u8], from: SocketAddr) {
        let hdr = match quiche::Header::from_slice(data, CID_LEN) {
            Ok(h) => h,
            Err(_) => {
                ShardStats::add(&self.stats().dropped, 1);
                return;
            }
        };
        if let Some(&idx) = self.table.by_cid.get(&hdr.dcid) {
            self.recv_into(idx, data, from);
            return;
        }
        match hdr.ty {
            quiche::Type::Short => self.stateless_reset(&hdr.dcid, data.len(), from),
            quiche::Type::Initial => {
                if !quiche::version_is_supported(hdr.version) {
                    let mut out = [0u8; MAX_DATAGRAM];
                    if let Ok(n) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut out) {
                        self.send_raw(&out[..n], from);
                    }
                    return;
                }
                let (dcid, scid, token) = (hdr.dcid.into_owned(), hdr.scid.into_owned(), hdr.token);
                self.accept(data, from, dcid, scid, token);
            }
            _ => ShardStats::add(&self.stats().dropped, 1),
        }
    }

    /// A new connection from an Initial packet (after address validation when required).
    pub(super) fn accept(
        &mut self,
        data: &mut [u8],
        from: SocketAddr,
        dcid: ConnectionId<'static>,
        client_scid: ConnectionId<'static>,
        token: Option<Vec<u8>>,
    ) {
        let draining = self.shutdown.load(Ordering::Relaxed);
        if draining || self.live_connections() >= self.rc.max_connections_per_core {
            ShardStats::add(&self.stats().refused, 1);
            return;
        }
        if self.load.busy {
            // Admission under load: a core over its budget takes no new connection (the
            // client's Initial goes unanswered and it retries).
            ShardStats::add(&self.stats().refused, 1);
            ShardStats::add(&self.stats().refused_busy, 1);
            return;
        }
        let token = token.unwrap_or_default();
        let odcid = if token.is_empty() {
            None
        } else {
            match self.handshakes.retry_tokens.validate(&token, from, SystemTime::now()) {
                Some(odcid) => Some(odcid),
                None => {
                    // An invalid token: drop (RFC 9000 §8.1.3 allows it; a new Initial without
                    // a token starts over).
                    ShardStats::add(&self.stats().refused, 1);
                    return;
                }
            }
        };
        let must_retry = match self.rc.retry {
            RetryPolicy::Never => false,
            RetryPolicy::Always => true,
            RetryPolicy::Auto { pending_handshakes } => {
                ShardStats::get(&self.stats().handshakes) as usize >= pending_handshakes
            }
        };
        if must_retry && odcid.is_none() {
            let new_scid = self.handshakes.cids.new_cid(self.id);
            let token = self.handshakes.retry_tokens.mint(from, &dcid, SystemTime::now());
            let mut out = [0u8; MAX_DATAGRAM];
            if let Ok(n) =
                quiche::retry(&client_scid, &dcid, &new_scid, &token, quiche::PROTOCOL_VERSION, &mut out)
            {
                ShardStats::add(&self.stats().retries, 1);
                self.send_raw(&out[..n], from);
            }
            return;
        }
        // After a Retry the client addresses us with the CID we chose in it (ours, carrying
        // this shard); otherwise choose one now.
        let scid = if odcid.is_some() && cid::shard_of(&dcid) == Some(self.id) {
            dcid.clone()
        } else {
            self.handshakes.cids.new_cid(self.id)
        };
        self.quic.server.set_stateless_reset_token(Some(self.handshakes.reset.token(&scid)));
        let quic = match quiche::accept_with_buf_factory(
            &scid,
            odcid.as_ref(),
            self.udp.local,
            from,
            &mut self.quic.server,
        ) {
            Ok(c) => c,
            Err(e) => {
                debug!(error = %e, "accept failed");
                ShardStats::add(&self.stats().refused, 1);
                return;
            }
        };
        let mut cids = vec![scid.clone()];
        if dcid != scid {
            cids.push(dcid.clone());
        }
        let conn = Conn {
            quic,
            app: None,
            cids: cids.clone(),
            scheduled: None,
            paced_until: None,
            flush_at: None,
            handshake_counted: true,
            dirty: false,
            gen: self.table.next_gen,
            outbound: None,
            setup_deadline: None,
            setup_armed: false,
        };
        let idx = self.insert_conn(conn);
        let stats = self.stats();
        ShardStats::add(&stats.accepted, 1);
        ShardStats::add(&stats.connections, 1);
        ShardStats::add(&stats.handshakes, 1);
        self.recv_into(idx, data, from);
    }

    /// Puts `conn` in a free slot and registers its connection IDs.
    pub(super) fn insert_conn(&mut self, mut conn: Conn) -> usize {
        conn.gen = self.table.next_gen;
        self.table.next_gen = self.table.next_gen.wrapping_add(1);
        if let Some(dir) = &self.rc.qlog_dir {
            let name = conn.cids.first().map(|c| hex(c)).unwrap_or_default();
            match std::fs::File::create(dir.join(format!("{name}.sqlog"))) {
                Ok(f) => conn.quic.set_qlog(
                    Box::new(std::io::BufWriter::new(f)),
                    "moq-edge".to_string(),
                    format!("core {} connection {name}", self.id.0),
                ),
                Err(e) => warn!(error = %e, dir = %dir.display(), "qlog file not created"),
            }
        }
        let cids = conn.cids.clone();
        let idx = match self.table.free.pop() {
            Some(i) => {
                self.table.conns[i] = Some(Box::new(conn));
                i
            }
            None => {
                self.table.conns.push(Some(Box::new(conn)));
                self.table.conns.len() - 1
            }
        };
        for c in cids {
            self.table.by_cid.insert(c, idx);
        }
        idx
    }

    /// Opens a connection the application asked for (an upstream relay). It runs like any
    /// other: when the handshake completes the application gets it with its tag.
    pub(super) fn connect(&mut self, c: Connect) {
        // The socket may be IPv6 dual-stack: an IPv4 peer is then reached as a mapped address.
        let peer = match (self.udp.local, c.peer) {
            (SocketAddr::V6(_), SocketAddr::V4(v4)) => {
                SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port())
            }
            (SocketAddr::V4(_), SocketAddr::V6(v6)) => match v6.ip().to_ipv4_mapped() {
                Some(ip) => SocketAddr::new(ip.into(), v6.port()),
                None => return self.connect_failed(c.tag, "an IPv6 peer from an IPv4 socket"),
            },
            (_, p) => p,
        };
        if self.shutdown.load(Ordering::Relaxed) {
            return self.connect_failed(c.tag, "shutting down");
        }
        let Some(scid) = self.handshakes.reset.outbound_cid(self.id, &self.handshakes.rng) else {
            return self.connect_failed(c.tag, "the random number generator failed");
        };
        let quic = match quiche::connect_with_buffer_factory(
            c.server_name.as_deref(),
            &scid,
            self.udp.local,
            peer,
            &mut self.quic.client,
        ) {
            Ok(q) => q,
            Err(e) => return self.connect_failed(c.tag, &format!("{e}")),
        };
        let conn = Conn {
            quic,
            app: None,
            cids: vec![scid],
            scheduled: None,
            paced_until: None,
            flush_at: None,
            handshake_counted: false,
            dirty: false,
            gen: 0,
            outbound: Some(c.tag),
            setup_deadline: None,
            setup_armed: true,
        };
        let idx = self.insert_conn(conn);
        ShardStats::add(&self.stats().connections, 1);
        ShardStats::add(&self.stats().outbound, 1);
        ShardStats::add(&self.stats().connects, 1);
        if let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) {
            mark_dirty(&mut self.dirty, conn, idx);
        }
    }

    pub(super) fn connect_failed(&mut self, tag: u64, why: &str) {
        debug!(shard = self.id.0, tag, why, "outbound connection failed");
        self.app.shard.connect_failed(tag, why);
    }

    pub(super) fn live_connections(&self) -> usize {
        self.table.conns.len() - self.table.free.len()
    }

    pub(super) fn recv_into(&mut self, idx: usize, data: &mut [u8], from: SocketAddr) {
        let local = self.udp.local;
        let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) else { return };
        let info = quiche::RecvInfo { from, to: local };
        if let Err(e) = conn.quic.recv(data, info) {
            debug!(error = %e, "quic recv");
        }
        mark_dirty(&mut self.dirty, conn, idx);
    }

    /// RFC 9000 §10.3: answer a short-header packet for an unknown connection.
    pub(super) fn stateless_reset(&mut self, dcid: &[u8], trigger_len: usize, to: SocketAddr) {
        let mut out = [0u8; 64];
        if let Some(n) =
            self.handshakes.reset.stateless_reset(dcid, trigger_len, &self.handshakes.rng, &mut out)
        {
            ShardStats::add(&self.stats().stateless_resets, 1);
            self.send_raw(&out[..n], to);
        } else {
            ShardStats::add(&self.stats().dropped, 1);
        }
    }

    /// One datagram outside any connection (Retry, version negotiation, reset). Best effort:
    /// if the socket buffer is full it is dropped, as the peer will retransmit.
    pub(super) fn send_raw(&mut self, buf: &[u8], to: SocketAddr) {
        match udp::send(self.udp.fd, to, buf, buf.len(), false) {
            Ok(n) => {
                ShardStats::add(&self.stats().datagrams_out, 1);
                ShardStats::add(&self.stats().bytes_out, n as u64);
            }
            Err(_) => ShardStats::add(&self.stats().dropped, 1),
        }
    }

    pub(super) fn close_conn(&mut self, idx: usize) {
        let Some(mut conn) = self.table.conns.get_mut(idx).and_then(Option::take) else { return };
        // quiche builds its path statistics anew for each read: read only when logged.
        let path = tracing::enabled!(tracing::Level::DEBUG).then(|| conn.quic.path_stats().next()).flatten();
        if let Some(p) = path {
            debug!(
                shard = self.id.0, sent = p.sent, lost = p.lost, rtt = ?p.rtt, min_rtt = ?p.min_rtt, cwnd = p.cwnd,
                delivery_rate = p.delivery_rate, max_bandwidth = ?p.max_bandwidth, startup_exit = ?p.startup_exit,
                "connection closed: its path"
            );
        }
        match (conn.app.as_mut(), conn.outbound) {
            (Some(app), _) => app.on_closed(&conn.quic),
            (None, Some(tag)) => {
                let why = match conn.quic.peer_error().or(conn.quic.local_error()) {
                    Some(e) => format!(
                        "closed during the handshake ({}): {:?}",
                        describe_close(e),
                        String::from_utf8_lossy(&e.reason)
                    ),
                    None if conn.quic.is_timed_out() => "the handshake timed out".to_string(),
                    None => "closed during the handshake".to_string(),
                };
                self.connect_failed(tag, &why);
            }
            (None, None) => {}
        }
        for c in &conn.cids {
            if self.table.by_cid.get(c) == Some(&idx) {
                self.table.by_cid.remove(c);
            }
        }
        let stats = &self.stats[self.id.index()];
        ShardStats::sub(&stats.connections, 1);
        if conn.outbound.is_some() {
            ShardStats::sub(&stats.outbound, 1);
        }
        if conn.handshake_counted {
            ShardStats::sub(&stats.handshakes, 1);
        }
        self.table.free.push(idx);
    }

    /// Shutdown: close every connection with NO_ERROR; they drain and leave the table.
    pub(super) fn close_all(&mut self, code: u64, reason: &[u8]) {
        self.tcp.close_all(code, reason);
        for idx in 0..self.table.conns.len() {
            if let Some(conn) = self.table.conns[idx].as_mut() {
                let _ = conn.quic.close(true, code, reason);
                mark_dirty(&mut self.dirty, conn, idx);
            }
        }
    }
}

/// A connection close's code for people: a TLS alert by name (QUIC carries a TLS alert as
/// transport error 0x100 + the alert, RFC 9001 §4.8; RFC 8446 §6), else the code.
fn describe_close(e: &quiche::ConnectionError) -> String {
    if e.is_app {
        return format!("application error 0x{:x}", e.error_code);
    }
    let Some(alert) = e.error_code.checked_sub(0x100).filter(|a| *a < 0x100) else {
        return format!("transport error 0x{:x}", e.error_code);
    };
    let name = match alert {
        40 => "handshake_failure",
        42 => "bad_certificate",
        44 => "certificate_revoked",
        45 => "certificate_expired",
        46 => "certificate_unknown",
        48 => "unknown_ca: the peer's certificate does not chain to a trusted CA",
        80 => "internal_error",
        116 => "certificate_required",
        120 => "no_application_protocol: no ALPN in common",
        _ => "see RFC 8446 §6",
    };
    format!("TLS alert {alert}, {name}")
}
