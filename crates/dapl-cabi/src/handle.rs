//! C handles: what libdat2 and the consumer hold for each DAT object.
//!
//! libdat2 dispatches on `*(DAT_PROVIDER **)handle`, so every handle value points at a word that
//! holds the provider pointer, even once its object is freed: a stale handle that libdat2
//! dereferences before calling us still reads valid memory, and we answer `DAT_INVALID_HANDLE`.
//! Handles live in [`Slot`]s, which are never returned to the allocator but are reused for new
//! objects: a slot has `STUBS` such words and its handle value is the address of word
//! `generation % STUBS`, so the value of a freed object's handle is not the value of the next
//! objects in that slot; a freed slot waits behind `QUARANTINE` others before its reuse. So a
//! C program that makes and frees objects for days keeps a bounded number of slots, and a stale
//! handle is recognised as such unless it outlived `STUBS * QUARANTINE` frees. Every handle
//! value we receive is looked up by address in the slot table ([`Handle::from_ptr`]): anything
//! else (a small-integer IA index, garbage) is never dereferenced.

use std::collections::HashMap;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use dapl::{
    Cno, ConnectionRequest, Endpoint, Evd, InterfaceAdapter, Lmr, Pz, Rmr, ServicePoint, Srq,
};

use crate::ffi::*;
use crate::provider::ProviderEntry;

/// Which DAT object a handle names (`DAT_HANDLE_TYPE` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ia,
    Ep,
    Lmr,
    Rmr,
    Pz,
    Psp,
    Rsp,
    Evd,
    Cr,
    Cno,
    Srq,
}

impl Kind {
    pub(crate) fn handle_type(self) -> DAT_HANDLE_TYPE {
        match self {
            Kind::Ia => DAT_HANDLE_TYPE_IA,
            Kind::Ep => DAT_HANDLE_TYPE_EP,
            Kind::Lmr => DAT_HANDLE_TYPE_LMR,
            Kind::Rmr => DAT_HANDLE_TYPE_RMR,
            Kind::Pz => DAT_HANDLE_TYPE_PZ,
            Kind::Psp => DAT_HANDLE_TYPE_PSP,
            Kind::Rsp => DAT_HANDLE_TYPE_RSP,
            Kind::Evd => DAT_HANDLE_TYPE_EVD,
            Kind::Cr => DAT_HANDLE_TYPE_CR,
            Kind::Cno => DAT_HANDLE_TYPE_CNO,
            Kind::Srq => DAT_HANDLE_TYPE_SRQ,
        }
    }

    /// `DAT_INVALID_HANDLE` with this kind's subtype.
    pub(crate) fn invalid(self) -> DAT_RETURN {
        DAT_CLASS_ERROR
            | DAT_INVALID_HANDLE
            | match self {
                Kind::Ia => DAT_INVALID_HANDLE_IA,
                Kind::Ep => DAT_INVALID_HANDLE_EP,
                Kind::Lmr => DAT_INVALID_HANDLE_LMR,
                Kind::Rmr => DAT_INVALID_HANDLE_RMR,
                Kind::Pz => DAT_INVALID_HANDLE_PZ,
                Kind::Psp => DAT_INVALID_HANDLE_PSP,
                Kind::Rsp => DAT_INVALID_HANDLE_RSP,
                Kind::Evd => DAT_INVALID_HANDLE_EVD_REQUEST,
                Kind::Cr => DAT_INVALID_HANDLE_CR,
                Kind::Cno => DAT_INVALID_HANDLE_CNO,
                Kind::Srq => DAT_INVALID_HANDLE_SRQ,
            }
    }
}

/// An IA as the C side sees it.
pub(crate) struct IaC {
    pub(crate) ia: InterfaceAdapter,
    pub(crate) entry: &'static ProviderEntry,
    /// `ia_attr.ia_address_ptr` points here (stable while the IA lives).
    pub(crate) address: Box<SockAddr>,
    /// Every handle created under this IA, tombstoned when the IA closes.
    pub(crate) children: Mutex<Vec<Handle>>,
}

/// An endpoint as the C side sees it.
pub(crate) struct EpC {
    pub(crate) ep: Endpoint,
    pub(crate) pz: Handle,
    pub(crate) recv_evd: Option<Handle>,
    pub(crate) request_evd: Option<Handle>,
    pub(crate) connect_evd: Option<Handle>,
    pub(crate) srq: Option<Handle>,
    /// Private data of the last connection event, valid until the next one or the EP's free.
    pub(crate) event_pdata: Mutex<Vec<Box<[u8]>>>,
    /// `ep_query`'s remote address pointer points into here: one box per distinct peer the
    /// EP was connected to, kept until the EP is freed (a box, so the address stays put while
    /// the vector grows).
    #[allow(clippy::vec_box)]
    pub(crate) remote_addrs: Mutex<Vec<Box<SockAddr>>>,
}

