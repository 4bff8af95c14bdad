//! TLS on a TCP connection whose bytes the core moves itself (`wss://`): BoringSSL over an
//! in-memory transport. The handshake runs where the connection was accepted (the web
//! listener's thread, blocking, on the socket); once the upgrade is answered the socket is
//! taken out ([`StreamTls::detach`]) and the core feeds ciphertext in and takes ciphertext
//! out, so no TLS call ever blocks a core.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use boring::ssl::{ErrorCode, HandshakeError, Ssl, SslContext, SslStream};

/// What BoringSSL reads from and writes to: the socket while it is attached, memory after.
#[derive(Debug)]
pub(crate) struct MemoryIo {
    socket: Option<TcpStream>,
    /// While the socket is attached, no read or write of it may end later than this: each
    /// waits at most what is left, and none starts once it has passed. So a peer that sends
    /// its ClientHello one byte at a time cannot stretch the handshake past it.
    deadline: Option<Instant>,
    rx: VecDeque<u8>,
    tx: Vec<u8>,
}

impl MemoryIo {
    /// The attached socket, its timeouts set to what is left before the deadline.
    fn attached(&mut self, write: bool) -> io::Result<Option<&mut TcpStream>> {
        let Some(s) = self.socket.as_mut() else { return Ok(None) };
        if let Some(at) = self.deadline {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "TLS connection past its deadline"));
            }
            if write {
                s.set_write_timeout(Some(left))?;
            } else {
                s.set_read_timeout(Some(left))?;
            }
        }
        Ok(Some(s))
    }
}

impl Read for MemoryIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.rx.is_empty() {
            return self.rx.read(buf);
        }
        match self.attached(false)? {
            Some(s) => s.read(buf),
            None => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Write for MemoryIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.attached(true)? {
            Some(s) => s.write(buf),
            None => {
                self.tx.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.socket.as_mut() {
            Some(s) => s.flush(),
            None => Ok(()),
        }
    }
}

/// A server's TLS session on one TCP connection.
#[derive(Debug)]
pub struct StreamTls {
    ssl: SslStream<MemoryIo>,
}

impl StreamTls {
    /// Runs the server handshake on `socket` (blocking), done by `deadline` or failed with
    /// `TimedOut`; the deadline stays on the socket's reads and writes until
    /// [`set_deadline`](Self::set_deadline) moves it.
    pub fn accept(ctx: &SslContext, socket: TcpStream, deadline: Instant) -> io::Result<StreamTls> {
        let ssl = Ssl::new(ctx).map_err(io::Error::other)?;
        let io =
            MemoryIo { socket: Some(socket), deadline: Some(deadline), rx: VecDeque::new(), tx: Vec::new() };
        let ssl = ssl.accept(io).map_err(handshake_error)?;
        Ok(StreamTls { ssl })
    }

    /// The time by which every read and write of the attached socket must end.
    pub fn set_deadline(&mut self, at: Instant) {
        self.ssl.get_mut().deadline = Some(at);
    }

    /// The socket while it is attached.
    pub fn socket(&self) -> Option<&TcpStream> {
        self.ssl.get_ref().socket.as_ref()
    }

    /// Takes the socket out: from now on ciphertext goes through [`decrypt`](Self::decrypt)
    /// and [`encrypt`](Self::encrypt).
    pub fn detach(&mut self) -> Option<TcpStream> {
        let io = self.ssl.get_mut();
        io.deadline = None;
        io.socket.take()
    }

    /// Feeds ciphertext from the socket; appends the plaintext it completes to `out`. `Ok(true)`
    /// once the peer closed TLS (close_notify).
    pub fn decrypt(&mut self, cipher: &[u8], out: &mut Vec<u8>) -> io::Result<bool> {
        self.ssl.get_mut().rx.extend(cipher);
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.ssl.ssl_read(&mut buf) {
                Ok(0) => return Ok(true),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.code() == ErrorCode::WANT_READ => return Ok(false),
                Err(e) if e.code() == ErrorCode::ZERO_RETURN => return Ok(true),
                Err(e) => return Err(io::Error::other(format!("TLS: {e}"))),
            }
        }
    }

    /// Encrypts `plain`; the ciphertext for the socket.
    pub fn encrypt(&mut self, plain: &[u8]) -> io::Result<Vec<u8>> {
        // Memory takes everything: one call writes it all.
        let mut at = 0;
        while at < plain.len() {
            at += self.ssl.ssl_write(&plain[at..]).map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        }
        Ok(std::mem::take(&mut self.ssl.get_mut().tx))
    }

    /// A close_notify alert's ciphertext.
    pub fn close(&mut self) -> Vec<u8> {
        let _ = self.ssl.shutdown();
        std::mem::take(&mut self.ssl.get_mut().tx)
    }
}

/// A failed handshake as an I/O error whose kind says why: `TimedOut` when the socket's
/// timeout or the deadline ended it (the caller counts those), `Other` otherwise.
fn handshake_error(e: HandshakeError<MemoryIo>) -> io::Error {
    let timed_out = |why: String| io::Error::new(io::ErrorKind::TimedOut, format!("TLS handshake: {why}"));
    match e {
        // A blocking socket whose read timed out (EAGAIN).
        HandshakeError::WouldBlock(mid) => timed_out(mid.error().to_string()),
        HandshakeError::Failure(mid) => match mid.error().io_error() {
            Some(io) if matches!(io.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
                timed_out(io.to_string())
            }
            _ => io::Error::other(format!("TLS handshake: {}", mid.error())),
        },
        HandshakeError::SetupFailure(stack) => io::Error::other(format!("TLS setup: {stack}")),
    }
}

impl Read for StreamTls {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.ssl.read(buf)
    }
}

impl Write for StreamTls {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.ssl.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.ssl.flush()
    }
}
