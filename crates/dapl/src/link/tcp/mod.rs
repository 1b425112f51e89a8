//! The tcp link: iWARP (RDMAP over DDP over MPA, RFC 5040/5041/5044/6581) over kernel TCP.
//!
//! One link per Interface Adapter, bound to the IA's IPv4 address. Its progress thread owns an
//! epoll set holding the IA's listening sockets and (nested) the set of its connections, and
//! drives everything that arrives: connection setup (the MPA exchange, through the sans-IO
//! `iwarp` codec), inbound FPDUs (checked against the memory table by the engine's `rx_*`
//! functions), and transmit backlogs. Posting threads write to a connection's socket
//! themselves when it is idle, so a post on an idle connection costs one `sendmsg` and no
//! thread switch. Consumers that poll their EVDs read the sockets themselves (`Link::poll`),
//! and while one polls a receive EVD the progress thread stands back (`HOT`).
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

use crate::engine::port::{
    CrossMemoryAttach, Link, LinkCaps, ListenError, Listener as PortListener, Progress,
};
use crate::engine::qp::Qp;
use crate::link::mono_ns;
use crate::link::spare_fd::SpareFd;
use crate::types::{ConnQual, ConnectionEventKind, EpState, IaAddress, MAX_IOV};

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
    /// A connection whose peer stops acknowledging (a silent network, a stopped or vanished
    /// host, a peer that stops reading) breaks within this bound (`dead_peer=<seconds>`).
    pub(crate) dead_peer: Duration,
    /// Small messages posted in a burst are written together (`coalesce`, the default;
    /// `nocoalesce` turns it off): see `conn::tx::Burst`.
    pub(crate) coalesce: bool,
}

/// The dead-peer bound of a tcp IA unless its name sets one: long enough for a loaded host or
/// a congested network to catch up, short enough that posted work does not wait for ever (the
/// kernel's own defaults are about 15 minutes with data outstanding and 2 hours idle).
pub const DEFAULT_DEAD_PEER: Duration = Duration::from_secs(30);

/// Bounds how long `sock` waits for a silent peer, with the kernel's own mechanisms: data
/// unacknowledged (or a zero window) for `bound` closes it (`TCP_USER_TIMEOUT`, ETIMEDOUT),
/// and an idle connection sends keepalive probes from `bound / 2` on, which the same timeout
/// ends, so a dead peer is found within `bound` plus at most a probe interval either way.
pub(crate) fn bound_dead_peer(sock: &socket2::Socket, bound: Duration) -> io::Result<()> {
    let secs = bound.as_secs().max(2);
    let idle = Duration::from_secs(secs / 2);
    let interval = Duration::from_secs((secs / 4).max(1));
    sock.set_tcp_user_timeout(Some(bound))?;
    sock.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(idle)
            .with_interval(interval)
            .with_retries(3),
    )
}

#[derive(Clone)]
enum Entry {
    Listener(Arc<Listener>),
    Conn(Arc<TcpConn>),
}

struct Listener {
    sock: TcpListener,
    sp: Weak<dyn PortListener>,
}

