//! A deterministic two-QP harness for the engine's own tests (in the manner of quinn-proto's
//! `Pair`): two [`Qp`]s joined by scripted connections ([`Wire`]). A wire records every message
//! its QP transmits, answers with a scripted [`TxOutcome`] (default `Sent`), and delivers
//! nothing by itself: the test moves one message at a time with [`Pair::step_a`] /
//! [`Pair::step_b`], so every interleaving of transmit, delivery, wake and close is chosen by
//! the test. Each QP's upcalls (completions, connection events) are recorded in order.
//!
//! A wire can also run a hook inside `transmit`, before it returns: that is how a test puts
//! another thread's action (a wake, a drain) exactly into the window a race needs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::engine::port::{Connection, InlineOutcome, Inlines, OutMsg, Payload, TxOutcome};
use crate::engine::qp::{
    Completion, CompletionQueue, Qp, QpEvent, QpUpcalls, RecvWr, ReqOp, RxReadFault, RxResponse,
    RxSend, RxWriteFault, RxWriteImmed, Segs, SendWr,
};
use crate::engine::srq::SharedRq;
use crate::mem::{EntryKind, MemTable, RegionMemory};
use crate::types::{
    CompletionFlags, ConnectionEventKind, DtoStatus, EpAttr, EpState, IaAddress, MemPriv,
    RmrTriplet,
};

/// The protection zone every harness QP and region is in.
pub(crate) const PZ: u64 = 7;

/// What a QP reported, in order.
#[derive(Debug, Clone)]
pub(crate) enum Up {
    Done(Completion),
    Event(QpEvent),
}

/// Records a QP's upcalls.
#[derive(Default)]
pub(crate) struct Recorder {
    ups: Mutex<Vec<Up>>,
    /// Runs when the next completion is reported, before it is recorded.
    hook: Mutex<Option<Hook>>,
}

impl QpUpcalls for Recorder {
    fn completed(&self, c: Completion) {
        let hook = self.hook.lock().unwrap().take();
        if let Some(f) = hook {
            f();
        }
        self.ups.lock().unwrap().push(Up::Done(c));
    }
    fn connection_event(&self, ev: QpEvent) {
        self.ups.lock().unwrap().push(Up::Event(ev));
    }
}

impl Recorder {
    /// `f` runs when the next completion is reported (as another thread would, in the window
    /// between the QP deciding it and the completion being queued).
    pub(crate) fn before_next_completion(&self, f: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(f));
    }

    /// Everything reported so far, and forgets it.
    pub(crate) fn take(&self) -> Vec<Up> {
        std::mem::take(&mut *self.ups.lock().unwrap())
    }

    /// The completions reported so far as (queue, cookie, status), forgetting everything.
    pub(crate) fn take_done(&self) -> Vec<(CompletionQueue, u64, DtoStatus)> {
        done_of(&self.take())
    }
}

/// The completions among `ups` as (queue, cookie, status).
pub(crate) fn done_of(ups: &[Up]) -> Vec<(CompletionQueue, u64, DtoStatus)> {
    ups.iter()
        .filter_map(|u| match u {
            Up::Done(c) => Some((c.queue, c.cookie.0, c.status)),
            Up::Event(_) => None,
        })
        .collect()
}

/// A message as a wire carries it (payload bytes copied at transmit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Send {
        solicited: bool,
        invalidate: Option<u32>,
        bytes: Vec<u8>,
    },
    Write {
        stag: u32,
        to: u64,
        bytes: Vec<u8>,
    },
    WriteImmed {
        stag: u32,
        to: u64,
        bytes: Vec<u8>,
        immediate: u32,
        solicited: bool,
    },
    ReadRequest {
        sink_stag: u32,
        sink_to: u64,
        len: u64,
        src_stag: u32,
        src_to: u64,
    },
    ReadResponse {
        sink_stag: u32,
        sink_to: u64,
        bytes: Vec<u8>,
    },
    /// The sender posted a receive for a waiting peer (`wake_peer`).
    Wake,
    /// The sender closed the connection (`close`).
    Close {
        broken: bool,
    },
}

