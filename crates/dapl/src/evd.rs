//! Event Dispatchers (`DAT_EVD`) and Consumer Notification Objects (`DAT_CNO`).
//!
//! An EVD is a bounded queue of events sized at create time: enqueueing never allocates. Each
//! event carries a *signalled* bit: unsignalled events (posted with
//! `DAT_COMPLETION_UNSIGNALLED_FLAG`, or receives of an EP with `SOLICITED_WAIT` whose matching
//! send was not solicited) are queued and can be dequeued, but do not wake a waiter or a CNO.
//! `wait(timeout, threshold)` returns once at least `threshold` events are queued and one of them
//! is signalled.
//!
//! Queue policy: the queue length is a minimum (DAT lets a provider give more room). The streams
//! a consumer paces by what it posts (DTO and RMR bind completions; software events, which
//! `post_se` refuses with `DAT_QUEUE_FULL`) keep DAT's overflow rule: a full EVD drops the event
//! and raises `DAT_ASYNC_ERROR_EVD_OVERFLOW` on the IA's async EVD. The streams it cannot pace
//! (connection events, connection requests, asynchronous errors: a peer or the network decides
//! how many arrive at once) are never dropped: past the length the queue grows.
//!
//! # Integrating with epoll
//! [`Evd::wait_fd`] returns an eventfd that is readable exactly while the EVD holds a signalled
//! event (level triggered). Rule: register it with epoll (`EPOLLIN`); when it is readable,
//! `dequeue` until it returns `None` (draining clears the fd); then wait again. Nothing needs
//! re-arming. Until `wait_fd` is first called, no fd exists and enqueueing costs no syscall.
//! Once the EVD is freed (or its IA closed) the fd stays readable and `dequeue` fails.
//! The fd is written only when the count of signalled events leaves zero: an edge-triggered
//! waiter must drain, or events behind the first wait for a later one. From async Rust:
//! `dapl::async_evd::AsyncEvd` (feature `tokio`) follows these rules.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::engine::port::Progress;
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::event::{AsyncEvent, AsyncKind, AsyncSubject, Event};
use crate::handle::{Handle, Owned};
use crate::ia::IaInner;
use crate::types::EvdFlags;

/// How long `Evd::wait` polls the link before it sleeps (a loopback round trip is 10-30 us).
const WAIT_SPIN: Duration = Duration::from_micros(50);

/// Timeout meaning "wait forever" (`DAT_TIMEOUT_INFINITE`).
pub const TIMEOUT_INFINITE: Option<Duration> = None;

// Hand-off: `HANDOFF` (the engine's `port::POLL_SLOT`: the links read it through
// `port::poll_satisfied`) holds, while this thread's `dequeue` on an empty EVD polls the link,
// that EVD (its address), until the poll produced a DTO completion for it: then
// [`HANDED_OFF`], and the completion is in [`HANDED`], which `dequeue` returns without
// queueing it (no lock to push it, none to pop it: it is the event a push and a pop would have
// returned, since the queue was empty). A `dequeue_into` arms it with the address tagged
// [`BATCH`], and the completions go to [`HANDED_MANY`] until it holds [`HANDOFF_MAX`]. 0: no
// `dequeue` polls. A plain cell, as every empty poll arms it.
use crate::engine::port::POLL_SLOT as HANDOFF;

