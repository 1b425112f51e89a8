//! The Interface Adapter (`DAT_IA`): opening by name, attributes, the registry of every object
//! created on it, and close (graceful refuses while objects live; abrupt tears everything down).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::cr::ConnectionRequest;
use crate::engine::port::{Link, LinkCaps, Progress};
use crate::ep::Endpoint;
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::evd::{Cno, CnoInner, Evd, EvdInner};
use crate::event::{AsyncEvent, Event};
use crate::handle::Handle;
use crate::link;
use crate::lmr::LmrInner;
use crate::mem::MemTable;
use crate::pz::{Pz, PzInner};
use crate::rmr::Rmr;
use crate::sp::ServicePoint;
use crate::srq::Srq;
use crate::types::{CloseFlags, EvdFlags, IaAddress};

/// Limits of an IA (`DAT_IA_ATTR`): the values the code enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IaAttr {
    /// Adapter name (the name it was opened with).
    pub adapter_name: String,
    /// Vendor name.
    pub vendor_name: &'static str,
    /// The IA's address.
    pub ia_address: IaAddress,
    /// Most endpoints at once: 16,384 unless the IA name sets `max_eps=<n>`
    /// (`"tcp:10.0.0.1,max_eps=50000"`; dat.conf: `"tcp 10.0.0.1 max_eps=50000"`).
    pub max_eps: usize,
    /// Most DTOs queued per direction per endpoint (`max_dto_per_ep`).
    pub max_dto_per_ep: usize,
    /// Most RDMA reads outstanding per endpoint, inbound and outbound (`max_rdma_read_per_ep`).
    pub max_rdma_read_per_ep: usize,
    /// Most EVDs at once.
    pub max_evds: usize,
    /// Longest EVD queue.
    pub max_evd_qlen: usize,
    /// Most iov segments in one DTO.
    pub max_iov_segments_per_dto: usize,
    /// Most LMRs at once.
    pub max_lmrs: usize,
    /// Largest LMR in bytes.
    pub max_lmr_block_size: u64,
    /// Most PZs at once.
    pub max_pzs: usize,
    /// Largest message (send) in bytes.
    pub max_message_size: u64,
    /// Largest RDMA read or write in bytes.
    pub max_rdma_size: u64,
    /// Most RMRs at once.
    pub max_rmrs: usize,
    /// Most SRQs at once.
    pub max_srqs: usize,
    /// Longest SRQ.
    pub max_recv_per_srq: usize,
    /// Most private data bytes in connect, accept and reject.
    pub max_private_data_size: usize,
    /// A connection whose peer goes silent (a network that drops everything, a vanished host,
    /// a peer that stops reading) breaks within this bound: its outstanding DTOs flush and
    /// the endpoint reports BROKEN. tcp: 30 s unless the IA name sets `dead_peer=<seconds>`
    /// (`"tcp:10.0.0.1,dead_peer=5"`; dat.conf: `"tcp 10.0.0.1 dead_peer=5"`). None where a
    /// peer cannot go silent unnoticed (loopback, shm).
    pub dead_peer_timeout: Option<std::time::Duration>,
    /// Library memory (`Pz::lmr_allocate`) is backed by files that peers of the shm link map,
    /// so that their RDMA Writes and Reads into and out of it are copies by the initiator
    /// (docs/architecture.md, "Mapped library memory"). On for shm IAs unless the IA name
    /// says `map=off` (`"shm,map=off"`); off elsewhere. `Pz::lmr_allocate_unmapped` turns
    /// it off for one LMR.
    pub map_library_memory: bool,
}

pub use crate::types::MAX_IOV;