/// State shared by the link object, its progress thread and its connections.
pub(crate) struct Shared {
    /// The progress thread's set: the waker, the listeners and `conns` (nested).
    epoll: OwnedFd,
    /// Every connection's socket. Consumers that poll (`Link::poll`) wait on this set only.
    conns: OwnedFd,
    /// Until when (ns on `mono_ns`) a consumer is taken to be polling this link: while it is,
    /// the progress thread leaves `conns` to it (see `HOT`).
    hot_until: AtomicU64,
    /// `HOT` in nanoseconds (tests change it).
    hot_ns: AtomicU64,
    /// Whether `conns` is armed in `epoll` (changed with the kernel's state under this lock).
    conns_armed: Mutex<bool>,
    /// Some socket is out of `conns` (`detach_idle`).
    detached: AtomicBool,
    waker: OwnedFd,
    stop: AtomicBool,
    entries: Mutex<HashMap<u64, Entry>>,
    /// Every registered connection (as in `entries`), for consumers' direct polls.
    conn_list: Mutex<Vec<Arc<TcpConn>>>,
    listeners_by_port: Mutex<HashMap<u16, u64>>,
    /// Connections whose receive side should be retried (a receive buffer was posted).
    wakes: Mutex<Vec<u64>>,
    /// Connections with a deadline (RNR grace, MPA timeout, linger).
    timed: Mutex<HashSet<u64>>,
    /// Connections holding back a burst of small posted messages (`TcpConn::transmit`):
    /// written when a consumer looks for completions (`Progress::flush`) or, at the latest,
    /// at the progress thread's next turn (see `WATCH`).
    corked: Mutex<Vec<Arc<TcpConn>>>,
    /// `corked` may be non-empty.
    any_corked: AtomicBool,
    /// The progress thread is (about to be) asleep in `epoll_wait` with no `ticker` running:
    /// a connection that starts holding a burst wakes it (SeqCst with `any_corked`: either
    /// the thread sees the burst before it sleeps or the poster sees it asleep), and so does a
    /// consumer that opens a polling window (`open_window`, SeqCst with `hot_until`).
    sleeping: AtomicBool,
    /// Bursts held back so far: the progress thread watches (`WATCH`) while this grows.
    bursts_held: AtomicU64,
    /// Bursts the progress thread wrote, their posters not having looked in time (tests).
    bursts_late: AtomicU64,
    /// The progress thread's looks that found a consumer polling (tests: `HOT_BACKOFF`).
    hot_looks: AtomicU64,
    /// Ticks every `WATCH` while the progress thread watches held bursts.
    ticker: OwnedFd,
    pub(crate) local_ip: Ipv4Addr,
    pub(crate) opts: TcpOptions,
}

const WAKER_TOKEN: u64 = 0;
/// `ticker` in the progress thread's set.
const TICKER_TOKEN: u64 = u64::MAX - 1;
/// `conns` in the progress thread's set.
const CONNS_TOKEN: u64 = u64::MAX;
/// Links with at most this many connections are polled by reading their sockets directly.
const DIRECT_MAX: usize = 2;

/// How long after its last poll of a receive EVD a consumer still counts as polling. While a
/// consumer polls, the progress thread does not wait on the connections' sockets (each
/// arriving message would wake it, and on a small machine that wake-up takes a CPU from the
/// polling threads); it takes them back once the polls stop for this long, or at once when
/// the consumer goes to sleep in `evd_wait` or `cno_wait` (`Link::stop_polling`). One-sided traffic that
/// arrives after the polls stopped (an RDMA write watched in memory) waits this long at most.
/// Each re-check wakes the progress thread: at 1 ms those wake-ups showed in the ping-pong's
/// 99th percentile.
const HOT: Duration = Duration::from_millis(4);

/// While a consumer keeps polling, the progress thread's re-checks back off: each one that
/// finds the window extended again sleeps twice as long as the last, up to `1 <<
/// HOT_BACKOFF` windows (32 ms). A consumer that polls for long is then looked at about 30
/// times a second instead of 250, and each look is a wake-up that preempts a polling thread
/// on a small machine: at every 4 ms they put the ping-pong's 99th percentile at 1.9x raw
/// TCP's (2026-12-07). The price: polls that stop without `evd_wait` after a long run give
/// the connections back up to that long after, not `HOT`.
const HOT_BACKOFF: u32 = 3;

/// How long the progress thread keeps polling (non-blocking `epoll_wait`, and `sched_yield` as
/// [`crate::pace`] says) after it handled a connection, before it sleeps in `epoll_wait`: the
/// next message of an exchange (an RDMA Read Request behind the last one's response, a Write
/// behind the last Write) then finds it awake, as `evd_wait` spins before it sleeps. Waking a
/// sleeping thread costs more than a round trip on small virtual machines.
const SPIN: Duration = Duration::from_micros(50);

