//! Service Points: Public (`DAT_PSP`, listens for any endpoint) and Reserved (`DAT_RSP`,
//! listens for one reserved endpoint). A connection request arriving at either becomes a
//! [`ConnectionRequest`] announced by a CR arrival event on the service point's EVD.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use crate::cr::{ConnectionRequest, CrInner};
use crate::engine::port::{is_resource_error, ListenError, Listener, PendingRequest};
use crate::ep::Endpoint;
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::evd::Evd;
use crate::event::{CrArrival, Event};
use crate::handle::{Handle, Owned};
use crate::ia::{IaInner, InterfaceAdapter};
use crate::types::{ConnQual, EpState, EvdFlags};

/// `DAT_PSP_FLAGS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PspFlags {
    /// `DAT_PSP_CONSUMER_FLAG`: the consumer supplies the endpoint at accept.
    Consumer = 0,
    /// `DAT_PSP_PROVIDER_FLAG`: accepted for compatibility; the consumer still supplies the
    /// endpoint at accept (this provider does not create endpoints on its own).
    Provider = 1,
}

#[derive(Debug, Clone)]
pub(crate) enum SpKind {
    Psp(PspFlags),
    /// An internal handle: the EP goes with the RSP if its own handles went first.
    Rsp(Endpoint),
}

pub(crate) struct SpInner {
    pub(crate) id: u64,
    pub(crate) ia: Arc<IaInner>,
    pub(crate) qual: ConnQual,
    pub(crate) evd: Evd,
    pub(crate) kind: SpKind,
    pub(crate) freed: AtomicBool,
    /// The consumer's handles (`handle.rs`).
    handles: AtomicUsize,
}

impl Owned for SpInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        self.release();
    }
}

/// A Public or Reserved Service Point (`DAT_PSP_HANDLE` / `DAT_RSP_HANDLE`).
///
/// Dropping the last handle frees it as [`free`](Self::free) does; an RSP's endpoint whose
/// handles went first goes with it.
#[derive(Clone)]
pub struct ServicePoint(pub(crate) Handle<SpInner>);

impl std::fmt::Debug for ServicePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = if matches!(self.0.kind, SpKind::Psp(_)) {
            "Psp"
        } else {
            "Rsp"
        };
        write!(f, "{k}({} qual {})", self.0.id, self.0.qual)
    }
}

handle_identity!(@eq ServicePoint);
handle_identity!(@counted ServicePoint);

/// `DAT_PSP_PARAM` / `DAT_RSP_PARAM`.
#[derive(Debug, Clone)]
pub struct SpParam {
    /// Connection qualifier.
    pub conn_qual: ConnQual,
    /// The EVD receiving CR arrival events.
    pub evd: Evd,
    /// PSP flags (PSPs only).
    pub psp_flags: Option<PspFlags>,
    /// The reserved endpoint (RSPs only).
    pub ep: Option<Endpoint>,
}

static NEXT_ANY_QUAL: AtomicU64 = AtomicU64::new(0);