/// An LMR and what it was created with (for `lmr_query`).
pub(crate) struct LmrC {
    pub(crate) lmr: Lmr,
    pub(crate) pz: Handle,
    pub(crate) mem_type: DAT_MEM_TYPE,
    pub(crate) privileges: DAT_MEM_PRIV_FLAGS,
    pub(crate) va_type: DAT_VA_TYPE,
}

/// A connection request and its requester's address (for `cr_query`).
pub(crate) struct CrC {
    pub(crate) cr: ConnectionRequest,
    pub(crate) remote: Box<SockAddr>,
    pub(crate) remote_port: u64,
}

/// The Rust object behind a live handle.
#[derive(Clone)]
pub(crate) enum Obj {
    Ia(Arc<IaC>),
    Ep(Arc<EpC>),
    Lmr(Arc<LmrC>),
    Rmr(Rmr, Handle),
    Pz(Pz),
    Psp(ServicePoint, Handle, DAT_PSP_FLAGS),
    Rsp(ServicePoint, Handle, Handle),
    Evd(Evd),
    Cr(Arc<CrC>),
    Cno(Cno),
    Srq(Srq, Handle),
}

/// How many handle values one slot has: a slot's handle is the address of stub
/// `generation % STUBS`, so a handle of a freed object stays invalid while its slot is reused
/// up to `STUBS - 1` more times.
const STUBS: usize = 8;
/// Freed slots wait in a queue this long before one is reused: a stale handle is taken for a
/// live one only after `STUBS * QUARANTINE` frees at the least.
const QUARANTINE: usize = 1024;

/// The words a handle value points at: each holds the provider pointer, as libdat2 reads
/// `*(DAT_PROVIDER **)handle` before it calls us, even for a stale handle.
#[repr(C, align(64))]
struct Stubs([AtomicPtr<DAT_PROVIDER>; STUBS]);

/// What a slot holds for its current object.
struct SlotState {
    generation: u64,
    kind: Kind,
    provider: *const DAT_PROVIDER,
    /// The IA this object belongs to (None for an IA).
    ia: Option<Handle>,
    /// `None` once freed.
    obj: Option<Obj>,
}

/// One handle slot, never returned to the allocator and reused for a new object once freed
/// (after `QUARANTINE`).
pub(crate) struct Slot {
    stubs: Stubs,
    state: RwLock<SlotState>,
    /// `dat_set_consumer_context` (reset on reuse).
    context: AtomicU64,
}

// SAFETY: the raw pointer is to a leaked, never-freed provider entry that is only read;
// everything mutable is behind atomics or locks.
unsafe impl Send for Slot {}
// SAFETY: as above.
unsafe impl Sync for Slot {}

/// A DAT handle as this library holds it: a slot and the generation of the object it names.
/// Its C value ([`as_ptr`](Handle::as_ptr)) is the address of one of the slot's stubs.
#[derive(Clone, Copy)]
pub(crate) struct Handle {
    slot: &'static Slot,
    generation: u64,
    pub(crate) kind: Kind,
}

/// The slots: by the address of their stubs (every value a handle can have is inside one), and
/// the freed ones in the order they were freed.
struct Slots {
    by_addr: HashMap<usize, &'static Slot>,
    free: std::collections::VecDeque<&'static Slot>,
}

/// Read on every handle lookup (every C call), written only when a slot is made or freed.
static SLOTS: RwLock<Option<Slots>> = RwLock::new(None);
/// Rust object id -> its handle, for objects that events name (EP, EVD, SRQ, RMR, PSP, RSP).
static BY_ID: RwLock<Option<HashMap<u64, Handle>>> = RwLock::new(None);

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

fn slots() -> std::sync::RwLockWriteGuard<'static, Option<Slots>> {
    write(&SLOTS)
}