thread_local! {
    /// This thread's polls for inbound data marked some link as polled since it last slept.
    static MARKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A spinning progress thread whose connections had nothing skips its outer epoll set (wakes,
/// listeners, the ticker) this many idle spins in a row, then asks it once (every fourth idle
/// spin): each ask is a system call, and a Read Request arriving meanwhile waits for it.
const OUTER_SKIPS: u32 = 3;

/// A thread's polls refresh `Shared::hot_until` every this many.
const HOT_EVERY: u32 = 64;

/// While posters hold bursts back, the progress thread wakes this often and writes what they
/// hold (`Shared::cork`): the longest a held message waits if its poster never looks for
/// completions again. Woken once when bursts begin (if it sleeps), it then watches by this
/// timer until a tick finds that no burst was held since the last one: bursts cost no
/// system call each (an eventfd write and a thread wake-up per burst cut the message rate by
/// four).
const WATCH: Duration = Duration::from_micros(100);

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

    /// `conn` started holding back a burst: it is written by the next `flush_corked`, which
    /// the progress thread runs on every turn (woken here if it sleeps without watching).
    pub(crate) fn cork(&self, conn: Arc<TcpConn>) {
        lock(&self.corked).push(conn);
        self.bursts_held.fetch_add(1, Ordering::Relaxed);
        self.any_corked.store(true, Ordering::SeqCst);
        self.wake_if_asleep();
    }

    /// A consumer begins to poll (`HOT`): the window is marked, and a progress thread asleep
    /// with the connections in its set is woken to take them out. Left asleep it would be
    /// woken in the kernel by every message that arrives (their sockets are in the set it
    /// waits on) and find nothing, since the polling consumer reads the socket first, so it
    /// would never come back to see the window: in a ping-pong, each reply woke it on the
    /// CPU of a spinning thread, a context switch per round trip for a whole round (half
    /// round trips of 7-15 us instead of 3.5, a third of datperf's latency runs, the 99th
    /// percentile at 2x raw TCP's). Paired with the progress thread's look before it sleeps
    /// (`sleeping` then `hot_until`, both SeqCst): one of the two sees the other.
    fn open_window(&self, until: u64) {
        self.hot_until.store(until, Ordering::SeqCst);
        self.wake_if_asleep();
    }

    /// After a SeqCst store the progress thread looks at before it sleeps: wakes it if it
    /// sleeps (or is about to) without having seen it.
    fn wake_if_asleep(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.wake_thread();
        }
    }

    /// Writes every burst held back (`cork`); `late`: by the progress thread, not at a
    /// consumer's look (`TcpConn::flush_corked`).
    fn flush_corked(&self, late: bool) {
        if !self.any_corked.load(Ordering::Relaxed)
            || !self.any_corked.swap(false, Ordering::SeqCst)
        {
            return;
        }
        let list = std::mem::take(&mut *lock(&self.corked));
        for c in list {
            if c.flush_corked(late) {
                self.bursts_late.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Starts (`Some(period)`) or stops the progress thread's `ticker`; false if the timer
    /// refused.
    fn set_ticker(&self, period: Option<Duration>) -> bool {
        let t = period.map_or(
            rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            |p| rustix::time::Timespec {
                tv_sec: p.as_secs() as _,
                tv_nsec: p.subsec_nanos() as _,
            },
        );
        let spec = rustix::time::Itimerspec {
            it_interval: t,
            it_value: t,
        };
        rustix::time::timerfd_settime(
            &self.ticker,
            rustix::time::TimerfdTimerFlags::empty(),
            &spec,
        )
        .is_ok()
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
        {
            let mut st = lock(&conn.interest);
            conn.wants_out
                .store(flags.contains(EventFlags::OUT), Ordering::Relaxed);
            epoll::add(&self.conns, conn.fd(), EventData::new_u64(conn.id), flags)?;
            st.flags = flags;
            st.attached = true;
        }
        // Listed once attached: `attach_all` and `detach_idle` only see registered sockets.
        lock(&self.conn_list).push(conn.clone());
        Ok(())
    }

    pub(crate) fn modify(&self, conn: &TcpConn, flags: EventFlags) {
        let mut st = lock(&conn.interest);
        if st.gone || (st.flags == flags && (st.attached || !flags.contains(EventFlags::OUT))) {
            return; // nothing changes (level-triggered: no re-arm needed)
        }
        st.flags = flags;
        conn.wants_out
            .store(flags.contains(EventFlags::OUT), Ordering::Relaxed);
        let data = EventData::new_u64(conn.id);
        if st.attached {
            let _ = epoll::modify(&self.conns, conn.fd(), data, flags);
        } else if flags.contains(EventFlags::OUT) {
            // Writability is only learnt from epoll.
            st.attached = epoll::add(&self.conns, conn.fd(), data, flags).is_ok();
        }
    }

    /// Drops a connection from the epoll set and the registry (its socket closes when the last
    /// reference goes).
    pub(crate) fn deregister(&self, conn: &TcpConn) {
        lock(&self.conn_list).retain(|c| c.id != conn.id);
        {
            let mut st = lock(&conn.interest);
            st.gone = true;
            if std::mem::replace(&mut st.attached, false) {
                let _ = epoll::delete(&self.conns, conn.fd());
            }
        }
        lock(&self.entries).remove(&conn.id);
        lock(&self.timed).remove(&conn.id);
    }

    /// Arms or disarms `conns` in the progress thread's set. Disarmed, with few enough
    /// connections for direct polls, the sockets leave `conns` too: then an arriving segment
    /// runs no epoll callback at all (as for a program polling its own socket).
    fn arm_conns(&self, on: bool) {
        let mut armed = lock(&self.conns_armed);
        // Disarm only if the link is still polled: a consumer that went to sleep between the
        // caller's look at `hot_until` and this lock has cleared it, and its own `arm_conns(true)`
        // found the set still armed.
        if !on && self.hot_until.load(Ordering::Relaxed) <= mono_ns() {
            return;
        }
        if *armed != on {
            let flags = if on {
                EventFlags::IN
            } else {
                EventFlags::empty()
            };
            let data = EventData::new_u64(CONNS_TOKEN);
            if epoll::modify(&self.epoll, &self.conns, data, flags).is_ok() {
                *armed = on;
                if on {
                    self.attach_all();
                } else {
                    self.detach_idle();
                }
            }
        }
    }

    /// Puts every socket back in `conns`.
    fn attach_all(&self) {
        let list = lock(&self.conn_list);
        for c in list.iter() {
            let mut st = lock(&c.interest);
            if !st.attached && !st.gone {
                let data = EventData::new_u64(c.id);
                st.attached = epoll::add(&self.conns, c.fd(), data, st.flags).is_ok();
            }
        }
        self.detached.store(false, Ordering::Relaxed);
    }

    /// Takes the sockets that wait for nothing but input out of `conns`, if consumers' polls
    /// read them directly (`poll_direct`).
    fn detach_idle(&self) {
        let list = lock(&self.conn_list);
        if list.len() > DIRECT_MAX {
            return;
        }
        for c in list.iter() {
            let mut st = lock(&c.interest);
            if st.attached && !st.flags.contains(EventFlags::OUT) {
                let _ = epoll::delete(&self.conns, c.fd());
                st.attached = false;
                self.detached.store(true, Ordering::Relaxed);
            }
        }
    }

    /// A consumer's poll of a link with at most `DIRECT_MAX` connections: a non-blocking
    /// read on each socket (an arriving message then costs one system call, as it would a
    /// program reading its socket itself), and epoll as well if one waits for writability.
    /// `None` when there are more connections (epoll must be asked; sockets taken out of
    /// `conns` are put back first).
    fn poll_direct(&self, events: &mut epoll::EventVec) -> Option<bool> {
        let mut picked: [Option<Arc<TcpConn>>; DIRECT_MAX] = Default::default();
        let mut out = false;
        {
            let list = lock(&self.conn_list);
            if list.len() > DIRECT_MAX {
                drop(list);
                if self.detached.load(Ordering::Relaxed) {
                    self.attach_all();
                }
                return None;
            }
            for (slot, c) in picked.iter_mut().zip(list.iter()) {
                out |= c.wants_out.load(Ordering::Relaxed);
                *slot = Some(c.clone());
            }
        }
        let mut any = false;
        for c in picked.iter().flatten() {
            any |= c.poll_read();
        }
        if out {
            any |= self.drain_conns(events);
        }
        Some(any)
    }

    /// Handles every ready connection of `conns` without blocking; true if there was one.
    fn drain_conns(&self, events: &mut epoll::EventVec) -> bool {
        if epoll::wait(&self.conns, events, 0).is_err() {
            return false;
        }
        let mut any = false;
        for ev in &*events {
            if let Some(c) = self.conn(ev.data.u64()) {
                c.on_event(ev.flags);
                any = true;
            }
        }
        any
    }

    fn conn(&self, id: u64) -> Option<Arc<TcpConn>> {
        match lock(&self.entries).get(&id) {
            Some(Entry::Conn(c)) => Some(c.clone()),
            _ => None,
        }
    }
}

/// Adds `fd` to the epoll set `epoll` for input, reported as `token`.
fn watch_input(epoll: &OwnedFd, fd: impl AsFd, token: u64) -> io::Result<()> {
    epoll::add(epoll, fd, EventData::new_u64(token), EventFlags::IN)?;
    Ok(())
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
        let conns = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        watch_input(&epoll, &conns, CONNS_TOKEN)?;
        let waker = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        watch_input(&epoll, &waker, WAKER_TOKEN)?;
        let ticker = rustix::time::timerfd_create(
            rustix::time::TimerfdClockId::Monotonic,
            rustix::time::TimerfdFlags::CLOEXEC | rustix::time::TimerfdFlags::NONBLOCK,
        )?;
        watch_input(&epoll, &ticker, TICKER_TOKEN)?;
        let shared = Arc::new(Shared {
            epoll,
            conns,
            hot_until: AtomicU64::new(0),
            hot_ns: AtomicU64::new(HOT.as_nanos() as u64),
            conns_armed: Mutex::new(true),
            detached: AtomicBool::new(false),
            waker,
            stop: AtomicBool::new(false),
            entries: Mutex::new(HashMap::new()),
            conn_list: Mutex::new(Vec::new()),
            listeners_by_port: Mutex::new(HashMap::new()),
            wakes: Mutex::new(Vec::new()),
            timed: Mutex::new(HashSet::new()),
            corked: Mutex::new(Vec::new()),
            any_corked: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            bursts_held: AtomicU64::new(0),
            bursts_late: AtomicU64::new(0),
            hot_looks: AtomicU64::new(0),
            ticker,
            local_ip: ip,
            opts,
        });
        let s2 = shared.clone();
        // Opened here, not in the thread: a process out of descriptors by then has none.
        let spare = SpareFd::new();
        let thread = std::thread::Builder::new()
            .name(format!("dapl-tcp-{ip}"))
            .spawn(move || progress(s2, spare))?;
        Ok(Arc::new(TcpLink {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
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

    fn caps(&self) -> LinkCaps {
        LinkCaps {
            completes_at_peer: false,
            rnr_waits_forever: false,
            max_iov: MAX_IOV,
            max_private_data: crate::engine::port::MAX_PRIVATE_DATA,
            cross_memory_attach: CrossMemoryAttach::NotUsed,
            dead_peer_bound: Some(self.shared.opts.dead_peer),
        }
    }

    fn listen(
        &self,
        addr: IaAddress,
        qual: ConnQual,
        sp: Weak<dyn PortListener>,
    ) -> Result<(), ListenError> {
        let port = port_for_qual(qual);
        let mut by_port = lock(&self.shared.listeners_by_port);
        if by_port.contains_key(&port) {
            return Err(ListenError::InUse);
        }
        let sock = bind_listener(SocketAddr::new(addr.ip(), port)).map_err(|e| match e.kind() {
            io::ErrorKind::AddrInUse => ListenError::InUse,
            io::ErrorKind::PermissionDenied => ListenError::Denied(privileged_port(port)),
            _ => ListenError::Failed(e),
        })?;
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let l = Arc::new(Listener { sock, sp });
        epoll::add(
            &self.shared.epoll,
            l.sock.as_fd(),
            EventData::new_u64(token),
            EventFlags::IN,
        )
        .map_err(|e| ListenError::Failed(e.into()))?;
        lock(&self.shared.entries).insert(token, Entry::Listener(l));
        by_port.insert(port, token);
        Ok(())
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

    fn connect(
        &self,
        ep: &Arc<Qp>,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
    ) -> io::Result<()> {
        let dial = Dial {
            target: SocketAddr::new(remote.ip(), port_for_qual(qual)),
            private_data: private_data.to_vec(),
            refused_until: Instant::now() + REFUSED_RETRY_FOR,
        };
        let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let attempt = ep.current_attempt();
        match TcpConn::connect(id, &self.shared, ep, attempt, dial) {
            Ok(()) => Ok(()),
            Err((e, _)) if crate::engine::port::is_resource_error(&e) => Err(e),
            Err((e, dial)) => {
                connect_failed(Arc::downgrade(&self.shared), ep, attempt, dial, e.kind());
                Ok(())
            }
        }
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

impl Progress for TcpLink {
    /// Handles what has arrived on the connections, here, as the progress thread would: a
    /// direct read of each socket when there are at most `DIRECT_MAX` (`poll_direct`), else a
    /// non-blocking `epoll_wait` on the connections' set. If the progress thread is awake for
    /// them too, whoever takes a connection's receive lock first reads and the other finds
    /// nothing. Listeners, wakes and ticks stay with the progress thread. A poll for inbound
    /// data marks the link as polled (`HOT`).
    fn poll(&self, for_inbound: bool) -> bool {
        thread_local! {
            static EVENTS: std::cell::RefCell<epoll::EventVec> =
                std::cell::RefCell::new(epoll::EventVec::with_capacity(16));
            static POLLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
        }
        // The clock is read on every `HOT_EVERY`-th poll of the thread (it costs more than the
        // rest of an empty poll); the window then ends that many polls early at worst.
        if for_inbound {
            MARKED.set(true);
            let n = POLLS.get();
            POLLS.set(n.wrapping_add(1));
            if n % HOT_EVERY == 0 {
                let now = mono_ns();
                let until = now + self.shared.hot_ns.load(Ordering::Relaxed);
                let was = self.shared.hot_until.load(Ordering::Relaxed);
                if was > now {
                    self.shared.hot_until.store(until, Ordering::Relaxed);
                } else {
                    self.shared.open_window(until);
                }
            }
        }
        let held_before = self.shared.bursts_held.load(Ordering::Relaxed);
        let any = EVENTS.with(|events| {
            let Ok(mut events) = events.try_borrow_mut() else {
                return false; // re-entered from a handler
            };
            match self.shared.poll_direct(&mut events) {
                Some(any) => any,
                None => self.shared.drain_conns(&mut events),
            }
        });
        // What this poll transmitted in a burst (the answers to a peer's Read Requests) is not
        // held past it: `evd_wait` polls again without looking for completions in between.
        // Only then: another thread's bursts stay held while this one polls.
        if self.shared.bursts_held.load(Ordering::Relaxed) != held_before {
            self.shared.flush_corked(false);
        }
        any
    }

    fn flush(&self) {
        crate::link::looks::note_look();
        self.shared.flush_corked(false);
    }

    fn idle(&self) {
        // Only a thread whose polls marked the link: another thread's sleep says nothing about
        // the one that polls.
        if !MARKED.replace(false) {
            return;
        }
        self.shared.hot_until.store(0, Ordering::Relaxed);
        self.shared.arm_conns(true);
    }
}

impl TcpLink {
    /// Tests: how long after its last poll a consumer still counts as polling.
    #[cfg(feature = "testing")]
    pub(crate) fn set_handoff_window(&self, window: Duration) {
        let ns = window.as_nanos() as u64;
        self.shared.hot_ns.store(ns, Ordering::Relaxed);
    }

    /// Tests: how many bursts of posts were held back and written together so far, and how
    /// many of them the progress thread wrote (their posters had not looked).
    #[cfg(feature = "testing")]
    pub(crate) fn bursts_held(&self) -> (u64, u64) {
        (
            self.shared.bursts_held.load(Ordering::Relaxed),
            self.shared.bursts_late.load(Ordering::Relaxed),
        )
    }

    /// Tests: how many times the progress thread looked and found a consumer polling.
    #[cfg(feature = "testing")]
    pub(crate) fn hot_looks(&self) -> u64 {
        self.shared.hot_looks.load(Ordering::Relaxed)
    }

    /// Tests: whether the progress thread watches the connections, and whether any socket
    /// was taken out of its epoll set for direct polls.
    #[cfg(feature = "testing")]
    pub(crate) fn handoff_state(&self) -> (bool, bool) {
        let armed = *lock(&self.shared.conns_armed);
        (armed, self.shared.detached.load(Ordering::Relaxed))
    }
}

/// Why binding TCP `port` was refused: the host's first unprivileged port and what to do.
fn privileged_port(port: u16) -> String {
    let first = std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1024);
    format!(
        "TCP port {port} is below this host's first unprivileged port ({first}, sysctl \
         net.ipv4.ip_unprivileged_port_start) and this process lacks CAP_NET_BIND_SERVICE: \
         choose a connection qualifier of {first} or above"
    )
}

fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(i32::MAX)?; // clamped to net.core.somaxconn
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// The progress thread: waits on epoll and dispatches.
fn progress(shared: Arc<Shared>, mut spare: SpareFd) {
    let mut events = epoll::EventVec::with_capacity(64);
    let mut conn_events = epoll::EventVec::with_capacity(64);
    // Until when the thread keeps polling (it handled a connection and no consumer polls).
    let mut spin_until = 0u64;
    let mut idle_spin = false;
    // Watching held bursts (`WATCH`), and how many had been held at the last tick.
    let mut watching = false;
    let mut bursts_seen = 0u64;
    // Idle spins since the outer set was last asked.
    let mut outer_skipped = 0u32;
    // Looks in a row that found a consumer polling (`HOT_BACKOFF`).
    let mut hot_looks = 0u32;
    // The spins' empty polls and their last yield, paced as a consumer's are (`dapl::pace`):
    // one count for the thread's life, so finding a message reads no clock for it.
    let mut spin = crate::pace::Spin::new(Instant::now());
    while !shared.stop.load(Ordering::SeqCst) {
        if idle_spin {
            // Yield after every empty poll while the yields let other threads run (a consumer
            // spinning on memory on this CPU), rarely while they find the CPU free: then each
            // empty spin is one system call, as a raw TCP responder's `recv` loop is, and a
            // Read Request that arrives waits for less.
            spin.after_empty_poll();
        }
        let mut timeout = if lock(&shared.timed).is_empty() {
            -1
        } else {
            TICK_MS
        };
        // A polling consumer handles the connections: wait only for the rest, and look again
        // when its polls may have stopped.
        let now = mono_ns();
        let hot_until = shared.hot_until.load(Ordering::Relaxed);
        if hot_until > now {
            shared.arm_conns(false);
            // The first look sleeps to the window's end; each later one in a row (the
            // consumer kept polling) twice as long as the last, up to `HOT_BACKOFF`.
            let backoff = if hot_looks == 0 {
                0
            } else {
                let window = shared.hot_ns.load(Ordering::Relaxed);
                window.saturating_mul(1 << hot_looks.min(HOT_BACKOFF))
            };
            hot_looks = hot_looks.saturating_add(1);
            shared.hot_looks.fetch_add(1, Ordering::Relaxed);
            let wait = (hot_until - now).max(backoff);
            let ms = wait.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
            timeout = if timeout < 0 { ms } else { timeout.min(ms) };
        } else {
            hot_looks = 0;
            shared.arm_conns(true);
            if now < spin_until {
                timeout = 0;
            }
        }
        // Spinning for the connections: their own set first, so a message that arrived costs
        // one `epoll_wait`, not one on the outer set and one on theirs; the outer set (wakes,
        // listeners, the ticker) is looked at when they had nothing.
        let conns_first = timeout == 0 && now < spin_until && hot_until <= now;
        let found = conns_first && shared.drain_conns(&mut conn_events);
        if found {
            spin_until = mono_ns() + SPIN.as_nanos() as u64;
            events.clear();
            idle_spin = false;
        } else if conns_first && outer_skipped < OUTER_SKIPS {
            // Nothing for the connections: the outer set (wakes, listeners, the ticker) is
            // skipped `OUTER_SKIPS` times in a row, so that most idle spins are one system
            // call and the next message is seen sooner.
            outer_skipped += 1;
            events.clear();
            idle_spin = true;
        } else {
            outer_skipped = 0;
            if timeout != 0 && !watching {
                // A burst held back meanwhile is written below, not slept on (see `cork`).
                shared.sleeping.store(true, Ordering::SeqCst);
                if shared.any_corked.load(Ordering::SeqCst) {
                    timeout = 0;
                }
                // Nor a window a consumer opened since the look above: the connections
                // leave the set first (`Shared::open_window`).
                if hot_until <= now && shared.hot_until.load(Ordering::SeqCst) > now {
                    timeout = 0;
                }
            }
            let waited = epoll::wait(&shared.epoll, &mut events, timeout);
            shared.sleeping.store(false, Ordering::Relaxed);
            if waited.is_err() {
                continue; // EINTR
            }
            idle_spin = timeout == 0 && events.is_empty();
        }
        let mut ticked = false;
        for ev in &events {
            let token = ev.data.u64();
            if token == WAKER_TOKEN {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(&shared.waker, &mut b);
                continue;
            }
            if token == TICKER_TOKEN {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(&shared.ticker, &mut b);
                ticked = true;
                continue;
            }
            if token == CONNS_TOKEN {
                if shared.drain_conns(&mut conn_events) {
                    spin_until = mono_ns() + SPIN.as_nanos() as u64;
                }
                continue;
            }
            let entry = lock(&shared.entries).get(&token).cloned();
            if let Some(Entry::Listener(l)) = entry {
                accept_all(&shared, &l, &mut spare);
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
        // Late only at a tick: a thread awake for other work (a transmit backlog, inbound
        // data) writes what is held as it goes, while the posters may be held up themselves.
        shared.flush_corked(ticked);
        // Watch from the first burst held; stop at a tick that finds none held since the last.
        // (A timer that cannot be set leaves the thread unwatching: bursts then wake it.)
        let bursts = shared.bursts_held.load(Ordering::Relaxed);
        if bursts != bursts_seen && (!watching || ticked) {
            if !watching {
                watching = shared.set_ticker(Some(WATCH));
            }
            bursts_seen = bursts;
        } else if watching && ticked {
            shared.set_ticker(None);
            watching = false;
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

fn accept_all(shared: &Arc<Shared>, l: &Listener, spare: &mut SpareFd) {
    loop {
        match l.sock.accept() {
            Ok((stream, peer)) => {
                let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
                TcpConn::accepted(id, shared, stream, peer, l.sp.clone());
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if crate::engine::port::is_descriptor_exhaustion(&e) => {
                // Out of descriptors: refuse what waits (a reset; the requester fails its
                // connect now instead of at its timeout, and this thread does not spin).
                spare.shed(|| {
                    while let Ok((stream, _)) = l.sock.accept() {
                        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                    }
                });
                return;
            }
            Err(_) => return, // WouldBlock, or a transient accept error
        }
    }
}

/// Parses the address part of a tcp IA name: `"<ipv4>"` with optional `,crc`.
pub(crate) fn parse_name(rest: &str) -> Option<(Ipv4Addr, TcpOptions)> {
    let mut parts = rest.split(',');
    let ip: Ipv4Addr = parts.next()?.trim().parse().ok()?;
    let mut opts = TcpOptions {
        crc: false,
        dead_peer: DEFAULT_DEAD_PEER,
        coalesce: true,
    };
    for p in parts {
        match p.trim() {
            "crc" => opts.crc = true,
            "nocrc" => opts.crc = false,
            "coalesce" => opts.coalesce = true,
            "nocoalesce" => opts.coalesce = false,
            p => {
                let secs: u64 = p.strip_prefix("dead_peer=")?.parse().ok()?;
                if !(1..=86_400).contains(&secs) {
                    return None;
                }
                opts.dead_peer = Duration::from_secs(secs);
            }
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
fn dial_now(shared: &Arc<Shared>, ep: &Arc<Qp>, attempt: u64, dial: Dial) {
    let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    if let Err((e, dial)) = TcpConn::connect(id, shared, ep, attempt, dial) {
        connect_failed(Arc::downgrade(shared), ep, attempt, dial, e.kind());
    }
}

/// Connect `attempt` failed with `kind`: a refusal within the retry window dials again after a
/// pause (if the attempt is still pending then); anything else ends the attempt.
pub(crate) fn connect_failed(
    shared: Weak<Shared>,
    ep: &Arc<Qp>,
    attempt: u64,
    dial: Dial,
    kind: ErrorKind,
) {
    let now = Instant::now();
    if kind == ErrorKind::ConnectionRefused && now + REFUSED_RETRY_GAP < dial.refused_until {
        let ep = ep.clone();
        crate::engine::timer::at(now + REFUSED_RETRY_GAP, move || {
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
        // Refused, or reset once connected (a listener out of descriptors resets what waits
        // in its queue): the other host's provider said no.
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset => {
            ConnectionEventKind::NonPeerRejected
        }
        _ => ConnectionEventKind::Unreachable,
    };
    ep.attempt_failed(attempt, kind, Vec::new());
}
