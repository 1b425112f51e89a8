//! The in-process loopback link: two endpoints of one process (of one IA or of two) connected
//! through the same engine path a network link uses. A message is delivered by calling the peer
//! engine's `rx_*` function with the sender's registered memory as the payload, so data moves
//! with one copy and every check (memory table, IRD, receive buffers) runs exactly as it does
//! for bytes from a socket.
//!
//! Listeners are process-wide, keyed by (IP address, connection qualifier).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::engine::port::{
    Connection, CrArrivalInfo, CrossMemoryAttach, Link, LinkCaps, ListenError, Listener, OutMsg,
    PendingRequest, Progress, TxOutcome,
};
use crate::engine::qp::{Qp, RxReadFault, RxResponse, RxSend, RxWriteFault, RxWriteImmed};
use crate::types::{ConnQual, ConnectionEventKind, DtoStatus, EpState, IaAddress, MAX_IOV};

pub(crate) struct Loopback {
    listeners: Mutex<HashMap<(IpAddr, ConnQual), Weak<dyn Listener>>>,
    /// Serializes accepts, so the two halves of a connection come up together.
    cm: Mutex<()>,
    next_conn: AtomicU64,
}

fn instance() -> Arc<Loopback> {
    static LINK: OnceLock<Arc<Loopback>> = OnceLock::new();
    LINK.get_or_init(|| {
        Arc::new(Loopback {
            listeners: Mutex::new(HashMap::new()),
            cm: Mutex::new(()),
            next_conn: AtomicU64::new(1),
        })
    })
    .clone()
}

/// The process's loopback link, and its progress (none: every message is delivered inline).
pub(crate) fn link() -> (Arc<dyn Link>, Arc<dyn Progress>) {
    let l = instance();
    (l.clone(), l)
}

impl Progress for Loopback {}

impl Link for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn caps(&self) -> LinkCaps {
        LinkCaps {
            completes_at_peer: true,
            rnr_waits_forever: true,
            max_iov: MAX_IOV,
            max_private_data: crate::engine::port::MAX_PRIVATE_DATA,
            cross_memory_attach: CrossMemoryAttach::NotUsed,
            dead_peer_bound: None,
        }
    }

    fn listen(
        &self,
        addr: IaAddress,
        qual: ConnQual,
        listener: Weak<dyn Listener>,
    ) -> Result<(), ListenError> {
        // Declared before the guard, so dropped after it: the upgraded listener may be the
        // last reference to a freed service point, whose drop must not run under the lock.
        let existing;
        let mut l = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        let key = (addr.ip(), qual);
        existing = l.get(&key).and_then(Weak::upgrade);
        if existing.as_ref().is_some_and(|s| s.is_open()) {
            return Err(ListenError::InUse);
        }
        l.insert(key, listener);
        Ok(())
    }

    fn unlisten(&self, addr: IaAddress, qual: ConnQual) {
        let mut l = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        l.remove(&(addr.ip(), qual));
    }

    fn connect(
        &self,
        ep: &Arc<Qp>,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
    ) -> std::io::Result<()> {
        let attempt = ep.current_attempt();
        let sp = {
            let l = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
            l.get(&(remote.ip(), qual)).and_then(Weak::upgrade)
        };
        let Some(sp) = sp.filter(|s| s.is_open()) else {
            ep.attempt_failed(attempt, ConnectionEventKind::NonPeerRejected, Vec::new());
            return Ok(());
        };
        let info = CrArrivalInfo {
            remote_addr: ep.local_addr(),
            remote_port_qual: ep.id(),
            private_data: private_data.to_vec(),
        };
        sp.request_arrived(Box::new(LoopbackRequest {
            active: Arc::downgrade(ep),
            attempt,
            info,
            link: instance(),
        }));
        Ok(())
    }
}

struct LoopbackRequest {
    active: Weak<Qp>,
    attempt: u64,
    info: CrArrivalInfo,
    link: Arc<Loopback>,
}

impl PendingRequest for LoopbackRequest {
    fn accept(&self, passive: &Arc<Qp>, private_data: &[u8]) -> bool {
        let _cm = self.link.cm.lock().unwrap_or_else(|p| p.into_inner());
        let Some(active) = self.active.upgrade() else {
            return false;
        };
        if !active.attempt_pending(self.attempt, EpState::ActiveConnectionPending) {
            return false;
        }
        let id = self.link.next_conn.fetch_add(1, Ordering::Relaxed);
        let (a_in, a_out) = active.read_depths();
        let (p_in, p_out) = passive.read_depths();
        let to_passive: Arc<dyn Connection> = Arc::new(LoopConn {
            id,
            peer: Arc::downgrade(passive),
            remote: passive.local_addr(),
        });
        let to_active: Arc<dyn Connection> = Arc::new(LoopConn {
            id,
            peer: Arc::downgrade(&active),
            remote: active.local_addr(),
        });
        // Each side's ORD is what it wants, capped by what the other side offers as IRD.
        let a_ord = a_out.min(p_in);
        let p_ord = p_out.min(a_in);
        // Both sides are CONNECTED before either hears ESTABLISHED, so that a DTO posted on
        // ESTABLISHED never finds the other side still pending.
        if !active.established(self.attempt, to_passive, p_ord, a_ord, passive.local_addr()) {
            return false;
        }
        let p_attempt = passive.current_attempt();
        if passive.established(p_attempt, to_active, a_ord, p_ord, active.local_addr()) {
            active.report_established(private_data.to_vec());
            passive.report_established(Vec::new());
        } else {
            active.end_connection(ConnectionEventKind::Disconnected, false);
        }
        // A Send the active side posted right away may be waiting for the passive side.
        passive.wake_from_peer();
        active.wake_from_peer();
        true
    }

