//! The sending half of [`Session`]: SETUP, Request ID allocation and MAX_REQUEST_ID grants
//! (draft-16 "MAX_REQUEST_ID", "REQUESTS_BLOCKED"), and routing each outgoing message onto its
//! stream. draft-16: the control stream, or a SUBSCRIBE_NAMESPACE's own stream for its response
//! and NAMESPACE messages. draft-22 (§6.4.2) and draft-18 (§3.3): a new bidirectional stream per request (client 0,
//! 4, 8..., server 1, 5, 9...), responses and updates on the request's stream, GOAWAY on the
//! control stream; plus graceful FIN and cancellation (draft-22 §6.4.2.2-§6.4.2.3).

use super::{ReqStream, Session, RESET_CANCELLED};
use crate::error::{SessionCode, SessionError};
use crate::requests::{consumed_id, opens_stream, referenced_id, Alloc};
use crate::streams::{RecvBuf, StreamId};
use crate::Transmit;
use wire::model::{Message, RequestId, Role, Setup};
use wire::Version;

impl Session {
    pub(super) fn send_setup(&mut self) {
        let setup = Setup { options: self.setup.local.clone() };
        let msg = match self.role {
            Role::Client => Message::ClientSetup(setup),
            Role::Server => Message::ServerSetup(setup),
        };
        match self.encode(&msg) {
            Ok(data) => {
                self.setup.sent = true;
                self.transmits.push_back(Transmit::Stream {
                    id: self.control.local,
                    data: data.into(),
                    fin: false,
                    expires: None,
                });
            }
            Err(e) => self.close(SessionCode::InternalError, format!("cannot encode SETUP: {e}")),
        }
    }

    fn encode(&self, msg: &Message) -> Result<Vec<u8>, SessionError> {
        let mut out = Vec::new();
        self.codec.encode_message(msg, &mut out)?;
        Ok(out)
    }

    fn write(&mut self, id: StreamId, data: Vec<u8>) {
        self.transmits.push_back(Transmit::Stream { id, data: data.into(), fin: false, expires: None });
    }

