//! Setting a connection up: the active side's dial (`connect`: a non-blocking connect(2) from
//! the IA's address) and the passive side's arrival at a listener (`accepted`), the MPA
//! exchange through the sans-IO `iwarp` codec (the initiator's Request with IRD/ORD and the RTRs
//! it offers; the responder's CR, delivered to the listener and accepted or rejected as a
//! [`PendingRequest`]), and the hand-over of the established connection to the engine
//! (`active_established`, `accept`): FPDU framing set up, the RTR queued on the active side,
//! the responder's FPDUs held until the initiator's first one (RFC 5044).
//!
//! The MPA bytes come and go through the other parts: a finished connect is seen by
//! `on_writable` ([`tx`](super::tx)), which sends the Request; the Request and the Reply are read
//! into the staging buffer of the receive path ([`rx`](super::rx)), whose `process` feeds them
//! to the codec kept in the phase and calls `deliver_request` or `active_established` here.

use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, MutexGuard, Weak};
use std::time::Instant;

use iwarp::mpa::{InitiatorConfig, MpaInitiator, MpaResponder, ResponderConfig, Rtr, RtrSet};
use iwarp::FpduEncoder;
use rustix::event::epoll::EventFlags;
use socket2::{Domain, Socket, Type};

use super::{Phase, Rx, TcpConn};
use crate::engine::port::{Connection, CrArrivalInfo, Listener, PendingRequest};
use crate::engine::qp::Qp;
use crate::link::tcp::{self, lock, Shared, LINGER, REQUEST_TIMEOUT};

impl TcpConn {
    /// Active side: starts a non-blocking connect from the IA's address.
    pub(crate) fn connect(
        id: u64,
        shared: &Arc<Shared>,
        ep: &Arc<Qp>,
        attempt: u64,
        dial: tcp::Dial,
    ) -> Result<(), (io::Error, tcp::Dial)> {
        let (sock, init) = match Self::try_connect(shared, ep, &dial) {
            Ok(x) => x,
            Err(e) => return Err((e, dial)),
        };
        let target = dial.target;
        tracing::debug!(conn = id, ep = ep.id(), attempt, %target, "dialling");
        let conn = Arc::new(TcpConn::new(
            id,
            Arc::downgrade(shared),
            sock,
            target,
            Phase::Connecting {
                init,
                attempt,
                dial,
            },
        ));
        conn.set_ep(ep);
        // Writability ends the connect (`on_writable`).
        lock(&conn.tx).want_out = true;
        // The endpoint learns its connection before epoll may drive it: once registered, the
        // handshake can finish on another thread (progress thread or a polling consumer), and
        // an endpoint that is no longer pending would then close the connection it just got.
        ep.set_pending_conn(attempt, conn.clone());
        shared.set_timed(id, true);
        shared
            .register(&conn, EventFlags::OUT | EventFlags::RDHUP)
            .map_err(|e| {
                let dial = tcp::Dial {
                    target,
                    private_data: Vec::new(),
                    refused_until: std::time::Instant::now(),
                };
                (e, dial)
            })
    }

    /// The socket of an active connect, connect(2) started, and the MPA initiator.
    fn try_connect(
        shared: &Arc<Shared>,
        ep: &Arc<Qp>,
        dial: &tcp::Dial,
    ) -> io::Result<(Socket, MpaInitiator)> {
        let target = dial.target;
        let private_data = &dial.private_data[..];
        let (ird, ord) = ep.read_depths();
        let config = InitiatorConfig {
            crc: shared.opts.crc,
            enhanced: true,
            ird: ird.min(iwarp::mpa::IRD_ORD_MAX as usize) as u16,
            ord: ord.min(iwarp::mpa::IRD_ORD_MAX as usize) as u16,
            // A Read RTR is a read from us: offered only when our ORD allows one.
            peer_to_peer: Some(if ord > 0 {
                RtrSet::WRITE.union(RtrSet::READ)
            } else {
                RtrSet::WRITE
            }),
        };
        let init = MpaInitiator::new(config, private_data)
            .map_err(|_| io::Error::from(ErrorKind::InvalidInput))?;
        let sock = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None)?;
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        super::super::bound_dead_peer(&sock, shared.opts.dead_peer)?;
        sock.bind(&SocketAddr::new(IpAddr::V4(shared.local_ip), 0).into())?;
        match sock.connect(&target.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        Ok((sock, init))
    }

    /// Passive side: a connection arrived at a listener.
    pub(crate) fn accepted(
        id: u64,
        shared: &Arc<Shared>,
        stream: TcpStream,
        peer: SocketAddr,
        sp: Weak<dyn Listener>,
    ) {
        let sock = Socket::from(stream);
        if sock.set_nonblocking(true).is_err()
            || sock.set_nodelay(true).is_err()
            || super::super::bound_dead_peer(&sock, shared.opts.dead_peer).is_err()
        {
            return;
        }
        tracing::debug!(conn = id, %peer, "TCP connection accepted");
        let resp = MpaResponder::new(ResponderConfig {
            crc_required: shared.opts.crc,
        });
        let conn = Arc::new(TcpConn::new(
            id,
            Arc::downgrade(shared),
            sock,
            peer,
            Phase::AwaitRequest {
                resp,
                sp,
                deadline: Instant::now() + REQUEST_TIMEOUT,
            },
        ));
        shared.set_timed(id, true);
        if shared
            .register(&conn, EventFlags::IN | EventFlags::RDHUP)
            .is_err()
        {
            shared.deregister(&conn);
        }
    }

