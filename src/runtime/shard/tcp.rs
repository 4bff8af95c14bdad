//! The core's connections over TCP (`crate::tcp`): each one's QMux state and application
//! live here and are serviced in the core's turn like a QUIC connection; two tasks of the
//! core's executor move its socket's bytes (one reads, one writes), each bounded, and tell the
//! turn when they did something.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use glommio::Task;

use super::*;
use crate::tcp::StreamHandoff;

/// Bytes read from one socket and not yet fed to its QMux state, beyond which its reader
/// waits: a peer cannot make a core hold more of its input than this.
const INPUT_LIMIT: usize = 256 * 1024;
/// One socket read (the reader task's buffer, one per connection).
const READ_CHUNK: usize = 16 * 1024;
/// Bytes handed to one socket's writer and not yet written, beyond which the core takes no
/// more output from its QMux state (which then takes no more stream data: the application's
/// own backlog rules apply, as behind a QUIC congestion window).
const OUTPUT_LIMIT: usize = 256 * 1024;
/// One hand-over to the writer.
const OUTPUT_CHUNK: usize = 64 * 1024;
/// How long a closing connection's last bytes may take to write.
const CLOSE_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections over TCP a core serves at once; more are closed as they arrive.
const MAX_STREAM_CONNS: usize = 4096;
/// The bit of a [`ConnHandle`]'s slot that marks a connection over TCP.
pub(super) const STREAM_BIT: u64 = 1 << 31;

/// A level-triggered wakeup for one waiting task: set until the waiter sees it.
#[derive(Default)]
pub(super) struct Signal {
    set: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Signal {
    fn notify(&self) {
        self.set.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Completes once notified since the last completion.
    pub(super) fn wait(self: Rc<Self>) -> impl Future<Output = ()> {
        SignalWait(self)
    }
}

struct SignalWait(Rc<Signal>);

impl Future for SignalWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.set.replace(false) {
            return Poll::Ready(());
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// What the core and one connection's two tasks share.
#[derive(Default)]
struct Pipe {
    input: RefCell<VecDeque<Bytes>>,
    input_bytes: Cell<usize>,
    /// The peer closed its side, or reading failed.
    eof: Cell<bool>,
    /// The reader waits on this while `input_bytes` is over the limit.
    resume: Rc<Signal>,
    output: RefCell<VecDeque<Bytes>>,
    output_bytes: Cell<usize>,
    /// Writing failed: the connection is gone.
    broken: Cell<bool>,
    /// The writer waits on this for output.
    more: Rc<Signal>,
    /// No more output will come: the writer writes what is left, then closes.
    finish: Cell<bool>,
}

/// What the core's tasks tell the turn: which connections have something new.
#[derive(Default)]
pub(super) struct Ready {
    slots: RefCell<Vec<usize>>,
    pub(super) signal: Rc<Signal>,
}

impl Ready {
    fn mark(&self, idx: usize) {
        self.slots.borrow_mut().push(idx);
        self.signal.notify();
    }
}

pub(super) struct StreamConn {
    qmux: qmux::Connection,
    app: Box<dyn ConnApp>,
    tls: Option<crate::StreamTls>,
    pipe: Rc<Pipe>,
    /// Held only to be cancelled with the connection.
    _reader: Task<()>,
    writer: Option<Task<()>>,
    gen: u32,
    eof_seen: bool,
    setup_deadline: Option<Instant>,
    scheduled: Option<Instant>,
}

impl StreamConn {
    fn next_deadline(&self) -> Option<Instant> {
        [self.qmux.timeout_instant(), self.setup_deadline].into_iter().flatten().min()
    }
}

/// The core's connections over TCP.
#[derive(Default)]
pub(super) struct TcpConns {
    conns: Vec<Option<StreamConn>>,
    free: Vec<usize>,
    next_gen: u32,
    pub(super) ready: Rc<Ready>,
    /// Connections to service this turn (woken by the application, or by a timer).
    dirty: Vec<usize>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    live: usize,
}

impl TcpConns {
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _))| *at)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Marks a connection the application woke (`h`: its handle's slot, with [`STREAM_BIT`]).
    pub(super) fn wake(&mut self, idx: usize, gen: u32) {
        if self.conns.get(idx).and_then(Option::as_ref).is_some_and(|c| c.gen == gen) {
            self.dirty.push(idx);
        }
    }
}

impl TcpConns {
    /// Takes the connections handed to this core (`StreamAcceptor::adopt`).
    /// `app` makes each one's application; none is taken while `refusing` (shutdown).
    pub(super) fn adopt<A: ShardApp>(
        &mut self,
        handoff: &crossbeam_queue::ArrayQueue<StreamHandoff>,
        refusing: bool,
        (app, rc, shard): (&mut A, &RuntimeConfig, ShardId),
        now: Instant,
    ) -> bool {
        let mut adopted = false;
        while let Some(handoff) = handoff.pop() {
            if self.live >= MAX_STREAM_CONNS || refusing {
                debug!(shard = shard.0, "connection over TCP refused: at the limit or shutting down");
                continue; // dropped: the socket closes
            }
            match self.adopt_one(handoff, app, rc, now) {
                Ok(idx) => {
                    self.dirty.push(idx);
                    adopted = true;
                }
                Err(e) => debug!(shard = shard.0, error = %e, "connection over TCP not adopted"),
            }
        }
        adopted
    }