impl InterfaceAdapter {
    fn sp_create(
        &self,
        op: &'static str,
        qual: ConnQual,
        evd: &Evd,
        kind: SpKind,
    ) -> Result<ServicePoint> {
        let ia = &self.0;
        ia.check_open(op)?;
        let obj = ia.object();
        if evd.0.freed.load(Ordering::Acquire) || !evd.0.flags.contains(EvdFlags::CR) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleEvdCr,
                op,
                obj,
                format!("EVD {} is freed or lacks DAT_EVD_CR_FLAG", evd.0.id),
            );
        }
        // Internal until it listens: a handle dropped on the error path below must not
        // release (unlisten) a qualifier another service point holds.
        let sp = ServicePoint(Handle::internal(Arc::new(SpInner {
            id: ia.next_id(),
            ia: ia.clone(),
            qual,
            evd: evd.internal(),
            kind,
            freed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
        })));
        let listener: Weak<dyn Listener> = Arc::downgrade(&sp.0) as Weak<dyn Listener>;
        if let Err(e) = ia.link.listen(ia.attr.ia_address, qual, listener) {
            let ip = ia.attr.ia_address.ip();
            let (kind, reason) = match e {
                ListenError::InUse => (
                    ErrorType::ConnQualInUse,
                    format!(
                        "connection qualifier {qual} is in use on {ip}: another service point \
                         (of this process or another) listens there; free it or choose another \
                         qualifier"
                    ),
                ),
                ListenError::Denied(why) => (
                    ErrorType::PrivilegesViolation,
                    format!("may not listen on connection qualifier {qual} at {ip}: {why}"),
                ),
                ListenError::Failed(e) if is_resource_error(&e) => (
                    ErrorType::InsufficientResources,
                    format!(
                        "cannot listen on connection qualifier {qual} at {ip}: {e} (out of file \
                         descriptors or memory: raise `ulimit -n` or free endpoints)"
                    ),
                ),
                ListenError::Failed(e) => (
                    ErrorType::InsufficientResources,
                    format!("cannot listen on connection qualifier {qual} at {ip}: {e}"),
                ),
            };
            return err(kind, Subtype::NoSubtype, op, obj, reason);
        }
        evd.0.users.fetch_add(1, Ordering::SeqCst);
        ia.objects().sps.insert(sp.0.id, sp.internal());
        Ok(sp.into_user())
    }

    /// Creates a Public Service Point listening on `qual` (`dat_psp_create`);
    /// `DAT_CONN_QUAL_IN_USE` if it is taken.
    pub fn psp_create(&self, qual: ConnQual, evd: &Evd, flags: PspFlags) -> Result<ServicePoint> {
        self.sp_create("psp_create", qual, evd, SpKind::Psp(flags))
    }

    /// Creates a Public Service Point on a free qualifier the provider picks
    /// (`dat_psp_create_any`); returns it and the qualifier.
    pub fn psp_create_any(&self, evd: &Evd, flags: PspFlags) -> Result<(ServicePoint, ConnQual)> {
        for _ in 0..20_000 {
            let qual = 40_000 + NEXT_ANY_QUAL.fetch_add(1, Ordering::Relaxed) % 20_000;
            match self.sp_create("psp_create_any", qual, evd, SpKind::Psp(flags)) {
                Ok(sp) => return Ok((sp, qual)),
                Err(e) if e.kind() == ErrorType::ConnQualInUse => continue,
                Err(e) => return Err(e),
            }
        }
        err(
            ErrorType::ConnQualUnavailable,
            Subtype::NoSubtype,
            "psp_create_any",
            self.0.object(),
            "no free connection qualifier",
        )
    }

    /// Creates a Reserved Service Point on `qual` for `ep`, which must be UNCONNECTED and
    /// becomes RESERVED (`dat_rsp_create`).
    pub fn rsp_create(&self, qual: ConnQual, ep: &Endpoint, evd: &Evd) -> Result<ServicePoint> {
        const OP: &str = "rsp_create";
        ep.check_handle(OP)?;
        let sp = self.sp_create(OP, qual, evd, SpKind::Rsp(ep.internal()))?;
        if let Err(e) = ep.0.set_reserved(Some(sp.0.id)) {
            sp.release();
            return Err(e);
        }
        Ok(sp)
    }
}

impl ServicePoint {
    fn object(&self) -> Object {
        Object::new(
            if matches!(self.0.kind, SpKind::Psp(_)) {
                "psp"
            } else {
                "rsp"
            },
            self.0.id,
        )
    }

