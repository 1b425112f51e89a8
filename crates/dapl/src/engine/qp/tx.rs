//! The transmit side of a QP: one thread at a time drains the SQ and IRQ into the link.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use super::{Lent, Qp, QpCore, ReadWork, ReqOp, SendWr};
use crate::engine::port::{Connection, InlineOutcome, OutMsg, Payload, TxOutcome};
use crate::types::{CompletionFlags, ConnectionEventKind, DtoStatus, EpState, RmrTriplet};

/// The connection a batch of messages was held on ([`Connection::hold`]): flushed when the
/// batch ends.
struct Batch(Option<Arc<dyn Connection>>);

impl Batch {
    fn flush(&mut self) {
        if let Some(conn) = self.0.take() {
            conn.flush();
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Posts (suppressed Sends, Read Requests) links took straight from their poster
/// (`Qp::transmit_inline`; `dapl::testing`): counted only in builds with that feature (a locked
/// add per ping-pong message otherwise).
#[cfg(feature = "testing")]
pub(crate) static INLINE_POSTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Read Responses links took straight from the handler of their request
/// (`Qp::respond_inline`; `dapl::testing`), counted as [`INLINE_POSTS`] are.
#[cfg(feature = "testing")]
pub(crate) static INLINE_RESPONSES: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// What became of a WR offered inline ([`Qp::transmit_inline`]).
pub(crate) enum Inline {
    /// Not taken: queue it.
    Declined,
    /// A Send, written: nothing more to do (drop it once the QP's lock is let go).
    Sent,
    /// A Read's request, written: the WR goes into the ORQ (under the same hold of the lock).
    Read,
    /// Attempted and failed (`InlineOutcome::Failed`): the WR completes with this status and
    /// the connection (this id) breaks, once the QP's lock is let go.
    Failed(DtoStatus, u64),
}

/// Where a Read's response lands, as its request names it: the address of its first segment.
fn read_sink_to(wr: &SendWr) -> u64 {
    wr.segs
        .first()
        .map(|s| s.region.addr() + s.offset as u64)
        .unwrap_or(0)
}

/// The request of a Read WR (its `sink_to` set).
fn read_request(wr: &SendWr) -> OutMsg<'static> {
    OutMsg::ReadRequest {
        sink_stag: wr.sink_stag,
        sink_to: wr.sink_to,
        len: wr.remote.segment_length,
        src_stag: wr.remote.rmr_context.0,
        src_to: wr.remote.virtual_address,
    }
}

/// The message a Send or RDMA Write (with immediate) WR transmits (not a Read: its request
/// goes through the ORQ).
fn wr_msg(wr: &SendWr) -> OutMsg<'_> {
    let solicited = wr.flags.contains(CompletionFlags::SOLICITED_WAIT);
    let payload = Payload::Segs(&wr.segs);
    let (stag, to) = (wr.remote.rmr_context.0, wr.remote.virtual_address);
    match wr.op {
        ReqOp::Send => OutMsg::Send {
            solicited,
            invalidate: None,
            payload,
        },
        ReqOp::SendInvalidate(stag) => OutMsg::Send {
            solicited,
            invalidate: Some(stag),
            payload,
        },
        ReqOp::WriteImmed(immediate) => OutMsg::WriteImmed {
            stag,
            to,
            payload,
            immediate,
            solicited,
        },
        ReqOp::Write | ReqOp::Read => OutMsg::Write { stag, to, payload },
    }
}

impl Qp {
    /// Drives the send side: transmits queued work while the link takes it. Never blocks: if
    /// another thread is already transmitting for this EP, it drains once more for this call
    /// ([`Turns`](crate::engine::turn::Turns)).
    pub(crate) fn pump(&self) {
        self.tx_turns.run(|| self.drain_tx(None));
    }

    /// [`pump`](Self::pump) for a poster that has just queued a WR and still holds the QP's
    /// lock `c`: if nobody transmits, this thread takes the turn and its first look at the
    /// queues is made under `c` (one lock less per post); otherwise `c` is let go and the
    /// turn asked for as `pump` does.
    pub(crate) fn pump_locked(&self, c: MutexGuard<'_, QpCore>) {
        if self.tx_turns.try_take() {
            let mut held = Some(c);
            self.tx_turns.run_taken(|| self.drain_tx(held.take()));
        } else {
            drop(c);
            self.pump();
        }
    }