thread_local! {
    /// The completion handed off to a `dequeue`, and whether it was signalled.
    static HANDED: std::cell::RefCell<Option<(Event, bool)>> =
        const { std::cell::RefCell::new(None) };
    /// Those handed off to a `dequeue_into`, in order: reused from call to call, so nothing
    /// is allocated once it has held the most a call asked for.
    static HANDED_MANY: std::cell::RefCell<Vec<(Event, bool)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// How many completions the armed `dequeue_into` takes.
    static HANDOFF_MAX: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `HANDOFF` once a completion was handed off (never an EVD's address), or a batch filled:
/// the armed `dequeue` has what it asked for, and the link's poll may leave the rest of its
/// input to the next look (`port::poll_satisfied`) rather than queue completions (two holds of
/// the EVD's lock each) that the next `dequeue` pops.
const HANDED_OFF: usize = crate::engine::port::SATISFIED;

/// The tag of a `dequeue_into`'s `HANDOFF` (an EVD's address is a multiple of 8).
const BATCH: usize = 2;

pub(crate) struct EvdState {
    queue: VecDeque<(Event, bool)>,
    qlen: usize,
    signalled: usize,
    enabled: bool,
    waitable: bool,
    /// Threads in `wait` (at most one: a second is refused), spinning or asleep.
    waiters: usize,
    /// Of those, the ones asleep on the condition variable: a push notifies only these (a
    /// notify is a `futex` system call whether or not anyone sleeps, and the spinning waiter,
    /// which looks at the queue after each poll, was notified by its own poll's push at every
    /// message: about a third of a microsecond of each shm wait here).
    sleeping: usize,
    fd_set: bool,
}

pub(crate) struct EvdInner {
    pub(crate) id: u64,
    pub(crate) ia: Weak<IaInner>,
    /// The IA's progress in the consumer's thread (`dequeue`, `wait`).
    progress: Arc<dyn Progress>,
    pub(crate) flags: EvdFlags,
    pub(crate) is_async: bool,
    state: Mutex<EvdState>,
    cond: Condvar,
    /// A counted handle: an attached CNO lives while the EVD does.
    cno: Mutex<Option<Cno>>,
    /// `cno` holds one (set under its lock): a push looks at `cno` only then, so an EVD
    /// without a CNO takes no second lock per event.
    has_cno: AtomicBool,
    fd: OnceLock<OwnedFd>,
    /// Endpoints, service points using the EVD (`free` is refused while any does).
    pub(crate) users: AtomicU32,
    pub(crate) freed: AtomicBool,
    /// The consumer's handles (`handle.rs`).
    handles: AtomicUsize,
    /// The receive EVD of some endpoint, or the request EVD of one that has posted an RDMA
    /// Read: a consumer that finds it empty waits for inbound data (a message, a read's
    /// response), and its polls hand that data in themselves (`Progress::poll`).
    pub(crate) awaits_inbound: AtomicBool,
    /// The queue's length, stored under the state lock whenever it changes: a busy-polling
    /// `dequeue` that finds 0 goes to the link's progress without taking the lock.
    queued: AtomicUsize,
}

/// An Event Dispatcher (`DAT_EVD_HANDLE`). Cloning gives another handle to the same EVD.
///
/// Dropping the last handle frees the EVD as [`free`](Self::free) does, with its queued
/// events; while endpoints or service points still use it, when the last of them is freed.
/// (The IA's async EVD is freed by the IA's close.)
#[derive(Clone)]
pub struct Evd(pub(crate) Handle<EvdInner>);

handle_identity!(Evd);
handle_identity!(@counted Evd);

impl Owned for EvdInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        // SeqCst: see `unuse`.
        if !self.is_async && self.users.load(Ordering::SeqCst) == 0 {
            self.release();
        }
    }
}

/// `DAT_EVD_PARAM`.
#[derive(Debug, Clone)]
pub struct EvdParam {
    /// Queue length.
    pub qlen: usize,
    /// Event streams taken.
    pub flags: EvdFlags,
    /// Attached CNO.
    pub cno: Option<Cno>,
    /// Whether the EVD is enabled (may trigger its CNO).
    pub enabled: bool,
    /// Events queued now.
    pub count: usize,
}

impl EvdInner {
    pub(crate) fn new(
        id: u64,
        ia: Weak<IaInner>,
        progress: Arc<dyn Progress>,
        qlen: usize,
        flags: EvdFlags,
        cno: Option<Cno>,
        is_async: bool,
    ) -> std::result::Result<Arc<Self>, crate::engine::NoMemory> {
        Ok(Arc::new(EvdInner {
            id,
            ia,
            progress,
            flags,
            is_async,
            state: Mutex::new(EvdState {
                queue: crate::engine::deque(qlen)?,
                qlen,
                signalled: 0,
                enabled: true,
                waitable: true,
                waiters: 0,
                sleeping: 0,
                fd_set: false,
            }),
            cond: Condvar::new(),
            has_cno: AtomicBool::new(cno.is_some()),
            cno: Mutex::new(cno),
            fd: OnceLock::new(),
            users: AtomicU32::new(0),
            freed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            awaits_inbound: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
        }))
    }

    /// `Progress::poll` of the EVD's IA: true if it handled something.
    fn poll_progress(&self) -> bool {
        self.progress
            .poll(self.awaits_inbound.load(Ordering::Relaxed))
    }

