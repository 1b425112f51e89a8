//! A shared receive queue: receive buffers any QP attached to it may take.
//!
//! Only QPs in CONNECTED or DISCONNECT_PENDING take buffers (the engine only delivers Sends to
//! those). When the posted count falls below the low watermark, the owner is told once
//! ([`SrqUpcalls::low_watermark`]); [`SharedRq::set_low_watermark`] arms it again.
//!
//! A QP that finds the queue empty for an inbound Send is listed as waiting (once, however
//! often it finds it empty), and a post wakes the listed QPs only: a post neither allocates
//! nor visits QPs whose peers wait for nothing, however many share the queue. The list is
//! reserved for every attached QP when it attaches, so listing never allocates either.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::engine::qp::{Qp, RecvWr};

/// How a shared receive queue reports to its owner (the DAT SRQ).
pub(crate) trait SrqUpcalls: Send + Sync {
    /// Fewer receives than the low watermark remain posted.
    fn low_watermark(&self);
}

struct SrqCore {
    queue: VecDeque<RecvWr>,
    max: usize,
    low_watermark: Option<usize>,
    lw_armed: bool,
    /// Attached QPs by id: each one's QP and whether it is in `waiting`.
    qps: HashMap<u64, Attached>,
    /// Ids of the attached QPs that found the queue empty since they were last woken, oldest
    /// first; each at most once, so never longer than `qps` (its capacity is reserved on
    /// attach).
    waiting: VecDeque<u64>,
}

struct Attached {
    qp: Weak<Qp>,
    listed: bool,
}

impl SrqCore {
    /// The next QP to wake (unlisted: it lists itself again if it finds the queue empty).
    fn next_waiting(&mut self) -> Option<Weak<Qp>> {
        while let Some(id) = self.waiting.pop_front() {
            if let Some(a) = self.qps.get_mut(&id) {
                a.listed = false;
                return Some(a.qp.clone());
            }
        }
        None
    }
}

/// A shared receive queue.
pub(crate) struct SharedRq {
    core: Mutex<SrqCore>,
    upcalls: Weak<dyn SrqUpcalls>,
}

impl SharedRq {
    /// An empty queue of depth `max`, with an armed low watermark if `low_watermark` is set.
    pub(crate) fn new(
        max: usize,
        low_watermark: Option<usize>,
        upcalls: Weak<dyn SrqUpcalls>,
    ) -> Result<SharedRq, crate::engine::NoMemory> {
        Ok(SharedRq {
            core: Mutex::new(SrqCore {
                queue: crate::engine::deque(max)?,
                max,
                low_watermark,
                lw_armed: low_watermark.is_some(),
                qps: HashMap::new(),
                waiting: VecDeque::new(),
            }),
            upcalls,
        })
    }