impl Handle {
    /// Makes a handle for `obj` under the IA handle `ia` (None: this is the IA), in a freed
    /// slot past its quarantine or a new one.
    pub(crate) fn create(provider: *const DAT_PROVIDER, ia: Option<Handle>, obj: Obj) -> Handle {
        let id = obj_id(&obj);
        let kind = obj.kind();
        let reused = {
            let mut g = slots();
            let s = g.get_or_insert_with(|| Slots {
                by_addr: HashMap::new(),
                free: std::collections::VecDeque::new(),
            });
            if s.free.len() > QUARANTINE {
                s.free.pop_front()
            } else {
                None
            }
        };
        let slot: &'static Slot = match reused {
            Some(slot) => slot,
            None => {
                let slot: &'static Slot = Box::leak(Box::new(Slot {
                    stubs: Stubs(std::array::from_fn(
                        |_| AtomicPtr::new(std::ptr::null_mut()),
                    )),
                    state: RwLock::new(SlotState {
                        generation: 0,
                        kind,
                        provider,
                        ia: None,
                        obj: None,
                    }),
                    context: AtomicU64::new(0),
                }));
                let addr = slot.stubs.0.as_ptr() as usize;
                if let Some(s) = slots().as_mut() {
                    s.by_addr.insert(addr, slot);
                }
                slot
            }
        };
        for w in &slot.stubs.0 {
            w.store(provider.cast_mut(), Ordering::Release);
        }
        slot.context.store(0, Ordering::Relaxed);
        let generation = {
            let mut st = write(&slot.state);
            st.generation += 1;
            st.kind = kind;
            st.provider = provider;
            st.ia = ia;
            st.obj = Some(obj);
            st.generation
        };
        let h = Handle {
            slot,
            generation,
            kind,
        };
        if let Some(id) = id {
            write(&BY_ID).get_or_insert_with(HashMap::new).insert(id, h);
        }
        if let Some(ia) = ia {
            if let Some(Obj::Ia(iac)) = ia.obj() {
                let mut c = iac.children.lock().unwrap_or_else(|p| p.into_inner());
                // Freed children go when the list has doubled since they were last dropped:
                // an IA that makes and frees objects for days keeps only its live ones.
                if c.len() >= 64 && c.len().is_power_of_two() {
                    c.retain(|h| h.obj().is_some());
                }
                c.push(h);
            }
        }
        h
    }

    /// The provider this handle dispatches to.
    pub(crate) fn provider(self) -> *const DAT_PROVIDER {
        read(&self.slot.state).provider
    }

    /// The handle value given to C: the stub of this generation.
    pub(crate) fn as_ptr(self) -> DAT_HANDLE {
        (&self.slot.stubs.0[(self.generation % STUBS as u64) as usize] as *const AtomicPtr<_>)
            .cast_mut()
            .cast()
    }

    /// Looks a C handle up: `Some` only for the current value of a slot this library made
    /// (its object live or freed since); anything else (a stale value of a reused slot, a
    /// small-integer IA index, garbage) is `None` and is never dereferenced.
    pub(crate) fn from_ptr(p: *const c_void) -> Option<Handle> {
        let p = p as usize;
        if p == 0 || p % 8 != 0 {
            return None;
        }
        let base = p & !63;
        let slot = *read(&SLOTS).as_ref()?.by_addr.get(&base)?;
        let st = read(&slot.state);
        if (st.generation % STUBS as u64) as usize != (p - base) / 8 {
            return None;
        }
        Some(Handle {
            slot,
            generation: st.generation,
            kind: st.kind,
        })
    }

    /// The live object, or `None` once it was freed.
    pub(crate) fn obj(self) -> Option<Obj> {
        let st = read(&self.slot.state);
        if st.generation != self.generation {
            return None;
        }
        st.obj.clone()
    }

    /// The IA handle this object belongs to.
    pub(crate) fn ia_handle(self) -> Handle {
        let st = read(&self.slot.state);
        match st.ia {
            Some(ia) if st.generation == self.generation => ia,
            _ => self,
        }
    }

    /// `dat_set_consumer_context`'s word.
    pub(crate) fn context(self) -> &'static AtomicU64 {
        &self.slot.context
    }

    /// Frees the object: its handle value is invalid from now on, and the slot joins the
    /// quarantine queue. Nothing if it was freed already.
    pub(crate) fn kill(self) {
        let old = {
            let mut st = write(&self.slot.state);
            if st.generation != self.generation {
                return;
            }
            st.ia = None;
            st.obj.take()
        };
        let Some(old) = old else {
            return;
        };
        if let Some(id) = obj_id(&old) {
            if let Some(m) = write(&BY_ID).as_mut() {
                if m.get(&id).is_some_and(|h| {
                    h.generation == self.generation && std::ptr::eq(h.slot, self.slot)
                }) {
                    m.remove(&id);
                }
            }
        }
        if let Some(s) = slots().as_mut() {
            s.free.push_back(self.slot);
        }
        drop(old);
    }

    /// The handle of the Rust object with this id, if it has one.
    pub(crate) fn by_id(id: u64) -> Option<Handle> {
        read(&BY_ID).as_ref()?.get(&id).copied()
    }
}

/// Looks up a handle of kind `kind` that is still live.
pub(crate) fn get(p: *const c_void, kind: Kind) -> Result<(Handle, Obj), DAT_RETURN> {
    let h = Handle::from_ptr(p).ok_or(kind.invalid())?;
    if h.kind != kind {
        return Err(kind.invalid());
    }
    let o = h.obj().ok_or(kind.invalid())?;
    Ok((h, o))
}