    /// A Send whose success is not reported (SUPPRESS), or an RDMA Read with room in the ORQ,
    /// posted while nothing of this QP's is queued, in the link, or being transmitted: offered
    /// to the link under the QP's lock `c` ([`Connection::transmit_inline`]), without the queue
    /// and the transmit turn. If the link wrote it, nothing is left to do but put a Read into
    /// the ORQ, where it waits for its response as if the drain had sent its request (a Send's
    /// success is not reported), and whatever this QP transmits next is written after it;
    /// otherwise the caller queues it as usual. The WR is lent, not moved: most posts are
    /// declined, and a WR is large.
    ///
    /// Nobody can be transmitting for this QP meanwhile: every drain takes the turn before it
    /// looks at the queues under this lock, and here the turn is idle, the queues empty and no
    /// WR in `transmit` (`in_transmit`), under the lock; a drain that asks for the turn now
    /// finds this WR written when it gets the lock. A Read's response cannot be handled before
    /// its WR is in the ORQ: that needs this lock, which the caller holds until then.
    pub(crate) fn transmit_inline(&self, c: &QpCore, wr: &mut SendWr) -> Inline {
        let read = wr.op == ReqOp::Read;
        let offered = if read {
            c.conn_inlines.reads && c.orq.len() < c.ord
        } else {
            wr.flags.contains(CompletionFlags::SUPPRESS)
                && match wr.op {
                    ReqOp::Send | ReqOp::SendInvalidate(_) => c.conn_inlines.sends,
                    ReqOp::Write => c.conn_inlines.writes,
                    _ => false,
                }
        };
        if !offered
            || !self.transmit_idle(c)
            || (wr.flags.contains(CompletionFlags::BARRIER_FENCE) && c.reads_pending())
            || self.rnr_blocked.load(Ordering::SeqCst)
        {
            return Inline::Declined;
        }
        let Some(conn) = c.conn.as_ref() else {
            return Inline::Declined;
        };
        let outcome = if read {
            wr.sink_to = read_sink_to(wr);
            conn.transmit_inline(&read_request(wr))
        } else {
            conn.transmit_inline(&wr_msg(wr))
        };
        #[cfg(feature = "testing")]
        if outcome == InlineOutcome::Taken {
            INLINE_POSTS.fetch_add(1, Ordering::Relaxed);
        }
        match outcome {
            InlineOutcome::Taken if read => Inline::Read,
            InlineOutcome::Taken => Inline::Sent,
            InlineOutcome::Failed(status) => Inline::Failed(status, conn.id()),
            InlineOutcome::Declined => Inline::Declined,
        }
    }

    /// Nothing of this QP's waits to be transmitted or is being transmitted (`c`: its core,
    /// locked): no Send Queue or response queued, nothing lent or stalled in the link, no WR
    /// in `transmit`, the transmit turn idle. What a message written straight by the link
    /// ([`Qp::transmit_inline`], [`Qp::respond_inline`]) needs, so that it goes out in order.
    pub(super) fn transmit_idle(&self, c: &QpCore) -> bool {
        c.sq.is_empty()
            && c.irq.is_empty()
            && c.lent.is_empty()
            && !c.tx_stalled
            && !c.in_transmit
            && self.tx_turns.idle()
    }