    fn lock(&self) -> MutexGuard<'_, SrqCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fire_low(&self) {
        if let Some(u) = self.upcalls.upgrade() {
            u.low_watermark();
        }
    }

    /// A QP takes its receives from here from now on. (The one call here that allocates:
    /// room for the QP in the map and in the waiting list.)
    pub(crate) fn attach(&self, qp: &Arc<Qp>) {
        let mut c = self.lock();
        match c.qps.entry(qp.id()) {
            // Attached again: its place in the list (if it has one) stays, so it is never
            // listed twice.
            Entry::Occupied(mut e) => e.get_mut().qp = Arc::downgrade(qp),
            Entry::Vacant(e) => {
                e.insert(Attached {
                    qp: Arc::downgrade(qp),
                    listed: false,
                });
                let extra = c.qps.len().saturating_sub(c.waiting.len());
                c.waiting.reserve(extra);
            }
        }
    }

    /// The QP `id` no longer uses this queue.
    pub(crate) fn detach(&self, id: u64) {
        let mut c = self.lock();
        if c.qps.remove(&id).is_some_and(|a| a.listed) {
            c.waiting.retain(|q| *q != id);
        }
    }

    /// Takes the oldest posted receive for an inbound Send of the attached QP `qp`; with none,
    /// lists `qp` as waiting, so that the next post wakes it. The caller marks its peer
    /// waiting under the QP's lock, which it holds across this call (a post's wake takes that
    /// lock, so it cannot come between the two).
    pub(crate) fn take(&self, qp: u64) -> Option<RecvWr> {
        let (wr, low) = {
            let mut c = self.lock();
            let Some(wr) = c.queue.pop_front() else {
                let c = &mut *c;
                if let Some(a) = c.qps.get_mut(&qp) {
                    if !a.listed {
                        a.listed = true;
                        // Within the capacity reserved on attach: one entry per attached QP.
                        c.waiting.push_back(qp);
                    }
                }
                return None;
            };
            let low = match c.low_watermark {
                Some(lw) if c.lw_armed && c.queue.len() < lw => {
                    c.lw_armed = false;
                    true
                }
                _ => false,
            };
            (wr, low)
        };
        if low {
            self.fire_low();
        }
        Some(wr)
    }

    /// Posts a receive; `Err(max)` when the queue is full. Attached QPs that found the queue
    /// empty since they were last woken are woken (their peers' Sends wait for a buffer).
    pub(crate) fn post(&self, wr: RecvWr) -> Result<(), usize> {
        match self.post_many(std::iter::once(wr)) {
            (_, Some(max)) => Err(max),
            _ => Ok(()),
        }
    }

    /// Posts receives in order under one hold of the lock, as [`SharedRq::post`] posts one:
    /// how many were taken, and the depth if the queue filled before the last (the rest are
    /// dropped: never posted).
    pub(crate) fn post_many(&self, wrs: impl Iterator<Item = RecvWr>) -> (usize, Option<usize>) {
        let (taken, full, mut next) = {
            let mut c = self.lock();
            let (mut taken, mut full) = (0, None);
            for wr in wrs {
                if c.queue.len() >= c.max {
                    full = Some(c.max);
                    break;
                }
                c.queue.push_back(wr);
                taken += 1;
            }
            // Only the QPs listed now: a woken peer's Send may come back at once (loopback
            // runs it inside `wake_peer`) and list its QP again if another took the buffer.
            let listed = if taken > 0 { c.waiting.len() } else { 0 };
            (taken, full, listed)
        };
        // One QP at a time, each taken off the list under the lock and woken outside it (the
        // wake takes the QP's lock, which is taken before this one).
        while next > 0 {
            next -= 1;
            let Some(qp) = self.lock().next_waiting() else {
                break;
            };
            if let Some(conn) = qp.upgrade().and_then(|qp| qp.take_peer_waiting()) {
                conn.wake_peer();
            }
        }
        (taken, full)
    }

    /// Receives posted and not yet taken.
    pub(crate) fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// The depth.
    pub(crate) fn max(&self) -> usize {
        self.lock().max
    }

    /// The low watermark.
    pub(crate) fn low_watermark(&self) -> Option<usize> {
        self.lock().low_watermark
    }

    /// QPs attached.
    pub(crate) fn qp_count(&self) -> usize {
        self.lock().qps.len()
    }

    /// The waiting list: its length and its capacity.
    #[cfg(test)]
    fn waiting(&self) -> (usize, usize) {
        let c = self.lock();
        (c.waiting.len(), c.waiting.capacity())
    }

    /// Changes the depth; `Err(posted)` if more are posted than fit.
    pub(crate) fn resize(&self, max: usize) -> Result<(), usize> {
        let mut c = self.lock();
        if c.queue.len() > max {
            return Err(c.queue.len());
        }
        c.max = max;
        let extra = max.saturating_sub(c.queue.capacity());
        c.queue.reserve(extra);
        Ok(())
    }

    /// Sets the low watermark and arms it (`None` disables it); if fewer receives are posted
    /// already, the owner is told at once.
    pub(crate) fn set_low_watermark(&self, lw: Option<usize>) {
        let fire = {
            let mut c = self.lock();
            c.low_watermark = lw;
            c.lw_armed = lw.is_some();
            match lw {
                Some(l) if c.queue.len() < l => {
                    c.lw_armed = false;
                    true
                }
                _ => false,
            }
        };
        if fire {
            self.fire_low();
        }
    }

    /// Drops every posted receive (the SRQ is freed).
    pub(crate) fn clear(&self) {
        self.lock().queue.clear();
    }
}

