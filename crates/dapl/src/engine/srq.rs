//! A shared receive queue: receive buffers any QP attached to it may take.
//!
//! Only QPs in CONNECTED or DISCONNECT_PENDING take buffers (the engine only delivers Sends to
//! those). When the posted count falls below the low watermark, the owner is told once
//! ([`SrqUpcalls::low_watermark`]); [`SharedRq::set_low_watermark`] arms it again.

use std::collections::VecDeque;
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
    qps: Vec<(u64, Weak<Qp>)>,
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
                qps: Vec::new(),
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

    /// A QP takes its receives from here from now on.
    pub(crate) fn attach(&self, qp: &Arc<Qp>) {
        self.lock().qps.push((qp.id(), Arc::downgrade(qp)));
    }

    /// The QP `id` no longer uses this queue.
    pub(crate) fn detach(&self, id: u64) {
        self.lock().qps.retain(|(q, _)| *q != id);
    }

    /// Takes the oldest posted receive for a QP's inbound Send.
    pub(crate) fn take(&self) -> Option<RecvWr> {
        let (wr, low) = {
            let mut c = self.lock();
            let wr = c.queue.pop_front()?;
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

    /// Posts a receive; `Err(max)` when the queue is full. If the queue was empty, attached QPs
    /// whose peers wait for a buffer are woken.
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
        let (taken, full, waiting): (usize, Option<usize>, Vec<Weak<Qp>>) = {
            let mut c = self.lock();
            let was_empty = c.queue.is_empty();
            let (mut taken, mut full) = (0, None);
            for wr in wrs {
                if c.queue.len() >= c.max {
                    full = Some(c.max);
                    break;
                }
                c.queue.push_back(wr);
                taken += 1;
            }
            let waiting = if was_empty && taken > 0 {
                c.qps.iter().map(|(_, w)| w.clone()).collect()
            } else {
                Vec::new()
            };
            (taken, full, waiting)
        };
        for qp in waiting.iter().filter_map(Weak::upgrade) {
            if let Some(conn) = qp.take_peer_waiting() {
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