impl IaAttr {
    fn defaults(name: &str, addr: IaAddress, caps: &LinkCaps) -> Self {
        IaAttr {
            adapter_name: name.to_string(),
            vendor_name: "dapl-rs",
            ia_address: addr,
            max_eps: 16_384,
            max_dto_per_ep: 16_384,
            max_rdma_read_per_ep: 128,
            max_evds: 16_384,
            max_evd_qlen: 1 << 20,
            max_iov_segments_per_dto: caps.max_iov,
            max_lmrs: 1 << 20,
            max_lmr_block_size: 1 << 40,
            max_pzs: 4096,
            max_message_size: 1 << 31,
            max_rdma_size: 1 << 31,
            max_rmrs: 1 << 20,
            max_srqs: 4096,
            max_recv_per_srq: 1 << 16,
            max_private_data_size: caps.max_private_data,
            dead_peer_timeout: caps.dead_peer_bound,
            map_library_memory: false,
        }
    }
}

/// Provider attributes (`DAT_PROVIDER_ATTR`), the parts this API has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderAttr {
    /// Provider name.
    pub provider_name: &'static str,
    /// Provider version (major, minor).
    pub provider_version: (u32, u32),
    /// DAPL API version (2, 0).
    pub dapl_version: (u32, u32),
    /// Shared receive queues are supported.
    pub srq_supported: bool,
    /// SRQ low watermarks are supported.
    pub srq_watermarks_supported: bool,
    /// Which link this IA runs over ("loopback", ...).
    pub link: &'static str,
    /// What differs on that link (decide by these, never by the name).
    pub link_caps: LinkCaps,
}

#[derive(Default)]
pub(crate) struct Objects {
    pub(crate) pzs: HashMap<u64, Pz>,
    pub(crate) evds: HashMap<u64, Evd>,
    pub(crate) cnos: HashMap<u64, Cno>,
    /// Weak: an LMR is freed when its last handle goes (`LmrInner`'s drop).
    pub(crate) lmrs: HashMap<u64, Weak<LmrInner>>,
    pub(crate) rmrs: HashMap<u64, Rmr>,
    pub(crate) eps: HashMap<u64, Endpoint>,
    pub(crate) srqs: HashMap<u64, Srq>,
    pub(crate) sps: HashMap<u64, ServicePoint>,
    pub(crate) crs: HashMap<u64, ConnectionRequest>,
}

/// The live entries of a weak part of the registry. Called with the registry's lock held: it
/// counts, never upgrades (an upgraded handle that turned out to be the last would free its
/// object, which takes this lock, under it).
fn count_live<T>(m: &HashMap<u64, Weak<T>>) -> usize {
    m.values().filter(|o| o.strong_count() > 0).count()
}

impl Objects {
    /// The objects alive, by kind (the async EVD belongs to the IA and is not counted).
    fn live_user_objects(&self) -> Vec<(&'static str, usize)> {
        [
            ("PZ", self.pzs.len()),
            ("EVD", self.evds.values().filter(|e| !e.0.is_async).count()),
            ("CNO", self.cnos.len()),
            ("LMR", count_live(&self.lmrs)),
            ("RMR", self.rmrs.len()),
            ("EP", self.eps.len()),
            ("SRQ", self.srqs.len()),
            ("PSP/RSP", self.sps.len()),
            ("CR", self.crs.len()),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .collect()
    }
}

pub(crate) struct IaInner {
    pub(crate) id: u64,
    pub(crate) attr: IaAttr,
    pub(crate) link: Arc<dyn Link>,
    /// Progress in the consumer's thread (the link's, or nothing to do).
    pub(crate) progress: Arc<dyn Progress>,
    pub(crate) memtable: Arc<MemTable>,
    /// The tcp link itself, for tests of its hand-off hooks.
    #[cfg_attr(not(test), allow(dead_code))]
    tcp: Option<Arc<link::tcp::TcpLink>>,
    pub(crate) closed: AtomicBool,
    objects: Mutex<Objects>,
    async_evd: Mutex<Option<Evd>>,
    /// Held while an endpoint posts the connection event and the async event of one end
    /// (`EpInner::connection_event`): the two streams list the IA's endpoints in one order,
    /// which consumers rely on (Debian's dtestsrq pairs each DISCONNECTED with the next
    /// EP_BROKEN).
    pub(crate) end_events: Mutex<()>,
    /// The user handles' share (`Pz::query` makes a handle from it while one lives).
    owner: Mutex<Weak<IaOwner>>,
}

impl IaInner {
    /// Tests: the IA's tcp link.
    #[cfg(feature = "testing")]
    pub(crate) fn tcp_link(&self) -> &link::tcp::TcpLink {
        self.tcp.as_deref().expect("a tcp IA")
    }