#[cfg(test)]
mod tests {
    //! The waiting list, replayed on the two-QP harness: several pairs whose B ends share one
    //! queue.

    use std::sync::{Arc, Weak};

    use super::{SharedRq, SrqUpcalls};
    use crate::engine::harness::{done_of, recv_wr, send_wr, Delivered, Msg, Pair};
    use crate::engine::port::{Payload, TxOutcome};
    use crate::engine::qp::{CompletionQueue, ReqOp, RxSend};
    use crate::mem::MemTable;
    use crate::types::{DtoStatus, EpAttr};

    struct NoUpcalls;
    impl SrqUpcalls for NoUpcalls {
        fn low_watermark(&self) {}
    }

    fn srq(max: usize) -> (Arc<SharedRq>, Arc<NoUpcalls>) {
        let up = Arc::new(NoUpcalls);
        let weak: Weak<dyn SrqUpcalls> = Arc::downgrade(&up) as Weak<NoUpcalls>;
        (Arc::new(SharedRq::new(max, None, weak).unwrap()), up)
    }

    /// `n` pairs whose B ends share `srq`.
    fn pairs(srq: &Arc<SharedRq>, n: u64) -> Vec<Pair> {
        let mem = Arc::new(MemTable::default());
        (0..n)
            .map(|i| Pair::connected_srq(&mem, 10 * i + 1, EpAttr::default(), srq))
            .collect()
    }

    /// B of `p` is offered a Send and finds no buffer (its peer now waits).
    fn refused(p: &Pair) {
        assert_eq!(
            p.b.qp.rx_send(false, None, Payload::Bytes(b"no room!")),
            RxSend::NoBuffer
        );
    }

    fn post(srq: &SharedRq, p: &Pair, cookie: u64) {
        let segs = p.b.segs(&p.mem, 64 * cookie, 64);
        srq.post(recv_wr(cookie, segs)).unwrap();
    }

    /// Wakes B of `p` sent that A has not taken yet.
    fn wakes(p: &Pair) -> usize {
        p.b.wire
            .queued()
            .iter()
            .filter(|m| matches!(m, Msg::Wake))
            .count()
    }

    #[test]
    fn srq_post_wakes_only_the_qps_that_found_it_empty() {
        let (q, _up) = srq(16);
        let ps = pairs(&q, 3);
        let (_, room) = q.waiting();
        assert!(room >= 3, "room for every attached QP: {room}");
        refused(&ps[0]);
        refused(&ps[2]);
        assert_eq!(q.waiting().0, 2);
        post(&q, &ps[1], 1);
        assert_eq!(ps.iter().map(wakes).collect::<Vec<_>>(), [1, 0, 1]);
        assert_eq!(
            q.waiting(),
            (0, room),
            "the list emptied, nothing allocated"
        );
    }

    #[test]
    fn srq_waiting_qp_is_listed_once_however_often_it_found_it_empty() {
        let (q, _up) = srq(16);
        let ps = pairs(&q, 2);
        for _ in 0..3 {
            refused(&ps[0]);
        }
        assert_eq!(q.waiting().0, 1);
        post(&q, &ps[0], 1);
        post(&q, &ps[0], 2);
        assert_eq!(wakes(&ps[0]), 1, "one wake for one wait");
        assert_eq!(wakes(&ps[1]), 0);
        // Found empty again after the wake: listed again, woken by the next post.
        let mut got = 0;
        while q.take(ps[0].b.qp.id()).is_some() {
            got += 1;
        }
        assert_eq!(got, 2);
        refused(&ps[0]);
        assert_eq!(q.waiting().0, 1);
        post(&q, &ps[0], 3);
        assert_eq!(wakes(&ps[0]), 2);
    }