fn bytes_of(p: Payload<'_>) -> Vec<u8> {
    match p {
        Payload::Bytes(b) => b.to_vec(),
        Payload::Segs(segs) => {
            let mut v = Vec::new();
            for s in segs {
                let mut b = vec![0; s.len];
                assert!(s.region.copy_out(s.offset, &mut b));
                v.extend_from_slice(&b);
            }
            v
        }
    }
}

type Hook = Box<dyn FnOnce() + Send>;

/// One direction of a scripted connection: what its QP transmits.
pub(crate) struct Wire {
    id: u64,
    /// Messages transmitted, in order (including those answered NotReady or Failed).
    log: Mutex<Vec<Msg>>,
    /// Messages to deliver to the peer, in order.
    queue: Mutex<VecDeque<Msg>>,
    /// Outcomes for the next transmits (then `Sent`).
    script: Mutex<VecDeque<TxOutcome>>,
    /// Runs inside the next transmit, before it returns.
    hook: Mutex<Option<Hook>>,
    /// Runs inside the next `wake_peer`, after the wake is queued (as loopback's peer sends
    /// again inside it).
    wake_hook: Mutex<Option<Hook>>,
    /// `hold` and `flush` calls, each with the number of messages logged before it.
    batches: Mutex<Vec<(Batch, usize)>>,
    /// Whether `transmit_inline` takes what it is offered (default: declines, as a link
    /// without it does).
    takes_inline: AtomicBool,
    /// For each logged message, whether it came through `transmit_inline`.
    inline: Mutex<Vec<bool>>,
    /// The outcome of the next `transmit_inline` that takes its offer (then `Taken`).
    inline_fails: Mutex<Option<DtoStatus>>,
}

/// A batch call of the engine ([`Connection::hold`], [`Connection::flush`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Batch {
    Hold,
    Flush,
}

impl Wire {
    fn new(id: u64) -> Arc<Wire> {
        Arc::new(Wire {
            id,
            log: Mutex::default(),
            queue: Mutex::default(),
            script: Mutex::default(),
            hook: Mutex::default(),
            wake_hook: Mutex::default(),
            batches: Mutex::default(),
            takes_inline: AtomicBool::new(false),
            inline: Mutex::default(),
            inline_fails: Mutex::default(),
        })
    }

    /// From now on `transmit_inline` takes what it is offered (while nothing is scripted and
    /// no hook waits: those are for `transmit`).
    pub(crate) fn take_inline(&self) {
        self.takes_inline.store(true, Ordering::Relaxed);
    }

    /// The next message `transmit_inline` takes fails with `status` (it is logged, not
    /// delivered), as a link's one-sided copy the peer refused after it began does.
    pub(crate) fn fail_next_inline(&self, status: DtoStatus) {
        *self.inline_fails.lock().unwrap() = Some(status);
    }

    /// For each message logged so far, whether it came through `transmit_inline`.
    pub(crate) fn inline_log(&self) -> Vec<bool> {
        self.inline.lock().unwrap().clone()
    }

    /// The engine's `hold` and `flush` calls so far, each with the number of messages it had
    /// transmitted before.
    pub(crate) fn batches(&self) -> Vec<(Batch, usize)> {
        self.batches.lock().unwrap().clone()
    }

    fn mark(&self, b: Batch) {
        let n = self.log.lock().unwrap().len();
        self.batches.lock().unwrap().push((b, n));
    }

    /// The next transmits answer these outcomes, in order.
    pub(crate) fn script(&self, outcomes: &[TxOutcome]) {
        self.script.lock().unwrap().extend(outcomes.iter().copied());
    }

    /// `f` runs inside the next transmit, before it returns its outcome.
    pub(crate) fn on_next_transmit(&self, f: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(f));
    }

    /// `f` runs inside the next `wake_peer`, after the wake is queued.
    pub(crate) fn on_next_wake(&self, f: impl FnOnce() + Send + 'static) {
        *self.wake_hook.lock().unwrap() = Some(Box::new(f));
    }

    /// Every message transmitted so far.
    pub(crate) fn log(&self) -> Vec<Msg> {
        self.log.lock().unwrap().clone()
    }

    /// The messages waiting for delivery, oldest first (wakes and closes too, which the log
    /// leaves out).
    pub(crate) fn queued(&self) -> Vec<Msg> {
        self.queue.lock().unwrap().iter().cloned().collect()
    }

    /// Messages waiting for delivery.
    pub(crate) fn pending(&self) -> usize {
        self.queue.lock().unwrap().len()
    }
}