    /// Completions to come on this EVD need inbound data ([`EvdInner::awaits_inbound`]).
    pub(crate) fn await_inbound(&self) {
        // A load first: a store on every post would write a shared line each time.
        if !self.awaits_inbound.load(Ordering::Relaxed) {
            self.awaits_inbound.store(true, Ordering::Relaxed);
        }
    }

    fn lock(&self) -> MutexGuard<'_, EvdState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn object(&self) -> Object {
        Object::new("evd", self.id)
    }

    /// Queues an event. `signalled` decides whether it wakes waiters and the CNO. Returns false
    /// (and raises an overflow on the IA's async EVD) if the queue was full and the event is of
    /// a stream the consumer paces (module docs), or if the EVD was freed (dropped: nobody can
    /// dequeue it).
    pub(crate) fn push(self: &Arc<Self>, event: Event, signalled: bool) -> bool {
        let Some(event) = self.hand_off(event, signalled) else {
            return true;
        };
        let trigger_cno;
        {
            let mut s = self.lock();
            if self.freed.load(Ordering::Acquire) {
                // Freed (its queue cleared under this lock after the flag was set): a late
                // event is dropped, after the lock, or it would hold what it names forever.
                drop(s);
                return false;
            }
            if s.queue.len() >= s.qlen && event.consumer_paced() {
                drop(s);
                self.overflow();
                return false;
            }
            // Past `qlen` only for the streams the consumer cannot pace: the queue grows (an
            // allocation, off the fast path) rather than lose the event.
            s.queue.push_back((event, signalled));
            self.queued.store(s.queue.len(), Ordering::Release);
            if signalled {
                s.signalled += 1;
                if s.signalled == 1 && s.fd_set {
                    self.fd_signal(true);
                }
            }
            trigger_cno = signalled && s.enabled && self.has_cno.load(Ordering::Acquire);
            if signalled && s.sleeping > 0 {
                self.cond.notify_all();
            }
        }
        if trigger_cno {
            // The CNO's state, not a handle: a handle dropped here could free the CNO in the
            // link's thread.
            let cno = self
                .cno
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(|c| c.0.arc().clone());
            if let Some(cno) = cno {
                cno.trigger(self);
            }
        }
        true
    }

    /// Gives a DTO completion to this thread's `dequeue` of this EVD if it is polling the link
    /// for one (`HANDOFF`) and nothing is queued before it; else returns it. Not with a CNO
    /// attached (its trigger stays with the queue) or once freed.
    fn hand_off(self: &Arc<Self>, event: Event, signalled: bool) -> Option<Event> {
        if !matches!(event, Event::Dto(_))
            || self.queued.load(Ordering::Acquire) != 0
            || self.has_cno.load(Ordering::Relaxed)
            || self.freed.load(Ordering::Acquire)
        {
            return Some(event);
        }
        let me = Arc::as_ptr(self) as usize;
        // (A push from a thread-local's destructor finds the slots gone: queued.)
        let armed = HANDOFF.try_with(|h| h.get());
        if armed != Ok(me) {
            if armed == Ok(me | BATCH) {
                return Self::hand_off_many(event, signalled);
            }
            return Some(event);
        }
        let mut event = Some((event, signalled));
        let _ = HANDED.try_with(|h| {
            // Armed for this EVD and nothing handed off yet: the slot is empty (`disarm`
            // empties it whenever it disarms `HANDED_OFF`).
            let before = h.replace(event.take());
            debug_assert!(before.is_none(), "a hand-off slot armed while full");
            HANDOFF.set(HANDED_OFF);
        });
        event.map(|(e, _)| e)
    }

    /// [`hand_off`](Self::hand_off) to a `dequeue_into` armed for this EVD with room left.
    fn hand_off_many(event: Event, signalled: bool) -> Option<Event> {
        let mut event = Some((event, signalled));
        let _ = HANDED_MANY.try_with(|h| {
            let Ok(mut h) = h.try_borrow_mut() else {
                return;
            };
            h.extend(event.take());
            if h.len() >= HANDOFF_MAX.get() {
                HANDOFF.set(HANDED_OFF);
            }
        });
        event.map(|(e, _)| e)
    }

    fn overflow(self: &Arc<Self>) {
        tracing::warn!(
            evd = self.id,
            ia = self.ia.upgrade().map(|ia| ia.id),
            qlen = self.lock().qlen,
            "EVD overflow: an event was dropped"
        );
        if self.is_async {
            return; // nowhere left to report it
        }
        if let Some(ia) = self.ia.upgrade() {
            ia.post_async(AsyncEvent {
                kind: AsyncKind::EvdOverflow,
                subject: AsyncSubject::Evd(Evd(Handle::internal(self.clone()))),
                reason: 0, // DAT_EVD_OVERFLOW_ERROR
            });
        }
    }

    /// The oldest event, its handles made the consumer's.
    fn pop(&self, s: &mut EvdState) -> Option<Event> {
        let (ev, signalled) = s.queue.pop_front()?;
        self.queued.store(s.queue.len(), Ordering::Release);
        if signalled {
            s.signalled -= 1;
            if s.signalled == 0 && s.fd_set {
                self.fd_signal(false);
            }
        }
        Some(ev.into_user())
    }

    /// Pops up to `max` events under one hold of the lock into `out`; how many.
    fn pop_into(&self, out: &mut Vec<Event>, max: usize) -> usize {
        let mut s = self.lock();
        let mut n = 0;
        while n < max {
            let Some(ev) = self.pop(&mut s) else { break };
            out.push(ev);
            n += 1;
        }
        n
    }

    fn fd_signal(&self, set: bool) {
        if let Some(fd) = self.fd.get() {
            if set {
                let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
            } else {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(fd, &mut b);
            }
        }
    }

    /// Drops every queued event (on free), breaking reference cycles through event handles,
    /// and makes the wait fd readable for good.
    pub(crate) fn clear(&self) {
        let events = {
            let mut s = self.lock();
            s.signalled = 0;
            s.waitable = false;
            self.cond.notify_all();
            self.queued.store(0, Ordering::Release);
            std::mem::take(&mut s.queue)
        };
        // Freed: a waiter on the wait fd (epoll, `AsyncEvd`) wakes and finds it so; the fd
        // stays readable from now on, as a closed socket does.
        self.fd_signal(true);
        // Dropped outside the lock: an event may hold the last reference to an object whose
        // drop takes other locks (an RMR's binding holds its LMR, whose drop deregisters it),
        // and an unread connection request is rejected, which posts to its requester's EVD.
        for (ev, _) in events {
            ev.drop_unread();
        }
    }
}