    fn adopt_one<A: ShardApp>(
        &mut self,
        h: StreamHandoff,
        app: &mut A,
        rc: &RuntimeConfig,
        now: Instant,
    ) -> io::Result<usize> {
        let socket = socket2::Socket::from(h.socket);
        socket.set_nonblocking(true)?;
        let _ = socket.set_nodelay(true);
        let write_half = socket.try_clone()?;
        let (reader, writer) = (TcpStream::from(socket), TcpStream::from(write_half));
        writer.set_write_timeout(Some(CLOSE_WRITE_TIMEOUT))?;
        let st = &mut *self;
        let idx = st.free.pop().unwrap_or_else(|| {
            st.conns.push(None);
            st.conns.len() - 1
        });
        st.next_gen = st.next_gen.wrapping_add(1);
        let gen = st.next_gen;
        let handle = ConnHandle(u64::from(gen) << 32 | STREAM_BIT | idx as u64);
        let mut app = app.new_stream_connection(handle, &h.request);
        let setup_deadline = now + rc.setup_timeout;
        app.set_setup_deadline(setup_deadline);
        let config = qmux::Config { max_idle_timeout: rc.idle_timeout, ..qmux::Config::default() };
        let mut qmux = qmux::Connection::new(h.version, h.framing, qmux::Role::Server, &config, now);
        let mut tls = h.tls;
        let mut early = h.early;
        if let Some(t) = tls.as_mut() {
            // What TLS decrypted already and the web listener did not read.
            t.decrypt(&[], &mut early)?;
        }
        if !early.is_empty() {
            let _ = qmux.recv(&early, now);
        }
        let pipe = Rc::new(Pipe::default());
        let ready = self.ready.clone();
        let reader = glommio::spawn_local(read_loop(reader, pipe.clone(), ready.clone(), idx));
        let writer = glommio::spawn_local(write_loop(writer, pipe.clone(), ready, idx));
        let conn = StreamConn {
            qmux,
            app,
            tls,
            pipe,
            _reader: reader,
            writer: Some(writer),
            gen,
            eof_seen: false,
            setup_deadline: Some(setup_deadline),
            scheduled: None,
        };
        self.conns[idx] = Some(conn);
        self.live += 1;
        Ok(idx)
    }

    /// Services the connections over TCP that have input, finished writes, a due timer, or
    /// were woken by the application. True when any was.
    pub(super) fn service(&mut self, now: Instant) -> bool {
        let mut todo = std::mem::take(&mut self.dirty);
        todo.append(&mut self.ready.slots.borrow_mut());
        while let Some(&Reverse((at, idx))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) {
                if c.scheduled == Some(at) {
                    c.scheduled = None;
                    todo.push(idx);
                }
            }
        }
        if todo.is_empty() {
            return false;
        }
        todo.sort_unstable();
        todo.dedup();
        for &idx in &todo {
            self.service_one(idx, now);
        }
        todo.clear();
        self.dirty = todo;
        true
    }

