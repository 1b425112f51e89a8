//! Connection management of a QP: attempts, establishment, the one terminal event per
//! connection, flushing, and graceful and abrupt ends.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{DeferredEnd, Qp, QpEvent, RecvWr, SendWr};
use crate::engine::port::Connection;
use crate::types::{ConnQual, ConnectionEventKind, DtoStatus, EpState, IaAddress};

impl Qp {
    /// Moves to DISCONNECTED, flushes everything outstanding, reports `kind` once for this
    /// connection, and (if `notify_peer`) tells the peer.
    pub(crate) fn end_connection(&self, kind: ConnectionEventKind, notify_peer: bool) {
        // The consumer's own end (a disconnect, a timeout): not deferred behind a transmit.
        self.end_connection_if(None, kind, notify_peer, true);
    }

    /// [`Qp::end_connection`] for the connection `conn_id` only: a no-op once the endpoint
    /// has moved on (that connection already ended, and maybe a new attempt began). Whoever
    /// acts on a connection it looked at earlier must use this form.
    pub(crate) fn end_connection_of(
        &self,
        conn_id: u64,
        kind: ConnectionEventKind,
        notify_peer: bool,
    ) {
        self.end_connection_if(Some(conn_id), kind, notify_peer, false);
    }

    /// As [`Qp::end_connection_of`], from the thread whose WR is inside `transmit` (after it
    /// recorded that WR's outcome): never deferred.
    pub(super) fn end_own_connection(
        &self,
        conn_id: u64,
        kind: ConnectionEventKind,
        notify_peer: bool,
    ) {
        self.lock().in_transmit = false;
        self.end_connection_if(Some(conn_id), kind, notify_peer, true);
    }

    /// The WR that was inside `transmit` has its outcome recorded (its completion queued):
    /// an end that came meanwhile runs now.
    pub(super) fn finish_transmit(&self) {
        let deferred = self.lock().finish_transmit();
        self.run_deferred_end(deferred);
    }

    /// Runs the end [`QpCore::finish_transmit`] returned (if any), with no lock held.
    pub(super) fn run_deferred_end(&self, deferred: Option<DeferredEnd>) {
        if let Some((only, kind, notify_peer)) = deferred {
            self.end_connection_if(only, kind, notify_peer, true);
        }
    }

    fn end_connection_if(
        &self,
        only: Option<u64>,
        kind: ConnectionEventKind,
        notify_peer: bool,
        transmitter: bool,
    ) {
        let (conn, report, flushed_sq, flushed_rq, kind, notify_peer) = {
            let mut c = self.lock();
            if let Some(id) = only {
                if c.conn.as_ref().is_none_or(|cur| cur.id() != id) {
                    return;
                }
            }
            if c.in_transmit && !transmitter {
                // The WR inside `transmit` completes first; its thread ends the connection.
                if c.end_deferred.is_none() {
                    c.end_deferred = Some((only, kind, notify_peer));
                }
                return;
            }
            // An end deferred earlier is this one (it came first: its kind is reported).
            let (kind, notify_peer) = c
                .end_deferred
                .take()
                .map_or((kind, notify_peer), |(_, k, n)| (k, n));
            match c.state {
                EpState::Connected
                | EpState::DisconnectPending
                | EpState::ActiveConnectionPending
                | EpState::PassiveConnectionPending
                | EpState::TentativeConnectionPending => {}
                _ => return,
            }
            self.set_state(&mut c, EpState::Disconnected);
            let report = !c.end_reported;
            c.end_reported = true;
            c.irq.clear();
            c.peer_waiting = false;
            c.tx_stalled = false;
            let mut sq: Vec<SendWr> = c.take_lent().collect();
            sq.extend(c.tx_inflight.take());
            sq.extend(c.orq.drain(..));
            sq.extend(c.sq.drain(..));
            let rq: Vec<RecvWr> = c.rq.drain(..).collect();
            (c.conn.take(), report, sq, rq, kind, notify_peer)
        };
        let conn_id = conn.as_ref().map(|c| c.id());
        if kind == ConnectionEventKind::Broken {
            tracing::info!(
                ep = self.id,
                conn = conn_id,
                ?kind,
                flushed_sends = flushed_sq.len(),
                flushed_recvs = flushed_rq.len(),
                "connection broken"
            );
        } else {
            tracing::debug!(
                ep = self.id,
                conn = conn_id,
                ?kind,
                flushed_sends = flushed_sq.len(),
                flushed_recvs = flushed_rq.len(),
                notify_peer,
                "connection ended"
            );
        }
        self.rnr_blocked.store(false, Ordering::SeqCst);
        let recv_flags = self.recv_flags();
        for wr in &flushed_sq {
            self.complete_send(wr, DtoStatus::Flushed, 0);
        }
        for wr in &flushed_rq {
            self.complete_recv(wr, DtoStatus::Flushed, 0, true, recv_flags);
        }
        if report {
            self.event(QpEvent::Ended(kind));
        }
        if notify_peer {
            if let Some(conn) = conn {
                conn.close(kind == ConnectionEventKind::Broken);
            }
        }
    }

