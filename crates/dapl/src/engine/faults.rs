//! Fault injection for tests of every link: a [`Connection`] wrapper that drops, delays or cuts
//! what a QP transmits. A test installs a [`Plan`] for a QP id ([`install`]); when that QP's
//! connection is established, whatever link made it, the QP wraps it ([`wrap`]). So the same
//! fault runs over loopback and tcp, and the engine's rules (one terminal event, every DTO
//! completed once) are checked under it on each.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::engine::port::{Connection, OutMsg, Payload, TxOutcome};
use crate::types::IaAddress;

/// What to do to a QP's outbound messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan {
    /// Drop the message with this 0-based number (it is reported sent, and never arrives).
    pub drop_nth: Option<u64>,
    /// Hold every message this long before handing it on.
    pub delay: Option<Duration>,
    /// After this many messages, cut the connection: the next transmit finds it broken, and
    /// the peer is told it broke.
    pub cut_after_msgs: Option<u64>,
    /// As `cut_after_msgs`, counted in payload bytes: the message that would pass the limit is
    /// not sent.
    pub cut_after_bytes: Option<u64>,
}

fn plans() -> &'static Mutex<HashMap<u64, Plan>> {
    static PLANS: OnceLock<Mutex<HashMap<u64, Plan>>> = OnceLock::new();
    PLANS.get_or_init(Mutex::default)
}

/// The QP `qp_id`'s next connection runs under `plan`.
pub(crate) fn install(qp_id: u64, plan: Plan) {
    plans().lock().unwrap().insert(qp_id, plan);
}

/// `conn` wrapped in the plan installed for `qp_id`, if any (the plan is used up).
pub(crate) fn wrap(qp_id: u64, conn: Arc<dyn Connection>) -> Arc<dyn Connection> {
    match plans().lock().unwrap().remove(&qp_id) {
        Some(plan) => Arc::new(Faulty {
            inner: conn,
            plan,
            msgs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            cut: AtomicBool::new(false),
        }),
        None => conn,
    }
}

struct Faulty {
    inner: Arc<dyn Connection>,
    plan: Plan,
    msgs: AtomicU64,
    bytes: AtomicU64,
    cut: AtomicBool,
}

fn payload_len(msg: &OutMsg<'_>) -> u64 {
    let p: Option<&Payload<'_>> = match msg {
        OutMsg::Send { payload, .. }
        | OutMsg::Write { payload, .. }
        | OutMsg::WriteImmed { payload, .. }
        | OutMsg::ReadResponse { payload, .. } => Some(payload),
        OutMsg::ReadRequest { .. } => None,
    };
    p.map_or(0, |p| p.len())
}

impl Faulty {
    /// Cuts: this transmit and every later one is `Broken`. The inner connection is closed by
    /// the engine's `close(true)`, after it has recorded the end as BROKEN: closing it here
    /// first let the peer see the stream end and close back, and this side's receive path
    /// could then report DISCONNECTED before the engine saw the `Broken`.
    fn cut_now(&self) -> TxOutcome {
        self.cut.store(true, Ordering::SeqCst);
        TxOutcome::Broken
    }
}

impl Faulty {
    /// The plan's faults for `msg`, else `msg` goes on by `pass`.
    fn transmit_by<'a>(
        &self,
        msg: OutMsg<'a>,
        pass: impl FnOnce(OutMsg<'a>) -> TxOutcome,
    ) -> TxOutcome {
        if self.cut.load(Ordering::SeqCst) {
            return TxOutcome::Broken;
        }
        let n = self.msgs.fetch_add(1, Ordering::SeqCst);
        let len = payload_len(&msg);
        let bytes = self.bytes.fetch_add(len, Ordering::SeqCst) + len;
        if self.plan.cut_after_msgs.is_some_and(|m| n >= m)
            || self.plan.cut_after_bytes.is_some_and(|b| bytes > b)
        {
            return self.cut_now();
        }
        if self.plan.drop_nth == Some(n) {
            return TxOutcome::Sent;
        }
        if let Some(d) = self.plan.delay {
            std::thread::sleep(d);
        }
        pass(msg)
    }
}

impl Connection for Faulty {
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome {
        self.transmit_by(msg, |m| self.inner.transmit(m))
    }

    fn transmit_unreported(&self, msg: OutMsg<'_>) -> TxOutcome {
        self.transmit_by(msg, |m| self.inner.transmit_unreported(m))
    }

    fn sent_completed(&self) {
        self.inner.sent_completed();
    }

    fn hold(&self) {
        self.inner.hold();
    }

    fn flush(&self) {
        self.inner.flush();
    }

    fn wake_peer(&self) {
        self.inner.wake_peer();
    }

    fn close(&self, broken: bool) {
        self.inner.close(broken);
    }

    fn remote_addr(&self) -> IaAddress {
        self.inner.remote_addr()
    }

    fn id(&self) -> u64 {
        self.inner.id()
    }
}
