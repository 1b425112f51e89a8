//! The few internals the `engine_inbound` fuzz harness (crate `dapl-testkit`) needs, behind the
//! `fuzzing` feature. Not part of the API: hidden from the docs, no stability promise.
//!
//! The harness plays the progress thread of a tcp connection itself, so it needs:
//! - a tcp connection in the Established phase over a socket it hands in, taken by an
//!   endpoint the way the link hands it over after MPA, with no link and no progress thread
//!   behind it ([`FuzzConn::establish`]), the calls the progress thread makes on it
//!   ([`FuzzConn::on_ready`], [`FuzzConn::on_wake`], [`FuzzConn::on_tick`]), and what it can see
//!   of the connection's state ([`FuzzConn::probe`], [`FuzzConn::references`]);
//! - memory of which only a part is registered (the rest are guard bytes the engine must not
//!   touch), entered in the IA's memory table at a fixed registered address, so that an input
//!   means the same in any process ([`FuzzMemory`], [`enter_lmr`], [`enter_rmr`] for a window a
//!   peer may invalidate, [`remove_lmr`]): the public `Lmr` chooses its own address and
//!   registers all of its memory.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use rustix::event::epoll::EventFlags;
use socket2::Socket;

use crate::engine::port::Connection;
use crate::ep::Endpoint;
use crate::ia::InterfaceAdapter;
use crate::link::tcp::TcpConn;
use crate::mem::{EntryKind, RegionMemory};
use crate::pz::Pz;
use crate::types::{EpState, MemPriv};

/// What the harness sees of a connection's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuzzProbe {
    /// `Established`, `Closing` or `Dead` (the harness never sees the MPA phases).
    pub phase: &'static str,
    /// A Send waits for a receive buffer.
    pub stalled: bool,
    /// A Send is being reassembled into a receive buffer.
    pub recv_held: bool,
    /// Transmitting failed or the connection was killed.
    pub tx_failed: bool,
    /// Our FIN went out.
    pub tx_shut: bool,
}

/// A tcp connection with no link behind it, driven by the caller.
pub struct FuzzConn(Arc<TcpConn>);

impl FuzzConn {
    /// An Established tcp connection over `sock` (a connected, non-blocking stream socket of
    /// any family; no epoll set, no progress thread: what the connection asks of its link is
    /// a no-op), which `ep` takes as the link hands a connection over once MPA is through,
    /// with IRD `ird` and ORD `ord`, and reports ESTABLISHED. `crc`: MPA CRCs on. `responder`:
    /// act as the MPA responder, which holds its FPDUs until the peer's first one (the
    /// endpoint comes from PASSIVE_CONNECTION_PENDING instead of ACTIVE_CONNECTION_PENDING).
    /// None if the endpoint refused the connection.
    pub fn establish(
        ep: &Endpoint,
        sock: OwnedFd,
        crc: bool,
        responder: bool,
        ird: usize,
        ord: usize,
    ) -> Option<FuzzConn> {
        let qp = &ep.0.qp;
        let conn = TcpConn::fuzz_established(Socket::from(sock), crc, responder, qp);
        let state = if responder {
            EpState::PassiveConnectionPending
        } else {
            EpState::ActiveConnectionPending
        };
        let remote = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let attempt = qp.begin_attempt(state, Some(remote), Some(1));
        let as_dyn: Arc<dyn Connection> = conn.clone();
        if !qp.established(attempt, as_dyn, ird, ord, remote) {
            return None;
        }
        qp.report_established(Vec::new());
        Some(FuzzConn(conn))
    }

    /// What the progress thread does when the socket is readable and writable
    /// (`EPOLLIN | EPOLLOUT`): transmit what waits, then read and process what arrived.
    pub fn on_ready(&self) {
        self.0.on_event(EventFlags::IN | EventFlags::OUT);
    }

    /// What the progress thread does when the connection is woken (a receive was posted: a
    /// Send waiting for a buffer may go on).
    pub fn on_wake(&self) {
        self.0.on_wake();
    }

    /// What the progress thread does on its timer tick at `now` (RNR grace, linger).
    pub fn on_tick(&self, now: Instant) {
        self.0.on_tick(now);
    }

    /// The connection's state.
    pub fn probe(&self) -> FuzzProbe {
        let p = self.0.fuzz_probe();
        FuzzProbe {
            phase: p.phase,
            stalled: p.stalled,
            recv_held: p.recv_held,
            tx_failed: p.tx_failed,
            tx_shut: p.tx_shut,
        }
    }