/// This thread's `HANDOFF` armed for one `dequeue` of an EVD. Dropped without [`take`]
/// (the poll unwound), it disarms the slot and queues what the poll handed off.
struct Armed<'a>(&'a Arc<EvdInner>);

impl<'a> Armed<'a> {
    /// Arms the slot for `evd`, unless a `dequeue` further out in this thread has.
    fn arm(evd: &'a Arc<EvdInner>) -> Option<Armed<'a>> {
        HANDOFF.with(|h| {
            (h.get() == 0).then(|| {
                h.set(Arc::as_ptr(evd) as usize);
                Armed(evd)
            })
        })
    }

    /// Disarms the slot and returns what the poll handed off.
    fn take(self) -> Option<Event> {
        Self::disarm().map(|(ev, _)| ev)
    }

    fn disarm() -> Option<(Event, bool)> {
        if HANDOFF.try_with(|h| h.replace(0)).ok()? != HANDED_OFF {
            return None;
        }
        HANDED.try_with(|h| h.borrow_mut().take()).ok().flatten()
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        if let Some((ev, signalled)) = Self::disarm() {
            self.0.push(ev, signalled);
        }
    }
}

/// [`Armed`] for a `dequeue_into` of up to `max` events.
struct ArmedMany<'a>(&'a Arc<EvdInner>);

impl<'a> ArmedMany<'a> {
    fn arm(evd: &'a Arc<EvdInner>, max: usize) -> Option<ArmedMany<'a>> {
        HANDOFF.with(|h| {
            (h.get() == 0).then(|| {
                HANDOFF_MAX.set(max);
                h.set(Arc::as_ptr(evd) as usize | BATCH);
                ArmedMany(evd)
            })
        })
    }

    /// Disarms the slots and gives `sink` what the poll handed off, in order; how many.
    fn take(self, mut sink: impl FnMut(Event)) -> usize {
        let mut n = 0;
        Self::disarm(|ev, _| {
            n += 1;
            sink(ev);
        });
        std::mem::forget(self); // disarmed
        n
    }

    fn disarm(mut each: impl FnMut(Event, bool)) {
        if HANDOFF.try_with(|h| h.replace(0)).unwrap_or(0) == 0 {
            return;
        }
        let _ = HANDED_MANY.try_with(|h| {
            // Taken out before `each` runs: it may push to an EVD (`Drop`), which looks at
            // these slots (disarmed by now, so it does not fill them).
            let mut taken = std::mem::take(&mut *h.borrow_mut());
            for (ev, signalled) in taken.drain(..) {
                each(ev, signalled);
            }
            // The (now empty) buffer back, for the next call (unless `each` refilled the
            // slot meanwhile, which nothing it calls does today).
            let mut slot = h.borrow_mut();
            if slot.is_empty() {
                *slot = taken;
            }
        });
    }
}

impl Drop for ArmedMany<'_> {
    fn drop(&mut self) {
        Self::disarm(|ev, signalled| {
            self.0.push(ev, signalled);
        });
    }
}

