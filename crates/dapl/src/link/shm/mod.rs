//! The shm link: processes on one host connected through rings in shared memory.
//!
//! - Rendezvous: a listener is an abstract `SOCK_SEQPACKET` unix socket named after the uid,
//!   the IA address and the qualifier (no file left behind; scoped to the network namespace).
//!   A connect sends a Request (IRD, ORD, private data) with two descriptors: the requester's
//!   inbound ring (a sealed memfd) and its doorbell (an eventfd). The acceptor answers with an
//!   Accept carrying its own pair, or a Reject. The socket stays open: a peer that exits or is
//!   killed hangs it up, which breaks the connection at once (no timeout).
//! - Data: each side produces into the other's inbound ring ([`ring`]) and rings its doorbell;
//!   messages travel as records of at most [`ring::Producer::max_payload`] bytes (Send, Write,
//!   Read Response segments; Read Requests; the Immediate Data that ends a write with
//!   immediate; Close). A message that does not fit waits in the sender's `Tx` until the
//!   consumer frees room and rings back (`TxOutcome::Queued`, then `tx_drained`).
//! - Checks: every record is checked by the ring (lengths, kinds) and every placement by the
//!   engine's memory table (`rx_*`), as on tcp; a peer that breaks the rules gets a broken
//!   connection, never an out-of-bounds access.
//! - Progress: one thread per IA waits on the listeners, the sockets and the doorbells; a
//!   consumer that polls an empty EVD reads the rings itself (`Progress::poll`) and marks them
//!   polled, so producers skip the doorbell meanwhile; after a doorbell the thread polls for
//!   a moment itself (`Shared::spin`).
//!
//! - Large messages (from `PULL_MIN` on, when the peer can attach to us): a descriptor of the
//!   source ranges goes through the ring and the receiving side copies the data straight out of
//!   our memory (`process_vm_readv`) into its own, after its memory-table checks; the sources
//!   stay leased (`RegionMemory::lease`) until the peer has consumed the descriptor
//!   (`TxOutcome::Lent`, returned in `settle`). Cross-memory attach is probed per connection in
//!   each direction (the probe words in the handshake); denied, everything goes through the ring.
//!
//! - Mapped library memory (both IAs map it: `IaAttr::map_library_memory`): each side offers
//!   its published table (`mem::published`) and the files of its regions in the handshake,
//!   and sends more region files when asked on the socket (`DRSM`/`DRSF`; read-only without
//!   REMOTE_WRITE); an RDMA Write or Read to a mapped region is then a copy by the initiator
//!   (`ShmConn::direct`), checked against the peer's table before and after, once nothing
//!   earlier of the endpoint waits in the link. Anything else takes the paths above.
//!
//! Not yet: placement straight from the ring (docs/architecture.md, "The shm link").

pub(crate) mod ring;
mod wake;

/// Feature "testing": the descriptors of peers' regions this process received (dups), with
/// whether they were sent as writable, for tests that try to map them writable.
#[cfg(feature = "testing")]
pub(crate) mod received {
    use std::os::fd::OwnedFd;
    use std::sync::Mutex;

    static FDS: Mutex<Vec<(OwnedFd, bool)>> = Mutex::new(Vec::new());

    pub(crate) fn keep(fd: &OwnedFd, writable: bool) {
        if let Ok(d) = fd.try_clone() {
            FDS.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((d, writable));
        }
    }

    pub(crate) fn take() -> Vec<(OwnedFd, bool)> {
        std::mem::take(&mut *FDS.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

use std::borrow::Cow;

use arrayvec::ArrayVec;
use std::collections::{HashMap, VecDeque};
use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags};
use rustix::fs::SealFlags;
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use self::ring::{
    Consumer, Header, Kind, Producer, BROKEN, INVALIDATE, LAST, PULL, READ_REFUSED, SOLICITED,
};
use crate::engine::port::{
    Connection, CrArrivalInfo, CrossMemoryAttach, InlineOutcome, Inlines, Link, LinkCaps,
    ListenError, Listener as PortListener, OutMsg, Payload, PendingRequest, Progress, TxOutcome,
    MAX_PRIVATE_DATA,
};
use crate::engine::qp::{
    place_at, place_from, PlaceFault, Qp, RecvWr, RxReadFault, RxResponse, RxTake, RxWriteFault,
};
use crate::link::looks::note_look;
use crate::link::mono_ns;
use crate::link::spare_fd::SpareFd;
use crate::mem::published;
use crate::mem::region::{pull_from, Lease, RecvPiece};
use crate::mem::{seg_span, RegionMemory, Seg};
use crate::types::MemPriv;
use crate::types::{ConnQual, ConnectionEventKind, DtoStatus, IaAddress, MAX_IOV};

/// Data bytes of each ring.
const RING_CAP: usize = 128 << 10;
/// How long a Send that found no receive buffer waits for one before the connection breaks
/// (as on tcp).
const RNR_GRACE: Duration = Duration::from_millis(500);
/// How long a connect to a qualifier nobody listens on is retried (as on tcp).
const REFUSED_RETRY_FOR: Duration = Duration::from_secs(2);
const REFUSED_RETRY_GAP: Duration = Duration::from_millis(50);
/// How long a consumer that polls an empty EVD counts as polling its rings: producers skip
/// the doorbell meanwhile (the progress thread drains what is left when it runs out).
const POLL_WINDOW_NS: u64 = 4_000_000;
/// A consumer's polls write the polling windows (and read the clock) once every this many.
const WINDOW_EVERY: u32 = 64;
/// How long the progress thread polls the rings itself after a doorbell woke it.
const SPIN_NS: u64 = 50_000;

const MAGIC_REQUEST: &[u8; 4] = b"DRSQ";
const MAGIC_ACCEPT: &[u8; 4] = b"DRSA";
const MAGIC_REJECT: &[u8; 4] = b"DRSR";
/// Bytes of a handshake message before the private data.
const HS_HDR: usize = 48;
/// On an established connection's socket: a request for the file of a region of the peer's
/// library memory (`MapAsk`), and its answer (`MapAnswer`, with the descriptor or without).
const MAGIC_MAP_ASK: &[u8; 4] = b"DRSM";
const MAGIC_MAP_ANSWER: &[u8; 4] = b"DRSF";
/// Bytes of either.
const MAP_MSG: usize = 20;
/// More mappings of a peer's regions than this, and those no longer in its published table are
/// dropped (the peer freed them).
const MAPS_PRUNE_AT: usize = 64;
/// Copies made straight into or out of a peer's mapped memory (`dapl::testing`).
pub(crate) static DIRECT_COPIES: AtomicU64 = AtomicU64::new(0);
/// Handshake flag of an Accept: the acceptor can read the requester's memory by cross-memory
/// attach (it probed it).
const HS_PULLS: u32 = 1;
/// Messages of at least this many bytes from registered memory go by descriptor when the peer
/// can read our memory: it copies them out itself (cross-memory attach), once. Below it they are
/// copied through the ring (measured here: 4 KiB is faster through the ring, 8 KiB by descriptor).
const PULL_MIN: u64 = 8 << 10;

/// Ring payloads from this size on are placed straight from the ring
/// (`ShmConn::place_direct`): from here on the region-to-region copy moves words without a
/// buffer between (`RegionMemory::copy_to`).
const DIRECT_PLACE_MIN: usize = 2048;

/// How long a source range stays leased to a peer after its message was abandoned (the
/// connection ended) while the peer may still be copying it out: until the peer has consumed
/// the descriptor or hung up, at most this long.
const ORPHAN_BOUND: Duration = Duration::from_secs(2);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The abstract socket name of a listener.
fn rendezvous(ip: IpAddr, qual: ConnQual) -> std::io::Result<SocketAddrUnix> {
    let uid = rustix::process::getuid().as_raw();
    let name = format!("dapl-rs-shm/{uid}/{ip}/{qual}");
    Ok(SocketAddrUnix::new_abstract_name(name.as_bytes())?)
}

fn seqpacket() -> std::io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?)
}

/// One side's inbound ring: the memfd (sealed against resizing) and its mapping.
fn new_ring() -> std::io::Result<(OwnedFd, Arc<RegionMemory>)> {
    let len = ring::mapping_len(RING_CAP);
    let fd = crate::mem::region::sealed_memfd("dapl-rs-shm-ring", len)?;
    // The link's own: nothing revokes a ring (no access count per record). Populated: no
    // page fault on the first lap.
    let mem = RegionMemory::map_shared_populated(fd.as_fd(), len)?.never_revoked();
    Ok((fd, Arc::new(mem)))
}

/// Maps a ring the peer sent, after checking it cannot shrink under the mapping (a shrunk
/// file would fault on access).
fn map_peer_ring(fd: &OwnedFd) -> std::io::Result<Arc<RegionMemory>> {
    let len = ring::mapping_len(RING_CAP);
    let seals = rustix::fs::fcntl_get_seals(fd)?;
    let st = rustix::fs::fstat(fd)?;
    if !seals.contains(SealFlags::SHRINK) || (st.st_size as u64) < len as u64 {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    Ok(Arc::new(
        RegionMemory::map_shared_populated(fd.as_fd(), len)?.never_revoked(),
    ))
}

fn new_bell() -> std::io::Result<OwnedFd> {
    Ok(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?)
}

fn ring_bell(fd: &OwnedFd) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

fn reset_bell(fd: &OwnedFd) {
    let mut b = [0u8; 8];
    let _ = rustix::io::read(fd, &mut b);
}

/// A handshake message (little-endian): magic, IRD u32, ORD u32, pid u32, private data length
/// u32, flags u32, the address and value of our probe word (u64 each), the endpoint's PZ id
/// u64, private data; then, if the sender's IA maps library memory, its offer: a count u32 and
/// per region its id u64 and whether the descriptor is writable (u32, then u32 0).
/// Descriptors: the ring, the doorbell, and with an offer a read-only descriptor of the
/// sender's published table and one per region offered.
struct Hello {
    magic: [u8; 4],
    ird: u32,
    ord: u32,
    flags: u32,
    probe: (u64, u64),
    pz: u64,
    pdata: Vec<u8>,
    /// The regions offered (id, writable), if the sender offered its table.
    regions: Option<Vec<(u64, bool)>>,
    fds: Vec<OwnedFd>,
}

/// What a side offers its peer in the handshake so that it can map its library memory: a
/// read-only descriptor of its published table, and the files of up to `OFFER_MAX` regions
/// its table grants the endpoint's PZ now (id, writable, descriptor; writable only with
/// REMOTE_WRITE), so that transfers to memory registered before connecting are copies from
/// the first on.
struct MapOffer {
    table: OwnedFd,
    regions: Vec<(u64, bool, OwnedFd)>,
}

/// Most regions offered in a handshake (later ones are asked for on first use).
const OFFER_MAX: usize = 16;

/// This process's probe word: a value a peer must read back at its address by cross-memory
/// attach before it copies anything from us that way.
fn probe_word() -> (u64, u64) {
    static WORD: AtomicU64 = AtomicU64::new(0);
    if WORD.load(Ordering::Relaxed) == 0 {
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u64;
        let v = (mono_ns() ^ pid.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let _ = WORD.compare_exchange(0, v, Ordering::Relaxed, Ordering::Relaxed);
    }
    (WORD.as_ptr() as usize as u64, WORD.load(Ordering::Relaxed))
}

/// Whether we can copy from process `pid` by cross-memory attach: its probe word read back.
/// Denied (another uid, a non-dumpable process, a seccomp filter) is false, never an error:
/// the connection copies through its rings, and says so once per process on stderr.
fn probe_peer(pid: i32, probe: (u64, u64)) -> bool {
    let r = match crate::mem::region::peek_word(pid, probe.0) {
        Ok(v) if v == probe.1 => return true,
        Ok(_) => "it read back something else".to_string(),
        Err(e) => e.to_string(),
    };
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "dapl-rs shm: cross-memory attach to process {pid} is not possible ({r}); \
             large messages from it are copied through the shared-memory rings"
        );
    });
    false
}

/// Cross-memory attach as this process finds it now: whether a peer could copy from it.
fn cross_memory_attach() -> CrossMemoryAttach {
    use rustix::process::{dumpable_behavior, DumpableBehavior};
    if dumpable_behavior().is_ok_and(|d| d == DumpableBehavior::NotDumpable) {
        return CrossMemoryAttach::Denied(
            "this process is not dumpable (prctl PR_SET_DUMPABLE 0): peers cannot attach to it",
        );
    }
    let me = rustix::process::getpid().as_raw_nonzero().get();
    match crate::mem::region::peek_word(me, probe_word().0) {
        Ok(_) => CrossMemoryAttach::Available,
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            CrossMemoryAttach::Denied("this kernel has no cross-memory attach")
        }
        Err(_) => CrossMemoryAttach::Denied(
            "process_vm_readv fails here (a seccomp filter or security module?)",
        ),
    }
}

/// The pid of the process at the other end of `sock`, as the kernel saw it.
fn peer_pid(sock: &OwnedFd) -> i32 {
    rustix::net::sockopt::get_socket_peercred(sock).map_or(0, |c| c.pid.as_raw_nonzero().get())
}