    /// The link reports the connection is over from the peer's side.
    pub(crate) fn peer_closed(&self, conn_id: u64, broken: bool) {
        let kind = if broken {
            ConnectionEventKind::Broken
        } else {
            ConnectionEventKind::Disconnected
        };
        self.end_connection_of(conn_id, kind, false);
    }

    /// Starts an attempt (connect or accept); returns its number.
    pub(crate) fn begin_attempt(
        &self,
        state: EpState,
        remote: Option<IaAddress>,
        qual: Option<ConnQual>,
    ) -> u64 {
        let mut c = self.lock();
        self.set_state(&mut c, state);
        c.attempt += 1;
        c.end_reported = false;
        c.remote_addr = remote;
        c.remote_qual = qual;
        c.attempt
    }

    /// Records the link connection carrying connect attempt `attempt` (see `pending_conn`).
    pub(crate) fn set_pending_conn(&self, attempt: u64, conn: Arc<dyn Connection>) {
        let mut c = self.lock();
        if c.attempt == attempt && c.state == EpState::ActiveConnectionPending {
            c.pending_conn = Some(conn);
        } else {
            drop(c);
            conn.close(true);
        }
    }

    /// Records the connect timeout of `attempt` (a timer id), cancelled when the attempt
    /// resolves; cancelled at once if it already has.
    pub(crate) fn set_attempt_timer(&self, attempt: u64, timer: u64) {
        let mut c = self.lock();
        if c.attempt == attempt && c.state == EpState::ActiveConnectionPending {
            if let Some(old) = c.attempt_timer.replace(timer) {
                crate::engine::timer::cancel(old);
            }
        } else {
            drop(c);
            crate::engine::timer::cancel(timer);
        }
    }

    /// Undoes connect attempt `attempt`, which the link could not start (nothing reached the
    /// network, no event follows): the QP is UNCONNECTED again, its connect timeout cancelled.
    pub(crate) fn abandon_attempt(&self, attempt: u64) {
        let mut c = self.lock();
        if c.attempt != attempt || c.state != EpState::ActiveConnectionPending {
            return;
        }
        self.set_state(&mut c, EpState::Unconnected);
        c.end_reported = true;
        c.pending_conn = None;
        c.remote_addr = None;
        c.remote_qual = None;
        if let Some(t) = c.attempt_timer.take() {
            crate::engine::timer::cancel(t);
        }
    }

    /// The number of the current attempt.
    pub(crate) fn current_attempt(&self) -> u64 {
        self.lock().attempt
    }

    /// True if `attempt` is the current one and still pending in `state`.
    pub(crate) fn attempt_pending(&self, attempt: u64, state: EpState) -> bool {
        let c = self.lock();
        c.attempt == attempt && c.state == state
    }

    /// The IRD and ORD this endpoint offers.
    pub(crate) fn read_depths(&self) -> (usize, usize) {
        let c = self.lock();
        (c.attr.max_rdma_read_in, c.attr.max_rdma_read_out)
    }

    /// The connection is up: data may move. `ird`/`ord` are the negotiated depths. The link
    /// then calls [`Qp::report_established`] (once both ends are up).
    pub(crate) fn established(
        &self,
        attempt: u64,
        conn: Arc<dyn Connection>,
        ird: usize,
        ord: usize,
        remote: IaAddress,
    ) -> bool {
        let conn_id = conn.id();
        #[cfg(any(test, feature = "testing"))]
        let conn = crate::engine::faults::wrap(self.id, conn);
        {
            let mut c = self.lock();
            if c.attempt != attempt
                || !matches!(
                    c.state,
                    EpState::ActiveConnectionPending | EpState::PassiveConnectionPending
                )
            {
                return false;
            }
            self.set_state(&mut c, EpState::Connected);
            c.conn_inlines = conn.takes_inline();
            c.conn = Some(conn);
            c.pending_conn = None;
            if let Some(t) = c.attempt_timer.take() {
                crate::engine::timer::cancel(t);
            }
            c.tx_stalled = false;
            c.tx_drained_early = false;
            c.lent_returned_early = (conn_id, 0);
            // A Send blocked on the previous connection's peer must not block this one.
            self.rnr_blocked.store(false, Ordering::SeqCst);
            c.ird = ird;
            c.ord = ord;
            c.remote_addr = Some(remote);
            c.irq.reserve(ird);
            c.orq.reserve(ord);
        }
        tracing::debug!(
            ep = self.id,
            conn = conn_id,
            attempt,
            ird,
            ord,
            %remote,
            "connection established"
        );
        true
    }

    /// Reports ESTABLISHED (with the peer's private data) and starts transmitting.
    pub(crate) fn report_established(&self, private_data: Vec<u8>) {
        self.event(QpEvent::Established(private_data));
        self.pump();
    }