impl Evd {
    fn check(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::NoSubtype,
                op,
                self.0.object(),
                "the EVD was freed",
            );
        }
        Ok(())
    }

    /// The EVD's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Removes and returns the oldest event, or `None` at once if the EVD is empty
    /// (`dat_evd_dequeue`; `None` is the cheap form of `DAT_QUEUE_EMPTY`).
    ///
    /// On an empty EVD it first lets the IA's link handle, in this thread, what has already
    /// arrived (`Progress::poll`), so a consumer that busy-polls sees a completion without waiting
    /// for the link's progress thread to run.
    pub fn dequeue(&self) -> Result<Option<Event>> {
        self.check("evd_dequeue")?;
        self.0.progress.flush();
        // Acquire: pairs with the store under the lock; an event queued after this load is
        // found by the next dequeue (or after the poll below).
        if self.0.queued.load(Ordering::Acquire) > 0 {
            let mut s = self.0.lock();
            if let Some(ev) = self.0.pop(&mut s) {
                return Ok(Some(ev));
            }
        }
        // The poll's first DTO completion for this EVD comes back through `HANDOFF` (unless a
        // `dequeue` further out in this thread is polling: then it is queued as usual).
        let armed = Armed::arm(self.0.arc());
        let handled = self.0.poll_progress();
        if let Some(ev) = armed.and_then(Armed::take) {
            return Ok(Some(ev.into_user()));
        }
        if handled {
            let mut s = self.0.lock();
            return Ok(self.0.pop(&mut s));
        }
        Ok(None)
    }

    /// Removes up to `max` events, oldest first, and appends them to `out`; returns how many
    /// (0 at once if the EVD is empty). The batch form of [`dequeue`](Self::dequeue), as
    /// `ibv_poll_cq` takes up to `num_entries` completions: one look at the link and one
    /// hold of the queue's lock for the lot, and completions that the look produces go
    /// straight to `out`, never queued. `out` only grows: reuse it (cleared) from call to
    /// call and nothing is allocated once it has held `max` events.
    pub fn dequeue_into(&self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        self.check("evd_dequeue")?;
        if max == 0 {
            return Ok(0);
        }
        self.0.progress.flush();
        out.reserve(max);
        if self.0.queued.load(Ordering::Acquire) > 0 {
            let n = self.0.pop_into(out, max);
            if n > 0 {
                return Ok(n);
            }
        }
        let armed = ArmedMany::arm(self.0.arc(), max);
        let handled = self.0.poll_progress();
        let mut n = 0;
        if let Some(armed) = armed {
            n += armed.take(|ev| out.push(ev.into_user()));
        }
        // What the look queued (behind what it handed off, or for a call further out).
        if (handled || n > 0) && n < max && self.0.queued.load(Ordering::Acquire) > 0 {
            n += self.0.pop_into(out, max - n);
        }
        Ok(n)
    }

    /// Waits up to `timeout` (`None` = forever) until at least `threshold` events are queued
    /// and one of them is signalled, then returns the oldest event and how many remain
    /// (`dat_evd_wait`). `Ok(None)` when the time runs out (also for a zero timeout: C's
    /// `DAT_TIMEOUT_EXPIRED`, which is not an error here).
    pub fn wait(
        &self,
        timeout: Option<Duration>,
        threshold: usize,
    ) -> Result<Option<(Event, usize)>> {
        const OP: &str = "evd_wait";
        self.check(OP)?;
        self.0.progress.flush();
        let mut s = self.0.lock();
        if threshold == 0 || threshold > s.qlen {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg3,
                OP,
                self.0.object(),
                format!("threshold {threshold} is not in 1..={}", s.qlen),
            );
        }
        if s.waiters > 0 {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEvdWaiter,
                OP,
                self.0.object(),
                "another thread is already waiting",
            );
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut spun = false;
        let mut first_sleep = true;
        loop {
            if !s.waitable {
                return err(
                    ErrorType::InvalidState,
                    Subtype::InvalidStateEvdUnwaitable,
                    OP,
                    self.0.object(),
                    "the EVD is unwaitable",
                );
            }
            if s.queue.len() >= threshold && s.signalled > 0 {
                let ev = self.0.pop(&mut s).expect("queue is not empty");
                return Ok(Some((ev, s.queue.len())));
            }
            let wait_for = match deadline {
                None => Duration::from_secs(3600),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(None);
                    }
                    d - now
                }
            };
            if spun && std::mem::take(&mut first_sleep) {
                // Going to sleep: if this thread's polls took the link's connections, its own
                // thread takes them back now (outside the EVD lock; then look again).
                s.waiters += 1; // still this thread's wait
                drop(s);
                self.0.progress.idle();
                s = self.0.lock();
                s.waiters -= 1;
                continue;
            }
            s.waiters += 1;
            if spun {
                s.sleeping += 1;
                let (g, _) = self
                    .0
                    .cond
                    .wait_timeout(s, wait_for)
                    .unwrap_or_else(|p| p.into_inner());
                s = g;
                s.sleeping -= 1;
            } else {
                // Before sleeping: a short spin that polls the link (see `dequeue`), so that an
                // answer arriving within a round trip costs no thread switch.
                spun = true;
                drop(s);
                let start = Instant::now();
                let until = start + WAIT_SPIN.min(wait_for);
                let mut spin = crate::pace::Spin::new(start);
                s = loop {
                    let progressed = self.0.poll_progress();
                    let g = self.0.lock();
                    if (g.queue.len() >= threshold && g.signalled > 0)
                        || !g.waitable
                        || self.0.freed.load(Ordering::Acquire)
                        || (!progressed && Instant::now() >= until)
                    {
                        break g;
                    }
                    drop(g);
                    // Yield (not pause) as this thread's pacer says: after every empty poll
                    // while its yields let other threads run (the peer that must answer may
                    // share this CPU), rarely while they find the CPU free (`pace`).
                    spin.after_empty_poll();
                };
            }
            s.waiters -= 1;
            if self.0.freed.load(Ordering::Acquire) {
                return err(
                    ErrorType::InvalidHandle,
                    Subtype::NoSubtype,
                    OP,
                    self.0.object(),
                    "the EVD was freed while waiting",
                );
            }
        }
    }

    /// Posts a software event carrying `value` (`dat_evd_post_se`). `DAT_QUEUE_FULL` if the
    /// queue is full.
    pub fn post_se(&self, value: u64) -> Result<()> {
        const OP: &str = "evd_post_se";
        self.check(OP)?;
        if !self.0.flags.contains(EvdFlags::SOFTWARE) {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg1,
                OP,
                self.0.object(),
                "the EVD was not created with DAT_EVD_SOFTWARE_FLAG",
            );
        }
        {
            let s = self.0.lock();
            if s.queue.len() >= s.qlen {
                return err(
                    ErrorType::QueueFull,
                    Subtype::NoSubtype,
                    OP,
                    self.0.object(),
                    "the EVD is full",
                );
            }
        }
        self.0.push(Event::Software(value), true);
        Ok(())
    }

    /// Changes the queue length (`dat_evd_resize`). Refused with `DAT_INVALID_STATE` if more
    /// events are queued than the new length holds.
    pub fn resize(&self, qlen: usize) -> Result<()> {
        const OP: &str = "evd_resize";
        self.check(OP)?;
        let max = self
            .0
            .ia
            .upgrade()
            .map(|ia| ia.attr.max_evd_qlen)
            .unwrap_or(0);
        if qlen == 0 || qlen > max {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.0.object(),
                format!("queue length {qlen} is not in 1..={max}"),
            );
        }
        let mut s = self.0.lock();
        if s.queue.len() > qlen {
            return err(
                ErrorType::InvalidState,
                Subtype::NoSubtype,
                OP,
                self.0.object(),
                format!("{} events are queued, more than {qlen}", s.queue.len()),
            );
        }
        let extra = qlen.saturating_sub(s.queue.len());
        if s.queue.try_reserve_exact(extra).is_err() {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceMemory,
                OP,
                self.0.object(),
                format!("cannot grow the queue to {qlen} events (out of memory)"),
            );
        }
        s.qlen = qlen;
        Ok(())
    }

    /// Lets the EVD trigger its CNO (`dat_evd_enable`).
    pub fn enable(&self) -> Result<()> {
        self.check("evd_enable")?;
        self.0.lock().enabled = true;
        Ok(())
    }

    /// Stops the EVD from triggering its CNO (`dat_evd_disable`); events are still queued.
    pub fn disable(&self) -> Result<()> {
        self.check("evd_disable")?;
        self.0.lock().enabled = false;
        Ok(())
    }

    /// Makes waits fail at once with `DAT_INVALID_STATE`, waking current waiters
    /// (`dat_evd_set_unwaitable`).
    pub fn set_unwaitable(&self) -> Result<()> {
        self.check("evd_set_unwaitable")?;
        self.0.lock().waitable = false;
        self.0.cond.notify_all();
        Ok(())
    }

    /// Undoes `set_unwaitable` (`dat_evd_clear_unwaitable`).
    pub fn clear_unwaitable(&self) -> Result<()> {
        self.check("evd_clear_unwaitable")?;
        self.0.lock().waitable = true;
        Ok(())
    }

    /// Attaches or detaches a CNO (`dat_evd_modify_cno`).
    pub fn modify_cno(&self, cno: Option<&Cno>) -> Result<()> {
        self.check("evd_modify_cno")?;
        let old = {
            let mut slot = self.0.cno.lock().unwrap_or_else(|p| p.into_inner());
            self.0.has_cno.store(cno.is_some(), Ordering::Release);
            std::mem::replace(&mut *slot, cno.cloned())
        };
        // Dropped outside the lock: the last handle to a CNO frees it, which looks at EVDs.
        drop(old);
        Ok(())
    }

    /// `dat_evd_query`.
    pub fn query(&self) -> Result<EvdParam> {
        self.check("evd_query")?;
        let s = self.0.lock();
        Ok(EvdParam {
            qlen: s.qlen,
            flags: self.0.flags,
            cno: self.0.cno.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            enabled: s.enabled,
            count: s.queue.len(),
        })
    }

    /// The epoll-able wait object (see the module docs for the rule). Created on first call.
    pub fn wait_fd(&self) -> Result<BorrowedFd<'_>> {
        const OP: &str = "evd_wait_fd";
        self.check(OP)?;
        if self.0.fd.get().is_none() {
            let fd = rustix::event::eventfd(
                0,
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
            )
            .or_else(|e| {
                err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceDevice,
                    OP,
                    self.0.object(),
                    format!("eventfd: {e}"),
                )
            })?;
            let mut s = self.0.lock();
            if self.0.fd.set(fd).is_ok() {
                s.fd_set = true;
                if s.signalled > 0 {
                    self.0.fd_signal(true);
                }
            }
        }
        Ok(self.0.fd.get().expect("set above").as_fd())
    }

    /// Frees the EVD (`dat_evd_free`). Refused with `DAT_INVALID_STATE` while an endpoint,
    /// service point or SRQ uses it.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "evd_free";
        self.check(OP)?;
        if self.0.is_async {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEvdAsync,
                OP,
                self.0.object(),
                "the IA's async EVD is freed by ia_close",
            );
        }
        let users = self.0.users.load(Ordering::Acquire);
        if users > 0 {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEvdInUse,
                OP,
                self.0.object(),
                format!("{users} objects still use this EVD"),
            );
        }
        self.0.release();
        Ok(())
    }
}