    /// The next Request ID for a request of ours. draft-16: fails before the peer's SETUP and
    /// when the peer's MAX_REQUEST_ID is reached (queueing REQUESTS_BLOCKED once per limit).
    pub fn next_request_id(&mut self) -> Result<RequestId, SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        match self.ids.allocate() {
            Ok(id) => Ok(id),
            Err(Alloc::NotReady) => Err(SessionError::NotReady),
            Err(Alloc::Blocked { max, send_blocked }) => {
                if send_blocked {
                    let data = self.encode(&Message::RequestsBlocked(RequestId(max)))?;
                    self.write(self.control.local, data);
                }
                Err(SessionError::Blocked { max })
            }
        }
    }

    /// draft-16: lets the peer make `requests` more requests (sends MAX_REQUEST_ID). draft-22
    /// has no such message (QUIC stream limits apply): a no-op.
    pub fn grant_requests(&mut self, requests: u64) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if !self.version.request_streams() && requests > 0 {
            let max = self.ids.grant(requests);
            let data = self.encode(&Message::MaxRequestId(RequestId(max)))?;
            self.write(self.control.local, data);
        }
        Ok(())
    }

    /// Names this session's connection in its logs: `core` and `conn`, as the relay calls it.
    pub fn set_log_id(&mut self, core: usize, conn: u64) {
        self.log_id = (core, conn);
    }

    /// Sends a version-neutral message on the stream it belongs on (see the module header).
    /// NAMESPACE / NAMESPACE_DONE name no request: use [`Session::send_on`].
    pub fn send(&mut self, msg: Message) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if !self.setup.sent {
            return Err(SessionError::NotReady);
        }
        match &msg {
            Message::ClientSetup(_) | Message::ServerSetup(_) => {
                return Err(SessionError::Misrouted("SETUP"))
            }
            Message::Namespace(_) | Message::NamespaceDone(_) => {
                return Err(SessionError::Misrouted(msg.name()))
            }
            _ => {}
        }
        if let Some(rid) = consumed_id(&msg) {
            if !self.ids.is_ours(rid) {
                return Err(SessionError::UnknownRequest(rid.0));
            }
        }
        if let Message::Publish(m) = &msg {
            self.ids.note_local_publish(m.request_id);
        }
        self.observe_outgoing(&msg);
        tracing::debug!(core = self.log_id.0, conn = self.log_id.1, ?msg, "message out");
        match self.version {
            Version::Draft14 => self.send_d14(msg),
            Version::Draft16 => self.send_d16(msg),
            Version::Draft18 | Version::Draft20 | Version::Draft22 => self.send_d22(msg),
        }
    }

    fn send_d16(&mut self, msg: Message) -> Result<(), SessionError> {
        let data = self.encode(&msg)?;
        match &msg {
            Message::SubscribeNamespace(m) => {
                let id = self.open_request_stream(m.request_id, false);
                self.write(id, data);
            }
            Message::RequestOk(_) | Message::RequestError(_) => {
                let stream = referenced_id(&msg).and_then(|r| self.reqs.by_request.get(&r).copied());
                self.write(stream.unwrap_or(self.control.local), data);
            }
            Message::MaxRequestId(m) => {
                self.ids.set_local_max(m.0);
                self.write(self.control.local, data);
            }
            _ => self.write(self.control.local, data),
        }
        Ok(())
    }

    /// draft-22, and draft-18 whose streams are the same (§3.3).
    fn send_d22(&mut self, mut msg: Message) -> Result<(), SessionError> {
        if let Message::GoAway(g) = &mut msg {
            // draft-18 §10.4: on the control stream GOAWAY names the smallest peer Request ID
            // not processed: the first the peer has not used.
            if self.version == Version::Draft18 {
                g.request_id.get_or_insert(self.ids.first_unused_peer());
                self.goaway.sent = true;
            }
            let data = self.encode(&msg)?;
            self.write(self.control.local, data);
            return Ok(());
        }
        match &msg {
            Message::Unsubscribe(r) | Message::FetchCancel(r) => return self.cancel(*r),
            // §3.3.2 / §9.16: a PUBLISH_NAMESPACE is withdrawn by cancelling its request.
            Message::PublishNamespaceDone(r) => return self.cancel(*r),
            _ => {}
        }
        let data = self.encode(&msg)?;
        if opens_stream(&msg) {
            if let Some(rid) = consumed_id(&msg) {
                let id = self.open_request_stream(rid, matches!(msg, Message::Publish(_)));
                self.write(id, data);
                return Ok(());
            }
        }
        let rid = referenced_id(&msg).ok_or(SessionError::Misrouted(msg.name()))?;
        let id = *self.reqs.by_request.get(&rid).ok_or(SessionError::UnknownRequest(rid.0))?;
        if matches!(msg, Message::RequestUpdate(_)) {
            // §9.1.7: at most the peer's MAX_REQUEST_UPDATES unanswered per request stream.
            let max = self.setup.peer.as_ref().and_then(|p| p.max_request_updates).unwrap_or(0);
            // draft-18 has no MAX_REQUEST_UPDATES: its SETUP never carries one, so no limit.
            if let Some(st) = self.reqs.streams.get_mut(&id) {
                if max > 0 && st.updates_out >= max {
                    return Err(SessionError::UpdatesBlocked { max });
                }
                st.updates_out += 1;
            }
        }
        self.write(id, data);
        Ok(())
    }

    fn open_request_stream(&mut self, rid: RequestId, publish: bool) -> StreamId {
        let id = self.reqs.next_local_bidi;
        self.reqs.next_local_bidi = self.reqs.next_local_bidi.next();
        self.reqs.streams.insert(
            id,
            ReqStream {
                request_id: Some(rid),
                recv: RecvBuf::default(),
                send_fin: false,
                publish,
                updates_out: 0,
                counted: 0,
            },
        );
        self.reqs.by_request.insert(rid, id);
        id
    }

    /// Sends `msg` on the stream of request `request_id` (NAMESPACE / NAMESPACE_DONE on a
    /// SUBSCRIBE_NAMESPACE stream, or any response).
    pub fn send_on(&mut self, request_id: RequestId, msg: Message) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if self.version == Version::Draft14 {
            return self.send_on_d14(request_id, msg);
        }
        let id = *self.reqs.by_request.get(&request_id).ok_or(SessionError::UnknownRequest(request_id.0))?;
        tracing::debug!(core = self.log_id.0, conn = self.log_id.1, ?msg, "message out");
        let data = self.encode(&msg)?;
        self.write(id, data);
        Ok(())
    }

    /// Ends our direction of the request's stream gracefully (FIN; draft-22 §6.4.2.2).
    pub fn finish(&mut self, request_id: RequestId) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        let id = *self.reqs.by_request.get(&request_id).ok_or(SessionError::UnknownRequest(request_id.0))?;
        self.finish_stream(id);
        if self.reqs.streams.get(&id).is_some_and(|s| s.recv.fin && s.recv.is_empty()) {
            self.drop_stream(id);
        }
        Ok(())
    }

    pub(super) fn finish_stream(&mut self, id: StreamId) {
        if let Some(st) = self.reqs.streams.get_mut(&id) {
            if !st.send_fin {
                st.send_fin = true;
                self.transmits.push_back(Transmit::Stream {
                    id,
                    data: bytes::Bytes::new(),
                    fin: true,
                    expires: None,
                });
            }
        }
    }

    /// Cancels a request that has its own stream (draft-22 requests, draft-16
    /// SUBSCRIBE_NAMESPACE): RESET_STREAM our direction, STOP_SENDING theirs (§6.4.2.3).
    pub fn cancel(&mut self, request_id: RequestId) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        if self.version == Version::Draft14 && self.cancel_d14(request_id)? {
            return Ok(());
        }
        let Some(&id) = self.reqs.by_request.get(&request_id) else {
            return Err(match self.version {
                Version::Draft14 | Version::Draft16 => {
                    SessionError::Misrouted("draft-14 and draft-16 cancel with UNSUBSCRIBE/FETCH_CANCEL")
                }
                Version::Draft18 | Version::Draft20 | Version::Draft22 => {
                    SessionError::UnknownRequest(request_id.0)
                }
            });
        };
        if let Some(st) = self.reqs.streams.get(&id) {
            if !st.send_fin {
                self.transmits.push_back(Transmit::Reset { id, code: RESET_CANCELLED });
            }
            if !st.recv.fin {
                self.transmits.push_back(Transmit::StopSending { id, code: RESET_CANCELLED });
            }
        }
        self.drop_stream(id);
        self.request_ended(request_id);
        Ok(())
    }
}