#[allow(clippy::too_many_arguments)]
fn send_hello(
    sock: &OwnedFd,
    magic: &[u8; 4],
    ird: usize,
    ord: usize,
    flags: u32,
    pz: u64,
    pdata: &[u8],
    fds: &[&OwnedFd],
    offer: Option<&MapOffer>,
) -> bool {
    let mut m = Vec::with_capacity(HS_HDR + pdata.len());
    m.extend_from_slice(magic);
    m.extend_from_slice(&(ird as u32).to_le_bytes());
    m.extend_from_slice(&(ord as u32).to_le_bytes());
    m.extend_from_slice(
        &rustix::process::getpid()
            .as_raw_nonzero()
            .get()
            .to_le_bytes(),
    );
    m.extend_from_slice(&(pdata.len() as u32).to_le_bytes());
    m.extend_from_slice(&flags.to_le_bytes());
    let (addr, value) = probe_word();
    m.extend_from_slice(&addr.to_le_bytes());
    m.extend_from_slice(&value.to_le_bytes());
    m.extend_from_slice(&pz.to_le_bytes());
    m.extend_from_slice(pdata);
    let mut borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    if let Some(o) = offer {
        m.extend_from_slice(&(o.regions.len() as u32).to_le_bytes());
        borrowed.push(o.table.as_fd());
        for (id, writable, fd) in &o.regions {
            m.extend_from_slice(&id.to_le_bytes());
            m.extend_from_slice(&u32::from(*writable).to_le_bytes());
            m.extend_from_slice(&0u32.to_le_bytes());
            borrowed.push(fd.as_fd());
        }
    }
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(3 + OFFER_MAX))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !borrowed.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
        return false;
    }
    rustix::net::sendmsg(sock, &[IoSlice::new(&m)], &mut control, SendFlags::NOSIGNAL)
        .is_ok_and(|n| n == m.len())
}

/// One non-blocking `recvmsg` on the rendezvous socket into `buf`, with the descriptors it
/// carried (`space`: room for their control message; close-on-exec).
fn recv_with_fds(
    sock: &OwnedFd,
    buf: &mut [u8],
    space: &mut [u8],
) -> (rustix::io::Result<rustix::net::RecvMsgReturn>, Vec<OwnedFd>) {
    let mut control = RecvAncillaryBuffer::new(space);
    let r = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    );
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = msg {
            fds.extend(it);
        }
    }
    (r, fds)
}

/// Reads one handshake message. `Ok(None)`: nothing yet; `Err`: the peer hung up or sent
/// something else.
fn recv_hello(sock: &OwnedFd) -> Result<Option<Hello>, ()> {
    let mut buf = [0u8; HS_HDR + MAX_PRIVATE_DATA + 4 + 16 * OFFER_MAX + 1];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(3 + OFFER_MAX))];
    let (r, fds) = recv_with_fds(sock, &mut buf, &mut space);
    let n = match r {
        Ok(r) if r.flags.contains(RecvFlags::TRUNC) => return Err(()),
        Ok(r) => r.bytes,
        Err(Errno::AGAIN) => return Ok(None),
        Err(Errno::INTR) => return Ok(None),
        Err(_) => return Err(()),
    };
    if n < HS_HDR {
        return Err(()); // 0: hung up
    }
    let word = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
    let len = word(16) as usize;
    if len > MAX_PRIVATE_DATA || HS_HDR + len > n {
        return Err(());
    }
    let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
    let end = HS_HDR + len;
    let regions = if end == n {
        None
    } else {
        let k = if n >= end + 4 {
            word(end) as usize
        } else {
            OFFER_MAX + 1
        };
        if k > OFFER_MAX || n != end + 4 + 16 * k {
            return Err(());
        }
        let at = |j: usize| end + 4 + 16 * j;
        Some(
            (0..k)
                .map(|j| (u64_at(at(j)), word(at(j) + 8) & 1 != 0))
                .collect(),
        )
    };
    Ok(Some(Hello {
        magic: buf[..4].try_into().expect("4 bytes"),
        ird: word(4),
        ord: word(8),
        flags: word(20),
        probe: (u64_at(24), u64_at(32)),
        pz: u64_at(40),
        pdata: buf[HS_HDR..end].to_vec(),
        regions,
        fds,
    }))
}