impl EvdInner {
    /// Marks the EVD freed and drops it from its IA (used by free and by abrupt IA close).
    pub(crate) fn release(self: &Arc<Self>) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.clear();
        if let Some(ia) = self.ia.upgrade() {
            ia.objects().evds.remove(&self.id);
        }
        let cno = {
            let mut slot = self.cno.lock().unwrap_or_else(|p| p.into_inner());
            self.has_cno.store(false, Ordering::Release);
            slot.take()
        };
        drop(cno); // outside the lock, as in `modify_cno`
    }

    /// An endpoint or service point stopped using the EVD: frees it if the consumer's handles
    /// are gone too.
    pub(crate) fn unuse(self: &Arc<Self>) {
        // SeqCst with the handle count's (`Handle`): of a last `unuse` and a last handle drop
        // racing, at least one sees both counts at zero.
        if self.users.fetch_sub(1, Ordering::SeqCst) == 1
            && self.handles.load(Ordering::SeqCst) == 0
            && !self.is_async
        {
            self.release();
        }
    }
}

// ------------------------------------------------------------------------------------------------
// CNO

pub(crate) struct CnoInner {
    pub(crate) id: u64,
    pub(crate) ia: Weak<IaInner>,
    /// Weak: a triggered EVD whose handles all went is gone, not waited for.
    triggered: Mutex<VecDeque<Weak<EvdInner>>>,
    cond: Condvar,
    pub(crate) freed: AtomicBool,
    /// The consumer's handles and the attached EVDs' (`handle.rs`).
    handles: AtomicUsize,
}