    #[test]
    fn srq_attached_again_is_not_listed_twice() {
        let (q, _up) = srq(16);
        let ps = pairs(&q, 1);
        refused(&ps[0]);
        q.attach(&ps[0].b.qp);
        refused(&ps[0]);
        assert_eq!((q.qp_count(), q.waiting().0), (1, 1));
    }

    #[test]
    fn srq_detached_qp_is_taken_off_the_list_and_not_woken() {
        let (q, _up) = srq(16);
        let ps = pairs(&q, 2);
        refused(&ps[0]);
        refused(&ps[1]);
        q.detach(ps[0].b.qp.id());
        assert_eq!((q.qp_count(), q.waiting().0), (1, 1));
        post(&q, &ps[1], 1);
        assert_eq!((wakes(&ps[0]), wakes(&ps[1])), (0, 1));
    }

    #[test]
    fn srq_qp_listed_again_inside_its_wake_waits_for_the_next_post() {
        // Loopback's peer sends again inside `wake_peer`: if another QP took the buffer, the
        // QP is refused and listed again there. The post wakes it once, not over and over.
        let (q, _up) = srq(16);
        let ps = pairs(&q, 1);
        refused(&ps[0]);
        let b = ps[0].b.qp.clone();
        let q2 = q.clone();
        ps[0].b.wire.on_next_wake(move || {
            assert!(q2.take(b.id()).is_some(), "another QP takes the buffer");
            assert_eq!(
                b.rx_send(false, None, Payload::Bytes(b"again!!!")),
                RxSend::NoBuffer
            );
        });
        post(&q, &ps[0], 1);
        assert_eq!(wakes(&ps[0]), 1);
        assert_eq!(q.waiting().0, 1, "listed again for the next post");
        post(&q, &ps[0], 2);
        assert_eq!(wakes(&ps[0]), 2);
    }

    #[test]
    fn srq_woken_peer_that_loses_the_race_waits_for_the_next_post() {
        // Two peers wait, one buffer is posted: both are woken, the first to come back takes
        // it, the other is refused again and woken by the next post; each Send lands once.
        let (q, _up) = srq(16);
        let ps = pairs(&q, 2);
        for (i, p) in ps.iter().enumerate() {
            p.a.wire.script(&[TxOutcome::NotReady]);
            let segs = p.a.segs(&p.mem, 0, 8);
            p.a.qp
                .post_send(send_wr(
                    ReqOp::Send,
                    100 + i as u64,
                    segs,
                    Default::default(),
                ))
                .unwrap();
            refused(p);
        }
        post(&q, &ps[0], 1);
        assert_eq!((wakes(&ps[0]), wakes(&ps[1])), (1, 1));
        // Each woken A transmits again; both Sends reach their B ends.
        for p in &ps {
            assert_eq!(p.step_b().map(|d| d.1), Some(Delivered::Wake));
        }
        let first = ps[0].step_a().map(|d| d.1);
        let second = ps[1].step_a().map(|d| d.1);
        assert_eq!(first, Some(Delivered::Send(RxSend::Placed)));
        assert_eq!(second, Some(Delivered::Send(RxSend::NoBuffer)));
        post(&q, &ps[0], 2);
        assert_eq!((wakes(&ps[0]), wakes(&ps[1])), (0, 1));
        // The loser's Send goes again (as its link would) and takes the second buffer.
        assert_eq!(
            ps[1].b.qp.rx_send(false, None, Payload::Bytes(b"second!!")),
            RxSend::Placed
        );
        let recv: Vec<_> = ps
            .iter()
            .map(|p| {
                done_of(&p.b.up.take())
                    .into_iter()
                    .filter(|(cq, _, _)| *cq == CompletionQueue::Recv)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            recv,
            [
                [(CompletionQueue::Recv, 1, DtoStatus::Success)],
                [(CompletionQueue::Recv, 2, DtoStatus::Success)]
            ]
        );
    }
}