    pub(crate) fn objects(&self) -> MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new object id: unique in the process across IAs and object kinds, so a consumer (the
    /// C ABI shim) can key its own tables by id alone.
    pub(crate) fn next_id(&self) -> u64 {
        NEXT_OBJECT.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn object(&self) -> Object {
        Object::new("ia", self.id)
    }

    /// Queues an asynchronous event on the IA's async EVD.
    pub(crate) fn post_async(&self, ev: AsyncEvent) {
        let evd = self
            .async_evd
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(evd) = evd {
            evd.0.push(Event::Async(ev), true);
        }
    }

    pub(crate) fn check_open(&self, op: &'static str) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleIa,
                op,
                self.object(),
                "the IA is closed",
            );
        }
        Ok(())
    }
}

/// An open Interface Adapter (`DAT_IA_HANDLE`). Cloning gives another handle to the same IA.
///
/// The IA owns everything created on it: dropping its last handle closes it abruptly, as
/// [`close`](Self::close) with `CloseFlags::Abrupt` does (endpoints disconnected with their
/// DTOs flushed, every object freed, memory deregistered, the link's thread stopped), so an
/// early return with `?` leaks nothing. Handles to its objects that outlive it report
/// `DAT_INVALID_HANDLE`.
#[derive(Clone)]
pub struct InterfaceAdapter(
    pub(crate) Arc<IaInner>,
    #[allow(dead_code)] // held for its drop
    Arc<IaOwner>,
);

/// The share of the IA's user handles: closes the IA abruptly when the last one goes. (The
/// IA's objects hold the `IaInner`, not this, so they do not keep it open.)
pub(crate) struct IaOwner(Weak<IaInner>);

impl Drop for IaOwner {
    fn drop(&mut self) {
        if let Some(ia) = self.0.upgrade() {
            // Already closed (the consumer's close): an error, and nothing to do.
            let _ = ia.close(CloseFlags::Abrupt);
        }
    }
}

impl std::fmt::Debug for InterfaceAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "InterfaceAdapter({} {})",
            self.0.id, self.0.attr.adapter_name
        )
    }
}

/// A link and its progress (often the same object).
type LinkPair = (Arc<dyn Link>, Arc<dyn Progress>);

static NEXT_IA: AtomicU64 = AtomicU64::new(1);
static NEXT_OBJECT: AtomicU64 = AtomicU64::new(1);

fn tcp_link(name: &str, rest: &str) -> Result<(Arc<link::tcp::TcpLink>, IaAddress)> {
    let obj = Object::new("ia", 0);
    let Some((ip, opts)) = link::tcp::parse_name(rest) else {
        return err(
            ErrorType::ProviderNotFound,
            Subtype::NameNotRegistered,
            "ia_open",
            obj,
            format!("no IA named {name:?} (tcp IAs are \"tcp:<ipv4>\" with options \",crc\", \",nocoalesce\", \",dead_peer=<seconds>\")"),
        );
    };
    // The address must be one of this host's (in this network namespace): otherwise every
    // listen and connect would fail later with a misleading reason.
    if !ip.is_unspecified() {
        if let Err(e) = std::net::UdpSocket::bind((ip, 0)) {
            if e.kind() == std::io::ErrorKind::AddrNotAvailable {
                return err(
                    ErrorType::InvalidAddress,
                    Subtype::InvalidAddressUnsupported,
                    "ia_open",
                    obj,
                    format!(
                        "{ip} is not an address of this host (see `ip addr`); a tcp IA is \
                         opened on one of its own IPv4 addresses"
                    ),
                );
            }
        }
    }
    match link::tcp::TcpLink::start(ip, opts) {
        Ok(l) => Ok((l, SocketAddr::new(IpAddr::V4(ip), 0))),
        Err(e) => err(
            ErrorType::InsufficientResources,
            Subtype::NoSubtype,
            "ia_open",
            obj,
            format!("cannot start the tcp link on {ip}: {e}"),
        ),
    }
}

