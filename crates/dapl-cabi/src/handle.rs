//! C handles: what libdat2 and the consumer hold for each DAT object.
//!
//! libdat2 dispatches on `*(DAT_PROVIDER **)handle`, so every handle points at a [`Handle`]
//! whose first word is the provider. Handles are leaked, never returned to the allocator: a
//! freed object becomes a tombstone (provider pointer kept, object gone), so a stale handle
//! that libdat2 dereferences before calling us still reads valid memory, and we answer
//! `DAT_INVALID_HANDLE`. Every handle pointer we receive is first looked up in [`LIVE`], the
//! set of every handle ever made; anything else (a small-integer IA index, garbage) is never
//! dereferenced.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
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
    pub(crate) children: Mutex<Vec<&'static Handle>>,
}

/// An endpoint as the C side sees it.
pub(crate) struct EpC {
    pub(crate) ep: Endpoint,
    pub(crate) pz: &'static Handle,
    pub(crate) recv_evd: Option<&'static Handle>,
    pub(crate) request_evd: Option<&'static Handle>,
    pub(crate) connect_evd: Option<&'static Handle>,
    pub(crate) srq: Option<&'static Handle>,
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
    pub(crate) pz: &'static Handle,
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
    Rmr(Rmr, &'static Handle),
    Pz(Pz),
    Psp(ServicePoint, &'static Handle, DAT_PSP_FLAGS),
    Rsp(ServicePoint, &'static Handle, &'static Handle),
    Evd(Evd),
    Cr(Arc<CrC>),
    Cno(Cno),
    Srq(Srq, &'static Handle),
}

/// What every DAT handle points at.
#[repr(C)]
pub(crate) struct Handle {
    /// First word: libdat2's `DAT_HANDLE_TO_PROVIDER`.
    provider: *const DAT_PROVIDER,
    pub(crate) kind: Kind,
    /// The IA this object belongs to (the IA itself for an IA handle).
    pub(crate) ia: *const Handle,
    /// `dat_set_consumer_context`.
    pub(crate) context: AtomicU64,
    /// `None` once freed.
    obj: RwLock<Option<Obj>>,
}

// SAFETY: the raw pointers are to leaked, never-freed memory (the provider entry and other
// handles) that is only read; everything mutable is behind atomics or locks.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// Addresses of every handle ever made (tombstones included).
static LIVE: RwLock<Option<HashSet<usize>>> = RwLock::new(None);
/// Rust object id -> its handle, for objects that events name (EP, EVD, SRQ, RMR, PSP, RSP).
static BY_ID: RwLock<Option<HashMap<u64, &'static Handle>>> = RwLock::new(None);

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Handle {
    /// Makes a handle for `obj` under the IA handle `ia` (None: this is the IA).
    pub(crate) fn create(
        provider: *const DAT_PROVIDER,
        ia: Option<&'static Handle>,
        obj: Obj,
    ) -> &'static Handle {
        let id = obj_id(&obj);
        let h: &'static Handle = Box::leak(Box::new(Handle {
            provider,
            kind: obj.kind(),
            ia: ia.map_or(std::ptr::null(), |h| h as *const Handle),
            context: AtomicU64::new(0),
            obj: RwLock::new(Some(obj)),
        }));
        let addr = h as *const Handle as usize;
        write(&LIVE).get_or_insert_with(HashSet::new).insert(addr);
        if let Some(id) = id {
            write(&BY_ID).get_or_insert_with(HashMap::new).insert(id, h);
        }
        if let Some(ia) = ia {
            if let Some(Obj::Ia(iac)) = ia.obj() {
                iac.children
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(h);
            }
        }
        h
    }

    /// The provider this handle dispatches to.
    pub(crate) fn provider(&self) -> *const DAT_PROVIDER {
        self.provider
    }

    /// The handle value given to C.
    pub(crate) fn as_ptr(&'static self) -> DAT_HANDLE {
        self as *const Handle as DAT_HANDLE
    }

    /// Looks a C handle up: `Some` only for a pointer this library made (live or tombstone).
    pub(crate) fn from_ptr(p: *const c_void) -> Option<&'static Handle> {
        if p.is_null() || !read(&LIVE).as_ref()?.contains(&(p as usize)) {
            return None;
        }
        // SAFETY: `p` is in LIVE, so it came from `Box::leak` in `create` and is never freed.
        Some(unsafe { &*(p as *const Handle) })
    }

    /// The live object, or `None` for a tombstone.
    pub(crate) fn obj(&self) -> Option<Obj> {
        read(&self.obj).clone()
    }

    /// The IA handle this object belongs to.
    pub(crate) fn ia_handle(&'static self) -> &'static Handle {
        if self.ia.is_null() {
            return self;
        }
        // SAFETY: `ia` is a leaked handle made by `create`.
        unsafe { &*self.ia }
    }

    /// Frees the object: the handle becomes a tombstone.
    pub(crate) fn kill(&self) {
        let old = write(&self.obj).take();
        if let Some(id) = old.as_ref().and_then(obj_id) {
            if let Some(m) = write(&BY_ID).as_mut() {
                m.remove(&id);
            }
        }
    }

    /// The handle of the Rust object with this id, if it has one.
    pub(crate) fn by_id(id: u64) -> Option<&'static Handle> {
        read(&BY_ID).as_ref()?.get(&id).copied()
    }
}

/// Looks up a handle of kind `kind` that is still live.
pub(crate) fn get(p: *const c_void, kind: Kind) -> Result<(&'static Handle, Obj), DAT_RETURN> {
    let h = Handle::from_ptr(p).ok_or(kind.invalid())?;
    if h.kind != kind {
        return Err(kind.invalid());
    }
    let o = h.obj().ok_or(kind.invalid())?;
    Ok((h, o))
}

macro_rules! getter {
    ($name:ident, $kind:ident, $t:ty, $pat:pat => $val:expr) => {
        pub(crate) fn $name(p: *const c_void) -> Result<(&'static Handle, $t), DAT_RETURN> {
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
pub(crate) fn ptr_or_null(h: Option<&'static Handle>) -> DAT_HANDLE {
    h.map_or(std::ptr::null_mut(), |h| h.as_ptr())
}

/// An optional EVD argument: NULL is `None`, anything else must be a live EVD.
pub(crate) fn opt_evd(p: *const c_void) -> Result<Option<(&'static Handle, Evd)>, DAT_RETURN> {
    if p.is_null() {
        Ok(None)
    } else {
        evd(p).map(Some)
    }
}

/// Tombstones every handle of a closed IA, and the IA's own.
pub(crate) fn kill_ia(h: &'static Handle, iac: &IaC) {
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
pub(crate) fn ia_index(ia: &'static Handle) -> DAT_IA_HANDLE {
    let mut out: DAT_IA_HANDLE = std::ptr::null_mut();
    // SAFETY: libdat2's converter only reads its handle table and writes `out`.
    let r = unsafe { dats_get_ia_handle(ia.as_ptr(), &mut out) };
    if r == DAT_SUCCESS && !out.is_null() {
        out
    } else {
        ia.as_ptr()
    }
}
