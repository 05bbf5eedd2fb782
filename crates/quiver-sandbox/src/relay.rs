//! The relay inside a tool's network namespace: copies each connection to
//! `127.0.0.1:<port>` to the runtime's proxy socket and back, in one thread with one `poll`
//! loop. Bounded: at most [`MAX_CONNECTIONS`] at once (more wait in the listen backlog until
//! one ends) and [`BUFFER`] bytes per direction of each, so its memory does not grow with what
//! a tool opens or sends.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;

use rustix::event::{PollFd, PollFlags, poll};

/// Connections relayed at once (the proxy's own cap per call is the same).
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// Bytes buffered per direction of a connection.
pub(crate) const BUFFER: usize = 16 << 10;

/// One direction of a connection: bytes read from one side, not yet written to the other.
struct Pipe {
    buf: Vec<u8>,
    sent: usize,
    eof: bool,
    shut: bool,
}

impl Pipe {
    fn new() -> Pipe {
        Pipe {
            buf: Vec::with_capacity(BUFFER),
            sent: 0,
            eof: false,
            shut: false,
        }
    }

    fn wants_read(&self) -> bool {
        !self.eof && self.buf.len() < BUFFER
    }

    fn pending(&self) -> bool {
        self.sent < self.buf.len()
    }

    /// Moves what `from` has and `to` takes; `Ok(true)` when a byte moved or a side closed.
    fn pump(
        &mut self,
        from: &mut impl Read,
        to: &mut impl Write,
        shut: impl Fn(),
    ) -> io::Result<bool> {
        let mut moved = false;
        if self.wants_read() {
            let start = self.buf.len();
            self.buf.resize(BUFFER, 0);
            match from.read(&mut self.buf[start..]) {
                Ok(0) => {
                    self.buf.truncate(start);
                    self.eof = true;
                    moved = true;
                }
                Ok(n) => {
                    self.buf.truncate(start + n);
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.buf.truncate(start),
                Err(e) => return Err(e),
            }
        }
        while self.pending() {
            match to.write(&self.buf[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if !self.pending() {
            self.buf.clear();
            self.sent = 0;
            if self.eof && !self.shut {
                shut();
                self.shut = true;
                moved = true;
            }
        }
        Ok(moved)
    }
}

/// A relayed connection: the tool's side and the proxy's.
struct Pair {
    inside: TcpStream,
    outside: UnixStream,
    up: Pipe,
    down: Pipe,
}

impl Pair {
    fn open(inside: TcpStream, socket: &Path) -> io::Result<Pair> {
        let outside = UnixStream::connect(socket)?;
        inside.set_nonblocking(true)?;
        outside.set_nonblocking(true)?;
        Ok(Pair {
            inside,
            outside,
            up: Pipe::new(),
            down: Pipe::new(),
        })
    }

    fn events(&self) -> (PollFlags, PollFlags) {
        let flags = |read: bool, write: bool| {
            let mut f = PollFlags::empty();
            if read {
                f |= PollFlags::IN;
            }
            if write {
                f |= PollFlags::OUT;
            }
            f
        };
        (
            flags(self.up.wants_read(), self.down.pending()),
            flags(self.down.wants_read(), self.up.pending()),
        )
    }

    /// Moves what can move both ways; `Ok(true)` when something did.
    fn step(&mut self) -> io::Result<bool> {
        let (inside, outside) = (&self.inside, &self.outside);
        let up = self.up.pump(&mut &self.inside, &mut &self.outside, || {
            let _ = outside.shutdown(Shutdown::Write);
        })?;
        let down = self.down.pump(&mut &self.outside, &mut &self.inside, || {
            let _ = inside.shutdown(Shutdown::Write);
        })?;
        Ok(up || down)
    }

    fn done(&self) -> bool {
        self.up.shut && self.down.shut
    }
}

/// Relays connections accepted on `listener` to the Unix socket `socket` until the process
/// is killed (the launcher kills the relay when the tool ends).
pub(crate) fn relay(listener: TcpListener, socket: &Path) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut pairs: Vec<Pair> = Vec::new();
    loop {
        {
            // Only sides with something to do are watched: a closed side is then never
            // reported again and again while the other catches up.
            let mut fds = Vec::with_capacity(1 + 2 * pairs.len());
            if pairs.len() < MAX_CONNECTIONS {
                fds.push(PollFd::new(&listener, PollFlags::IN));
            }
            for pair in &pairs {
                let (inside, outside) = pair.events();
                if !inside.is_empty() {
                    fds.push(PollFd::new(&pair.inside, inside));
                }
                if !outside.is_empty() {
                    fds.push(PollFd::new(&pair.outside, outside));
                }
            }
            if poll(&mut fds, None).is_err() {
                continue;
            }
        }
        // Step every connection (non-blocking, at most 32); a finished or failed one is
        // dropped.
        pairs.retain_mut(|pair| pair.step().is_ok_and(|_| !pair.done()));
        while pairs.len() < MAX_CONNECTIONS {
            match listener.accept() {
                Ok((inside, _)) => {
                    if let Ok(pair) = Pair::open(inside, socket) {
                        pairs.push(pair);
                    }
                }
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    /// An echo server on a Unix socket, one thread per connection (it stands for the proxy).
    fn echo(path: &Path) {
        let server = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            for stream in server.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut reader = stream.try_clone().unwrap();
                    let _ = io::copy(&mut reader, &mut stream);
                    let _ = stream.shutdown(Shutdown::Write);
                });
            }
        });
    }

    fn relayed() -> (tempfile::TempDir, std::net::SocketAddr) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        echo(&socket);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || relay(listener, &socket));
        (dir, addr)
    }

    fn round_trip(addr: std::net::SocketAddr, payload: &[u8]) -> Vec<u8> {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let payload = payload.to_vec();
        let sender = std::thread::spawn(move || {
            writer.write_all(&payload).unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        stream.read_to_end(&mut back).unwrap();
        sender.join().unwrap();
        back
    }

    #[test]
    fn every_byte_comes_back_through_many_connections_at_once() {
        let (_dir, addr) = relayed();
        // More connections than the cap, each larger than the buffers: those over the cap wait
        // for a slot, and every one is relayed whole both ways.
        let clients: Vec<_> = (0..MAX_CONNECTIONS + 8)
            .map(|i| {
                std::thread::spawn(move || {
                    let payload: Vec<u8> =
                        (0..(3 * BUFFER + i)).map(|n| (n * 7 + i) as u8).collect();
                    assert_eq!(round_trip(addr, &payload), payload, "connection {i}");
                })
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
        assert_eq!(round_trip(addr, b""), b"");
    }

    #[test]
    fn connections_over_the_cap_wait_until_one_ends() {
        let (_dir, addr) = relayed();
        let mut held: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                s.write_all(b"x").unwrap();
                let mut one = [0u8; 1];
                s.read_exact(&mut one).unwrap();
                s
            })
            .collect();
        let mut extra = TcpStream::connect(addr).unwrap();
        extra.write_all(b"y").unwrap();
        extra
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut one = [0u8; 1];
        assert!(extra.read_exact(&mut one).is_err(), "served over the cap");
        drop(held.pop());
        extra
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        extra.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"y");
    }
}