fn shm_link(name: &str, rest: &str) -> Result<(LinkPair, IaAddress)> {
    let obj = Object::new("ia", 0);
    let Ok(ip) = rest.parse::<Ipv4Addr>() else {
        return err(
            ErrorType::ProviderNotFound,
            Subtype::NameNotRegistered,
            "ia_open",
            obj,
            format!("no IA named {name:?} (shm IAs are \"shm\" or \"shm:<ipv4>\")"),
        );
    };
    match link::shm::ShmLink::start(ip) {
        Ok(l) => Ok(((l.clone(), l), SocketAddr::new(IpAddr::V4(ip), 0))),
        Err(e) => err(
            ErrorType::InsufficientResources,
            Subtype::NoSubtype,
            "ia_open",
            obj,
            format!("cannot start the shm link on {ip}: {e}"),
        ),
    }
}

/// Most endpoints an IA may be opened with (`max_eps=<n>`).
pub const MAX_EPS_LIMIT: usize = 1 << 20;

/// Splits the options every link takes (`,max_eps=<n>`) off an IA name: the name the link
/// parses, and the endpoint limit if one was given.
fn ia_options(name: &str) -> Result<(String, Option<usize>, bool)> {
    let mut parts = name.split(',');
    let mut base = parts.next().unwrap_or_default().to_string();
    let mut max_eps = None;
    let mut map = true;
    for p in parts {
        match p.trim() {
            "map=off" => {
                map = false;
                continue;
            }
            "map=on" => {
                map = true;
                continue;
            }
            _ => {}
        }
        match p.trim().strip_prefix("max_eps=") {
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=MAX_EPS_LIMIT).contains(&n) => max_eps = Some(n),
                _ => {
                    return err(
                        ErrorType::InvalidParameter,
                        Subtype::InvalidArg1,
                        "ia_open",
                        Object::new("ia", 0),
                        format!(
                            "{p:?} in IA name {name:?}: the endpoint limit is a number in \
                             1..={MAX_EPS_LIMIT}"
                        ),
                    )
                }
            },
            None => {
                base.push(',');
                base.push_str(p);
            }
        }
    }
    Ok((base, max_eps, map))
}