/// A read-only descriptor of the file `fd` names (reopened through /proc): a mapping of it
/// with PROT_WRITE fails (EACCES), in whatever process it is sent to.
fn reopen_read_only(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    Ok(rustix::fs::open(
        format!("/proc/self/fd/{}", fd.as_raw_fd()),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// The file of our region behind `stag` that a peer endpoint may have (`grant_map`'s rule):
/// None unless our memory table says the entry is region `region`'s, in `qp`'s PZ, with a
/// remote right; writable only if `write` and it grants REMOTE_WRITE.
fn region_file(qp: &Qp, stag: u32, write: bool, region: u64) -> Option<(OwnedFd, bool)> {
    let (mem, writable) = qp.memtable().map_grant(stag, qp.pz_id(), write)?;
    let (id, fd) = mem.shared_file()?;
    if id != region {
        return None;
    }
    match writable {
        true => rustix::io::dup(fd).ok().map(|f| (f, true)),
        false => reopen_read_only(fd).ok().map(|f| (f, false)),
    }
}

/// What we offer a peer of `qp` in the handshake (`MapOffer`); None if our IA does not map
/// library memory.
fn offer_for_peer(qp: &Qp) -> Option<MapOffer> {
    let p = qp.memtable().published()?;
    let table = reopen_read_only(p.fd()).ok()?;
    let mut regions: Vec<(u64, bool, OwnedFd)> = Vec::new();
    for e in p.entries().filter(|e| e.pz == qp.pz_id()) {
        if regions.len() >= OFFER_MAX {
            break;
        }
        if regions.iter().any(|r| r.0 == e.region) {
            continue;
        }
        let write = e.rights.contains(MemPriv::REMOTE_WRITE);
        if let Some((fd, writable)) = region_file(qp, e.stag, write, e.region) {
            regions.push((e.region, writable, fd));
        }
    }
    Some(MapOffer { table, regions })
}

/// What a peer offered (its Hello's `regions` and the descriptors after the ring's and the
/// doorbell's), mapped, if our IA maps library memory too: its table (read-only, sealed
/// against shrinking and long enough: a shrunk file would fault) and the regions offered.
fn map_peer_offer(
    qp: &Qp,
    pz: u64,
    regions: Option<&[(u64, bool)]>,
    fds: impl Iterator<Item = OwnedFd>,
) -> PeerMem {
    let mut fds = fds;
    let mut peer = PeerMem {
        table: None,
        pz,
        maps: Vec::new(),
    };
    let (Some(regions), Some(_)) = (regions, qp.memtable().published()) else {
        return peer;
    };
    peer.table = fds
        .next()
        .and_then(|fd| map_sealed(&fd, false))
        .filter(|m| m.len() >= published::TABLE_LEN);
    if peer.table.is_some() {
        for (&(id, writable), fd) in regions.iter().zip(fds) {
            #[cfg(feature = "testing")]
            crate::link::shm::received::keep(&fd, writable);
            if let Some(m) = map_sealed(&fd, writable) {
                peer.maps.push((id, writable, m));
            }
        }
    }
    peer
}

/// Maps all of the sealed (against shrinking) file `fd` shared, writable or read-only.
fn map_sealed(fd: &OwnedFd, writable: bool) -> Option<Arc<RegionMemory>> {
    let seals = rustix::fs::fcntl_get_seals(fd).ok()?;
    let size = usize::try_from(rustix::fs::fstat(fd).ok()?.st_size).ok()?;
    if !seals.contains(SealFlags::SHRINK) || size == 0 {
        return None;
    }
    let m = if writable {
        RegionMemory::map_shared(fd.as_fd(), size)
    } else {
        RegionMemory::map_shared_read_only(fd.as_fd(), size)
    };
    // A peer's memory or table as this link maps it: only the link holds the mapping, and
    // nothing revokes it (a region the peer withdraws is refused by its table's generation).
    m.ok().map(|m| Arc::new(m.never_revoked()))
}

/// One message on an established connection's socket (`Ctl::Msg`: its bytes and descriptors).
enum Ctl {
    Nothing,
    Msg(Vec<u8>, Vec<OwnedFd>),
    HangUp,
}

fn recv_ctl(sock: &OwnedFd) -> Ctl {
    let mut buf = [0u8; 64];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
    let (r, fds) = recv_with_fds(sock, &mut buf, &mut space);
    match r {
        Ok(r) if r.bytes > 0 => Ctl::Msg(buf[..r.bytes.min(buf.len())].to_vec(), fds),
        Err(Errno::AGAIN) | Err(Errno::INTR) => Ctl::Nothing,
        _ => Ctl::HangUp,
    }
}

fn map_msg(magic: &[u8; 4], stag: u32, flags: u32, region: u64) -> [u8; MAP_MSG] {
    let mut m = [0u8; MAP_MSG];
    m[..4].copy_from_slice(magic);
    m[4..8].copy_from_slice(&stag.to_le_bytes());
    m[8..12].copy_from_slice(&flags.to_le_bytes());
    m[12..20].copy_from_slice(&region.to_le_bytes());
    m
}

/// Sends `m` (and `fd`) on an established connection's socket, without waiting.
fn send_ctl(sock: &OwnedFd, m: &[u8], fd: Option<&OwnedFd>) -> bool {
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let one = fd.map(|f| [f.as_fd()]);
    if let Some(one) = &one {
        if !control.push(SendAncillaryMessage::ScmRights(one)) {
            return false;
        }
    }
    rustix::net::sendmsg(
        sock,
        &[IoSlice::new(m)],
        &mut control,
        SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    )
    .is_ok_and(|n| n == m.len())
}

// ------------------------------------------------------------------------------------------------
// The link and its progress thread

/// What a token in the epoll set stands for.
#[derive(Clone)]
enum Entry {
    /// A listening socket.
    Listener(Arc<ListenSock>),
    /// An accepted socket whose Request has not arrived yet.
    Incoming(Arc<Incoming>),
    /// Our Request went out; the answer has not arrived yet.
    Dial(Arc<Dial>),
    /// An established connection's socket (hang-up: the peer is gone).
    Sock(Arc<ShmConn>),
    /// An established connection's doorbell.
    Bell(Arc<ShmConn>),
}

struct ListenSock {
    sock: OwnedFd,
    sp: Weak<dyn PortListener>,
}

struct Incoming {
    sock: Mutex<Option<OwnedFd>>,
    sp: Weak<dyn PortListener>,
    token: u64,
}

struct Dial {
    qp: Weak<Qp>,
    attempt: u64,
    remote: SocketAddrUnix,
    remote_ip: IpAddr,
    pdata: Vec<u8>,
    ring_fd: OwnedFd,
    ring: Arc<RegionMemory>,
    bell: OwnedFd,
    /// Our published table and regions for the acceptor (None: our IA does not map).
    offer: Option<MapOffer>,
    refused_until: Instant,
    sock: Mutex<Option<OwnedFd>>,
    token: u64,
    shared: Weak<Shared>,
}

/// The attempt's link connection until it is established (`Qp::set_pending_conn`): when the
/// attempt ends first (timed out, disconnected), the engine closes it, and the request's
/// socket goes, so that a late accept fails (ACCEPT_COMPLETION_ERROR at the acceptor).
impl Connection for Dial {
    fn transmit(&self, _msg: OutMsg<'_>) -> TxOutcome {
        TxOutcome::Broken
    }

    fn wake_peer(&self) {}

    fn close(&self, _broken: bool) {
        if let Some(sock) = lock(&self.sock).take() {
            if let Some(s) = self.shared.upgrade() {
                s.remove(&sock, self.token);
            }
        }
    }

    fn remote_addr(&self) -> IaAddress {
        SocketAddr::new(self.remote_ip, 0)
    }

    fn id(&self) -> u64 {
        self.token
    }
}

pub(crate) struct Shared {
    ip: Ipv4Addr,
    epoll: OwnedFd,
    /// Wakes the progress thread (to stop).
    kick: OwnedFd,
    entries: Mutex<HashMap<u64, Entry>>,
    /// Qualifier -> the listener's token.
    listeners: Mutex<HashMap<ConnQual, u64>>,
    /// Established connections, for polls in consumers' threads.
    conns: Mutex<Vec<Arc<ShmConn>>>,
    /// Until when (`mono_ns`) a consumer of this IA polls the rings (0: none does).
    hot_until: AtomicU64,
    /// 1 while the progress thread sleeps with no window open (its idle timeout, not a window's
    /// end): a consumer that opens the window then kicks it (`wake::begin_idle`).
    idle_sleep: AtomicU64,
    stop: AtomicBool,
    next_token: AtomicU64,
}

/// The shm link of one IA.
pub(crate) struct ShmLink {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Connection ids: unique in the process.
static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

const KICK: u64 = 0;

impl ShmLink {
    /// Starts the link for the IA address `ip` (its progress thread).
    pub(crate) fn start(ip: Ipv4Addr) -> std::io::Result<Arc<ShmLink>> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let kick = new_bell()?;
        epoll::add(&epoll, &kick, EventData::new_u64(KICK), EventFlags::IN)?;
        let shared = Arc::new(Shared {
            ip,
            epoll,
            kick,
            entries: Mutex::new(HashMap::new()),
            listeners: Mutex::new(HashMap::new()),
            conns: Mutex::new(Vec::new()),
            hot_until: AtomicU64::new(0),
            idle_sleep: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            next_token: AtomicU64::new(1),
        });
        let s2 = shared.clone();
        // Opened here, not in the thread: a process out of descriptors by then has none.
        let spare = SpareFd::new();
        let thread = std::thread::Builder::new()
            .name("dapl-shm".into())
            .spawn(move || progress(s2, spare))?;
        Ok(Arc::new(ShmLink {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }
}

impl Shared {
    fn token(&self) -> u64 {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    fn add(&self, fd: &OwnedFd, token: u64, entry: Entry) -> bool {
        lock(&self.entries).insert(token, entry);
        if epoll::add(
            &self.epoll,
            fd,
            EventData::new_u64(token),
            EventFlags::IN | EventFlags::RDHUP,
        )
        .is_err()
        {
            lock(&self.entries).remove(&token);
            return false;
        }
        true
    }

    fn remove(&self, fd: &OwnedFd, token: u64) {
        let _ = epoll::delete(&self.epoll, fd);
        lock(&self.entries).remove(&token);
    }

    /// Sends our Request on `dial`'s socket (connecting it first); a refusal within the retry
    /// window tries again later.
    fn dial(self: &Arc<Self>, dial: Arc<Dial>) {
        let Some(qp) = dial.qp.upgrade() else {
            return;
        };
        if !qp.attempt_pending(dial.attempt, crate::types::EpState::ActiveConnectionPending) {
            return;
        }
        let refused = |s: &Arc<Shared>| {
            let now = Instant::now();
            if now + REFUSED_RETRY_GAP < dial.refused_until {
                let (s, d) = (Arc::downgrade(s), dial.clone());
                crate::engine::timer::at(now + REFUSED_RETRY_GAP, move || {
                    if let Some(s) = s.upgrade() {
                        s.dial(d);
                    }
                });
            } else {
                qp.attempt_failed(
                    dial.attempt,
                    ConnectionEventKind::NonPeerRejected,
                    Vec::new(),
                );
            }
        };
        let Ok(sock) = seqpacket() else {
            return refused(self);
        };
        match rustix::net::connect_unix(&sock, &dial.remote) {
            Ok(()) => {}
            Err(Errno::CONNREFUSED | Errno::NOENT | Errno::AGAIN) => return refused(self),
            Err(_) => {
                return qp.attempt_failed(
                    dial.attempt,
                    ConnectionEventKind::NonPeerRejected,
                    Vec::new(),
                )
            }
        }
        let (ird, ord) = qp.read_depths();
        if !send_hello(
            &sock,
            MAGIC_REQUEST,
            ird,
            ord,
            0,
            qp.pz_id(),
            &dial.pdata,
            &[&dial.ring_fd, &dial.bell],
            dial.offer.as_ref(),
        ) {
            return refused(self);
        }
        let ok = self.add(&sock, dial.token, Entry::Dial(dial.clone()));
        *lock(&dial.sock) = Some(sock);
        if !ok {
            qp.attempt_failed(
                dial.attempt,
                ConnectionEventKind::NonPeerRejected,
                Vec::new(),
            );
            return;
        }
        let pending: Arc<dyn Connection> = dial.clone();
        qp.set_pending_conn(dial.attempt, pending);
    }

    /// The handshake message waiting on the socket in `slot` (registered as `token`): None
    /// while there is none yet; else the socket, taken out of the slot and the epoll set, and
    /// the message (None if the peer hung up or sent something else).
    fn take_hello(
        &self,
        slot: &Mutex<Option<OwnedFd>>,
        token: u64,
    ) -> Option<(OwnedFd, Option<Hello>)> {
        let mut slot = lock(slot);
        let hello = match recv_hello(slot.as_ref()?) {
            Ok(None) => return None,
            Ok(Some(h)) => Some(h),
            Err(()) => None,
        };
        let sock = slot.take()?;
        drop(slot);
        self.remove(&sock, token);
        Some((sock, hello))
    }

    /// The answer to a Request of ours arrived (or the socket hung up).
    fn on_dial(self: &Arc<Self>, dial: &Arc<Dial>) {
        let Some((sock, hello)) = self.take_hello(&dial.sock, dial.token) else {
            return;
        };
        let Some(qp) = dial.qp.upgrade() else {
            return;
        };
        let Some(mut h) = hello else {
            qp.attempt_failed(
                dial.attempt,
                ConnectionEventKind::NonPeerRejected,
                Vec::new(),
            );
            return;
        };
        if &h.magic == MAGIC_REJECT {
            qp.attempt_failed(dial.attempt, ConnectionEventKind::PeerRejected, h.pdata);
            return;
        }
        let want_fds = 2 + h.regions.as_ref().map_or(0, |r| 1 + r.len());
        let peer = (&h.magic == MAGIC_ACCEPT && h.fds.len() == want_fds)
            .then(|| {
                let mut fds = std::mem::take(&mut h.fds).into_iter();
                let ring = map_peer_ring(&fds.next()?).ok()?;
                let bell = fds.next()?;
                let mem = map_peer_offer(&qp, h.pz, h.regions.as_deref(), fds);
                Some((ring, bell, mem))
            })
            .flatten();
        let Some((peer_ring, peer_bell, peer_mem)) = peer else {
            qp.attempt_failed(
                dial.attempt,
                ConnectionEventKind::NonPeerRejected,
                Vec::new(),
            );
            return;
        };
        let (my_in, my_out) = qp.read_depths();
        let ord = my_out.min(h.ird as usize);
        let ird = (h.ord as usize).min(my_in);
        let remote = SocketAddr::new(dial.remote_ip, 0);
        let Ok(bell) = rustix::io::dup(&dial.bell) else {
            return;
        };
        // Cross-memory attach, probed for real in each direction: the acceptor probed us (its
        // flag), we probe it now and tell it in our first record.
        let pid = peer_pid(&sock);
        let pulls = Pulls {
            pid,
            we_pull: probe_peer(pid, h.probe),
            peer_pulls: h.flags & HS_PULLS != 0,
        };
        let conn = ShmConn::new(
            self,
            &qp,
            remote,
            sock,
            bell,
            peer_bell,
            dial.ring.clone(),
            peer_ring,
            pulls,
            peer_mem,
        );
        conn.send_caps();
        // Established before the ring is watched: a record handled earlier would find the
        // endpoint not connected.
        let as_conn: Arc<dyn Connection> = conn.clone();
        if !qp.established(dial.attempt, as_conn, ird, ord, remote) {
            // Stale (timed out, disconnected while the Accept was on its way): the acceptor
            // sees the connection break.
            conn.close(true);
            return;
        }
        if !self.register(&conn) {
            qp.end_connection_of(conn.id, ConnectionEventKind::Broken, true);
            return;
        }
        qp.report_established(h.pdata);
        // Records the acceptor sent before we got here wait in the ring.
        conn.on_bell();
    }

    /// Puts an established connection's socket and doorbell in the epoll set.
    fn register(self: &Arc<Self>, conn: &Arc<ShmConn>) -> bool {
        let ok = self.add(&conn.sock, conn.sock_token, Entry::Sock(conn.clone()))
            && self.add(&conn.bell, conn.bell_token, Entry::Bell(conn.clone()));
        if ok {
            lock(&self.conns).push(conn.clone());
        }
        ok
    }

    /// The progress thread polls every ring for `SPIN_NS` after the last record it found (the
    /// rings marked polled meanwhile, so producers skip the doorbell), or until a consumer
    /// polls; then producers ring again. Between empty looks it yields as [`crate::pace`]
    /// says: after each while its yields let other threads run, rarely while it has its CPU.
    fn spin(&self) {
        let conns: Vec<Arc<ShmConn>> = lock(&self.conns).clone();
        let mut until = mono_ns() + SPIN_NS;
        let mut spin = crate::pace::Spin::new(std::time::Instant::now());
        loop {
            let mut any = false;
            for c in &conns {
                ring::mark_polled(&c.inbound);
                if c.has_input() {
                    any |= c.poll_rx();
                }
            }
            let now = mono_ns();
            if any {
                until = now + SPIN_NS;
            }
            if now >= until || self.hot_until.load(Ordering::Relaxed) != 0 {
                break;
            }
            if !any {
                spin.after_empty_poll();
            }
        }
        if !wake::still_open(&self.hot_until) {
            for c in &conns {
                if ring::stop_polling(&c.inbound) {
                    c.on_bell();
                }
            }
        }
    }

    /// No consumer polls any more: producers ring again, and records that came without a
    /// doorbell meanwhile are handled.
    fn end_polling(&self, here: bool) {
        let conns: Vec<Arc<ShmConn>> = lock(&self.conns).clone();
        for c in conns {
            // Lent messages that polls were returning (unmarked) are settled with a mark by
            // the progress thread: returned if consumed, else the peer rings when they are.
            let lending = c.lending.load(Ordering::SeqCst);
            if ring::stop_polling(&c.inbound) || lending {
                if here {
                    c.on_bell();
                } else {
                    ring_bell(&c.bell);
                }
            }
        }
    }

    fn forget(&self, conn: &ShmConn) {
        self.remove(&conn.sock, conn.sock_token);
        self.remove(&conn.bell, conn.bell_token);
        lock(&self.conns).retain(|c| c.id != conn.id);
    }

    fn on_listener(self: &Arc<Self>, l: &Arc<ListenSock>, spare: &mut SpareFd) {
        let me = rustix::process::getuid();
        let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
        loop {
            let sock = match rustix::net::accept_with(&l.sock, flags) {
                Ok(s) => s,
                Err(Errno::INTR) => continue,
                Err(Errno::MFILE | Errno::NFILE) => {
                    // Out of descriptors: refuse what waits (the requester sees its socket
                    // close and fails its connect now), rather than spin on the listener.
                    spare.shed(|| while rustix::net::accept_with(&l.sock, flags).is_ok() {});
                    return;
                }
                Err(_) => return,
            };
            // Only our own uid: an abstract socket has no permissions of its own.
            if rustix::net::sockopt::get_socket_peercred(&sock).map(|c| c.uid) != Ok(me) {
                continue;
            }
            let token = self.token();
            let inc = Arc::new(Incoming {
                sock: Mutex::new(None),
                sp: l.sp.clone(),
                token,
            });
            if self.add(&sock, token, Entry::Incoming(inc.clone())) {
                *lock(&inc.sock) = Some(sock);
                self.on_incoming(&inc);
            }
        }
    }

    fn on_incoming(self: &Arc<Self>, inc: &Arc<Incoming>) {
        let Some((sock, hello)) = self.take_hello(&inc.sock, inc.token) else {
            return;
        };
        let Some(mut h) = hello.filter(|h| {
            &h.magic == MAGIC_REQUEST
                && h.fds.len() == 2 + h.regions.as_ref().map_or(0, |r| 1 + r.len())
        }) else {
            return;
        };
        let Some(sp) = inc.sp.upgrade().filter(|s| s.is_open()) else {
            let _ = send_hello(&sock, MAGIC_REJECT, 0, 0, 0, 0, &[], &[], None);
            return;
        };
        let mut fds = std::mem::take(&mut h.fds).into_iter();
        let peer_ring_fd = fds.next().expect("two descriptors");
        let peer_bell = fds.next().expect("two descriptors");
        let peer_offer = h.regions.take().map(|r| (r, fds.collect()));
        let peer_ucred = rustix::net::sockopt::get_socket_peercred(&sock).ok();
        let info = CrArrivalInfo {
            remote_addr: SocketAddr::new(IpAddr::V4(self.ip), 0),
            remote_port_qual: peer_ucred.map_or(0, |c| c.pid.as_raw_nonzero().get() as u64),
            private_data: h.pdata,
        };
        sp.request_arrived(Box::new(ShmRequest {
            shared: Arc::downgrade(self),
            sock: Mutex::new(Some(sock)),
            peer_ring_fd,
            peer_bell: Mutex::new(Some(peer_bell)),
            peer_offer: Mutex::new(peer_offer),
            peer_pz: h.pz,
            ird: h.ird as usize,
            ord: h.ord as usize,
            probe: h.probe,
            info,
        }));
    }
}

fn progress(shared: Arc<Shared>, mut spare: SpareFd) {
    let mut events = epoll::EventVec::with_capacity(64);
    let mut rang = false;
    while !shared.stop.load(Ordering::SeqCst) {
        // While a consumer polls, look again when its window runs out: it may have stopped
        // without saying so, with records that no doorbell announced.
        let hot = shared.hot_until.load(Ordering::Relaxed);
        let now = mono_ns();
        if wake::expire_window(&shared.hot_until, hot, now) {
            shared.end_polling(true);
        }
        let timeout = if hot > now {
            ((hot - now).div_ceil(1_000_000) as i32).clamp(1, 200)
        } else {
            // The idle sleep, unless a consumer opened a window meanwhile: it kicks the thread
            // if it sees the mark (`wake::begin_idle`), so a window opened during the sleep is
            // looked at when it ends, not up to 200 ms later.
            if !wake::begin_idle(&shared.idle_sleep, &shared.hot_until) {
                continue;
            }
            200
        };
        let woke = epoll::wait(&shared.epoll, &mut events, timeout);
        shared.idle_sleep.store(0, Ordering::SeqCst);
        if woke.is_err() {
            continue;
        }
        for ev in &events {
            let token = ev.data.u64();
            if token == KICK {
                reset_bell(&shared.kick);
                continue;
            }
            let entry = lock(&shared.entries).get(&token).cloned();
            match entry {
                Some(Entry::Listener(l)) => shared.on_listener(&l, &mut spare),
                Some(Entry::Incoming(i)) => shared.on_incoming(&i),
                Some(Entry::Dial(d)) => shared.on_dial(&d),
                Some(Entry::Sock(c)) => c.on_sock(),
                Some(Entry::Bell(c)) => {
                    c.on_bell();
                    rang = true;
                }
                None => {}
            }
        }
        // A doorbell woke the thread and no consumer polls: the next record (a Read Request
        // after the last, the answer to what was just sent) often follows within a round
        // trip, so the thread polls the rings itself for a moment before it sleeps again.
        if std::mem::take(&mut rang) && shared.hot_until.load(Ordering::Relaxed) == 0 {
            shared.spin();
        }
    }
}

impl Link for ShmLink {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn caps(&self) -> LinkCaps {
        LinkCaps {
            completes_at_peer: false,
            rnr_waits_forever: false,
            max_iov: MAX_IOV,
            max_private_data: MAX_PRIVATE_DATA,
            cross_memory_attach: cross_memory_attach(),
            dead_peer_bound: None,
        }
    }

    fn listen(
        &self,
        addr: IaAddress,
        qual: ConnQual,
        sp: Weak<dyn PortListener>,
    ) -> Result<(), ListenError> {
        let s = &self.shared;
        let mut by_qual = lock(&s.listeners);
        if by_qual.contains_key(&qual) {
            return Err(ListenError::InUse);
        }
        let name = rendezvous(addr.ip(), qual).map_err(ListenError::Failed)?;
        let sock = seqpacket().map_err(ListenError::Failed)?;
        rustix::net::bind_unix(&sock, &name).map_err(|e| match e {
            rustix::io::Errno::ADDRINUSE => ListenError::InUse,
            e => ListenError::Failed(e.into()),
        })?;
        rustix::net::listen(&sock, 1024).map_err(|e| ListenError::Failed(e.into()))?;
        let token = s.token();
        let l = Arc::new(ListenSock { sock, sp });
        if !s.add(&l.sock, token, Entry::Listener(l.clone())) {
            return Err(ListenError::Failed(std::io::Error::other(
                "cannot add the listening socket to the link's epoll set",
            )));
        }
        by_qual.insert(qual, token);
        Ok(())
    }

    fn unlisten(&self, _addr: IaAddress, qual: ConnQual) {
        let s = &self.shared;
        let Some(token) = lock(&s.listeners).remove(&qual) else {
            return;
        };
        let entry = lock(&s.entries).remove(&token);
        if let Some(Entry::Listener(l)) = entry {
            let _ = epoll::delete(&s.epoll, &l.sock);
        }
    }

    fn connect(
        &self,
        qp: &Arc<Qp>,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
    ) -> std::io::Result<()> {
        let attempt = qp.current_attempt();
        let (name, (ring_fd, ring), bell) =
            match (rendezvous(remote.ip(), qual), new_ring(), new_bell()) {
                (Ok(n), Ok(r), Ok(b)) => (n, r, b),
                (n, r, b) => {
                    let e = [n.err(), r.err(), b.err()].into_iter().flatten().next();
                    if let Some(e) = e.filter(crate::engine::port::is_resource_error) {
                        return Err(e);
                    }
                    qp.attempt_failed(attempt, ConnectionEventKind::NonPeerRejected, Vec::new());
                    return Ok(());
                }
            };
        let dial = Arc::new(Dial {
            qp: Arc::downgrade(qp),
            attempt,
            remote: name,
            remote_ip: remote.ip(),
            pdata: private_data.to_vec(),
            ring_fd,
            ring,
            bell,
            offer: offer_for_peer(qp),
            refused_until: Instant::now() + REFUSED_RETRY_FOR,
            sock: Mutex::new(None),
            token: self.shared.token(),
            shared: Arc::downgrade(&self.shared),
        });
        self.shared.dial(dial);
        Ok(())
    }

    fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        ring_bell(&self.shared.kick);
        let t = lock(&self.thread).take();
        if let Some(t) = t {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        lock(&self.shared.entries).clear();
        lock(&self.shared.listeners).clear();
        lock(&self.shared.conns).clear();
    }
}

impl Progress for ShmLink {
    fn flush(&self) {
        note_look();
    }

    /// Reads the rings of every connection here, as the progress thread would, and marks
    /// them polled (`POLL_WINDOW_NS`): producers skip the doorbell meanwhile. (Any poll: a
    /// consumer waiting for a read's or a send's completion reads the rings as well.) Once
    /// the consumer has all it asked for (`port::poll_satisfied`), each ring is left after
    /// the record its handler is at (at least one per ring), the rest to the next look.
    fn poll(&self, _for_inbound: bool) -> bool {
        thread_local! {
            // The connections with input, reused from poll to poll (no allocation per poll).
            static READY: std::cell::RefCell<Vec<Arc<ShmConn>>> =
                const { std::cell::RefCell::new(Vec::new()) };
            static POLLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
        }
        // The windows are written (and the clock read) on every `WINDOW_EVERY`-th poll of the
        // thread, and whenever the IA's window is closed: the clock and the fenced store cost
        // more than the rest of an empty poll, and a window written a few polls ago ends at
        // most those few polls early (the progress thread then looks).
        let n = POLLS.get();
        POLLS.set(n.wrapping_add(1));
        let opens = self.shared.hot_until.load(Ordering::Relaxed) == 0;
        let refresh = n % WINDOW_EVERY == 0 || opens;
        READY.with(|ready| {
            let Ok(mut ready) = ready.try_borrow_mut() else {
                return false; // re-entered from a handler (its poll opened the windows)
            };
            let conns_with_input = |ready: &mut Vec<Arc<ShmConn>>, mark: bool| {
                for c in lock(&self.shared.conns).iter() {
                    if mark {
                        ring::mark_polled(&c.inbound);
                    }
                    if c.has_input() {
                        ready.push(c.clone());
                    }
                }
            };
            if refresh {
                // The IA's window, then every ring's, then the look: if another consumer went
                // idle meanwhile (`idle`), producers would skip the doorbell with nobody left
                // to look, so these rings are stopped here (`wake::poll_window`).
                let until = mono_ns() + POLL_WINDOW_NS;
                wake::poll_window(
                    &self.shared.hot_until,
                    until,
                    || conns_with_input(&mut ready, true),
                    || self.shared.end_polling(false),
                );
                // A window opened while the progress thread sleeps idle: it must wake when
                // the window ends, in case this consumer stops polling without a word (a
                // `wait_fd` user) and a record comes that no doorbell announces.
                if opens && wake::kick_idle(&self.shared.idle_sleep) {
                    ring_bell(&self.shared.kick);
                }
            } else {
                conns_with_input(&mut ready, false);
            }
            let mut any = false;
            for c in ready.drain(..) {
                any |= c.poll_rx();
            }
            any
        })
    }

    /// The consumer goes to sleep: producers ring again (records that came meanwhile are
    /// handed to the progress thread).
    fn idle(&self) {
        if wake::close_window(&self.shared.hot_until) {
            self.shared.end_polling(false);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Connection requests

struct ShmRequest {
    shared: Weak<Shared>,
    sock: Mutex<Option<OwnedFd>>,
    peer_ring_fd: OwnedFd,
    peer_bell: Mutex<Option<OwnedFd>>,
    /// What the requester offered (regions, and the table's and regions' descriptors), if
    /// its IA maps library memory.
    #[allow(clippy::type_complexity)]
    peer_offer: Mutex<Option<(Vec<(u64, bool)>, Vec<OwnedFd>)>>,
    /// The requester endpoint's PZ.
    peer_pz: u64,
    ird: usize,
    ord: usize,
    /// The requester's probe word.
    probe: (u64, u64),
    info: CrArrivalInfo,
}

impl PendingRequest for ShmRequest {
    fn accept(&self, qp: &Arc<Qp>, private_data: &[u8]) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let (Some(sock), Some(peer_bell)) = (lock(&self.sock).take(), lock(&self.peer_bell).take())
        else {
            return false;
        };
        let (Ok(peer_ring), Ok((ring_fd, ring)), Ok(bell)) =
            (map_peer_ring(&self.peer_ring_fd), new_ring(), new_bell())
        else {
            return false;
        };
        let (my_in, my_out) = qp.read_depths();
        let pid = peer_pid(&sock);
        let we_pull = probe_peer(pid, self.probe);
        let offer = offer_for_peer(qp);
        if !send_hello(
            &sock,
            MAGIC_ACCEPT,
            my_in,
            my_out,
            if we_pull { HS_PULLS } else { 0 },
            qp.pz_id(),
            private_data,
            &[&ring_fd, &bell],
            offer.as_ref(),
        ) {
            return false;
        }
        let ord = my_out.min(self.ird);
        let ird = self.ord.min(my_in);
        let remote = self.info.remote_addr;
        // Whether the requester can read us arrives in its first record (`Kind::Caps`).
        let pulls = Pulls {
            pid,
            we_pull,
            peer_pulls: false,
        };
        let peer_mem = match lock(&self.peer_offer).take() {
            Some((regions, fds)) => {
                map_peer_offer(qp, self.peer_pz, Some(&regions), fds.into_iter())
            }
            None => map_peer_offer(qp, self.peer_pz, None, std::iter::empty()),
        };
        let conn = ShmConn::new(
            &shared, qp, remote, sock, bell, peer_bell, ring, peer_ring, pulls, peer_mem,
        );
        // Established at once (the requester may send as soon as it reads the Accept), and
        // before the ring is watched; a requester that gave up meanwhile has closed the socket
        // (the send above failed) or closes the connection when the Accept arrives.
        let as_conn: Arc<dyn Connection> = conn.clone();
        if !qp.established(qp.current_attempt(), as_conn, ird, ord, remote) {
            conn.close(true);
            return false;
        }
        if !shared.register(&conn) {
            qp.end_connection_of(conn.id, ConnectionEventKind::Broken, true);
            return true;
        }
        qp.report_established(Vec::new());
        conn.on_bell();
        true
    }

    fn reject(&self, private_data: &[u8]) {
        if let Some(sock) = lock(&self.sock).take() {
            let _ = send_hello(&sock, MAGIC_REJECT, 0, 0, 0, 0, private_data, &[], None);
        }
    }

    fn info(&self) -> &CrArrivalInfo {
        &self.info
    }
}

// ------------------------------------------------------------------------------------------------
// Connections

/// The pieces of the scatter list `segs` that hold its bytes `at..at + len`.
fn pieces_of(segs: &[Seg], at: u64, len: usize) -> ArrayVec<RecvPiece<'_>, MAX_IOV> {
    seg_span(segs, at, len)
        .map(|(i, off, k)| RecvPiece {
            mem: &segs[i].region,
            offset: segs[i].offset + off,
            len: k,
        })
        .collect()
}

/// Where a message's payload comes from while it is sent: borrowed from the engine's call,
/// owned only by a message that has to wait for room (`Job::into_owned`).
enum Src<'a> {
    Segs(Cow<'a, [Seg]>),
    Bytes(Cow<'a, [u8]>),
}

impl<'a> Src<'a> {
    fn of(p: Payload<'a>) -> Src<'a> {
        match p {
            Payload::Segs(s) => Src::Segs(Cow::Borrowed(s)),
            Payload::Bytes(b) => Src::Bytes(Cow::Borrowed(b)),
        }
    }

    fn into_owned(self) -> Src<'static> {
        match self {
            Src::Segs(s) => Src::Segs(Cow::Owned(s.into_owned())),
            Src::Bytes(b) => Src::Bytes(Cow::Owned(b.into_owned())),
        }
    }

    /// Copies `buf.len()` bytes from byte `from` of the payload into `buf`.
    fn read_into(&self, from: u64, buf: &mut [u8]) -> bool {
        let n = buf.len();
        match self {
            Src::Bytes(b) => {
                buf.copy_from_slice(&b[from as usize..from as usize + n]);
                true
            }
            Src::Segs(segs) => {
                let mut done = 0usize;
                for (i, off, k) in crate::mem::seg_span(segs, from, n) {
                    let s = &segs[i];
                    if !s.region.copy_out(s.offset + off, &mut buf[done..done + k]) {
                        return false;
                    }
                    done += k;
                }
                done == n
            }
        }
    }

    /// Copies `n` bytes from byte `from` of the payload into `dst` at `at`.
    fn copy(&self, from: u64, n: usize, dst: &RegionMemory, at: usize) -> bool {
        match self {
            Src::Bytes(b) => dst.copy_in(at, &b[from as usize..from as usize + n]),
            Src::Segs(segs) => {
                let mut done = 0usize;
                for (i, off, k) in crate::mem::seg_span(segs, from, n) {
                    let s = &segs[i];
                    if !s.region.copy_to(s.offset + off, dst, at + done, k) {
                        return false;
                    }
                    done += k;
                }
                done == n
            }
        }
    }
}

/// A message being written into the peer's ring.
struct Job<'a> {
    /// The header of each segment record (`a` is advanced per segment for the offset).
    hdr: Header,
    src: Src<'a>,
    sent: u64,
    total: u64,
    /// Segments carry `LAST` on the final one (Send, Read Response).
    segmented_last: bool,
    /// After the data, one record of its own (the Immediate Data of a write with immediate).
    trailer: Option<Header>,
    started: bool,
    /// A message sent by descriptor (`PULL`): its source ranges, held against revocation
    /// until the peer has copied them out.
    lent: Option<Vec<Lease>>,
}

impl<'a> Job<'a> {
    /// A message of `payload` under `hdr`; `segmented_last`: its final record carries LAST.
    fn new(hdr: Header, payload: Payload<'a>, segmented_last: bool) -> Job<'a> {
        Job {
            hdr,
            total: payload.len(),
            src: Src::of(payload),
            sent: 0,
            segmented_last,
            trailer: None,
            started: false,
            lent: None,
        }
    }

    /// Turns the message into a descriptor of its source ranges (flag `PULL`), each leased
    /// until the peer has copied it out. Err if a source region was revoked.
    fn lend(self) -> Result<Job<'static>, ()> {
        let Src::Segs(segs) = &self.src else {
            return Ok(self.into_owned());
        };
        let leases = segs
            .iter()
            .map(|s| s.region.lease(s.offset, s.len))
            .collect::<Option<Vec<Lease>>>()
            .ok_or(())?;
        let mut desc = Vec::with_capacity(16 * leases.len());
        for l in &leases {
            desc.extend_from_slice(&l.addr().to_le_bytes());
            desc.extend_from_slice(&(l.len() as u64).to_le_bytes());
        }
        let mut hdr = self.hdr;
        hdr.flags |= PULL;
        Ok(Job {
            hdr,
            total: desc.len() as u64,
            src: Src::Bytes(Cow::Owned(desc)),
            sent: 0,
            segmented_last: self.segmented_last,
            trailer: self.trailer,
            started: false,
            lent: Some(leases),
        })
    }

    fn into_owned(self) -> Job<'static> {
        Job {
            src: self.src.into_owned(),
            ..self
        }
    }

    /// Writes as much of the message as the ring takes. Ok(true) when all of it is in;
    /// Err: the peer's ring is garbage or the source was revoked.
    fn push(&mut self, ring: &mut Producer) -> Result<bool, ()> {
        let max = ring.max_payload() as u64;
        while !self.started || self.sent < self.total {
            let n = (self.total - self.sent).min(max) as usize;
            let mut hdr = self.hdr;
            hdr.a = self.hdr.a.wrapping_add(self.sent);
            if self.segmented_last && self.sent + n as u64 == self.total {
                hdr.flags |= LAST;
            }
            let (src, from) = (&self.src, self.sent);
            let mut revoked = false;
            let pushed = if ring::HDR + n <= ring::SMALL_RECORD {
                ring.push_small(hdr, n, |buf| {
                    let ok = src.read_into(from, buf);
                    revoked = !ok;
                    ok
                })
            } else {
                ring.push(hdr, n, |m, at| {
                    let ok = src.copy(from, n, m, at);
                    revoked = !ok;
                    ok
                })
            }
            .map_err(|_| ())?;
            if revoked {
                return Err(());
            }
            if !pushed {
                return Ok(false);
            }
            self.started = true;
            self.sent += n as u64;
        }
        if let Some(t) = self.trailer {
            if !ring.push(t, 0, |_, _| true).map_err(|_| ())? {
                return Ok(false);
            }
            self.trailer = None;
        }
        Ok(true)
    }
}

struct Tx {
    ring: Producer,
    /// Records pushed but not published until the engine queued their completion.
    held: bool,
    job: Option<Job<'static>>,
    /// Sources of abandoned descriptors (the connection ended) that the peer may still be
    /// copying out: released once its head passes the position, it hangs up, or after
    /// `ORPHAN_BOUND`.
    orphans: Vec<(u64, Vec<Lease>)>,
    /// Messages sent by descriptor that the peer has not consumed yet, oldest first.
    lent: VecDeque<LentMsg>,
    /// Numbers them (`watch_lent`).
    lent_seq: u64,
    /// A Close to send once the job is out: Some(broken flags).
    close: Option<u8>,
    /// The Close waits for the thread handling our ring to let go of it (`close`).
    close_deferred: bool,
    closed: bool,
    /// The ring position after the records of the last DTO of ours written into it (Send,
    /// Write, Immediate Data, Read Request): a direct copy waits until the peer has
    /// consumed past it (`ShmConn::quiet`). Caps, Read Responses and Close do not count.
    dto_until: u64,
}

/// A message sent by descriptor (`TxOutcome::Lent`).
struct LentMsg {
    seq: u64,
    /// The ring position after its records: consumed past it, the peer has copied it out.
    until: u64,
    /// Its source ranges, held against revocation meanwhile.
    leases: Vec<Lease>,
}

struct Rx {
    ring: Consumer,
    /// The receive buffer of the Send being received, and the STag its first record asks to
    /// invalidate (a Send with Invalidate): every later record of the message must say the
    /// same.
    recv: Option<(RecvWr, Option<u32>)>,
    rnr_until: Option<Instant>,
    done: bool,
    buf: Vec<u8>,
}

pub(crate) struct ShmConn {
    me: Weak<ShmConn>,
    id: u64,
    qp: Weak<Qp>,
    remote: IaAddress,
    shared: Weak<Shared>,
    sock: OwnedFd,
    sock_token: u64,
    bell: OwnedFd,
    bell_token: u64,
    peer_bell: OwnedFd,
    tx: Mutex<Tx>,
    rx: Mutex<Rx>,
    /// Our inbound ring (also in `rx`), for lock-free looks.
    inbound: Arc<RegionMemory>,
    /// The peer's pid (for cross-memory attach).
    peer_pid: i32,
    /// We can read the peer's memory by cross-memory attach (probed at connect time).
    we_pull: bool,
    /// The peer can read ours: large messages go by descriptor.
    peer_pulls: AtomicBool,
    /// Lent messages wait for the peer to consume them (`settle`).
    lending: AtomicBool,
    /// Set with `Tx::held` by `transmit` and cleared by `sent_completed`, in the engine's
    /// transmitting thread: `sent_completed` takes the lock only when something was held.
    held_any: AtomicBool,
    /// The peer's published table (read-only), if both IAs map library memory.
    peer_table: Option<Arc<RegionMemory>>,
    /// The peer endpoint's PZ, as its handshake said: what its table's entries must name.
    peer_pz: u64,
    /// Our mappings of the peer's library memory.
    maps: Mutex<Maps>,
}

/// What a peer told in its handshake about mapping its library memory, mapped.
struct PeerMem {
    table: Option<Arc<RegionMemory>>,
    pz: u64,
    /// The regions it offered: (id, writable, mapping).
    maps: Vec<(u64, bool, Arc<RegionMemory>)>,
}

/// Mappings of a peer's regions of library memory, by region id.
#[derive(Default)]
struct Maps {
    /// Region id -> its mappings.
    by_region: HashMap<u64, RegionMaps>,
    /// Files asked for and not answered yet: (region id, writable).
    asked: std::collections::HashSet<(u64, bool)>,
}

/// A read-only mapping of a peer's region, and a writable one.
type RegionMaps = (Option<Arc<RegionMemory>>, Option<Arc<RegionMemory>>);

/// What the direct path did with an RDMA Write or Read (`ShmConn::direct`).
enum Direct {
    /// Not taken (no mapping yet, no published entry, the ring not drained): today's path.
    Ring,
    /// The data is placed: the message is done (a Write: `Sent`; a Read: completed) or failed.
    Done(TxOutcome),
    /// A write with immediate's data is placed: its Immediate Data goes through the ring.
    Placed,
}

/// Cross-memory attach between the two ends of a connection, as probed at connect time.
struct Pulls {
    pid: i32,
    we_pull: bool,
    peer_pulls: bool,
}

enum Step {
    Go,
    /// Handled and already consumed (before its completion was reported: a peer that reacts
    /// to the completion finds the record consumed); true if the producer is to be rung.
    Taken(bool),
    Stall,
    Stop,
}

impl ShmConn {
    #[allow(clippy::too_many_arguments)]
    fn new(
        shared: &Arc<Shared>,
        qp: &Arc<Qp>,
        remote: IaAddress,
        sock: OwnedFd,
        bell: OwnedFd,
        peer_bell: OwnedFd,
        inbound: Arc<RegionMemory>,
        outbound: Arc<RegionMemory>,
        pulls: Pulls,
        peer_mem: PeerMem,
    ) -> Arc<ShmConn> {
        Arc::new_cyclic(|me| ShmConn {
            me: me.clone(),
            id: NEXT_CONN.fetch_add(1, Ordering::Relaxed),
            qp: Arc::downgrade(qp),
            remote,
            shared: Arc::downgrade(shared),
            sock,
            sock_token: shared.token(),
            bell,
            bell_token: shared.token(),
            peer_bell,
            tx: Mutex::new(Tx {
                ring: Producer::new(outbound, RING_CAP),
                held: false,
                job: None,
                orphans: Vec::new(),
                lent: VecDeque::new(),
                lent_seq: 0,
                close: None,
                close_deferred: false,
                closed: false,
                dto_until: 0,
            }),
            rx: Mutex::new(Rx {
                ring: Consumer::new(inbound.clone(), RING_CAP),
                recv: None,
                rnr_until: None,
                done: false,
                buf: Vec::new(),
            }),
            inbound,
            peer_pid: pulls.pid,
            we_pull: pulls.we_pull,
            peer_pulls: AtomicBool::new(pulls.peer_pulls),
            lending: AtomicBool::new(false),
            held_any: AtomicBool::new(false),
            peer_table: peer_mem.table,
            peer_pz: peer_mem.pz,
            maps: Mutex::new(Maps {
                by_region: peer_mem.maps.into_iter().fold(
                    HashMap::new(),
                    |mut by, (id, writable, m)| {
                        let e: &mut RegionMaps = by.entry(id).or_default();
                        match writable {
                            true => e.1 = Some(m),
                            false => e.0 = Some(m),
                        }
                        by
                    },
                ),
                asked: Default::default(),
            }),
        })
    }

    /// The requester's first record: whether it can read the acceptor's memory.
    fn send_caps(&self) {
        let mut tx = lock(&self.tx);
        let mut h = Header::new(Kind::Caps);
        if self.we_pull {
            h.flags = PULL;
        }
        // A fresh ring always has room for it.
        let _ = tx.ring.push(h, 0, |_, _| true);
        tx.ring.publish();
    }

    /// Drops the job and the lent messages (the connection ended under them). A descriptor
    /// already in the ring may still be copied out by the peer: its sources stay leased
    /// (`Tx::orphans`).
    fn abandon(&self, tx: &mut Tx) {
        tx.job = None;
        self.lending.store(false, Ordering::SeqCst);
        if tx.lent.is_empty() {
            return;
        }
        for l in std::mem::take(&mut tx.lent) {
            tx.orphans.push((l.until, l.leases));
        }
        let me = self.me.clone();
        crate::engine::timer::at(Instant::now() + ORPHAN_BOUND, move || {
            if let Some(c) = me.upgrade() {
                lock(&c.tx).orphans.clear();
            }
        });
    }

    /// Every `ORPHAN_BOUND` while lent message `seq` waits for the peer: if its source is being
    /// deregistered meanwhile (a `revoke` waits for the lease) and the peer has not copied it
    /// out for that long, the connection breaks, so that the deregistration ends within a
    /// bound (the lease then lasts `ORPHAN_BOUND` more: `abandon`).
    fn watch_lent(&self, seq: u64) {
        let me = self.me.clone();
        crate::engine::timer::at(Instant::now() + ORPHAN_BOUND, move || {
            let Some(c) = me.upgrade() else {
                return;
            };
            let revoking = {
                let tx = lock(&c.tx);
                let Some(l) = tx.lent.iter().find(|l| l.seq == seq) else {
                    return; // returned (or abandoned)
                };
                l.leases.iter().any(Lease::revoking)
            };
            if !revoking {
                return c.watch_lent(seq);
            }
            if let Some(qp) = c.qp() {
                qp.end_connection_of(c.id, ConnectionEventKind::Broken, true);
            }
        });
    }

    /// Releases the orphaned sources the peer has consumed past.
    fn release_orphans(tx: &mut Tx) {
        if tx.orphans.is_empty() {
            return;
        }
        let ring = &tx.ring;
        tx.orphans
            .retain(|(pos, _)| !ring.consumed(*pos).unwrap_or(true));
    }

    /// True while a consumer of this IA polls the rings (its window lies ahead).
    fn polled_here(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|s| s.hot_until.load(Ordering::SeqCst) > mono_ns())
    }

    /// Lock-free: never takes `rx` (a poll holds the connection list's lock here).
    fn has_input(&self) -> bool {
        ring::pending(&self.inbound, RING_CAP) || self.lending.load(Ordering::Relaxed)
    }

    /// Rings the peer's doorbell for records just published, unless it polls its ring.
    fn notify_peer(&self, tx: &Tx) {
        if tx.ring.needs_bell() {
            ring_bell(&self.peer_bell);
        }
    }

    /// Writes as much of the job (then a pending Close) as the ring takes. Ok(true) when
    /// nothing is left; Err: the peer's ring is garbage or our source was revoked.
    fn drive(&self, tx: &mut Tx) -> Result<bool, ()> {
        if let Some(job) = tx.job.as_mut() {
            if !job.push(&mut tx.ring)? {
                tx.ring.publish();
                return Ok(false);
            }
            if job.hdr.kind != Kind::ReadResponse {
                tx.dto_until = tx.ring.position();
            }
            tx.job = None;
        }
        if let Some(flags) = tx.close.filter(|_| !tx.close_deferred) {
            let mut h = Header::new(Kind::Close);
            h.flags = flags;
            if !tx.ring.push(h, 0, |_, _| true).map_err(|_| ())? {
                tx.ring.publish();
                return Ok(false);
            }
            tx.close = None;
            tx.closed = true;
        }
        if !tx.held {
            tx.ring.publish();
        }
        Ok(true)
    }

    /// Returns the lent messages the peer has consumed (copied out) to the engine, oldest
    /// first. Called with `rx` held, before any record the peer sent after consuming them is
    /// handled, so that they complete first. `mark`: the producer is marked waiting for the
    /// oldest one not consumed yet, so that the peer rings when it has consumed it (the
    /// progress thread's way); a consumer's poll does not mark, it looks again at its next
    /// poll, and when the polling ends the progress thread settles with a mark
    /// (`Shared::end_polling`).
    fn settle(&self, mark: bool) {
        if !self.lending.load(Ordering::SeqCst) {
            return;
        }
        let mut returned = 0;
        let mut garbage = false;
        {
            let mut tx = lock(&self.tx);
            while let Some(l) = tx.lent.front() {
                let consumed = if mark {
                    tx.ring.consumed(l.until)
                } else {
                    Ok(tx.ring.passed(l.until))
                };
                match consumed {
                    Ok(true) => {}
                    // Not consumed yet: we are marked waiting, the consumer rings when it is.
                    Ok(false) => break,
                    // The peer's head is impossible: the connection breaks (below).
                    Err(_) => {
                        garbage = true;
                        break;
                    }
                }
                tx.lent.pop_front();
                returned += 1;
            }
            if tx.lent.is_empty() {
                self.lending.store(false, Ordering::SeqCst);
            }
        }
        if let Some(qp) = self.qp() {
            for _ in 0..returned {
                qp.tx_returned(self.id);
            }
            if garbage {
                qp.end_connection_of(self.id, ConnectionEventKind::Broken, true);
            }
        }
    }

    fn qp(&self) -> Option<Arc<Qp>> {
        self.qp.upgrade()
    }

    /// The doorbell rang (or a poll found input): room in the peer's ring for a waiting job,
    /// records in ours.
    fn on_bell(self: &Arc<Self>) {
        reset_bell(&self.bell);
        self.drain_tx();
        // Blocking: a consumer's poll holding the ring may have looked before these records
        // were published; once it lets go, this looks again (a poll's `try_lock` never waits).
        let mut rx = lock(&self.rx);
        self.process(&mut rx, false);
        drop(rx);
        self.send_deferred_close();
    }

    /// Continues a job that waited for room.
    fn drain_tx(self: &Arc<Self>) {
        let outcome = {
            let mut tx = lock(&self.tx);
            Self::release_orphans(&mut tx);
            if tx.job.is_none() && tx.close.is_none() {
                return;
            }
            let had_job = tx.job.is_some();
            tx.held = false;
            let r = self.drive(&mut tx);
            self.notify_peer(&tx);
            match r {
                Ok(true) if had_job => Some(true),
                Ok(_) => None,
                Err(()) => Some(false),
            }
        };
        if let (Some(ok), Some(qp)) = (outcome, self.qp()) {
            if ok {
                qp.tx_drained(self.id);
            } else {
                qp.end_connection_of(self.id, ConnectionEventKind::Broken, true);
            }
        }
    }

    /// Handles the records waiting in our ring, unless another thread is at it. True if it
    /// handled any.
    fn poll_rx(self: &Arc<Self>) -> bool {
        let Ok(mut rx) = self.rx.try_lock() else {
            return false;
        };
        let any = self.process(&mut rx, true);
        drop(rx);
        self.send_deferred_close();
        any
    }

    /// Sends the Close that `close` left to the thread that was handling our ring, now that
    /// it has let go (`rx` released: every record it handled is consumed).
    fn send_deferred_close(&self) {
        let mut tx = lock(&self.tx);
        if std::mem::take(&mut tx.close_deferred) {
            let _ = self.drive(&mut tx);
            ring_bell(&self.peer_bell);
        }
    }

    /// Handles the records waiting in our ring (`rx` held).
    /// `polled`: a consumer's poll (lent messages are returned without marking the producer
    /// waiting: `settle`).
    fn process(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>, polled: bool) -> bool {
        if rx.done {
            return false;
        }
        self.settle(!polled);
        let mut any = false;
        let mut wake_producer = false;
        let mut qp = None;
        // A ring's worth of records per call: a peer that leaves records all around the ring
        // (or sends without pause) cannot keep this thread here; the progress thread, rung
        // below, handles the rest.
        let mut budget = rx.ring.cap();
        loop {
            // Broken while handling the last record (taken before its failed completion).
            if rx.done {
                break;
            }
            if budget == 0 {
                ring_bell(&self.bell);
                break;
            }
            // The polling consumer has all it asked for: the rest stays in the ring (marked
            // polled) for its next look, rather than queued on its EVD. At least one record
            // per poll, so that a connection whose completions go elsewhere is never starved
            // by one whose completions satisfy each poll.
            if polled && any && crate::engine::port::poll_satisfied() {
                break;
            }
            let rec = match rx.ring.peek() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => {
                    self.fail(rx, false);
                    break;
                }
            };
            any = true;
            budget = budget.saturating_sub(rec.len());
            // The peer may have sent this after consuming our descriptor: that message
            // completes first (the record's first word was read with Acquire, so its
            // consumption, published before it, is seen).
            self.settle(!polled);
            // The QP once for the batch (an upgrade and a drop, two read-modify-writes, each
            // record before); gone: the connection is over.
            if qp.is_none() {
                qp = self.qp();
            }
            let step = match &qp {
                Some(qp) => self.handle(rx, &rec, qp),
                None => {
                    rx.done = true;
                    Step::Stop
                }
            };
            // Consumed (the head published, then the fence and the look at the producer's waiting
            // flag) per record, not once for a batch, and a record that completes a receive
            // before its completion is reported (`Step::Taken`): a peer that reacts to a
            // completion finds its records consumed (architecture.md, "The shm link").
            match step {
                Step::Go => wake_producer |= rx.ring.consume(&rec),
                Step::Taken(wake) => wake_producer |= wake,
                Step::Stall => break,
                Step::Stop => {
                    wake_producer |= rx.ring.consume(&rec);
                    break;
                }
            }
        }
        if wake_producer {
            ring_bell(&self.peer_bell);
        }
        any
    }

    /// An RDMA Write segment of at least [`DIRECT_PLACE_MIN`] bytes, placed straight from the
    /// ring (`place_direct`).
    #[inline(never)]
    fn write_direct(rx: &Rx, rec: &ring::Record, qp: &Qp) -> Result<(), RxWriteFault> {
        let h = rec.hdr;
        qp.rx_write_with(h.stag, h.a, h.payload_len.into(), |seg| {
            Self::place_direct(rx, rec, std::slice::from_ref(seg), 0).is_ok()
        })
    }

    /// A Read Response segment of at least [`DIRECT_PLACE_MIN`] bytes, placed straight from
    /// the ring (`place_direct`).
    #[inline(never)]
    fn read_response_direct(rx: &Rx, rec: &ring::Record, qp: &Qp) -> RxResponse {
        let h = rec.hdr;
        let n = u64::from(h.payload_len);
        qp.rx_read_response_with(h.stag, h.a, n, h.flags & LAST != 0, |segs, at| {
            Self::place_direct(rx, rec, segs, at).ok().map(|()| n)
        })
    }

    /// A record's payload of at least [`DIRECT_PLACE_MIN`] bytes placed into the scatter list
    /// `dst` from byte `offset` on straight from the ring, region to region (the ring checked
    /// that the payload lies inside the record; `place_from` checks `dst`). Smaller payloads
    /// are copied out first (`payload`), which costs less for them. These three are kept out
    /// of line: inlined, they made the small Send's path in `handle` about 60 instructions
    /// longer (`per_message shm suppress`).
    #[inline(never)]
    fn place_direct(
        rx: &Rx,
        rec: &ring::Record,
        dst: &[Seg],
        offset: u64,
    ) -> Result<(), PlaceFault> {
        place_from(
            rx.ring.mem(),
            rec.payload_at,
            rec.hdr.payload_len as usize,
            dst,
            offset,
        )
    }

    /// Copies a record's payload out of the ring (bounds checked by the ring and here).
    fn payload<'a>(rx: &'a mut Rx, rec: &ring::Record) -> Option<&'a [u8]> {
        let n = rec.hdr.payload_len as usize;
        let Rx { ring, buf, .. } = rx;
        buf.resize(n, 0);
        ring.mem()
            .copy_out(rec.payload_at, &mut buf[..n])
            .then_some(&buf[..n])
    }

    /// Handles one record for `qp` (the connection's QP, upgraded once per batch).
    fn handle(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        rec: &ring::Record,
        qp: &Arc<Qp>,
    ) -> Step {
        let h = rec.hdr;
        match h.kind {
            Kind::Pad => Step::Go,
            Kind::Send | Kind::Immed => {
                if rx.recv.is_none() {
                    if h.kind == Kind::Send && h.a != 0 {
                        return self.fail(rx, false);
                    }
                    match qp.rx_send_take() {
                        RxTake::Buffer(wr) => {
                            rx.rnr_until = None;
                            let invalidate = (h.kind == Kind::Send && h.flags & INVALIDATE != 0)
                                .then_some(h.stag);
                            rx.recv = Some((wr, invalidate));
                        }
                        RxTake::NoBuffer => {
                            let now = Instant::now();
                            let first = rx.rnr_until.is_none();
                            let until = *rx.rnr_until.get_or_insert(now + RNR_GRACE);
                            if now >= until {
                                return self.fail(rx, false);
                            }
                            // One timer for the grace (polls find the Send stalled again and
                            // again while the consumer catches up: one each was a timer-map
                            // insertion per poll).
                            if first {
                                let me = Arc::downgrade(self);
                                crate::engine::timer::at(until, move || {
                                    if let Some(c) = me.upgrade() {
                                        ring_bell(&c.bell);
                                    }
                                });
                            }
                            return Step::Stall;
                        }
                        RxTake::NotConnected => {
                            rx.done = true;
                            return Step::Stop;
                        }
                    }
                } else if h.kind == Kind::Immed {
                    return self.fail(rx, false); // in the middle of a Send
                }
                let (wr, invalidate) = rx.recv.take().expect("taken above");
                if h.kind == Kind::Immed {
                    let wake = rx.ring.consume(rec);
                    qp.rx_immed_done(&wr, h.stag, h.a, h.flags & SOLICITED != 0);
                    return Step::Taken(wake);
                }
                if (h.flags & INVALIDATE != 0).then_some(h.stag) != invalidate {
                    // A segment that says otherwise than the message's first: garbage.
                    qp.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                    return self.fail(rx, false);
                }
                if h.flags & PULL != 0 {
                    return self.pull_send(rx, rec, wr, qp, invalidate);
                }
                let placed = if h.payload_len as usize >= DIRECT_PLACE_MIN {
                    Self::place_direct(rx, rec, &wr.segs, h.a)
                } else {
                    let Some(bytes) = Self::payload(rx, rec) else {
                        qp.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                        return self.fail(rx, false);
                    };
                    place_at(bytes, &wr.segs, h.a)
                };
                match placed {
                    Ok(()) => {}
                    Err(PlaceFault::TooLong) => {
                        qp.rx_send_done(&wr, DtoStatus::LocalLength, 0, true);
                        return self.fail(rx, false);
                    }
                    Err(PlaceFault::Revoked) => {
                        qp.rx_send_done(&wr, DtoStatus::LocalProtection, 0, true);
                        return self.fail(rx, false);
                    }
                }
                if h.flags & LAST == 0 {
                    rx.recv = Some((wr, invalidate));
                    return Step::Go;
                }
                // Its bytes are placed: consumed before the completion is reported.
                let wake = rx.ring.consume(rec);
                let len = h.a + h.payload_len as u64;
                let solicited = h.flags & SOLICITED != 0;
                if qp.rx_send_placed(&wr, len, solicited, invalidate).is_err() {
                    // Completed in error (the STag could not be invalidated): break.
                    self.fail(rx, false);
                }
                Step::Taken(wake)
            }
            Kind::Write if h.flags & PULL != 0 => {
                let Some(desc) = Self::descriptor(rx, rec) else {
                    return self.fail(rx, false);
                };
                let total = desc.iter().map(|d| d.1 as u64).sum();
                let pulled = qp.rx_write_with(h.stag, h.a, total, |seg| {
                    let piece = RecvPiece {
                        mem: &seg.region,
                        offset: seg.offset,
                        len: seg.len,
                    };
                    self.pull(&desc, &[piece]).is_ok()
                });
                match pulled {
                    Ok(()) => Step::Go,
                    Err(RxWriteFault::Access(_)) => self.fail(rx, false),
                    Err(RxWriteFault::NotConnected) => {
                        rx.done = true;
                        Step::Stop
                    }
                }
            }
            Kind::Write => {
                let n = h.payload_len as usize;
                if n == 0 {
                    return Step::Go;
                }
                let placed = if n >= DIRECT_PLACE_MIN {
                    Self::write_direct(rx, rec, qp)
                } else {
                    let Some(bytes) = Self::payload(rx, rec) else {
                        return self.fail(rx, false);
                    };
                    qp.rx_write(h.stag, h.a, Payload::Bytes(bytes))
                };
                match placed {
                    Ok(()) => Step::Go,
                    Err(RxWriteFault::Access(_)) => self.fail(rx, false),
                    Err(RxWriteFault::NotConnected) => {
                        rx.done = true;
                        Step::Stop
                    }
                }
            }
            Kind::ReadRequest => {
                let (src_stag, len) = (h.c as u32, h.c >> 32);
                match qp.rx_read_request(h.stag, h.a, len, src_stag, h.b, true) {
                    Ok(()) => Step::Go,
                    Err(RxReadFault::Access(_)) => self.fail(rx, true),
                    Err(RxReadFault::IrdExceeded) => self.fail(rx, false),
                    Err(RxReadFault::NotConnected) => {
                        rx.done = true;
                        Step::Stop
                    }
                }
            }
            Kind::ReadResponse if h.flags & PULL != 0 => {
                let Some(desc) = Self::descriptor(rx, rec) else {
                    return self.fail(rx, false);
                };
                let total: u64 = desc.iter().map(|d| d.1 as u64).sum();
                let last = h.flags & LAST != 0;
                let pulled = qp.rx_read_response_with(h.stag, h.a, total, last, |segs, at| {
                    let pieces = pieces_of(segs, at, total as usize);
                    self.pull(&desc, &pieces).ok().map(|()| total)
                });
                match pulled {
                    RxResponse::Placed => Step::Go,
                    RxResponse::NotConnected => {
                        rx.done = true;
                        Step::Stop
                    }
                    RxResponse::Unexpected | RxResponse::Revoked => self.fail(rx, false),
                }
            }
            Kind::Caps => {
                self.peer_pulls
                    .store(h.flags & PULL != 0, Ordering::Relaxed);
                Step::Go
            }
            Kind::ReadResponse => {
                let last = h.flags & LAST != 0;
                let placed = if h.payload_len as usize >= DIRECT_PLACE_MIN {
                    Self::read_response_direct(rx, rec, qp)
                } else {
                    let Some(bytes) = Self::payload(rx, rec) else {
                        return self.fail(rx, false);
                    };
                    qp.rx_read_response_segment(h.stag, h.a, bytes, last)
                };
                match placed {
                    RxResponse::Placed => Step::Go,
                    RxResponse::NotConnected => {
                        rx.done = true;
                        Step::Stop
                    }
                    RxResponse::Unexpected | RxResponse::Revoked => self.fail(rx, false),
                }
            }
            Kind::Close => {
                let broken = h.flags & BROKEN != 0;
                if broken {
                    tracing::warn!(
                        conn = self.id,
                        ep = qp.id(),
                        read_refused = h.flags & READ_REFUSED != 0,
                        "broken Close received"
                    );
                } else {
                    tracing::debug!(conn = self.id, ep = qp.id(), "Close received");
                }
                let held = rx.recv.take();
                rx.done = true;
                if let Some((wr, _)) = held {
                    qp.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                }
                if h.flags & READ_REFUSED != 0 {
                    qp.fail_oldest_read(DtoStatus::RemoteAccess);
                }
                qp.peer_closed(self.id, broken);
                self.finish();
                Step::Stop
            }
        }
    }

    /// A record's descriptor (`PULL`): at most `MAX_IOV` ranges of the peer's memory whose
    /// total fits a u64. None if it is not one (garbage).
    fn descriptor(rx: &mut Rx, rec: &ring::Record) -> Option<ArrayVec<(u64, usize), MAX_IOV>> {
        let bytes = Self::payload(rx, rec)?;
        if bytes.is_empty() || bytes.len() % 16 != 0 || bytes.len() / 16 > MAX_IOV {
            return None;
        }
        let mut total = 0u64;
        let mut desc = ArrayVec::new();
        for d in bytes.chunks_exact(16) {
            let addr = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
            let len = u64::from_le_bytes(d[8..].try_into().expect("8 bytes"));
            total = total.checked_add(len)?;
            desc.push((addr, usize::try_from(len).ok()?));
        }
        (total > 0).then_some(desc)
    }

    /// Copies the peer's ranges `desc` into `pieces` of our registered memory (held against
    /// revocation meanwhile) by cross-memory attach.
    fn pull(&self, desc: &[(u64, usize)], pieces: &[RecvPiece<'_>]) -> std::io::Result<()> {
        pull_from(self.peer_pid, desc, pieces)
    }

    /// A Send by descriptor (`PULL`), for the receive `wr` it takes: copied straight from the
    /// sender's memory into the receive's buffers.
    fn pull_send(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        rec: &ring::Record,
        wr: RecvWr,
        qp: &Arc<Qp>,
        invalidate: Option<u32>,
    ) -> Step {
        let h = rec.hdr;
        let solicited = h.flags & SOLICITED != 0;
        let Some(desc) = Self::descriptor(rx, rec).filter(|_| h.a == 0 && h.flags & LAST != 0)
        else {
            qp.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
            return self.fail(rx, false);
        };
        let total: u64 = desc.iter().map(|d| d.1 as u64).sum();
        let room: u64 = wr.segs.iter().map(|s| s.len as u64).sum();
        if total > room {
            qp.rx_send_done(&wr, DtoStatus::LocalLength, 0, true);
            return self.fail(rx, false);
        }
        let pieces = pieces_of(&wr.segs, 0, total as usize);
        match self.pull(&desc, &pieces) {
            Ok(()) => {
                // Copied out: consumed (the peer's lent message returned) before the completion
                // is reported, so a reply to it never reaches the peer first.
                let wake = rx.ring.consume(rec);
                if qp
                    .rx_send_placed(&wr, total, solicited, invalidate)
                    .is_err()
                {
                    self.fail(rx, false);
                }
                Step::Taken(wake)
            }
            Err(e) => {
                let status = if crate::mem::region::is_revoked_error(&e) {
                    DtoStatus::LocalProtection
                } else {
                    DtoStatus::Flushed
                };
                qp.rx_send_done(&wr, status, 0, true);
                self.fail(rx, false)
            }
        }
    }

    /// The peer broke the rules or refused an access: tell it (a broken Close), flush, break.
    /// The event names the line that found the fault (`at`), which says what it was.
    #[track_caller]
    fn fail(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>, read_refused: bool) -> Step {
        tracing::warn!(
            conn = self.id,
            ep = self.qp().map(|q| q.id()),
            read_refused,
            at = %std::panic::Location::caller(),
            "broken Close sent: the peer's record was refused"
        );
        let held = rx.recv.take();
        rx.done = true;
        rx.rnr_until = None;
        {
            let mut tx = lock(&self.tx);
            if !tx.closed && tx.close.is_none() {
                self.abandon(&mut tx);
                tx.held = false;
                tx.close = Some(BROKEN | if read_refused { READ_REFUSED } else { 0 });
                let _ = self.drive(&mut tx);
                ring_bell(&self.peer_bell);
            }
        }
        if let Some(qp) = self.qp() {
            if let Some((wr, _)) = held {
                qp.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
            }
            qp.end_connection_of(self.id, ConnectionEventKind::Broken, false);
        }
        Step::Stop
    }

    /// The socket is readable or hung up: after the records already in the ring (a Close
    /// among them), a hang-up means the peer is gone.
    fn on_sock(self: &Arc<Self>) {
        loop {
            match recv_ctl(&self.sock) {
                Ctl::Nothing => return,
                Ctl::Msg(m, fds) => self.on_ctl(&m, fds),
                Ctl::HangUp => break,
            }
        }
        let held = {
            // Waits for a poll in another thread: what the peer wrote before it went (its
            // Close among it) is handled first.
            let mut rx = lock(&self.rx);
            self.process(&mut rx, false);
            if rx.done {
                None
            } else {
                rx.done = true;
                Some(rx.recv.take())
            }
        };
        self.send_deferred_close();
        if let Some(held) = held {
            if let Some(qp) = self.qp() {
                if let Some((wr, _)) = held {
                    qp.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                }
                qp.peer_closed(self.id, true);
            }
        }
        self.finish();
    }

    /// A message on the socket: a peer asks for the file of one of our regions, or answers our
    /// request. Anything else is ignored.
    fn on_ctl(&self, m: &[u8], fds: Vec<OwnedFd>) {
        if m.len() != MAP_MSG {
            return;
        }
        let stag = u32::from_le_bytes(m[4..8].try_into().expect("4 bytes"));
        let flags = u32::from_le_bytes(m[8..12].try_into().expect("4 bytes"));
        let region = u64::from_le_bytes(m[12..20].try_into().expect("8 bytes"));
        if &m[..4] == MAGIC_MAP_ASK {
            self.grant_map(stag, flags & 1 != 0, region);
        } else if &m[..4] == MAGIC_MAP_ANSWER {
            let asked_write = flags & 2 != 0;
            let writable = flags & 1 != 0 && asked_write;
            let mapped = fds
                .first()
                .filter(|_| lock(&self.maps).asked.contains(&(region, asked_write)))
                .and_then(|fd| {
                    #[cfg(feature = "testing")]
                    crate::link::shm::received::keep(fd, writable);
                    map_sealed(fd, writable)
                });
            let mut maps = lock(&self.maps);
            maps.asked.remove(&(region, asked_write));
            if let Some(map) = mapped {
                if maps.by_region.len() >= MAPS_PRUNE_AT {
                    if let Some(t) = &self.peer_table {
                        let live = published::live_regions(t);
                        maps.by_region.retain(|r, _| live.contains(r));
                    }
                }
                let e = maps.by_region.entry(region).or_default();
                match writable {
                    true => e.1 = Some(map),
                    false => e.0 = Some(map),
                }
            }
        }
    }

    /// The peer asks for the file of region `region` behind our `stag` (`write`: writable):
    /// granted if the memory table says the entry is that mappable region's and grants our
    /// endpoint's PZ a remote right; a read-only descriptor unless it grants REMOTE_WRITE.
    fn grant_map(&self, stag: u32, write: bool, region: u64) {
        let Some(qp) = self.qp() else {
            return;
        };
        let fd = region_file(&qp, stag, write, region);
        let flags = u32::from(write) << 1 | u32::from(fd.as_ref().is_some_and(|f| f.1));
        let m = map_msg(MAGIC_MAP_ANSWER, stag, flags, region);
        let _ = send_ctl(&self.sock, &m, fd.as_ref().map(|f| &f.0));
    }

    /// Asks the peer for the file of its region `region` (once until answered).
    fn ask_map(&self, maps: &mut Maps, stag: u32, region: u64, write: bool) {
        if !maps.asked.insert((region, write)) {
            return;
        }
        let m = map_msg(MAGIC_MAP_ASK, stag, u32::from(write), region);
        if !send_ctl(&self.sock, &m, None) {
            maps.asked.remove(&(region, write));
        }
    }

    /// Where `len` bytes at `to` of the peer's `stag` are mapped here, for a `write` or a read:
    /// the mapping, the offset in it and the generation of the published entry that allowed
    /// it. None (asking for the file if that is what is missing) if the peer's table does not
    /// allow it (no entry, another PZ, no right, out of bounds) or nothing is mapped yet.
    fn mapped(
        &self,
        stag: u32,
        to: u64,
        len: u64,
        write: bool,
    ) -> Option<(Arc<RegionMemory>, usize, u64)> {
        let table = self.peer_table.as_ref()?;
        let (e, gen) = published::lookup(table, stag)?;
        let right = match write {
            true => MemPriv::REMOTE_WRITE,
            false => MemPriv::REMOTE_READ,
        };
        let off = usize::try_from(e.check(self.peer_pz, right, to, len)?).ok()?;
        let mut maps = lock(&self.maps);
        let m = maps
            .by_region
            .get(&e.region)
            .and_then(|(ro, rw)| match write {
                true => rw.clone(),
                false => rw.clone().or_else(|| ro.clone()),
            });
        if m.is_none() {
            self.ask_map(&mut maps, stag, e.region, write);
        }
        Some((m?, off, gen))
    }

    /// Nothing of ours waits in the link or the peer's ring: a copy made now is ordered after
    /// every DTO transmitted before it (the peer has handled them all; a Caps record or a
    /// Read Response it has not consumed yet does not count).
    fn quiet(&self) -> bool {
        let tx = lock(&self.tx);
        !tx.closed
            && tx.close.is_none()
            && tx.job.is_none()
            && !tx.held
            && tx.ring.passed(tx.dto_until)
    }

    /// RDMA Writes and Reads on the peer's mapped library memory: the copy is made here, by
    /// the initiator, after checking the peer's published entry (STag, PZ, right, bounds) and
    /// again after the copy (the generation: neither withdrawn nor replaced meanwhile). Taken
    /// only when nothing earlier of this endpoint waits in the link; anything else is
    /// `Direct::Ring` (today's path, whose checks are the peer's memory table).
    fn direct(&self, msg: &OutMsg<'_>) -> Direct {
        if self.peer_table.is_none() {
            return Direct::Ring;
        }
        match *msg {
            OutMsg::Write {
                stag,
                to,
                payload: Payload::Segs(segs),
            }
            | OutMsg::WriteImmed {
                stag,
                to,
                payload: Payload::Segs(segs),
                ..
            } => {
                let len: u64 = segs.iter().map(|s| s.len as u64).sum();
                if len == 0 || !self.quiet() {
                    return Direct::Ring;
                }
                let Some((map, off, gen)) = self.mapped(stag, to, len, true) else {
                    return Direct::Ring;
                };
                let mut at = off;
                for s in segs {
                    if !s.region.copy_to(s.offset, &map, at, s.len) {
                        return Direct::Done(TxOutcome::Failed(DtoStatus::LocalProtection));
                    }
                    at += s.len;
                }
                DIRECT_COPIES.fetch_add(1, Ordering::Relaxed);
                let table = self.peer_table.as_ref().expect("checked above");
                if !published::still_valid(table, stag, gen) {
                    // Withdrawn while we copied: refused, as the ring path would have been.
                    return Direct::Done(TxOutcome::Failed(DtoStatus::RemoteAccess));
                }
                match msg {
                    OutMsg::WriteImmed { .. } => Direct::Placed,
                    _ => Direct::Done(TxOutcome::Sent),
                }
            }
            OutMsg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            } => {
                if len == 0 || !self.quiet() {
                    return Direct::Ring;
                }
                let Some((map, off, gen)) = self.mapped(src_stag, src_to, len, false) else {
                    return Direct::Ring;
                };
                let Some(qp) = self.qp() else {
                    return Direct::Ring;
                };
                // Only this read is outstanding (an earlier one must complete first).
                if qp.reads_outstanding() != 1 {
                    return Direct::Ring;
                }
                let table = self.peer_table.as_ref().expect("checked above");
                let mut refused = None;
                let r = qp.rx_read_response_with(sink_stag, sink_to, len, true, |segs, at| {
                    let mut from = off;
                    for (i, o, k) in seg_span(segs, at, len as usize) {
                        let sg = &segs[i];
                        if !map.copy_to(from, &sg.region, sg.offset + o, k) {
                            refused = Some(DtoStatus::LocalProtection);
                            return None;
                        }
                        from += k;
                    }
                    DIRECT_COPIES.fetch_add(1, Ordering::Relaxed);
                    if !published::still_valid(table, src_stag, gen) {
                        refused = Some(DtoStatus::RemoteAccess);
                        return None;
                    }
                    Some(len)
                });
                Direct::Done(match r {
                    RxResponse::Placed => TxOutcome::Sent,
                    RxResponse::Revoked => {
                        TxOutcome::Failed(refused.unwrap_or(DtoStatus::LocalProtection))
                    }
                    RxResponse::NotConnected | RxResponse::Unexpected => TxOutcome::Broken,
                })
            }
            _ => Direct::Ring,
        }
    }

    /// Both directions are over for this side: out of the epoll set and the poll list.
    fn finish(&self) {
        if let Some(s) = self.shared.upgrade() {
            s.forget(self);
        }
    }
}

/// The header of a Send's records.
fn send_header(solicited: bool, invalidate: Option<u32>) -> Header {
    let mut hdr = Header::new(Kind::Send);
    if solicited {
        hdr.flags |= SOLICITED;
    }
    if let Some(stag) = invalidate {
        // In every segment record (the header is copied into each).
        hdr.flags |= INVALIDATE;
        hdr.stag = stag;
    }
    hdr
}

impl ShmConn {
    /// Pushes `msg` as one small record if it is a Send of one segment that fits one
    /// (`ring::SMALL_RECORD`): None if it is not, else whether the ring had room (Err: the
    /// segment's region was revoked, or the ring is garbage). Not published.
    fn push_small_send(tx: &mut Tx, msg: &OutMsg<'_>) -> Option<Result<bool, ()>> {
        let OutMsg::Send {
            solicited,
            invalidate,
            payload: Payload::Segs([seg]),
        } = *msg
        else {
            return None;
        };
        if ring::HDR + seg.len > ring::SMALL_RECORD {
            return None;
        }
        let mut hdr = send_header(solicited, invalidate);
        hdr.flags |= LAST;
        let fill = |buf: &mut [u8]| seg.region.copy_out(seg.offset, buf);
        let pushed = tx.ring.push_small(hdr, seg.len, fill).map_err(|_| ());
        if pushed == Ok(true) {
            tx.dto_until = tx.ring.position();
        }
        Some(pushed)
    }

    /// A pushed Send or Write is sent: held until `sent_completed` if `hold`, else published.
    fn sent(&self, tx: &mut Tx, hold: bool) -> TxOutcome {
        if hold {
            tx.held = true;
            self.held_any.store(true, Ordering::Relaxed);
        } else {
            tx.ring.publish();
            self.notify_peer(tx);
        }
        TxOutcome::Sent
    }

    /// `transmit`; `may_hold`: a Send or Write may be held until `sent_completed` (its
    /// completion is reported).
    fn transmit_as(&self, msg: OutMsg<'_>, may_hold: bool) -> TxOutcome {
        let placed = match self.direct(&msg) {
            Direct::Ring => false,
            Direct::Done(out) => return out,
            Direct::Placed => true,
        };
        let mut tx = lock(&self.tx);
        if tx.closed || tx.close.is_some() {
            return TxOutcome::Broken;
        }
        debug_assert!(tx.job.is_none(), "the engine waits for tx_drained");
        // What an earlier transmit held went out at its `sent_completed`: publishing now never
        // publishes a record whose completion is not queued yet.
        debug_assert!(!tx.held, "sent_completed follows every held transmit");
        // The common small message, a Send of one segment that fits one record: written
        // straight from its segment (no job, no segment walk). Without room it takes the
        // general path below, which queues it.
        match Self::push_small_send(&mut tx, &msg) {
            Some(Ok(true)) => return self.sent(&mut tx, may_hold),
            Some(Ok(false)) | None => {}
            Some(Err(())) => return TxOutcome::Failed(DtoStatus::LocalProtection),
        }
        let at = |kind, stag, a| {
            let mut h = Header::new(kind);
            h.stag = stag;
            h.a = a;
            h
        };
        let mut job = match msg {
            OutMsg::Send {
                solicited,
                invalidate,
                payload,
            } => Job::new(send_header(solicited, invalidate), payload, true),
            OutMsg::Write { payload, .. } if payload.len() == 0 => {
                return TxOutcome::Sent; // nothing to place
            }
            OutMsg::Write { stag, to, payload } => {
                Job::new(at(Kind::Write, stag, to), payload, false)
            }
            OutMsg::WriteImmed {
                stag,
                to,
                payload,
                immediate,
                solicited,
            } => {
                let mut t = at(Kind::Immed, immediate, payload.len());
                if solicited {
                    t.flags |= SOLICITED;
                }
                // Placed already by a copy into the peer's mapping: only the Immediate Data.
                let payload = if placed { Payload::Bytes(&[]) } else { payload };
                let mut job = Job::new(at(Kind::Write, stag, to), payload, false);
                job.trailer = Some(t);
                // An empty write with immediate sends only its Immediate Data.
                job.started = payload.len() == 0;
                job
            }
            OutMsg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            } => {
                let mut hdr = at(Kind::ReadRequest, sink_stag, sink_to);
                hdr.b = src_to;
                hdr.c = u64::from(src_stag) | (len << 32);
                Job::new(hdr, Payload::Bytes(&[]), false)
            }
            OutMsg::ReadResponse {
                sink_stag,
                sink_to,
                payload,
            } => Job::new(at(Kind::ReadResponse, sink_stag, sink_to), payload, true),
        };
        // A large message from registered memory goes by descriptor if the peer can read our
        // memory: it copies it out itself, and the message completes once it has.
        let lend = job.total >= PULL_MIN
            && matches!(job.src, Src::Segs(_))
            && matches!(job.hdr.kind, Kind::Send | Kind::Write | Kind::ReadResponse)
            && self.peer_pulls.load(Ordering::Relaxed);
        // Only when the descriptor fits now (else the message is copied through the ring as
        // it frees up): the engine goes on transmitting, and the message completes when the
        // peer has consumed it (`settle`).
        if lend && tx.ring.fits(&[16 * MAX_IOV, 0]) {
            let Ok(mut job) = job.lend() else {
                return TxOutcome::Failed(DtoStatus::LocalProtection);
            };
            match job.push(&mut tx.ring) {
                Ok(true) => {}
                _ => return TxOutcome::Failed(DtoStatus::LocalProtection),
            }
            tx.lent_seq += 1;
            let seq = tx.lent_seq;
            let until = tx.ring.position();
            let leases = job.lent.take().unwrap_or_default();
            tx.lent.push_back(LentMsg { seq, until, leases });
            if job.hdr.kind != Kind::ReadResponse {
                tx.dto_until = until;
            }
            self.lending.store(true, Ordering::SeqCst);
            // Marked waiting, so that the consumer rings once it has consumed it, unless a
            // consumer of this IA polls: its polls return the message (`settle` without a
            // mark), and when the polling ends `end_polling` has the progress thread settle
            // with a mark. (SeqCst with the window's closing: a window read open here was
            // closed after `lending` was set, so `end_polling` sees the flag.)
            if !self.polled_here() {
                let _ = tx.ring.consumed(until);
            }
            tx.ring.publish();
            self.notify_peer(&tx);
            drop(tx);
            self.watch_lent(seq);
            return TxOutcome::Lent;
        }
        // A Send or Write that fits is published only once the engine has queued its
        // completion (`sent_completed`): the peer cannot answer it (or end the connection
        // after it) before this side reports it complete.
        let hold = may_hold && matches!(job.hdr.kind, Kind::Send | Kind::Write);
        // Written from the engine's borrowed payload; only a message that must wait for room
        // keeps its own copy of the segment list.
        let pushed = job.push(&mut tx.ring);
        if matches!(pushed, Ok(true)) && job.hdr.kind != Kind::ReadResponse {
            tx.dto_until = tx.ring.position();
        }
        let outcome = match pushed {
            Ok(true) => return self.sent(&mut tx, hold),
            Ok(false) => {
                tx.job = Some(job.into_owned());
                TxOutcome::Queued
            }
            Err(()) => TxOutcome::Failed(DtoStatus::LocalProtection),
        };
        tx.ring.publish();
        self.notify_peer(&tx);
        outcome
    }
}

impl Connection for ShmConn {
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome {
        self.transmit_as(msg, true)
    }

    fn transmit_unreported(&self, msg: OutMsg<'_>) -> TxOutcome {
        self.transmit_as(msg, false)
    }

    /// A small Send of one segment, written and published at once if the ring has room and
    /// nothing of ours waits in the link (no job, nothing held, not closing): a ping-pong's
    /// every message and a stream's too. Without room it is declined and queued, and the
    /// engine's queue and turn take it and the posts behind it, as every other message.
    /// Until 2026-12-07 only a post that began its poster's run (`looks`) was taken: on
    /// 2026-11-27 a stream written inline outran its consumer and the message rate fell
    /// (1.7 -> 1.1 Mmsg/s); on 2026-12-07, after the changes to waiting since, taking every
    /// one put `datperf --link shm -t send -k rate` at 3.64-5.35 Mmsg/s against 1.60-3.51
    /// (twelve runs alternating the two builds) and on one CPU (`taskset -c 0`) at 2.17-3.44
    /// against 0.43-0.57 (ten each). docs/architecture.md, "Posting and transmitting".
    fn takes_inline(&self) -> Inlines {
        // Not Read Requests: a read of mapped memory is a copy in `transmit` (`direct`), which
        // places and completes it. Nor their responses, which this link's handler of a request
        // copies out itself. Suppressed RDMA Writes where the peer's table is mapped: the copy
        // (`direct`) under the post, with no queue and no transmit turn.
        Inlines {
            sends: true,
            writes: self.peer_table.is_some(),
            reads: false,
            responses: false,
        }
    }

    fn transmit_inline(&self, msg: &OutMsg<'_>) -> InlineOutcome {
        if let OutMsg::Write { .. } = msg {
            // The copy into the peer's mapping, or its refusal; the ring path (nothing copied)
            // goes through `transmit`.
            return match self.direct(msg) {
                Direct::Done(TxOutcome::Sent) => InlineOutcome::Taken,
                Direct::Done(TxOutcome::Failed(status)) => InlineOutcome::Failed(status),
                _ => InlineOutcome::Declined,
            };
        }
        let mut tx = lock(&self.tx);
        if tx.closed || tx.close.is_some() || tx.job.is_some() || tx.held {
            return InlineOutcome::Declined;
        }
        match Self::push_small_send(&mut tx, msg) {
            Some(Ok(true)) => {
                self.sent(&mut tx, false);
                InlineOutcome::Taken
            }
            _ => InlineOutcome::Declined,
        }
    }

    fn sent_completed(&self) {
        // Only this thread holds records back (the engine's transmit turn), so a flag it
        // cleared says there is nothing to publish without taking the lock.
        if !self.held_any.load(Ordering::Relaxed) {
            return;
        }
        let mut tx = lock(&self.tx);
        self.held_any.store(false, Ordering::Relaxed);
        if std::mem::take(&mut tx.held) {
            tx.ring.publish();
            self.notify_peer(&tx);
        }
    }

    fn wake_peer(&self) {
        // A receive was posted: a Send stalled in our ring may go on. While the ring is marked
        // polled, the next poll (or whoever ends the window, `stop_polling`) finds it there, as
        // it finds a record whose producer skipped the doorbell; else the progress thread.
        if !ring::is_polled(&self.inbound) {
            ring_bell(&self.bell);
        }
    }

    fn close(&self, broken: bool) {
        let mut tx = lock(&self.tx);
        if tx.closed || tx.close.is_some() {
            return;
        }
        // The engine has ended the connection: whatever the job was, its WR is complete
        // (flushed); a descriptor's sources stay leased while the peer may copy them out.
        self.abandon(&mut tx);
        tx.held = false;
        tx.close = Some(if broken { BROKEN } else { 0 });
        // A record of the peer's being handled meanwhile (in another thread, or in this one
        // that is closing because of it) may have placed data our consumer has already seen
        // and acted on: it is consumed (its descriptor returned to the peer) only when the
        // handler is done, and our Close must not overtake that, or the peer would flush a
        // message whose data arrived. Then the handler sends the Close when it lets go
        // (`send_deferred_close`); the lock order is rx before tx, so only try it here.
        if matches!(self.rx.try_lock(), Err(std::sync::TryLockError::WouldBlock)) {
            tx.close_deferred = true;
            return;
        }
        let _ = self.drive(&mut tx);
        ring_bell(&self.peer_bell);
    }

    fn remote_addr(&self) -> IaAddress {
        self.remote
    }

    fn id(&self) -> u64 {
        self.id
    }
}