macro_rules! getter {
    ($name:ident, $kind:ident, $t:ty, $pat:pat => $val:expr) => {
        pub(crate) fn $name(p: *const c_void) -> Result<(Handle, $t), DAT_RETURN> {
            match get(p, Kind::$kind)? {
                (h, $pat) => Ok((h, $val)),
                _ => Err(Kind::$kind.invalid()),
            }
        }
    };
}

getter!(ia, Ia, Arc<IaC>, Obj::Ia(x) => x);
getter!(ep, Ep, Arc<EpC>, Obj::Ep(x) => x);
getter!(lmr, Lmr, Arc<LmrC>, Obj::Lmr(x) => x);
getter!(rmr, Rmr, Rmr, Obj::Rmr(x, _) => x);
getter!(pz, Pz, Pz, Obj::Pz(x) => x);
getter!(evd, Evd, Evd, Obj::Evd(x) => x);
getter!(cr, Cr, Arc<CrC>, Obj::Cr(x) => x);
getter!(cno, Cno, Cno, Obj::Cno(x) => x);
getter!(srq, Srq, Srq, Obj::Srq(x, _) => x);

/// The C value of an optional handle: NULL for `None`.
pub(crate) fn ptr_or_null(h: Option<Handle>) -> DAT_HANDLE {
    h.map_or(std::ptr::null_mut(), |h| h.as_ptr())
}

/// An optional EVD argument: NULL is `None`, anything else must be a live EVD.
pub(crate) fn opt_evd(p: *const c_void) -> Result<Option<(Handle, Evd)>, DAT_RETURN> {
    if p.is_null() {
        Ok(None)
    } else {
        evd(p).map(Some)
    }
}

/// Tombstones every handle of a closed IA, and the IA's own.
pub(crate) fn kill_ia(h: Handle, iac: &IaC) {
    let children = std::mem::take(&mut *iac.children.lock().unwrap_or_else(|p| p.into_inner()));
    for c in children {
        c.kill();
    }
    h.kill();
}

impl Obj {
    fn kind(&self) -> Kind {
        match self {
            Obj::Ia(_) => Kind::Ia,
            Obj::Ep(_) => Kind::Ep,
            Obj::Lmr(_) => Kind::Lmr,
            Obj::Rmr(..) => Kind::Rmr,
            Obj::Pz(_) => Kind::Pz,
            Obj::Psp(..) => Kind::Psp,
            Obj::Rsp(..) => Kind::Rsp,
            Obj::Evd(_) => Kind::Evd,
            Obj::Cr(_) => Kind::Cr,
            Obj::Cno(_) => Kind::Cno,
            Obj::Srq(..) => Kind::Srq,
        }
    }
}

/// The Rust id of an object that events can name.
pub(crate) fn obj_id(o: &Obj) -> Option<u64> {
    match o {
        Obj::Ep(e) => Some(e.ep.id()),
        Obj::Evd(e) => Some(e.id()),
        Obj::Srq(s, _) => Some(s.id()),
        Obj::Rmr(r, _) => Some(r.id()),
        Obj::Psp(s, ..) | Obj::Rsp(s, ..) => Some(s.id()),
        Obj::Cno(c) => Some(c.id()),
        _ => None,
    }
}

/// A `struct sockaddr_in` (the `DAT_IA_ADDRESS_PTR` we hand out), 16 bytes.
pub(crate) type SockAddr = libc::sockaddr_in;

/// `addr` as a `sockaddr_in` (IPv6 is not used by the links; it maps to 0.0.0.0).
pub(crate) fn sockaddr(addr: Option<SocketAddr>) -> SockAddr {
    let (ip, port) = match addr {
        Some(SocketAddr::V4(a)) => (u32::from(*a.ip()), a.port()),
        _ => (0, 0),
    };
    SockAddr {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: ip.to_be() },
        sin_zero: [0; 8],
    }
}

/// The consumer's value for an IA handle: libdat2 gives consumers small indexes into its own
/// table, and any IA handle we put in a query result must be that index (contract 2.2).
pub(crate) fn ia_index(ia: Handle) -> DAT_IA_HANDLE {
    let mut out: DAT_IA_HANDLE = std::ptr::null_mut();
    // SAFETY: libdat2's converter only reads its handle table and writes `out`.
    let r = unsafe { dats_get_ia_handle(ia.as_ptr(), &mut out) };
    if r == DAT_SUCCESS && !out.is_null() {
        out
    } else {
        ia.as_ptr()
    }
}