impl Wire {
    /// `msg` as the wire logs and carries it.
    fn msg_of(msg: &OutMsg<'_>) -> Msg {
        match *msg {
            OutMsg::Send {
                solicited,
                invalidate,
                payload,
            } => Msg::Send {
                solicited,
                invalidate,
                bytes: bytes_of(payload),
            },
            OutMsg::Write { stag, to, payload } => Msg::Write {
                stag,
                to,
                bytes: bytes_of(payload),
            },
            OutMsg::WriteImmed {
                stag,
                to,
                payload,
                immediate,
                solicited,
            } => Msg::WriteImmed {
                stag,
                to,
                bytes: bytes_of(payload),
                immediate,
                solicited,
            },
            OutMsg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            } => Msg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            },
            OutMsg::ReadResponse {
                sink_stag,
                sink_to,
                payload,
            } => Msg::ReadResponse {
                sink_stag,
                sink_to,
                bytes: bytes_of(payload),
            },
        }
    }
}

impl Connection for Wire {
    /// Always: whether it takes an offer is decided per offer (`take_inline`).
    fn takes_inline(&self) -> Inlines {
        Inlines {
            sends: true,
            writes: true,
            reads: true,
            responses: true,
        }
    }

    fn transmit_inline(&self, msg: &OutMsg<'_>) -> InlineOutcome {
        if !self.takes_inline.load(Ordering::Relaxed)
            || !self.script.lock().unwrap().is_empty()
            || self.hook.lock().unwrap().is_some()
        {
            return InlineOutcome::Declined;
        }
        let m = Self::msg_of(msg);
        self.log.lock().unwrap().push(m.clone());
        self.inline.lock().unwrap().push(true);
        if let Some(status) = self.inline_fails.lock().unwrap().take() {
            return InlineOutcome::Failed(status);
        }
        self.queue.lock().unwrap().push_back(m);
        InlineOutcome::Taken
    }

    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome {
        let m = Self::msg_of(&msg);
        self.log.lock().unwrap().push(m.clone());
        self.inline.lock().unwrap().push(false);
        let out = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(TxOutcome::Sent);
        if matches!(out, TxOutcome::Sent | TxOutcome::Queued) {
            self.queue.lock().unwrap().push_back(m);
        }
        let hook = self.hook.lock().unwrap().take();
        if let Some(f) = hook {
            f();
        }
        out
    }

    fn hold(&self) {
        self.mark(Batch::Hold);
    }

    fn flush(&self) {
        self.mark(Batch::Flush);
    }

    fn wake_peer(&self) {
        self.queue.lock().unwrap().push_back(Msg::Wake);
        let hook = self.wake_hook.lock().unwrap().take();
        if let Some(f) = hook {
            f();
        }
    }

    fn close(&self, broken: bool) {
        self.queue.lock().unwrap().push_back(Msg::Close { broken });
    }

    fn remote_addr(&self) -> IaAddress {
        "127.0.0.1:0".parse().unwrap()
    }

    fn id(&self) -> u64 {
        self.id
    }
}

/// What delivering one message did at the receiving QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivered {
    Send(RxSend),
    Write(Result<(), RxWriteFault>),
    WriteImmed(RxWriteImmed),
    ReadRequest(Result<(), RxReadFault>),
    ReadResponse(RxResponse),
    Wake,
    Close,
}

/// One QP of a pair with its recorder, its outbound wire, and a region it owns.
pub(crate) struct End {
    pub(crate) qp: Arc<Qp>,
    pub(crate) up: Arc<Recorder>,
    pub(crate) wire: Arc<Wire>,
    /// A region of `REGION` bytes registered with every right; its STag.
    pub(crate) region: Arc<RegionMemory>,
    pub(crate) stag: u32,
}