impl InterfaceAdapter {
    /// Opens an IA by name (`dat_ia_open`) and creates its async EVD with `async_evd_qlen`.
    ///
    /// Names select the link:
    /// - `"loopback"` (address 127.0.0.1) or `"loopback:<ipv4>"`: the in-process loopback
    ///   link. IAs of one process with the same address share connection qualifiers, like
    ///   sockets on one IP.
    ///
    /// - `"tcp"` (127.0.0.1) or `"tcp:<ipv4>"`: the iWARP-over-TCP link on that local
    ///   address; `"tcp:<ipv4>,crc"` also asks peers for MPA CRC32c, and
    ///   `",dead_peer=<seconds>"` sets how long a silent peer keeps a connection (30 s by
    ///   default: [`IaAttr::dead_peer_timeout`]). Small messages posted in a burst (one
    ///   thread posting with no look for completions between) are written together when the
    ///   thread next looks (`dequeue`, `wait`) or the progress thread runs (woken for it);
    ///   `",nocoalesce"` writes each when it is posted. Each tcp IA runs one progress thread.
    ///
    /// - `"shm"` (127.0.0.1) or `"shm:<ipv4>"`: the shared-memory link between processes of
    ///   one host (rings in shared memory; the address names the rendezvous only). Each shm
    ///   IA runs one progress thread. Its library memory is mapped by peers unless the name
    ///   adds `",map=off"` ([`IaAttr::map_library_memory`]).
    ///
    /// Every form with an address also takes `",max_eps=<n>"`: the most endpoints the IA
    /// holds at once ([`IaAttr::max_eps`]; 16,384 by default, at most [`MAX_EPS_LIMIT`]). A
    /// tcp endpoint that connects also needs a file descriptor (`ulimit -n`), a shm one three.
    ///
    /// Other names are `DAT_PROVIDER_NOT_FOUND`.
    pub fn open(name: &str, async_evd_qlen: usize) -> Result<(InterfaceAdapter, Evd)> {
        const OP: &str = "ia_open";
        let obj = Object::new("ia", 0);
        let mut tcp = None;
        let (base, max_eps, map) = ia_options(name)?;
        let base = base.as_str();
        let ((link, progress), addr): (LinkPair, IaAddress) = match base.split_once(':') {
            None if base == "loopback" => (
                link::loopback::link(),
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            ),
            Some(("loopback", a)) => {
                let ip: Ipv4Addr = a.parse().or_else(|_| {
                    err(
                        ErrorType::InvalidAddress,
                        Subtype::InvalidAddressMalformed,
                        OP,
                        obj,
                        format!("{a:?} is not an IPv4 address"),
                    )
                })?;
                (link::loopback::link(), SocketAddr::new(IpAddr::V4(ip), 0))
            }
            None if base == "tcp" => {
                let (l, addr) = tcp_link(name, "127.0.0.1")?;
                tcp = Some(l.clone());
                ((l.clone(), l), addr)
            }
            Some(("tcp", rest)) => {
                let (l, addr) = tcp_link(name, rest)?;
                tcp = Some(l.clone());
                ((l.clone(), l), addr)
            }
            None if base == "shm" => shm_link(name, "127.0.0.1")?,
            Some(("shm", rest)) => shm_link(name, rest)?,
            _ => {
                return err(
                    ErrorType::ProviderNotFound,
                    Subtype::NameNotRegistered,
                    OP,
                    obj,
                    format!(
                        "no IA named {name:?} (known: \"loopback\", \"loopback:<ipv4>\", \
                         \"tcp\", \"tcp:<ipv4>[,crc][,nocoalesce][,dead_peer=<seconds>]\", \"shm\", \"shm:<ipv4>\"; \
                         every form with an address also takes \",max_eps=<n>\")"
                    ),
                )
            }
        };
        let mut attr = IaAttr::defaults(name, addr, &link.caps());
        if let Some(n) = max_eps {
            attr.max_eps = n;
        }
        // Library memory peers map: a published table for them (without one, mapping is off).
        let published = (map && link.name() == "shm")
            .then(crate::mem::published::Published::new)
            .and_then(|p| p.ok());
        attr.map_library_memory = published.is_some();
        if async_evd_qlen == 0 || async_evd_qlen > attr.max_evd_qlen {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                obj,
                format!(
                    "async EVD length {async_evd_qlen} is not in 1..={}",
                    attr.max_evd_qlen
                ),
            );
        }
        let inner = Arc::new(IaInner {
            id: NEXT_IA.fetch_add(1, Ordering::Relaxed),
            attr,
            link,
            progress,
            memtable: Arc::new(match published {
                Some(p) => MemTable::with_published(p),
                None => MemTable::default(),
            }),
            tcp,
            closed: AtomicBool::new(false),
            objects: Mutex::new(Objects::default()),
            async_evd: Mutex::new(None),
            end_events: Mutex::new(()),
            owner: Mutex::new(Weak::new()),
        });
        let owner = Arc::new(IaOwner(Arc::downgrade(&inner)));
        *inner.owner.lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(&owner);
        let evd = match EvdInner::new(
            inner.next_id(),
            Arc::downgrade(&inner),
            inner.progress.clone(),
            async_evd_qlen,
            EvdFlags::ASYNC,
            None,
            true,
        ) {
            Ok(e) => Evd(Handle::new(e)),
            Err(e) => {
                let _ = InterfaceAdapter(inner, owner).close(CloseFlags::Abrupt);
                return err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceMemory,
                    OP,
                    obj,
                    format!("the async EVD's queue: {e}"),
                );
            }
        };
        inner.objects().evds.insert(evd.0.id, evd.internal());
        *inner.async_evd.lock().unwrap_or_else(|p| p.into_inner()) = Some(evd.internal());
        tracing::debug!(
            ia = inner.id,
            name,
            link = inner.link.name(),
            address = %inner.attr.ia_address,
            "IA opened"
        );
        Ok((InterfaceAdapter(inner, owner), evd))
    }

    /// The IA's process-unique id.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// IA attributes (`dat_ia_query`).
    pub fn query(&self) -> Result<IaAttr> {
        self.0.check_open("ia_query")?;
        Ok(self.0.attr.clone())
    }

    /// Provider attributes (`dat_ia_query`).
    pub fn provider_attr(&self) -> Result<ProviderAttr> {
        self.0.check_open("ia_query")?;
        Ok(ProviderAttr {
            provider_name: "dapl-rs",
            provider_version: (0, 1),
            dapl_version: (2, 0),
            srq_supported: true,
            srq_watermarks_supported: true,
            link: self.0.link.name(),
            link_caps: self.0.link.caps(),
        })
    }

    /// The IA's async EVD.
    pub fn async_evd(&self) -> Option<Evd> {
        self.0
            .async_evd
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(Evd::user)
    }

    /// Creates a Protection Zone (`dat_pz_create`).
    pub fn pz_create(&self) -> Result<Pz> {
        const OP: &str = "pz_create";
        self.0.check_open(OP)?;
        let mut o = self.0.objects();
        if o.pzs.len() >= self.0.attr.max_pzs {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceProtectionDomain,
                OP,
                self.0.object(),
                format!("the IA already has {} PZs", o.pzs.len()),
            );
        }
        let pz = Arc::new(PzInner::new(self.0.next_id(), self.0.clone()));
        o.pzs.insert(pz.id, Pz(Handle::internal(pz.clone())));
        Ok(Pz(Handle::new(pz)))
    }

    /// Creates an Event Dispatcher (`dat_evd_create`) taking the streams in `flags`.
    pub fn evd_create(&self, qlen: usize, cno: Option<&Cno>, flags: EvdFlags) -> Result<Evd> {
        const OP: &str = "evd_create";
        self.0.check_open(OP)?;
        if qlen == 0 || qlen > self.0.attr.max_evd_qlen {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.0.object(),
                format!(
                    "queue length {qlen} is not in 1..={}",
                    self.0.attr.max_evd_qlen
                ),
            );
        }
        if flags.is_empty() || flags.contains(EvdFlags::ASYNC) {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg4,
                OP,
                self.0.object(),
                "flags must name at least one stream, and only ia_open creates the async EVD",
            );
        }
        if let Some(c) = cno {
            if c.0.freed.load(Ordering::Acquire) {
                return err(
                    ErrorType::InvalidHandle,
                    Subtype::InvalidHandleCno,
                    OP,
                    self.0.object(),
                    "the CNO was freed",
                );
            }
        }
        let mut o = self.0.objects();
        if o.evds.len() >= self.0.attr.max_evds {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceTevd,
                OP,
                self.0.object(),
                format!("the IA already has {} EVDs", o.evds.len()),
            );
        }
        let evd = match EvdInner::new(
            self.0.next_id(),
            Arc::downgrade(&self.0),
            self.0.progress.clone(),
            qlen,
            flags,
            cno.cloned(),
            false,
        ) {
            Ok(e) => Evd(Handle::new(e)),
            Err(e) => {
                return err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceMemory,
                    OP,
                    self.0.object(),
                    format!("the EVD's queue: {e}"),
                )
            }
        };
        o.evds.insert(evd.0.id, evd.internal());
        Ok(evd)
    }

    /// Creates a Consumer Notification Object (`dat_cno_create`).
    pub fn cno_create(&self) -> Result<Cno> {
        self.0.check_open("cno_create")?;
        let cno = CnoInner::new(self.0.next_id(), Arc::downgrade(&self.0));
        self.0
            .objects()
            .cnos
            .insert(cno.id, Cno(Handle::internal(cno.clone())));
        Ok(Cno(Handle::new(cno)))
    }

    /// Closes the IA (`dat_ia_close`). Graceful: refused with `DAT_INVALID_STATE` while any
    /// object created on it is alive. Abrupt: disconnects every endpoint (flushing what is
    /// outstanding), frees every object, and closes. (Dropping the last handle closes
    /// abruptly too.)
    pub fn close(&self, flags: CloseFlags) -> Result<()> {
        self.0.close(flags)
    }
}

