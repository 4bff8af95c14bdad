//! The glue between a quiche connection and a sans-IO MoQT [`Session`]: stream bytes, resets,
//! STOP_SENDING and datagrams go into the session; its transmits go out through quiche, with
//! a per-stream queue for what flow control does not take yet. It moves bytes and makes no
//! protocol decision; what to do with requests is the [`RequestHandler`]'s business (the
//! relay, when it exists).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use tracing::debug;

use super::app::{AppFactory, ConnApp};
use super::ShardId;
use crate::session::{Event, Session, SessionConfig, Transmit};
use crate::wire::model::{Message, RequestError, RequestId, Role, SetupOptions};
use crate::wire::Version;

/// REQUEST_ERROR NOT_SUPPORTED (0x3) in both drafts.
const NOT_SUPPORTED: u64 = 0x3;

/// Decides what to answer to the peer's requests.
pub trait RequestHandler {
    /// An event from the session (requests, responses, objects, ...). Answer through `session`.
    fn on_event(&mut self, session: &mut Session, event: Event);
}

/// The answer of a node that does not relay yet: every request gets REQUEST_ERROR
/// NOT_SUPPORTED ("the endpoint does not support the type of request"), which is true of this
/// build; the SETUP exchange itself is complete and correct.
#[derive(Debug, Default, Clone, Copy)]
pub struct RefuseRequests;

impl RequestHandler for RefuseRequests {
    fn on_event(&mut self, session: &mut Session, event: Event) {
        let Event::Message(msg) = event else { return };
        let request_id = match &msg {
            Message::Subscribe(m) | Message::TrackStatus(m) => m.request_id,
            Message::Publish(m) => m.request_id,
            Message::Fetch(m) => m.request_id,
            Message::PublishNamespace(m) => m.request_id,
            Message::SubscribeNamespace(m) => m.request_id,
            Message::SubscribeTracks(m) => m.request_id,
            Message::RequestUpdate(m) => m.existing_request_id,
            _ => return,
        };
        refuse(session, request_id);
    }
}

fn refuse(session: &mut Session, request_id: RequestId) {
    let error = Message::RequestError(RequestError {
        request_id,
        error_code: NOT_SUPPORTED,
        retry_interval: 0,
        reason: Bytes::from_static(b"moq-edge: relaying is not implemented in this build"),
        redirect: None,
    });
    if let Err(e) = session.send(error) {
        debug!(error = %e, "could not refuse request");
    }
    // draft-22: the request stream ends after the error (draft-16 has no request streams).
    if session.version() == Version::Draft22 {
        let _ = session.finish(request_id);
    }
}

/// Moves bytes between one quiche connection and its [`Session`]: stream data, resets,
/// STOP_SENDING and datagrams in; the session's transmits out, with a per-stream queue for
/// what flow control does not take yet.
#[derive(Debug, Default)]
pub struct Pump {
    /// Bytes the session wrote that quiche has not taken yet, per stream, in order. Streams
    /// are retried oldest first (lowest ID), so that the streams a peer is waiting on to end
    /// (and to grant more streams) go first, and new streams open in ID order.
    pending: BTreeMap<u64, VecDeque<(Bytes, bool)>>,
}

impl Pump {
    /// Feeds everything readable on `conn` into `session`; `buf` is scratch space.
    pub fn read(&mut self, conn: &mut quiche::Connection, session: &mut Session, buf: &mut [u8]) {
        while let Some(id) = conn.stream_readable_next() {
            loop {
                match conn.stream_recv(id, buf) {
                    Ok((n, fin)) => {
                        session.on_stream_data(id, &buf[..n], fin);
                        if fin {
                            break;
                        }
                    }
                    Err(quiche::Error::Done) => break,
                    Err(quiche::Error::StreamReset(code)) => {
                        session.on_stream_reset(id, code);
                        break;
                    }
                    Err(e) => {
                        debug!(stream = id, error = %e, "stream_recv");
                        break;
                    }
                }
            }
        }
        while let Ok(n) = conn.dgram_recv(buf) {
            session.on_datagram(Bytes::copy_from_slice(&buf[..n]));
        }
    }