/// Bytes of each end's region.
pub(crate) const REGION: usize = 4096;

impl End {
    /// A one-segment local iov of `len` bytes at `offset` of this end's region.
    pub(crate) fn segs(&self, mem: &MemTable, offset: u64, len: u64) -> Segs {
        let va = self.region.addr() + offset;
        let seg = mem
            .resolve_local(self.stag, va, len, PZ, MemPriv::LOCAL_READ)
            .expect("a local segment in the region");
        Segs::from_iter([seg])
    }

    /// The remote triplet naming `len` bytes at `offset` of this end's region.
    pub(crate) fn remote(&self, offset: u64, len: u64) -> RmrTriplet {
        RmrTriplet {
            rmr_context: self.stag.into(),
            virtual_address: self.region.addr() + offset,
            segment_length: len,
        }
    }

    /// Bytes `offset..offset + len` of the region.
    pub(crate) fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        assert!(self.region.copy_out(offset, &mut v));
        v
    }
}

/// Two connected QPs.
pub(crate) struct Pair {
    pub(crate) mem: Arc<MemTable>,
    pub(crate) a: End,
    pub(crate) b: End,
}

fn end(mem: &Arc<MemTable>, id: u64, attr: EpAttr, srq: Option<&Arc<SharedRq>>) -> End {
    let up = Arc::new(Recorder::default());
    let weak: Weak<dyn QpUpcalls> = Arc::downgrade(&up) as Weak<Recorder>;
    let qp = Arc::new(Qp::new(
        id,
        "127.0.0.1:0".parse().unwrap(),
        PZ,
        mem.clone(),
        srq.cloned(),
        attr.clone(),
        weak,
        crate::engine::qp::QpQueues::new(&attr, srq.is_some()).expect("queues"),
    ));
    if let Some(srq) = srq {
        srq.attach(&qp);
    }
    let region = Arc::new(RegionMemory::allocate(REGION).expect("region"));
    let stag = mem
        .insert(
            EntryKind::Lmr,
            region.clone(),
            0,
            region.addr(),
            REGION as u64,
            PZ,
            MemPriv::ALL,
            1 << 10,
        )
        .expect("stag");
    End {
        qp,
        up,
        wire: Wire::new(1000 + id),
        region,
        stag,
    }
}

impl Pair {
    /// Two QPs with these attributes, connected with IRD/ORD as both offered (each side's ORD
    /// capped by the other's IRD), both ESTABLISHED (the events are taken from the recorders).
    pub(crate) fn connected(attr_a: EpAttr, attr_b: EpAttr) -> Pair {
        Self::connect(Arc::new(MemTable::default()), 1, attr_a, attr_b, None)
    }

    /// As [`Pair::connected`], with B taking its receives from `srq` (attached), the QPs
    /// numbered `id` (A) and `id + 1` (B), and their regions in `mem`: several pairs can share
    /// one queue.
    pub(crate) fn connected_srq(
        mem: &Arc<MemTable>,
        id: u64,
        attr: EpAttr,
        srq: &Arc<SharedRq>,
    ) -> Pair {
        Self::connect(mem.clone(), id, attr.clone(), attr, Some(srq))
    }

    fn connect(
        mem: Arc<MemTable>,
        id: u64,
        attr_a: EpAttr,
        attr_b: EpAttr,
        srq: Option<&Arc<SharedRq>>,
    ) -> Pair {
        let a = end(&mem, id, attr_a.clone(), None);
        let b = end(&mem, id + 1, attr_b.clone(), srq);
        let remote: IaAddress = "127.0.0.1:0".parse().unwrap();
        let a_ord = attr_a.max_rdma_read_out.min(attr_b.max_rdma_read_in);
        let b_ord = attr_b.max_rdma_read_out.min(attr_a.max_rdma_read_in);
        let at =
            a.qp.begin_attempt(EpState::ActiveConnectionPending, Some(remote), Some(1));
        let bt =
            b.qp.begin_attempt(EpState::PassiveConnectionPending, Some(remote), Some(1));
        // Both wires share one connection id, as both directions of a link connection do.
        let (wa, wb) = (Wire::new(99), Wire::new(99));
        let (a, b) = (End { wire: wa, ..a }, End { wire: wb, ..b });
        assert!(a.qp.established(at, a.wire.clone(), b_ord, a_ord, remote));
        assert!(b.qp.established(bt, b.wire.clone(), a_ord, b_ord, remote));
        a.qp.report_established(Vec::new());
        b.qp.report_established(Vec::new());
        for e in [&a, &b] {
            let ups = e.up.take();
            assert!(
                matches!(&ups[..], [Up::Event(QpEvent::Established(_))]),
                "{ups:?}"
            );
        }
        Pair { mem, a, b }
    }