    /// Transmits the queued work while the link takes it; `held`: the QP's lock, taken by the
    /// caller, for the first look at the queues.
    fn drain_tx(&self, mut held: Option<MutexGuard<'_, QpCore>>) {
        #[allow(clippy::large_enum_variant)] // lives on the stack for one iteration
        enum Work {
            Resp(ReadWork),
            Wr(SendWr),
            ReadReq {
                sink_stag: u32,
                sink_to: u64,
                len: u64,
                remote: RmrTriplet,
            },
        }
        // Several messages queued at once: the link may write them together (`hold`); what it
        // held back is written when this call ends, however it ends.
        let mut batch = Batch(None);
        // The last WR's outcome is recorded but `in_transmit` not cleared yet: done under the
        // next look at the queues (one lock for both).
        let mut finish_pending = false;
        loop {
            let (work, conn, more, lent_empty) = {
                let mut c = held.take().unwrap_or_else(|| self.lock());
                if std::mem::take(&mut finish_pending) {
                    if let Some(end) = c.finish_transmit() {
                        drop(c);
                        self.run_deferred_end(Some(end));
                        continue; // look again (the connection has ended: nothing goes out)
                    }
                }
                if !matches!(c.state, EpState::Connected | EpState::DisconnectPending) {
                    return;
                }
                // Cloned only for work (an atomic increment and decrement): the last look of
                // a drain usually finds the queues empty.
                let Some(conn_id) = c.conn.as_ref().map(|conn| conn.id()) else {
                    return;
                };
                if c.tx_stalled {
                    return; // the link calls tx_drained when it has written its message
                }
                let more = c.irq.len() + c.sq.len() > 1;
                // No lent message now means none until this thread lends one (only the
                // transmitting thread adds to `lent`): a Send or Write sent in this turn
                // completes without looking again.
                let lent_empty = c.lent.is_empty();
                let conn = |c: &QpCore| c.conn.clone().expect("checked above");
                if let Some(r) = c.irq.pop_front() {
                    (Work::Resp(r), conn(&c), more, lent_empty)
                } else if let Some(head) = c.sq.front() {
                    if self.rnr_blocked.load(Ordering::SeqCst) {
                        return;
                    }
                    if head.flags.contains(CompletionFlags::BARRIER_FENCE) && c.reads_pending() {
                        return; // resumes when the last outstanding read completes
                    }
                    if head.op == ReqOp::Read && c.orq.len() >= c.ord {
                        return; // ORD reached: the read waits in the send queue
                    }
                    let mut wr = c.sq.pop_front().expect("head exists");
                    if wr.op == ReqOp::Read {
                        // Into the ORQ before the request leaves: the response may come back
                        // before transmit returns.
                        wr.sink_to = read_sink_to(&wr);
                        let w = Work::ReadReq {
                            sink_stag: wr.sink_stag,
                            sink_to: wr.sink_to,
                            len: wr.remote.segment_length,
                            remote: wr.remote,
                        };
                        c.orq.push_back(wr);
                        (w, conn(&c), more, lent_empty)
                    } else {
                        // Until its outcome is recorded, an end from another thread waits
                        // (`finish_transmit`).
                        c.in_transmit = true;
                        (Work::Wr(wr), conn(&c), more, lent_empty)
                    }
                } else {
                    let graceful_done = c.state == EpState::DisconnectPending && !c.outstanding();
                    drop(c);
                    if graceful_done {
                        batch.flush(); // what was held goes out before the end
                        self.end_connection_of(conn_id, ConnectionEventKind::Disconnected, true);
                    }
                    return;
                }
            };
            if more && batch.0.is_none() {
                conn.hold();
                batch.0 = Some(conn.clone());
            }
            match work {
                Work::Resp(r) => {
                    let segs = [r.seg];
                    let out = conn.transmit(OutMsg::ReadResponse {
                        sink_stag: r.sink_stag,
                        sink_to: r.sink_to,
                        payload: Payload::Segs(&segs),
                    });
                    match out {
                        TxOutcome::Sent => {}
                        TxOutcome::Lent => self.lend(None, &conn),
                        TxOutcome::Queued => {
                            if self.stall_tx(None, &conn) {
                                return;
                            }
                        }
                        TxOutcome::PeerClosed => {
                            self.end_connection_of(
                                conn.id(),
                                ConnectionEventKind::Disconnected,
                                true,
                            );
                            return;
                        }
                        _ => {
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                    }
                }
                Work::ReadReq {
                    sink_stag,
                    sink_to,
                    len,
                    remote,
                } => {
                    let out = conn.transmit(OutMsg::ReadRequest {
                        sink_stag,
                        sink_to,
                        len,
                        src_stag: remote.rmr_context.0,
                        src_to: remote.virtual_address,
                    });
                    match out {
                        TxOutcome::Sent | TxOutcome::Lent => {}
                        TxOutcome::Queued => {
                            if self.stall_tx(None, &conn) {
                                return;
                            }
                        }
                        TxOutcome::Failed(status) => {
                            // The peer refused the read: complete it (it is the ORQ's newest)
                            // with the peer's reason, then break.
                            let wr = self.lock().orq.pop_back();
                            if let Some(wr) = wr {
                                self.complete_send(&wr, status, 0);
                            }
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                        TxOutcome::NotReady | TxOutcome::Broken => {
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                        TxOutcome::PeerClosed => {
                            // The read is in the ORQ: the end flushes it.
                            self.end_connection_of(
                                conn.id(),
                                ConnectionEventKind::Disconnected,
                                true,
                            );
                            return;
                        }
                    }
                }
                Work::Wr(wr) => {
                    let wakes = self.rnr_wakes.load(Ordering::SeqCst);
                    let msg = wr_msg(&wr);
                    let out = match wr.flags.contains(CompletionFlags::SUPPRESS) {
                        true => conn.transmit_unreported(msg),
                        false => conn.transmit(msg),
                    };
                    let stop = match out {
                        TxOutcome::Sent => {
                            if lent_empty {
                                self.complete_send(&wr, DtoStatus::Success, wr.total);
                            } else {
                                self.complete_sent(wr);
                            }
                            conn.sent_completed();
                            false
                        }
                        TxOutcome::Lent => {
                            self.lend(Some(wr), &conn);
                            false
                        }
                        TxOutcome::Queued => self.stall_tx(Some(wr), &conn),
                        TxOutcome::NotReady => {
                            if self.requeue_head(wr, &conn) {
                                // Block, unless a wake came in meanwhile (checked after
                                // setting, so no wake is lost; see wake_from_peer).
                                self.rnr_blocked.store(true, Ordering::SeqCst);
                                if self.rnr_wakes.load(Ordering::SeqCst) != wakes {
                                    self.rnr_blocked.store(false, Ordering::SeqCst);
                                    false
                                } else {
                                    true
                                }
                            } else {
                                true
                            }
                        }
                        TxOutcome::Failed(status) => {
                            self.complete_send(&wr, status, 0);
                            self.end_own_connection(conn.id(), ConnectionEventKind::Broken, true);
                            true
                        }
                        TxOutcome::Broken => {
                            self.requeue_head(wr, &conn);
                            self.end_own_connection(conn.id(), ConnectionEventKind::Broken, true);
                            true
                        }
                        TxOutcome::PeerClosed => {
                            self.requeue_head(wr, &conn);
                            self.end_own_connection(
                                conn.id(),
                                ConnectionEventKind::Disconnected,
                                true,
                            );
                            true
                        }
                    };
                    // The WR's outcome is recorded: an end that came meanwhile runs now, or
                    // at the next look at the queues.
                    if stop {
                        self.finish_transmit();
                        return;
                    }
                    finish_pending = true;
                }
            }
        }
    }

    /// The link took a message it could not write at once: remember the WR (completed by
    /// [`Qp::tx_drained`]) and stop transmitting. Returns true if the caller must stop
    /// (false: the link already drained it meanwhile, go on).
    fn stall_tx(&self, wr: Option<SendWr>, conn: &Arc<dyn Connection>) -> bool {
        let mut c = self.lock();
        if c.conn.as_ref().is_none_or(|cur| cur.id() != conn.id()) {
            // The connection ended while the message was being written: it is flushed here.
            drop(c);
            if let Some(wr) = wr {
                self.complete_send(&wr, DtoStatus::Flushed, 0);
            }
            return true;
        }
        if std::mem::take(&mut c.tx_drained_early) {
            drop(c);
            if let Some(wr) = wr {
                self.complete_sent(wr);
            }
            return false;
        }
        c.tx_stalled = true;
        c.tx_inflight = wr;
        true
    }

    /// The link has handed the whole of its queued message to the transport: the message
    /// completes and transmission resumes.
    pub(crate) fn tx_drained(&self, conn_id: u64) {
        let wr = {
            let mut c = self.lock();
            if c.conn.as_ref().is_none_or(|cur| cur.id() != conn_id) {
                return;
            }
            if !c.tx_stalled {
                // Raced ahead of stall_tx, which completes the message itself.
                c.tx_drained_early = true;
                return;
            }
            c.tx_stalled = false;
            c.tx_inflight.take()
        };
        if let Some(wr) = wr {
            self.complete_sent(wr);
        }
        self.pump();
    }

    /// A Send or Write the link has handed over completes, unless a lent message before it
    /// is still out: then it waits in `lent` for its turn.
    fn complete_sent(&self, wr: SendWr) {
        {
            let mut c = self.lock();
            if !c.lent.is_empty() {
                c.lent.push_back(Lent {
                    wr: Some(wr),
                    returned: true,
                });
                return;
            }
        }
        self.complete_send(&wr, DtoStatus::Success, wr.total);
    }

    /// The link lent `wr`'s message (None: a Read Response) on `conn`: it completes on
    /// [`Qp::tx_returned`]. If the connection ended meanwhile, it is flushed here, unless the
    /// peer had copied it out before (returned early): then its data arrived, and it
    /// completes successfully (every message lent before it was returned before it).
    fn lend(&self, wr: Option<SendWr>, conn: &Arc<dyn Connection>) {
        let mut c = self.lock();
        let returned_early = c.lent_returned_early.0 == conn.id() && c.lent_returned_early.1 > 0;
        if returned_early {
            c.lent_returned_early.1 -= 1;
        }
        if c.conn.as_ref().is_none_or(|cur| cur.id() != conn.id()) {
            drop(c);
            if let Some(wr) = wr {
                match returned_early {
                    true => self.complete_send(&wr, DtoStatus::Success, wr.total),
                    false => self.complete_send(&wr, DtoStatus::Flushed, 0),
                }
            }
            return;
        }
        if returned_early {
            // Already returned (the link's call came first): it completes in its turn.
            if c.lent.is_empty() {
                drop(c);
                if let Some(wr) = wr {
                    self.complete_send(&wr, DtoStatus::Success, wr.total);
                }
                return;
            }
            c.lent.push_back(Lent { wr, returned: true });
            return;
        }
        c.lent.push_back(Lent {
            wr,
            returned: false,
        });
    }

    /// The peer has copied out the oldest lent message of connection `conn_id` that was not
    /// returned yet: the WRs whose turn has come complete, in order.
    pub(crate) fn tx_returned(&self, conn_id: u64) {
        let (done, graceful) = {
            let mut c = self.lock();
            if c.conn.as_ref().is_none_or(|cur| cur.id() != conn_id) {
                return;
            }
            match c.lent.iter_mut().find(|l| !l.returned) {
                Some(l) => l.returned = true,
                // `transmit` has not returned yet: `lend` finds it counted.
                None => c.lent_returned_early.1 += 1,
            }
            let mut done = Vec::new();
            while c.lent.front().is_some_and(|l| l.returned) {
                done.extend(c.lent.pop_front().and_then(|l| l.wr));
            }
            (
                done,
                c.lent.is_empty() && c.state == EpState::DisconnectPending,
            )
        };
        for wr in &done {
            self.complete_send(wr, DtoStatus::Success, wr.total);
        }
        if graceful {
            self.pump(); // a graceful disconnect waited for these
        }
    }

    /// Puts `wr`, taken off the send queue to go out on `conn`, back at the head if `conn` is
    /// still the endpoint's connection. Otherwise the connection ended while `wr` was in flight
    /// and its flush did not see it: `wr` completes as flushed here, so that it is neither lost
    /// nor sent on a later connection. Returns whether it was requeued.
    fn requeue_head(&self, wr: SendWr, conn: &Arc<dyn Connection>) -> bool {
        let mut c = self.lock();
        if c.conn.as_ref().is_some_and(|cur| cur.id() == conn.id()) {
            c.sq.push_front(wr);
            return true;
        }
        drop(c);
        self.complete_send(&wr, DtoStatus::Flushed, 0);
        false
    }

    /// The peer posted a receive buffer: a Send blocked on it may go.
    pub(crate) fn wake_from_peer(&self) {
        self.rnr_wakes.fetch_add(1, Ordering::SeqCst);
        self.rnr_blocked.store(false, Ordering::SeqCst);
        self.pump();
    }
}