    fn check(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            let sub = if matches!(self.0.kind, SpKind::Psp(_)) {
                Subtype::InvalidHandlePsp
            } else {
                Subtype::InvalidHandleRsp
            };
            return err(
                ErrorType::InvalidHandle,
                sub,
                op,
                self.object(),
                "the service point was freed",
            );
        }
        Ok(())
    }

    /// The service point's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// True for a Public Service Point.
    pub fn is_public(&self) -> bool {
        matches!(self.0.kind, SpKind::Psp(_))
    }

    /// The connection qualifier.
    pub fn conn_qual(&self) -> ConnQual {
        self.0.qual
    }

    /// `dat_psp_query` / `dat_rsp_query`.
    pub fn query(&self) -> Result<SpParam> {
        self.check("sp_query")?;
        let (psp_flags, ep) = match &self.0.kind {
            SpKind::Psp(f) => (Some(*f), None),
            SpKind::Rsp(ep) => (None, Some(ep.user())),
        };
        Ok(SpParam {
            conn_qual: self.0.qual,
            evd: self.0.evd.user(),
            psp_flags,
            ep,
        })
    }

    /// Stops listening and frees the service point (`dat_psp_free` / `dat_rsp_free`). A reserved
    /// endpoint still RESERVED returns to UNCONNECTED.
    pub fn free(&self) -> Result<()> {
        self.check("sp_free")?;
        self.release();
        Ok(())
    }

    pub(crate) fn release(&self) {
        self.0.release();
    }

    /// A link delivers a connection request.
    pub(crate) fn request_arrived(&self, pending: Box<dyn PendingRequest>) {
        if self.0.freed.load(Ordering::Acquire) {
            pending.reject(&[]);
            return;
        }
        if let SpKind::Rsp(ep) = &self.0.kind {
            let mut c_ok = false;
            if ep.0.state() == EpState::Reserved {
                ep.0.qp.begin_attempt(
                    EpState::TentativeConnectionPending,
                    Some(pending.info().remote_addr),
                    Some(self.0.qual),
                );
                c_ok = true;
            }
            if !c_ok {
                pending.reject(&[]);
                return;
            }
        }
        let ia = &self.0.ia;
        let remote = pending.info().remote_addr;
        let cr = ConnectionRequest(Handle::internal(Arc::new(CrInner::new(
            ia.next_id(),
            self.internal(),
            pending,
        ))));
        ia.objects().crs.insert(cr.0.id, cr.clone());
        tracing::debug!(
            ia = ia.id,
            sp = self.0.id,
            cr = cr.0.id,
            qual = self.0.qual,
            %remote,
            "connection request"
        );
        let queued = self.0.evd.0.push(
            Event::ConnectionRequest(CrArrival {
                sp: self.internal(),
                conn_qual: self.0.qual,
                cr: cr.clone(),
            }),
            true,
        );
        if !queued {
            tracing::warn!(
                cr = cr.0.id,
                "connection request rejected: its EVD could not queue it"
            );
            // The EVD was full (its overflow is reported): nobody will see the request, so
            // the requester is answered now rather than left waiting.
            let _ = cr.reject(&[]);
        }
    }
}

impl SpInner {
    fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        let ia = &self.ia;
        ia.link.unlisten(ia.attr.ia_address, self.qual);
        if let SpKind::Rsp(ep) = &self.kind {
            ep.0.unreserve(self.id);
            // The consumer dropped the endpoint while it was reserved (its drop left it to
            // the RSP): free it now. Racing its last drop, one of the two sees it unreserved
            // with no handles (SeqCst count, reservation under its lock); a second free is
            // a no-op.
            if ep.0.handle_count().load(Ordering::SeqCst) == 0 {
                ep.0.last_handle_dropped();
            }
        }
        self.evd.0.unuse();
        ia.objects().sps.remove(&self.id);
    }
}

impl Listener for SpInner {
    fn is_open(&self) -> bool {
        !self.freed.load(Ordering::Acquire)
    }

    fn request_arrived(self: Arc<Self>, req: Box<dyn PendingRequest>) {
        ServicePoint(Handle::internal(self)).request_arrived(req);
    }
}
