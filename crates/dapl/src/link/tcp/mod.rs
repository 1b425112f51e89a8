//! The tcp link: iWARP (RDMAP over DDP over MPA, RFC 5040/5041/5044/6581) over kernel TCP.
//!
//! One link per Interface Adapter, bound to the IA's IPv4 address. Its progress thread owns an
//! epoll set holding the IA's listening sockets and connections, and drives everything that
//! arrives: connection setup (the MPA exchange, through the sans-IO `iwarp` codec), inbound
//! FPDUs (checked against the memory table by the engine's `rx_*` functions), and transmit
//! backlogs. Posting threads write to a connection's socket themselves when it is idle, so a
//! post on an idle connection costs one `sendmsg` and no thread switch.
//!
//! Connection qualifiers map to TCP ports: `port = qual` for `qual <= 65535`, otherwise
//! `qual % 32001 + 33534`.

mod conn;

use std::collections::{HashMap, HashSet};
use std::io::{self, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, EventData, EventFlags};
use socket2::{Domain, Socket, Type};

use crate::ep::EpInner;
use crate::event::ConnectionEventKind;
use crate::link::Link;
use crate::sp::SpInner;
use crate::types::{ConnQual, EpState, IaAddress};

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use conn::FuzzProbe;
pub(crate) use conn::TcpConn;

/// The TCP port a connection qualifier listens on.
pub fn port_for_qual(qual: ConnQual) -> u16 {
    if qual <= 65535 {
        qual as u16
    } else {
        (qual % 32001 + 33534) as u16
    }
}

/// How long an inbound Send waits for a receive buffer before the connection is broken.
pub(crate) const RNR_GRACE: Duration = Duration::from_millis(500);
/// How long a passive connection waits for the MPA Request.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a closing connection waits for the peer's FIN before the socket is dropped.
pub(crate) const LINGER: Duration = Duration::from_secs(2);
/// Progress-thread tick while some connection has a deadline.
const TICK_MS: i32 = 20;

/// Options of a tcp IA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TcpOptions {
    /// Ask for MPA CRC32c as initiator and require it as responder.
    pub(crate) crc: bool,
}

#[derive(Clone)]
enum Entry {
    Listener(Arc<Listener>),
    Conn(Arc<TcpConn>),
}

struct Listener {
    sock: TcpListener,
    sp: Weak<SpInner>,
}

/// State shared by the link object, its progress thread and its connections.
pub(crate) struct Shared {
    epoll: OwnedFd,
    waker: OwnedFd,
    stop: AtomicBool,
    entries: Mutex<HashMap<u64, Entry>>,
    listeners_by_port: Mutex<HashMap<u16, u64>>,
    /// Connections whose receive side should be retried (a receive buffer was posted).
    wakes: Mutex<Vec<u64>>,
    /// Connections with a deadline (RNR grace, MPA timeout, linger).
    timed: Mutex<HashSet<u64>>,
    pub(crate) local_ip: Ipv4Addr,
    pub(crate) opts: TcpOptions,
}

const WAKER_TOKEN: u64 = 0;

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn wake_thread(&self) {
        let _ = rustix::io::write(&self.waker, &1u64.to_ne_bytes());
    }

    /// Asks the progress thread to retry `conn`'s receive side.
    pub(crate) fn wake_conn(&self, id: u64) {
        lock(&self.wakes).push(id);
        self.wake_thread();
    }

    /// Puts `id` on the list of connections checked every tick.
    pub(crate) fn set_timed(&self, id: u64, on: bool) {
        let mut t = lock(&self.timed);
        if on {
            if t.insert(id) && t.len() == 1 {
                drop(t);
                self.wake_thread(); // recompute the epoll timeout
            }
        } else {
            t.remove(&id);
        }
    }

    pub(crate) fn register(&self, conn: &Arc<TcpConn>, flags: EventFlags) -> io::Result<()> {
        lock(&self.entries).insert(conn.id, Entry::Conn(conn.clone()));
        epoll::add(&self.epoll, conn.fd(), EventData::new_u64(conn.id), flags)
            .map_err(io::Error::from)
    }

    pub(crate) fn modify(&self, conn: &TcpConn, flags: EventFlags) {
        let _ = epoll::modify(&self.epoll, conn.fd(), EventData::new_u64(conn.id), flags);
    }

    /// Drops a connection from the epoll set and the registry (its socket closes when the last
    /// reference goes).
    pub(crate) fn deregister(&self, conn: &TcpConn) {
        let _ = epoll::delete(&self.epoll, conn.fd());
        lock(&self.entries).remove(&conn.id);
        lock(&self.timed).remove(&conn.id);
    }

    fn conn(&self, id: u64) -> Option<Arc<TcpConn>> {
        match lock(&self.entries).get(&id) {
            Some(Entry::Conn(c)) => Some(c.clone()),
            _ => None,
        }
    }
}