    pub(super) fn deliver_request(self: &Arc<Self>, sp: Weak<dyn Listener>, private_data: Vec<u8>) {
        let req = Box::new(TcpRequest {
            conn: self.clone(),
            info: CrArrivalInfo {
                remote_addr: SocketAddr::new(self.remote.ip(), 0),
                remote_port_qual: self.remote.port() as u64,
                private_data,
            },
        });
        match sp.upgrade().filter(|s| s.is_open()) {
            Some(sp) => {
                tracing::debug!(conn = self.id, "MPA Request received");
                sp.request_arrived(req)
            }
            None => {
                tracing::debug!(
                    conn = self.id,
                    "MPA Request for a closed listener: rejected"
                );
                req.reject(&[])
            }
        }
    }

    /// The active side got the Reply: set up framing, send the RTR, report ESTABLISHED.
    pub(super) fn active_established(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        attempt: u64,
        acc: iwarp::mpa::Accepted,
    ) -> bool {
        let neg = acc.negotiated;
        tracing::debug!(
            conn = self.id,
            revision = neg.revision,
            crc = neg.crc,
            ird = neg.ird,
            ord = neg.ord,
            rtr = ?neg.rtr,
            "MPA Reply received"
        );
        {
            let mut tx = lock(&self.tx);
            tx.enc = FpduEncoder::new(neg.crc);
            tx.mulpdu = self.mss_mulpdu();
            if let Some(rtr) = neg.rtr {
                let msn = if rtr == Rtr::Read {
                    let m = tx.msn_read;
                    tx.msn_read += 1;
                    rx.rtr_read_pending = true;
                    m
                } else {
                    1
                };
                tx.push_segment(&rtr.segment(msn));
            }
        }
        if let Some(s) = self.shared() {
            s.set_timed(self.id, false);
        }
        let Some(ep) = self.ep() else {
            return false;
        };
        let remote = self.remote;
        let conn: Arc<dyn Connection> = self.clone();
        if !ep.established(
            attempt,
            conn,
            neg.ird as usize,
            neg.ord as usize,
            SocketAddr::new(remote.ip(), 0),
        ) {
            return false;
        }
        // The RTR goes first.
        {
            let mut tx = lock(&self.tx);
            self.flush_locked(&mut tx);
        }
        self.update_interest();
        ep.report_established(acc.private_data);
        true
    }
}

/// A connection request waiting for accept or reject.
struct TcpRequest {
    conn: Arc<TcpConn>,
    info: CrArrivalInfo,
}

impl PendingRequest for TcpRequest {
    fn accept(&self, ep: &Arc<Qp>, private_data: &[u8]) -> bool {
        let c = &self.conn;
        let mut rx = lock(&c.rx);
        // The requester may have gone (its connect timed out) without us having read its FIN.
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        if rx.peer_gone || matches!(c.sock.peek(&mut probe), Ok(0)) {
            return false;
        }
        let Phase::AwaitAccept { resp } = &mut rx.phase else {
            return false;
        };
        let (ird, ord) = ep.read_depths();
        let max = iwarp::mpa::IRD_ORD_MAX as usize;
        let (mut ird, mut ord) = (ird.min(max) as u16, ord.min(max) as u16);
        if let Some(iwarp::mpa::Revision::V2 {
            ird_ord: Some(peer),
        }) = resp.pending_request().map(|r| r.revision)
        {
            // Inbound depth: no more than the initiator will use; outbound: no more than it
            // offers. A Read RTR (chosen only when Write is not offered) needs one inbound slot.
            let read_rtr = peer.peer_to_peer && peer.rtr.preferred() == Some(iwarp::mpa::Rtr::Read);
            ird = ird.min(peer.ord).max(u16::from(read_rtr && ird > 0));
            ord = ord.min(peer.ird);
        }
        let reply = match resp.accept(private_data, ird, ord) {
            Ok(r) => r,
            Err(_) => return false,
        };
        let Some(neg) = resp.negotiated().copied() else {
            return false;
        };
        tracing::debug!(
            conn = c.id,
            ep = ep.id(),
            revision = neg.revision,
            crc = neg.crc,
            ird = neg.ird,
            ord = neg.ord,
            rtr = ?neg.rtr,
            "MPA Reply sent"
        );
        rx.phase = Phase::Established;
        rx.crc = neg.crc;
        {
            let mut tx = lock(&c.tx);
            tx.enc = FpduEncoder::new(neg.crc);
            tx.mulpdu = c.mss_mulpdu();
            tx.ctl.push_back((reply, false));
            tx.hold = true; // until the initiator's first FPDU
            c.flush_locked(&mut tx);
        }
        c.set_ep(ep);
        let remote = c.remote;
        let conn: Arc<dyn Connection> = c.clone();
        if !ep.established(
            ep.current_attempt(),
            conn,
            neg.ird as usize,
            neg.ord as usize,
            SocketAddr::new(remote.ip(), 0),
        ) {
            drop(rx);
            c.kill();
            return false;
        }
        let pending = rx.end > rx.start;
        drop(rx);
        ep.report_established(Vec::new());
        c.update_interest();
        if pending {
            c.on_readable();
        }
        true
    }

    fn reject(&self, private_data: &[u8]) {
        let c = &self.conn;
        let mut rx = lock(&c.rx);
        let Phase::AwaitAccept { resp } = &mut rx.phase else {
            return;
        };
        let reply = resp.reject(private_data).ok();
        tracing::debug!(conn = c.id, "MPA Reject sent");
        rx.phase = Phase::Closing {
            deadline: Instant::now() + LINGER,
        };
        drop(rx);
        match reply {
            Some(r) => c.send_and_close(r),
            None => c.kill(),
        }
    }

    fn info(&self) -> &CrArrivalInfo {
        &self.info
    }
}
