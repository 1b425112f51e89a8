//! What the single-process examples share: an endpoint with EVDs of its own, the connect /
//! accept sequence through a public service point, and waiting for a completion.
//!
//! Each example takes the IA name as its one optional argument (`loopback` when absent; `tcp`,
//! `shm`, ...: the same program runs over every link).

// Each example compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::time::Duration;

use dapl::*;

/// How long any one event may take.
pub const T: Option<Duration> = Some(Duration::from_secs(10));

/// `main`'s result: any error, printed by the runtime.
pub type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The IA name from the command line, `"loopback"` by default.
pub fn ia_name() -> String {
    std::env::args().nth(1).unwrap_or_else(|| "loopback".into())
}

/// An endpoint and the EVDs its completions and connection events go to.
pub struct Side {
    pub ep: Endpoint,
    /// Receive completions.
    pub recv_evd: Evd,
    /// Completions of what this side posts (sends, RDMA writes and reads).
    pub req_evd: Evd,
    /// Connection events.
    pub conn_evd: Evd,
}

impl Side {
    /// An endpoint in `pz` of `ia` with EVDs of its own; receives from `srq` if given.
    pub fn new(ia: &InterfaceAdapter, pz: &Pz, srq: Option<&Srq>) -> Res<Side> {
        let recv_evd = ia.evd_create(64, None, EvdFlags::DTO)?;
        let req_evd = ia.evd_create(64, None, EvdFlags::DTO)?;
        let conn_evd = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
        let mut builder =
            (ia.endpoint(pz).recv_evd(&recv_evd).request_evd(&req_evd)).connect_evd(&conn_evd);
        if let Some(srq) = srq {
            builder = builder.srq(srq);
        }
        let ep = builder.build()?;
        Ok(Side {
            ep,
            recv_evd,
            req_evd,
            conn_evd,
        })
    }

    /// Waits for the next connection event and checks that it is `kind`.
    pub fn expect(&self, kind: ConnectionEventKind) -> Res<ConnectionEvent> {
        let (ev, _) = self
            .conn_evd
            .wait(T, 1)?
            .ok_or("no connection event in time")?;
        let c = ev.as_connection().ok_or("not a connection event")?.clone();
        if c.kind != kind {
            return Err(format!("expected {kind:?}, got {:?}", c.kind).into());
        }
        Ok(c)
    }
}

/// Connects `active` to `passive` (an endpoint of `passive_ia`): a PSP on a free qualifier of
/// `passive_ia`, `ep_connect` with `request` as private data, the connection request
/// accepted with `reply`. Returns the reply as the active side received it, and the PSP
/// (still listening until dropped).
pub fn connect(
    active: &Side,
    passive_ia: &InterfaceAdapter,
    passive: &Side,
    request: &[u8],
    reply: &[u8],
) -> Res<(Vec<u8>, ServicePoint)> {
    let cr_evd = passive_ia.evd_create(8, None, EvdFlags::CR)?;
    // A qualifier is a TCP port on the tcp link: take the first free one from 19600 up.
    let (qual, psp) = (19600..19700)
        .find_map(|q| {
            Some((
                q,
                passive_ia.psp_create(q, &cr_evd, PspFlags::Consumer).ok()?,
            ))
        })
        .ok_or("no free connection qualifier")?;
    let addr = passive_ia.query()?.ia_address.ip();
    active.ep.connect(addr, qual, T, request)?;
    let (ev, _) = cr_evd.wait(T, 1)?.ok_or("no connection request in time")?;
    let cr = ev
        .as_cr_arrival()
        .ok_or("not a connection request")?
        .cr
        .clone();
    cr.accept(Some(&passive.ep), reply)?;
    let established = active.expect(ConnectionEventKind::Established)?;
    passive.expect(ConnectionEventKind::Established)?;
    Ok((established.private_data, psp))
}

/// Waits for the next completion on `evd` and checks that it succeeded.
pub fn completion(evd: &Evd) -> Res<DtoCompletion> {
    let (ev, _) = evd.wait(T, 1)?.ok_or("no completion in time")?;
    let d = ev.as_dto().ok_or("not a DTO completion")?.clone();
    if d.status != DtoStatus::Success {
        return Err(format!("cookie {}: {:?}", d.cookie, d.status).into());
    }
    Ok(d)
}