    /// How many references to the connection exist, this one included (1 once the endpoint
    /// and the engine let go of it).
    pub fn references(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

/// Memory the library allocates (page aligned, zeroed), for [`enter_lmr`].
pub struct FuzzMemory(Arc<RegionMemory>);

impl FuzzMemory {
    /// `len` zeroed bytes; None if `len` is 0 or the allocation fails.
    pub fn allocate(len: usize) -> Option<Self> {
        RegionMemory::allocate(len).map(|m| FuzzMemory(Arc::new(m)))
    }

    /// The address of the first byte (what a read sink's tagged offset is based on).
    pub fn addr(&self) -> u64 {
        self.0.addr()
    }

    /// Copies `src` in at `offset`; false (and nothing copied) if it does not fit.
    pub fn copy_in(&self, offset: usize, src: &[u8]) -> bool {
        self.0.copy_in(offset, src)
    }

    /// Copies bytes out from `offset` into `dst`; false (and nothing copied) if they are not all
    /// there.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.0.copy_out(offset, dst)
    }
}

/// Enters `len` bytes of `mem` from `offset` in `ia`'s memory table as an LMR of `pz` with
/// `privs`, registered at address `va`; returns its STag (LMR and RMR context alike), or None
/// when the table is full. The entry lives until [`remove_lmr`] (or the IA closes).
pub fn enter_lmr(
    ia: &InterfaceAdapter,
    pz: &Pz,
    mem: &FuzzMemory,
    offset: usize,
    va: u64,
    len: u64,
    privs: MemPriv,
) -> Option<u32> {
    let max = ia.0.attr.max_lmrs;
    enter(EntryKind::Lmr, max, ia, pz, mem, offset, va, len, privs)
}

/// As [`enter_lmr`], but the entry is a bound RMR's (a memory window, remote access only):
/// the one kind a peer's Send with Invalidate can invalidate. It has no owner (no DAT RMR
/// learns of its invalidation); [`remove_lmr`] removes it too.
pub fn enter_rmr(
    ia: &InterfaceAdapter,
    pz: &Pz,
    mem: &FuzzMemory,
    offset: usize,
    va: u64,
    len: u64,
    privs: MemPriv,
) -> Option<u32> {
    let max = ia.0.attr.max_rmrs;
    enter(EntryKind::Rmr, max, ia, pz, mem, offset, va, len, privs)
}

#[allow(clippy::too_many_arguments)]
fn enter(
    kind: EntryKind,
    max: usize,
    ia: &InterfaceAdapter,
    pz: &Pz,
    mem: &FuzzMemory,
    offset: usize,
    va: u64,
    len: u64,
    privs: MemPriv,
) -> Option<u32> {
    let table = &ia.0.memtable;
    table.insert(kind, mem.0.clone(), offset, va, len, pz.id(), privs, max)
}

/// Removes the entry for `stag` from `ia`'s memory table; true if it was there.
pub fn remove_lmr(ia: &InterfaceAdapter, stag: u32) -> bool {
    ia.0.memtable.remove(stag)
}

/// The shm link's ring consumer fed `bytes` as the peer's side of a ring: the first 16 bytes
/// are the producer's tail and a head offset (as a peer could leave them), the rest the data
/// area. Reads records until the ring is empty, refused as garbage, or a ring's worth of bytes
/// is consumed (the link's bound per call: records all around the ring are a peer sending
/// without end), checking that every record it accepts lies inside the mapping. Returns how
/// many records it accepted. Panics on a broken invariant (a fuzz finding).
pub fn shm_ring_consume(bytes: &[u8]) -> usize {
    use crate::link::shm::ring::{mapping_len, Consumer, HDR};
    const CAP: usize = 4096;
    let mem = Arc::new(RegionMemory::allocate(mapping_len(CAP)).expect("a small allocation"));
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let (tail, head) = match bytes.get(..16) {
        Some(h) => (word(&h[..8]), word(&h[8..16]) % 4096),
        None => (bytes.len() as u64, 0),
    };
    let data = bytes.get(16..).unwrap_or_default();
    mem.copy_in(crate::link::shm::ring::DATA, &data[..data.len().min(CAP)]);
    mem.word(0)
        .expect("tail word")
        .store(tail, std::sync::atomic::Ordering::Release);
    mem.word(64)
        .expect("head word")
        .store(head, std::sync::atomic::Ordering::Release);
    let mut c = Consumer::new(mem.clone(), CAP);
    let (mut n, mut taken) = (0, 0);
    while taken < CAP {
        let Ok(Some(r)) = c.peek() else { break };
        taken += r.len();
        let end = r.payload_at + r.hdr.payload_len as usize;
        assert!(r.payload_at >= crate::link::shm::ring::DATA + HDR && end <= mem.len());
        let mut buf = vec![0u8; r.hdr.payload_len as usize];
        assert!(
            c.mem().copy_out(r.payload_at, &mut buf),
            "a payload outside the mapping"
        );
        c.consume(&r);
        n += 1;
        assert!(n <= CAP, "more records than a ring holds");
    }
    n
}