    fn reject(&self, private_data: &[u8]) {
        if let Some(active) = self.active.upgrade() {
            active.attempt_failed(
                self.attempt,
                ConnectionEventKind::PeerRejected,
                private_data.to_vec(),
            );
        }
    }

    fn info(&self) -> &CrArrivalInfo {
        &self.info
    }
}

/// One direction of a loopback connection: delivers to `peer`.
struct LoopConn {
    id: u64,
    peer: Weak<Qp>,
    remote: IaAddress,
}

impl Connection for LoopConn {
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome {
        let Some(peer) = self.peer.upgrade() else {
            return TxOutcome::Broken;
        };
        // The peer refused the message (`cause`: what its engine found): it breaks.
        let refused = |status, cause: &dyn std::fmt::Debug| {
            tracing::warn!(
                conn = self.id,
                peer_ep = peer.id(),
                ?status,
                ?cause,
                "message refused by the peer: the connection breaks"
            );
            peer.end_connection_of(self.id, ConnectionEventKind::Broken, false);
            TxOutcome::Failed(status)
        };
        match msg {
            OutMsg::Send {
                solicited,
                invalidate,
                payload,
            } => match peer.rx_send(solicited, invalidate, payload) {
                RxSend::Placed => TxOutcome::Sent,
                RxSend::NoBuffer => TxOutcome::NotReady,
                // The peer's receive buffer was too short, or deregistered under it, or the
                // STag of a Send with Invalidate could not be invalidated there: its responder
                // refused the message (its receive completed REMOTE_RESPONDER too).
                r @ (RxSend::TooLong | RxSend::Revoked | RxSend::NotInvalidated(_)) => {
                    refused(DtoStatus::RemoteResponder, &r)
                }
            },
            OutMsg::Write { stag, to, payload } => match peer.rx_write(stag, to, payload) {
                Ok(()) => TxOutcome::Sent,
                Err(RxWriteFault::Access(f)) => refused(DtoStatus::RemoteAccess, &f),
                Err(RxWriteFault::NotConnected) => TxOutcome::PeerClosed,
            },
            OutMsg::WriteImmed {
                stag,
                to,
                payload,
                immediate,
                solicited,
            } => match peer.rx_write_immed(stag, to, payload, immediate, solicited) {
                RxWriteImmed::Placed => TxOutcome::Sent,
                RxWriteImmed::NoBuffer => TxOutcome::NotReady,
                RxWriteImmed::Access(f) => refused(DtoStatus::RemoteAccess, &f),
            },
            OutMsg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            } => match peer.rx_read_request(sink_stag, sink_to, len, src_stag, src_to, true) {
                Ok(()) => TxOutcome::Sent,
                Err(RxReadFault::Access(f)) => refused(DtoStatus::RemoteAccess, &f),
                Err(RxReadFault::IrdExceeded) => {
                    refused(DtoStatus::RemoteResponder, &RxReadFault::IrdExceeded)
                }
                Err(RxReadFault::NotConnected) => TxOutcome::PeerClosed,
            },
            OutMsg::ReadResponse { payload, .. } => match peer.rx_read_response(payload) {
                RxResponse::Placed => TxOutcome::Sent,
                RxResponse::NotConnected => TxOutcome::PeerClosed,
                // A protocol error, or a region of the read deregistered under it (the
                // responder's source or the requester's sink): the connection breaks, and
                // the read is flushed.
                r @ (RxResponse::Unexpected | RxResponse::Revoked) => {
                    tracing::warn!(
                        conn = self.id,
                        peer_ep = peer.id(),
                        cause = ?r,
                        "Read Response refused by the peer: the connection breaks"
                    );
                    peer.end_connection_of(self.id, ConnectionEventKind::Broken, false);
                    TxOutcome::Broken
                }
            },
        }
    }

    fn wake_peer(&self) {
        if let Some(p) = self.peer.upgrade() {
            p.wake_from_peer();
        }
    }

    fn close(&self, broken: bool) {
        if let Some(p) = self.peer.upgrade() {
            p.peer_closed(self.id, broken);
        }
    }

    fn remote_addr(&self) -> IaAddress {
        self.remote
    }

    fn id(&self) -> u64 {
        self.id
    }
}