/// A Consumer Notification Object (`DAT_CNO_HANDLE`): one place to wait for any of several EVDs.
///
/// An EVD attached to the CNO holds a handle to it; dropping the last handle frees it.
#[derive(Clone)]
pub struct Cno(pub(crate) Handle<CnoInner>);

handle_identity!(Cno);
handle_identity!(@counted Cno);

impl Owned for CnoInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        self.release();
    }
}

impl CnoInner {
    pub(crate) fn new(id: u64, ia: Weak<IaInner>) -> Arc<CnoInner> {
        Arc::new(CnoInner {
            id,
            ia,
            triggered: Mutex::new(VecDeque::new()),
            cond: Condvar::new(),
            freed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
        })
    }

    fn trigger(&self, evd: &Arc<EvdInner>) {
        let mut t = self.triggered.lock().unwrap_or_else(|p| p.into_inner());
        if !t.iter().any(|e| std::ptr::eq(e.as_ptr(), Arc::as_ptr(evd))) {
            t.push_back(Arc::downgrade(evd));
        }
        self.cond.notify_all();
    }

    /// Marks the CNO freed, drops it from its IA and wakes its waiter.
    fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(ia) = self.ia.upgrade() {
            ia.objects().cnos.remove(&self.id);
        }
        self.triggered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.cond.notify_all();
    }
}