/// The tcp link of one IA.
pub(crate) struct TcpLink {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl TcpLink {
    /// Starts the link (and its progress thread) on `ip`.
    pub(crate) fn start(ip: Ipv4Addr, opts: TcpOptions) -> io::Result<Arc<TcpLink>> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let waker = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        epoll::add(
            &epoll,
            &waker,
            EventData::new_u64(WAKER_TOKEN),
            EventFlags::IN,
        )?;
        let shared = Arc::new(Shared {
            epoll,
            waker,
            stop: AtomicBool::new(false),
            entries: Mutex::new(HashMap::new()),
            listeners_by_port: Mutex::new(HashMap::new()),
            wakes: Mutex::new(Vec::new()),
            timed: Mutex::new(HashSet::new()),
            local_ip: ip,
            opts,
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("dapl-tcp-{ip}"))
            .spawn(move || progress(s2))?;
        Ok(Arc::new(TcpLink {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }
}

impl TcpLink {
    fn poll_with(&self, events: &mut epoll::EventVec) -> bool {
        if epoll::wait(&self.shared.epoll, events, 0).is_err() {
            return false;
        }
        let mut any = false;
        for ev in &*events {
            let token = ev.data.u64();
            if token == WAKER_TOKEN {
                continue;
            }
            let entry = lock(&self.shared.entries).get(&token).cloned();
            if let Some(Entry::Conn(c)) = entry {
                c.on_event(ev.flags);
                any = true;
            }
        }
        any
    }
}

impl Drop for TcpLink {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Link for TcpLink {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn listen(&self, addr: IaAddress, qual: ConnQual, sp: &Arc<SpInner>) -> bool {
        let port = port_for_qual(qual);
        let mut by_port = lock(&self.shared.listeners_by_port);
        if by_port.contains_key(&port) {
            return false;
        }
        let sock = match bind_listener(SocketAddr::new(addr.ip(), port)) {
            Ok(s) => s,
            Err(_) => return false,
        };
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let l = Arc::new(Listener {
            sock,
            sp: Arc::downgrade(sp),
        });
        if epoll::add(
            &self.shared.epoll,
            l.sock.as_fd(),
            EventData::new_u64(token),
            EventFlags::IN,
        )
        .is_err()
        {
            return false;
        }
        lock(&self.shared.entries).insert(token, Entry::Listener(l));
        by_port.insert(port, token);
        true
    }

    fn unlisten(&self, _addr: IaAddress, qual: ConnQual) {
        let port = port_for_qual(qual);
        let Some(token) = lock(&self.shared.listeners_by_port).remove(&port) else {
            return;
        };
        if let Some(Entry::Listener(l)) = lock(&self.shared.entries).remove(&token) {
            let _ = epoll::delete(&self.shared.epoll, l.sock.as_fd());
        }
    }

    fn connect(&self, ep: &Arc<EpInner>, remote: IaAddress, qual: ConnQual, private_data: &[u8]) {
        let dial = Dial {
            target: SocketAddr::new(remote.ip(), port_for_qual(qual)),
            private_data: private_data.to_vec(),
            refused_until: Instant::now() + REFUSED_RETRY_FOR,
        };
        dial_now(&self.shared, ep, ep.current_attempt(), dial);
    }

    /// A non-blocking `epoll_wait` on the progress thread's set, handling ready connections
    /// here, as the progress thread would (which may also wake for them; whoever takes a
    /// connection's receive lock first reads, the other finds nothing). Listeners, wakes and
    /// ticks stay with the progress thread.
    fn poll(&self) -> bool {
        thread_local! {
            static EVENTS: std::cell::RefCell<epoll::EventVec> =
                std::cell::RefCell::new(epoll::EventVec::with_capacity(16));
        }
        EVENTS.with(|events| {
            let Ok(mut events) = events.try_borrow_mut() else {
                return false; // re-entered from a handler
            };
            self.poll_with(&mut events)
        })
    }

    fn shutdown(&self) {
        if self.shared.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.wake_thread();
        let t = lock(&self.thread).take();
        if let Some(t) = t {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(128)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// The progress thread: waits on epoll and dispatches.
fn progress(shared: Arc<Shared>) {
    let mut events = epoll::EventVec::with_capacity(64);
    while !shared.stop.load(Ordering::SeqCst) {
        let timeout = if lock(&shared.timed).is_empty() {
            -1
        } else {
            TICK_MS
        };
        if epoll::wait(&shared.epoll, &mut events, timeout).is_err() {
            continue; // EINTR
        }
        for ev in &events {
            let token = ev.data.u64();
            if token == WAKER_TOKEN {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(&shared.waker, &mut b);
                continue;
            }
            let entry = lock(&shared.entries).get(&token).cloned();
            match entry {
                Some(Entry::Listener(l)) => accept_all(&shared, &l),
                Some(Entry::Conn(c)) => c.on_event(ev.flags),
                None => {}
            }
        }
        let wakes = std::mem::take(&mut *lock(&shared.wakes));
        for id in wakes {
            if let Some(c) = shared.conn(id) {
                c.on_wake();
            }
        }
        if !lock(&shared.timed).is_empty() {
            let ids: Vec<u64> = lock(&shared.timed).iter().copied().collect();
            let now = std::time::Instant::now();
            for id in ids {
                if let Some(c) = shared.conn(id) {
                    c.on_tick(now);
                } else {
                    lock(&shared.timed).remove(&id);
                }
            }
        }
    }
    // Stopped (the IA closed): drop every socket.
    let entries: Vec<Entry> = lock(&shared.entries).drain().map(|(_, e)| e).collect();
    for e in entries {
        if let Entry::Conn(c) = e {
            c.abort();
        }
    }
    lock(&shared.listeners_by_port).clear();
}

fn accept_all(shared: &Arc<Shared>, l: &Listener) {
    loop {
        match l.sock.accept() {
            Ok((stream, peer)) => {
                let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
                TcpConn::accepted(id, shared, stream, peer, l.sp.clone());
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return, // WouldBlock, or a transient accept error
        }
    }
}

/// Parses the address part of a tcp IA name: `"<ipv4>"` with optional `,crc`.
pub(crate) fn parse_name(rest: &str) -> Option<(Ipv4Addr, TcpOptions)> {
    let mut parts = rest.split(',');
    let ip: Ipv4Addr = parts.next()?.trim().parse().ok()?;
    let mut opts = TcpOptions { crc: false };
    for p in parts {
        match p.trim() {
            "crc" => opts.crc = true,
            "nocrc" => opts.crc = false,
            _ => return None,
        }
    }
    Some((ip, opts))
}

/// A refused connect is tried again for this long before the endpoint gets NON_PEER_REJECTED
/// (within its own connect timeout, which still applies): a peer that creates its PSP just
/// after telling the requester to connect (Debian's dtestx does) is not yet listening, and IB
/// and iWARP connection managers retry such rejects too.
pub(crate) const REFUSED_RETRY_FOR: Duration = Duration::from_secs(2);
/// Pause between refused connects.
const REFUSED_RETRY_GAP: Duration = Duration::from_millis(50);

/// What an active connect needs to be made again.
pub(crate) struct Dial {
    pub(crate) target: SocketAddr,
    pub(crate) private_data: Vec<u8>,
    /// Refused connects are retried until then.
    pub(crate) refused_until: Instant,
}

/// Starts (or restarts) connect `attempt` of `ep`.
fn dial_now(shared: &Arc<Shared>, ep: &Arc<EpInner>, attempt: u64, dial: Dial) {
    let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    if let Err((e, dial)) = TcpConn::connect(id, shared, ep, attempt, dial) {
        connect_failed(Arc::downgrade(shared), ep, attempt, dial, e.kind());
    }
}

/// Connect `attempt` failed with `kind`: a refusal within the retry window dials again after a
/// pause (if the attempt is still pending then); anything else ends the attempt.
pub(crate) fn connect_failed(
    shared: Weak<Shared>,
    ep: &Arc<EpInner>,
    attempt: u64,
    dial: Dial,
    kind: ErrorKind,
) {
    let now = Instant::now();
    if kind == ErrorKind::ConnectionRefused && now + REFUSED_RETRY_GAP < dial.refused_until {
        let ep = ep.clone();
        crate::timer::at(now + REFUSED_RETRY_GAP, move || {
            if !ep.attempt_pending(attempt, EpState::ActiveConnectionPending) {
                return;
            }
            if let Some(shared) = shared.upgrade() {
                dial_now(&shared, &ep, attempt, dial);
            }
        });
        return;
    }
    let kind = match kind {
        ErrorKind::ConnectionRefused => ConnectionEventKind::NonPeerRejected,
        _ => ConnectionEventKind::Unreachable,
    };
    ep.attempt_failed(attempt, kind, Vec::new());
}