    /// Writes the session's transmits into `conn` (what does not fit waits here).
    pub fn write(&mut self, conn: &mut quiche::Connection, session: &mut Session) {
        while let Some(t) = session.poll_transmit() {
            match t {
                Transmit::Stream { id, data, fin } => {
                    self.pending.entry(id).or_default().push_back((data, fin));
                }
                Transmit::Reset { id, code } => {
                    self.pending.remove(&id);
                    let _ = conn.stream_shutdown(id, quiche::Shutdown::Write, code);
                }
                Transmit::StopSending { id, code } => {
                    let _ = conn.stream_shutdown(id, quiche::Shutdown::Read, code);
                }
                Transmit::Datagram { data } => {
                    // Best effort by nature: a full queue drops the datagram.
                    let _ = conn.dgram_send(&data);
                }
                Transmit::Close { code, reason } => {
                    let _ = conn.close(true, code, reason.as_bytes());
                }
            }
        }
        // Set when a stream type (the two low bits of the ID) hit the peer's stream limit:
        // every later stream of that type would too, so they are not tried this time.
        let mut limited = [false; 4];
        self.pending.retain(|&id, queue| {
            if limited[(id & 3) as usize] {
                return true;
            }
            while let Some((data, fin)) = queue.front_mut() {
                match conn.stream_send(id, data, *fin) {
                    Ok(n) if n == data.len() => {
                        queue.pop_front();
                    }
                    Ok(n) => {
                        let _ = data.split_to(n);
                        return true; // flow control: the rest waits for the next call
                    }
                    // No credit yet: the bytes wait here, in order, for MAX_DATA or
                    // MAX_STREAM_DATA, or for MAX_STREAMS (the peer's stream limit).
                    Err(quiche::Error::Done) => return true,
                    Err(quiche::Error::StreamLimit) => {
                        limited[(id & 3) as usize] = true;
                        return true;
                    }
                    Err(quiche::Error::StreamStopped(code)) => {
                        session.on_stop_sending(id, code);
                        return false;
                    }
                    Err(e) => {
                        debug!(stream = id, error = %e, "stream_send");
                        return false;
                    }
                }
            }
            false
        });
    }

    /// Bytes waiting for flow control.
    pub fn queued_bytes(&self) -> usize {
        self.pending.values().flatten().map(|(b, _)| b.len()).sum()
    }
}

/// One connection's MoQT session over quiche, with a handler for its events (our client).
pub struct MoqtApp<H> {
    session: Session,
    handler: H,
    pump: Pump,
    buf: Vec<u8>,
}

impl<H: RequestHandler> MoqtApp<H> {
    /// Glue for `session` (either role: the server's connections and our client use it).
    pub fn new(session: Session, handler: H) -> Self {
        MoqtApp { session, handler, pump: Pump::default(), buf: vec![0u8; 65_536] }
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    pub fn handler(&self) -> &H {
        &self.handler
    }

    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// Hands the next session event to the handler; false when there was none.
    fn handle_next_event(&mut self) -> bool {
        match self.session.poll_event() {
            Some(event) => {
                self.handler.on_event(&mut self.session, event);
                true
            }
            None => false,
        }
    }

    fn read(&mut self, conn: &mut quiche::Connection) {
        self.pump.read(conn, &mut self.session, &mut self.buf);
    }

    fn write(&mut self, conn: &mut quiche::Connection) {
        self.pump.write(conn, &mut self.session);
    }
}

impl<H: RequestHandler> ConnApp for MoqtApp<H> {
    fn on_io(&mut self, conn: &mut quiche::Connection) {
        self.read(conn);
        loop {
            while self.handle_next_event() {}
            self.write(conn);
            // Writing can surface events (a STOP_SENDING seen by stream_send); stop when it
            // did not. Every round consumes queued work, so this ends.
            if !self.handle_next_event() {
                break;
            }
        }
    }
}

/// Serves MoQT on every connection, refusing requests until the relay exists.
#[derive(Debug, Default, Clone)]
pub struct MoqtFactory {
    pub config: SessionConfig,
}

impl AppFactory for MoqtFactory {
    fn new_connection(&self, _shard: ShardId, version: Version) -> Box<dyn ConnApp> {
        let session = Session::new(version, Role::Server, self.config.clone(), SetupOptions::default());
        Box::new(MoqtApp::new(session, RefuseRequests))
    }
}