impl Cno {
    /// The CNO's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Waits until an attached, enabled EVD receives a signalled event and returns that EVD
    /// (`dat_cno_wait`). `Ok(None)` if none did in time (C's `DAT_TIMEOUT_EXPIRED`).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Option<Evd>> {
        const OP: &str = "cno_wait";
        let obj = Object::new("cno", self.0.id);
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleCno,
                OP,
                obj,
                "the CNO was freed",
            );
        }
        if let Some(ia) = self.0.ia.upgrade() {
            ia.progress.flush();
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut t = self.0.triggered.lock().unwrap_or_else(|p| p.into_inner());
        let mut first_sleep = true;
        loop {
            if let Some(evd) = t.pop_front() {
                match evd.upgrade() {
                    Some(evd) if !evd.freed.load(Ordering::Acquire) => {
                        return Ok(Some(Evd(Handle::new(evd))));
                    }
                    _ => continue,
                }
            }
            if std::mem::take(&mut first_sleep) {
                // The thread sleeps: if it polled, the link's own thread takes over now
                // (outside the `triggered` lock; then look again).
                drop(t);
                if let Some(ia) = self.0.ia.upgrade() {
                    ia.progress.idle();
                }
                t = self.0.triggered.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let wait_for = match deadline {
                None => Duration::from_secs(3600),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(None);
                    }
                    d - now
                }
            };
            t = self
                .0
                .cond
                .wait_timeout(t, wait_for)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if self.0.freed.load(Ordering::Acquire) {
                return err(
                    ErrorType::InvalidHandle,
                    Subtype::InvalidHandleCno,
                    OP,
                    obj,
                    "the CNO was freed while waiting",
                );
            }
        }
    }

    /// Frees the CNO (`dat_cno_free`). Refused while an EVD is attached.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "cno_free";
        let obj = Object::new("cno", self.0.id);
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleCno,
                OP,
                obj,
                "the CNO was freed",
            );
        }
        if let Some(ia) = self.0.ia.upgrade() {
            let users = ia
                .objects()
                .evds
                .values()
                .filter(|e| {
                    e.0.cno.lock().unwrap_or_else(|p| p.into_inner()).as_ref() == Some(self)
                })
                .count();
            if users > 0 {
                return err(
                    ErrorType::InvalidState,
                    Subtype::InvalidStateCnoInUse,
                    OP,
                    obj,
                    format!("{users} EVDs are attached to this CNO"),
                );
            }
        }
        self.0.release();
        Ok(())
    }
}