impl IaInner {
    /// A user handle to this IA while one lives (after the last is dropped the IA is closed).
    pub(crate) fn handle(self: &Arc<Self>) -> Option<InterfaceAdapter> {
        let owner = self
            .owner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .upgrade()?;
        Some(InterfaceAdapter(self.clone(), owner))
    }

    /// The live objects of a weak part of the registry, upgraded (to be dropped after the
    /// registry's lock is released, which this releases before it returns).
    fn live<T>(&self, part: impl Fn(&Objects) -> &HashMap<u64, Weak<T>>) -> Vec<Arc<T>> {
        part(&self.objects())
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// `InterfaceAdapter::close`.
    pub(crate) fn close(&self, flags: CloseFlags) -> Result<()> {
        const OP: &str = "ia_close";
        self.check_open(OP)?;
        if flags == CloseFlags::Graceful {
            let live = self.objects().live_user_objects();
            if !live.is_empty() {
                let total: usize = live.iter().map(|&(_, n)| n).sum();
                let kinds: Vec<String> = live.iter().map(|(k, n)| format!("{n} {k}")).collect();
                return err(
                    ErrorType::InvalidState,
                    Subtype::InvalidStateIaInUse,
                    OP,
                    self.object(),
                    format!(
                        "{total} objects are still alive on this IA ({})",
                        kinds.join(", ")
                    ),
                );
            }
        } else {
            self.teardown();
        }
        tracing::debug!(ia = self.id, ?flags, "IA closed");
        self.link.shutdown();
        self.closed.store(true, Ordering::Release);
        let evds: Vec<Evd> = self.objects().evds.values().cloned().collect();
        for e in evds {
            e.0.release();
        }
        *self.async_evd.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }

    fn teardown(&self) {
        // Order: stop new connections, break existing ones, then free leaves first.
        let sps: Vec<ServicePoint> = self.objects().sps.values().cloned().collect();
        for sp in sps {
            sp.release();
        }
        let crs: Vec<ConnectionRequest> = self.objects().crs.values().cloned().collect();
        for cr in crs {
            let _ = cr.reject(&[]);
        }
        let eps: Vec<Endpoint> = self.objects().eps.values().cloned().collect();
        for ep in &eps {
            ep.0.qp.abort_for_close();
        }
        for ep in eps {
            ep.0.release();
        }
        let rmrs: Vec<Rmr> = self.objects().rmrs.values().cloned().collect();
        for r in rmrs {
            r.0.release();
        }
        let srqs: Vec<Srq> = self.objects().srqs.values().cloned().collect();
        for s in srqs {
            s.0.release();
        }
        // Upgraded in one statement and dropped after the registry's lock is released (an LMR
        // whose last handle goes with it frees itself and takes that lock).
        let lmrs = self.live(|o| &o.lmrs);
        for l in lmrs {
            l.release();
        }
        let mut o = self.objects();
        for pz in o.pzs.values() {
            pz.0.freed.store(true, Ordering::Release);
        }
        o.pzs.clear();
        for c in o.cnos.values() {
            c.0.freed.store(true, Ordering::Release);
        }
        o.cnos.clear();
    }
}