    fn service_one(&mut self, idx: usize, now: Instant) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else { return };
        feed_input(c, now);
        if c.setup_deadline.is_some_and(|at| at <= now) {
            c.setup_deadline = None; // the application was told it; its on_stream_io acts on it
        }
        if c.qmux.timeout_instant().is_some_and(|at| at <= now) {
            c.qmux.on_timeout(now);
        }
        c.app.on_stream_io(&mut c.qmux);
        take_output(c);
        if c.qmux.is_closed() && !c.qmux.has_output() || c.pipe.broken.get() {
            self.close_one(idx);
            return;
        }
        if let Some(at) = c.next_deadline() {
            if c.scheduled.is_none_or(|s| at < s) {
                c.scheduled = Some(at);
                self.timers.push(Reverse((at, idx)));
            }
        }
    }

    fn close_one(&mut self, idx: usize) {
        let Some(mut c) = self.conns.get_mut(idx).and_then(Option::take) else { return };
        c.app.on_stream_closed(&c.qmux);
        if let Some(tls) = c.tls.as_mut() {
            push_output(&c.pipe, Bytes::from(tls.close()));
        }
        // The writer writes what is left (bounded by its write timeout), then closes the
        // socket; the reader is cancelled with its task.
        c.pipe.finish.set(true);
        c.pipe.more.notify();
        if let Some(w) = c.writer.take() {
            w.detach();
        }
        drop(c);
        self.free.push(idx);
        self.live -= 1;
    }

    /// Closes every connection over TCP with `code` (shutdown).
    pub(super) fn close_all(&mut self, code: u64, reason: &[u8]) {
        for idx in 0..self.conns.len() {
            if let Some(c) = self.conns[idx].as_mut() {
                let _ = c.qmux.close(true, code, reason);
                self.dirty.push(idx);
            }
        }
    }
}

/// Feeds what the reader brought (through TLS, if any) into the QMux state.
fn feed_input(c: &mut StreamConn, now: Instant) {
    let mut plain = Vec::new();
    loop {
        let Some(chunk) = c.pipe.input.borrow_mut().pop_front() else { break };
        c.pipe.input_bytes.set(c.pipe.input_bytes.get() - chunk.len());
        let eof = match c.tls.as_mut() {
            None => {
                let _ = c.qmux.recv(&chunk, now);
                false
            }
            Some(tls) => {
                plain.clear();
                let closed = tls.decrypt(&chunk, &mut plain);
                if !plain.is_empty() {
                    let _ = c.qmux.recv(&plain, now);
                }
                !matches!(closed, Ok(false))
            }
        };
        if eof {
            c.pipe.eof.set(true);
            break;
        }
    }
    c.pipe.resume.notify();
    if c.pipe.eof.get() && !c.eof_seen && c.pipe.input.borrow().is_empty() {
        c.eof_seen = true;
        c.qmux.recv_eof(now);
    }
}

/// Moves the QMux state's output (through TLS, if any) to the writer, up to its limit.
fn take_output(c: &mut StreamConn) {
    while c.pipe.output_bytes.get() < OUTPUT_LIMIT {
        let Some(bytes) = c.qmux.take_output(OUTPUT_CHUNK) else { break };
        let bytes = match c.tls.as_mut() {
            None => bytes,
            Some(tls) => match tls.encrypt(&bytes) {
                Ok(cipher) => Bytes::from(cipher),
                Err(_) => {
                    c.pipe.broken.set(true);
                    return;
                }
            },
        };
        push_output(&c.pipe, bytes);
    }
}

fn push_output(pipe: &Pipe, bytes: Bytes) {
    if bytes.is_empty() {
        return;
    }
    pipe.output_bytes.set(pipe.output_bytes.get() + bytes.len());
    pipe.output.borrow_mut().push_back(bytes);
    pipe.more.notify();
}

async fn read_loop(mut socket: TcpStream, pipe: Rc<Pipe>, ready: Rc<Ready>, idx: usize) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        while pipe.input_bytes.get() >= INPUT_LIMIT {
            pipe.resume.clone().wait().await;
        }
        let n = match socket.read(&mut buf).await {
            Ok(0) | Err(_) => {
                pipe.eof.set(true);
                ready.mark(idx);
                return;
            }
            Ok(n) => n,
        };
        pipe.input.borrow_mut().push_back(Bytes::copy_from_slice(&buf[..n]));
        pipe.input_bytes.set(pipe.input_bytes.get() + n);
        ready.mark(idx);
    }
}

async fn write_loop(mut socket: TcpStream, pipe: Rc<Pipe>, ready: Rc<Ready>, idx: usize) {
    loop {
        let next = pipe.output.borrow_mut().pop_front();
        match next {
            Some(bytes) => {
                if socket.write_all(&bytes).await.is_err() {
                    pipe.broken.set(true);
                    if !pipe.finish.get() {
                        ready.mark(idx);
                    }
                    return;
                }
                pipe.output_bytes.set(pipe.output_bytes.get() - bytes.len());
                if !pipe.finish.get() {
                    ready.mark(idx);
                }
            }
            None if pipe.finish.get() => {
                let _ = socket.shutdown(std::net::Shutdown::Both).await;
                return;
            }
            None => pipe.more.clone().wait().await,
        }
    }
}