    /// A connection attempt failed before it was established.
    pub(crate) fn attempt_failed(
        &self,
        attempt: u64,
        kind: ConnectionEventKind,
        private_data: Vec<u8>,
    ) {
        {
            let mut c = self.lock();
            if c.attempt != attempt
                || c.end_reported
                || !matches!(
                    c.state,
                    EpState::ActiveConnectionPending
                        | EpState::PassiveConnectionPending
                        | EpState::TentativeConnectionPending
                )
            {
                return;
            }
            c.end_reported = true;
            self.set_state(&mut c, EpState::Disconnected);
            if let Some(t) = c.attempt_timer.take() {
                crate::engine::timer::cancel(t);
            }
            if let Some(conn) = c.pending_conn.take() {
                drop(c);
                conn.close(true);
            }
        }
        tracing::debug!(ep = self.id, attempt, ?kind, "connection attempt failed");
        // Receives posted before the attempt are flushed like any on a DISCONNECTED EP.
        self.end_flush_only();
        self.event(QpEvent::AttemptFailed(kind, private_data));
    }

    fn end_flush_only(&self) {
        let (sq, rq, recv_flags) = {
            let mut c = self.lock();
            c.tx_stalled = false;
            let mut sq: Vec<SendWr> = c.take_lent().collect();
            sq.extend(c.tx_inflight.take());
            sq.extend(c.orq.drain(..));
            sq.extend(c.sq.drain(..));
            (
                sq,
                c.rq.drain(..).collect::<Vec<_>>(),
                c.attr.recv_completion_flags,
            )
        };
        if !sq.is_empty() || !rq.is_empty() {
            tracing::debug!(
                ep = self.id,
                flushed_sends = sq.len(),
                flushed_recvs = rq.len(),
                "work flushed"
            );
        }
        for wr in &sq {
            self.complete_send(wr, DtoStatus::Flushed, 0);
        }
        for wr in &rq {
            self.complete_recv(wr, DtoStatus::Flushed, 0, true, recv_flags);
        }
    }

    /// Abrupt teardown for IA close or EP free.
    pub(crate) fn abort_for_close(&self) {
        let state = self.lock().state;
        match state {
            EpState::Connected | EpState::DisconnectPending => {
                self.end_connection(ConnectionEventKind::Disconnected, true)
            }
            EpState::ActiveConnectionPending
            | EpState::PassiveConnectionPending
            | EpState::TentativeConnectionPending => {
                let attempt = self.lock().attempt;
                self.attempt_failed(attempt, ConnectionEventKind::Disconnected, Vec::new());
            }
            _ => self.end_flush_only(),
        }
    }

    /// Starts a connect attempt if the QP is UNCONNECTED; returns its number, or the state
    /// that forbids it.
    pub(crate) fn begin_connect(&self, remote: IaAddress, qual: ConnQual) -> Result<u64, EpState> {
        {
            let c = self.lock();
            if c.state != EpState::Unconnected {
                return Err(c.state);
            }
        }
        Ok(self.begin_attempt(EpState::ActiveConnectionPending, Some(remote), Some(qual)))
    }

    /// The state and the current attempt's number.
    pub(crate) fn state_and_attempt(&self) -> (EpState, u64) {
        let c = self.lock();
        (c.state, c.attempt)
    }

    /// Graceful disconnect of a CONNECTED QP: DISCONNECT_PENDING while queued requests and
    /// outstanding reads finish, then the connection ends (DISCONNECTED). A no-op if the
    /// connection ended meanwhile (that end was reported).
    pub(crate) fn disconnect_graceful(&self) {
        {
            let mut c = self.lock();
            if c.state != EpState::Connected {
                return;
            }
            self.set_state(&mut c, EpState::DisconnectPending);
        }
        tracing::debug!(
            ep = self.id,
            "disconnect pending: the send queue drains first"
        );
        self.pump();
        // pump ends the connection once the queues are empty; if a transmitter is busy
        // elsewhere it will do so.
        let done = {
            let c = self.lock();
            c.state == EpState::DisconnectPending && c.sq.is_empty() && !c.reads_pending()
        };
        if done {
            self.end_connection(ConnectionEventKind::Disconnected, true);
        }
    }

    /// Moves from `from` to `to` if the QP is in `from`; returns the state it was in.
    pub(crate) fn transition(&self, from: EpState, to: EpState) -> EpState {
        let mut c = self.lock();
        let was = c.state;
        if was == from {
            self.set_state(&mut c, to);
        }
        was
    }

    /// DISCONNECTED -> UNCONNECTED (reuse), forgetting the last connection's peer and depths.
    /// Returns the state it was in; only DISCONNECTED changes.
    pub(crate) fn reset(&self) -> EpState {
        let mut c = self.lock();
        let was = c.state;
        if was == EpState::Disconnected {
            self.set_state(&mut c, EpState::Unconnected);
            c.remote_addr = None;
            c.remote_qual = None;
            c.ord = 0;
            c.ird = 0;
        }
        was
    }
}