    /// Delivers the oldest message A sent to B.
    pub(crate) fn step_a(&self) -> Option<(Msg, Delivered)> {
        Self::deliver(&self.a.wire, &self.a.qp, &self.b.qp)
    }

    /// Delivers the oldest message B sent to A.
    pub(crate) fn step_b(&self) -> Option<(Msg, Delivered)> {
        Self::deliver(&self.b.wire, &self.b.qp, &self.a.qp)
    }

    /// Delivers everything in flight both ways, until both wires are empty.
    pub(crate) fn settle(&self) -> Vec<(Msg, Delivered)> {
        let mut all = Vec::new();
        loop {
            let mut any = false;
            while let Some(d) = self.step_a() {
                all.push(d);
                any = true;
            }
            while let Some(d) = self.step_b() {
                all.push(d);
                any = true;
            }
            if !any {
                return all;
            }
        }
    }

    fn deliver(wire: &Wire, from: &Arc<Qp>, to: &Arc<Qp>) -> Option<(Msg, Delivered)> {
        let m = wire.queue.lock().unwrap().pop_front()?;
        let d = match &m {
            Msg::Send {
                solicited,
                invalidate,
                bytes,
            } => Delivered::Send(to.rx_send(*solicited, *invalidate, Payload::Bytes(bytes))),
            Msg::Write {
                stag,
                to: at,
                bytes,
            } => Delivered::Write(to.rx_write(*stag, *at, Payload::Bytes(bytes))),
            Msg::WriteImmed {
                stag,
                to: at,
                bytes,
                immediate,
                solicited,
            } => Delivered::WriteImmed(to.rx_write_immed(
                *stag,
                *at,
                Payload::Bytes(bytes),
                *immediate,
                *solicited,
            )),
            Msg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            } => Delivered::ReadRequest(
                to.rx_read_request(*sink_stag, *sink_to, *len, *src_stag, *src_to, true),
            ),
            Msg::ReadResponse { bytes, .. } => {
                Delivered::ReadResponse(to.rx_read_response(Payload::Bytes(bytes)))
            }
            Msg::Wake => {
                to.wake_from_peer();
                Delivered::Wake
            }
            Msg::Close { broken } => {
                to.peer_closed(wire.id, *broken);
                let _ = from;
                Delivered::Close
            }
        };
        Some((m, d))
    }
}

/// A work request for [`Qp::post_send`].
pub(crate) fn send_wr(op: ReqOp, cookie: u64, segs: Segs, remote: RmrTriplet) -> SendWr {
    let total = segs.iter().map(|s| s.len as u64).sum();
    SendWr {
        cookie: cookie.into(),
        op,
        flags: CompletionFlags::empty(),
        segs,
        total,
        remote,
        sink_stag: 1,
        sink_to: 0,
        resp_got: 0,
    }
}

/// A receive for [`Qp::post_recv`].
pub(crate) fn recv_wr(cookie: u64, segs: Segs) -> RecvWr {
    let total = segs.iter().map(|s| s.len as u64).sum();
    RecvWr {
        cookie: cookie.into(),
        flags: CompletionFlags::empty(),
        segs,
        total,
    }
}

/// Whether a QP reported exactly one terminal event, of `kind`, among `ups`.
pub(crate) fn one_end(ups: &[Up], kind: ConnectionEventKind) -> bool {
    let ends: Vec<_> = ups
        .iter()
        .filter_map(|u| match u {
            Up::Event(QpEvent::Ended(k)) => Some(*k),
            _ => None,
        })
        .collect();
    ends == [kind]
}
