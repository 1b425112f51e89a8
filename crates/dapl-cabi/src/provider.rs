//! Loading: `dat_provider_init` / `dat_provider_fini`, one `DAT_PROVIDER` per dat.conf IA name.

use std::ffi::{c_char, c_void, CStr, CString};
use std::net::Ipv4Addr;
use std::sync::{Mutex, Once};

use crate::ffi::*;
use crate::{ep, evd, ia, mem, sp, srq};

/// One dat.conf IA name this library was initialised for. Leaked: its `DAT_PROVIDER` must
/// keep its address for as long as any handle points at it.
pub struct ProviderEntry {
    pub(crate) provider: DAT_PROVIDER,
    name: CString,
    /// The `dapl` IA name the entry's `ia_params` select (e.g. `tcp:127.0.0.1`).
    pub(crate) link_name: Mutex<Result<String, String>>,
}

impl ProviderEntry {
    /// The dat.conf IA name.
    pub(crate) fn name(&self) -> String {
        self.name.to_string_lossy().into_owned()
    }
}

// SAFETY: the DAT_PROVIDER's pointers are to this entry's own leaked name and to functions;
// nothing in it is written after creation except under the Mutex.
unsafe impl Sync for ProviderEntry {}
// SAFETY: as above.
unsafe impl Send for ProviderEntry {}

static ENTRIES: Mutex<Vec<&'static ProviderEntry>> = Mutex::new(Vec::new());

fn entries() -> std::sync::MutexGuard<'static, Vec<&'static ProviderEntry>> {
    ENTRIES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The entry for an IA name (what `ia_open` receives).
pub(crate) fn entry(name: &str) -> Option<&'static ProviderEntry> {
    entries()
        .iter()
        .copied()
        .find(|e| e.name.to_bytes() == name.as_bytes())
}

/// `ia_params` of a dat.conf line -> a `dapl` IA name.
///
/// Words: the link, then its address, then options. `tcp <ipv4> [crc]` is the iWARP/TCP link
/// on that local address (`crc` asks peers for MPA CRC32c; `dead_peer=<seconds>` bounds how
/// long a silent peer keeps a connection, 30 s by default; `nocoalesce` writes every small
/// message when it is posted, never held back in a burst); `shm [<ipv4>]` the shared-memory
/// link between processes of one host; `loopback [<ipv4>]` the in-process link. A bare IPv4
/// address first means tcp. Every link takes `max_eps=<n>`: the most endpoints the IA holds
/// (16,384 by default).
pub fn parse_ia_params(params: &str) -> Result<String, String> {
    // `max_eps=<n>` (every link): the IA's endpoint limit, appended to the name the link
    // parses (which then needs its address form).
    let mut max_eps = None;
    let words: Vec<&str> = params
        .split_whitespace()
        .filter(|w| match w.strip_prefix("max_eps=") {
            Some(v) => {
                max_eps = Some(v.to_string());
                false
            }
            None => true,
        })
        .collect();
    let name = parse_link_words(&words)?;
    let Some(n) = max_eps else {
        return Ok(name);
    };
    match n.parse::<usize>() {
        Ok(v) if (1..=dapl::MAX_EPS_LIMIT).contains(&v) => {}
        _ => {
            return Err(format!(
                "max_eps={n}: the endpoint limit is a number in 1..={}",
                dapl::MAX_EPS_LIMIT
            ))
        }
    }
    let name = match name.as_str() {
        "loopback" | "shm" => format!("{name}:127.0.0.1"),
        _ => name,
    };
    Ok(format!("{name},max_eps={n}"))
}

/// The link words of `ia_params` (options every link takes removed) -> a `dapl` IA name.
fn parse_link_words(words: &[&str]) -> Result<String, String> {
    let (link, rest) = match words.split_first() {
        None => return Err("ia_params is empty (expected e.g. \"tcp 127.0.0.1\")".into()),
        Some((w, rest)) if w.parse::<Ipv4Addr>().is_ok() => ("tcp", &words[..=rest.len()]),
        Some((w, rest)) => (*w, rest),
    };
    match link {
        "tcp" => {
            let Some((addr, opts)) = rest.split_first() else {
                return Err("tcp needs a local IPv4 address (\"tcp 127.0.0.1\")".into());
            };
            let ip: Ipv4Addr = addr
                .parse()
                .map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
            let mut name = format!("tcp:{ip}");
            for o in opts {
                match *o {
                    "crc" => name.push_str(",crc"),
                    "nocoalesce" => name.push_str(",nocoalesce"),
                    // The reference provider's "<addr> <port offset>" form: no offset here.
                    "0" => {}
                    o if o
                        .strip_prefix("dead_peer=")
                        .and_then(|v| v.parse::<u64>().ok())
                        .is_some_and(|v| (1..=86_400).contains(&v)) =>
                    {
                        name.push(',');
                        name.push_str(o);
                    }
                    _ => {
                        return Err(format!(
                            "unknown tcp option {o:?} (known: crc, nocoalesce, dead_peer=<1..86400 seconds>)"
                        ))
                    }
                }
            }
            Ok(name)
        }
        "loopback" => match rest {
            [] => Ok("loopback".into()),
            [a] => {
                let ip: Ipv4Addr = a
                    .parse()
                    .map_err(|_| format!("{a:?} is not an IPv4 address"))?;
                Ok(format!("loopback:{ip}"))
            }
            _ => Err("loopback takes at most an IPv4 address".into()),
        },
        "shm" => match rest {
            [] => Ok("shm".into()),
            [a] => {
                let ip: Ipv4Addr = a
                    .parse()
                    .map_err(|_| format!("{a:?} is not an IPv4 address"))?;
                Ok(format!("shm:{ip}"))
            }
            _ => Err("shm takes at most an IPv4 address".into()),
        },
        other => Err(format!(
            "unknown link {other:?} (known: tcp, shm, loopback)"
        )),
    }
}

/// Keeps this library mapped for the life of the process: dlclose after the last IA closes
/// would otherwise unmap code that the link's timer thread (which is never joined) still runs.
fn pin_library() {
    static PIN: Once = Once::new();
    PIN.call_once(|| {
        let mut info: libc::Dl_info = libc::Dl_info {
            dli_fname: std::ptr::null(),
            dli_fbase: std::ptr::null_mut(),
            dli_sname: std::ptr::null(),
            dli_saddr: std::ptr::null_mut(),
        };
        let me = dat_provider_init as *const c_void;
        // SAFETY: dladdr only reads the loader's tables for an address in this library and
        // fills `info`; dlopen with RTLD_NOLOAD only bumps the reference count of the already
        // loaded library (the path dladdr gave), and RTLD_NODELETE keeps it mapped.
        unsafe {
            if libc::dladdr(me, &mut info) != 0 && !info.dli_fname.is_null() {
                libc::dlopen(
                    info.dli_fname,
                    libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
                );
            }
        }
    });
}

fn vtable(name: *const c_char) -> DAT_PROVIDER {
    DAT_PROVIDER {
        device_name: name,
        extension: std::ptr::null_mut(),
        ia_open_func: Some(ia::ia_open),
        ia_query_func: Some(ia::ia_query),
        ia_close_func: Some(ia::ia_close),
        set_consumer_context_func: Some(ia::set_consumer_context),
        get_consumer_context_func: Some(ia::get_consumer_context),
        get_handle_type_func: Some(ia::get_handle_type),
        cno_create_func: Some(evd::cno_create),
        cno_modify_agent_func: Some(evd::cno_modify_agent),
        cno_query_func: Some(evd::cno_query),
        cno_free_func: Some(evd::cno_free),
        cno_wait_func: Some(evd::cno_wait),
        cr_query_func: Some(sp::cr_query),
        cr_accept_func: Some(sp::cr_accept),
        cr_reject_func: Some(sp::cr_reject),
        cr_handoff_func: Some(sp::cr_handoff),
        evd_create_func: Some(evd::evd_create),
        evd_query_func: Some(evd::evd_query),
        evd_modify_cno_func: Some(evd::evd_modify_cno),
        evd_enable_func: Some(evd::evd_enable),
        evd_disable_func: Some(evd::evd_disable),
        evd_wait_func: Some(evd::evd_wait),
        evd_resize_func: Some(evd::evd_resize),
        evd_post_se_func: Some(evd::evd_post_se),
        evd_dequeue_func: Some(evd::evd_dequeue),
        evd_free_func: Some(evd::evd_free),
        ep_create_func: Some(ep::ep_create),
        ep_query_func: Some(ep::ep_query),
        ep_modify_func: Some(ep::ep_modify),
        ep_connect_func: Some(ep::ep_connect),
        ep_dup_connect_func: Some(ep::ep_dup_connect),
        ep_disconnect_func: Some(ep::ep_disconnect),
        ep_post_send_func: Some(ep::ep_post_send),
        ep_post_recv_func: Some(ep::ep_post_recv),
        ep_post_rdma_read_func: Some(ep::ep_post_rdma_read),
        ep_post_rdma_write_func: Some(ep::ep_post_rdma_write),
        ep_get_status_func: Some(ep::ep_get_status),
        ep_free_func: Some(ep::ep_free),
        lmr_create_func: Some(mem::lmr_create),
        lmr_query_func: Some(mem::lmr_query),
        lmr_free_func: Some(mem::lmr_free),
        rmr_create_func: Some(mem::rmr_create),
        rmr_query_func: Some(mem::rmr_query),
        rmr_bind_func: Some(mem::rmr_bind),
        rmr_free_func: Some(mem::rmr_free),
        psp_create_func: Some(sp::psp_create),
        psp_query_func: Some(sp::psp_query),
        psp_free_func: Some(sp::psp_free),
        rsp_create_func: Some(sp::rsp_create),
        rsp_query_func: Some(sp::rsp_query),
        rsp_free_func: Some(sp::rsp_free),
        pz_create_func: Some(mem::pz_create),
        pz_query_func: Some(mem::pz_query),
        pz_free_func: Some(mem::pz_free),
        psp_create_any_func: Some(sp::psp_create_any),
        ep_reset_func: Some(ep::ep_reset),
        evd_set_unwaitable_func: Some(evd::evd_set_unwaitable),
        evd_clear_unwaitable_func: Some(evd::evd_clear_unwaitable),
        lmr_sync_rdma_read_func: Some(mem::lmr_sync_rdma_read),
        lmr_sync_rdma_write_func: Some(mem::lmr_sync_rdma_write),
        ep_create_with_srq_func: Some(ep::ep_create_with_srq),
        ep_recv_query_func: Some(ep::ep_recv_query),
        ep_set_watermark_func: Some(ep::ep_set_watermark),
        srq_create_func: Some(srq::srq_create),
        srq_free_func: Some(srq::srq_free),
        srq_post_recv_func: Some(srq::srq_post_recv),
        srq_query_func: Some(srq::srq_query),
        srq_resize_func: Some(srq::srq_resize),
        srq_set_lw_func: Some(srq::srq_set_lw),
        csp_create_func: Some(sp::csp_create),
        csp_query_func: Some(sp::csp_query),
        csp_free_func: Some(sp::csp_free),
        ep_common_connect_func: Some(ep::ep_common_connect),
        rmr_create_for_ep_func: Some(mem::rmr_create_for_ep),
        ep_post_send_with_invalidate_func: Some(ep::ep_post_send_with_invalidate),
        ep_post_rdma_read_to_rmr_func: Some(ep::ep_post_rdma_read_to_rmr),
        cno_fd_create_func: Some(evd::cno_fd_create),
        cno_trigger_func: Some(evd::cno_trigger),
        ia_ha_related_func: Some(ia::ia_ha_related),
        handle_extendedop_func: Some(daplrs_extendedop),
    }
}

extern "C" {
    /// The IB extension slot: a C function (csrc/ext_shim.c) that reads the `va_list` and calls
    /// back into Rust.
    fn daplrs_extendedop(h: DAT_HANDLE, op: DAT_EXTENDED_OP, args: *mut c_void) -> DAT_RETURN;
}

/// The entry for the IA name `name`, made (and leaked) the first time, its link set to `link`:
/// what `ia_open` of that name opens. `dat_provider_init` registers the entry's vtable with
/// libdat2; `fuzz_api` hands it out directly.
pub(crate) fn register(name: CString, link: Result<String, String>) -> &'static ProviderEntry {
    match entry(&name.to_string_lossy()) {
        Some(e) => {
            *e.link_name.lock().unwrap_or_else(|p| p.into_inner()) = link;
            e
        }
        None => {
            let e: &'static mut ProviderEntry = Box::leak(Box::new(ProviderEntry {
                provider: vtable(std::ptr::null()),
                name,
                link_name: Mutex::new(link),
            }));
            e.provider.device_name = e.name.as_ptr();
            let e: &'static ProviderEntry = e;
            entries().push(e);
            e
        }
    }
}

/// Called by libdat2 (under its registry lock) the first time an IA name of ours is opened.
///
/// # Safety
/// `info` is libdat2's entry for the dat.conf line, `instance_data` its `ia_params` string.
#[no_mangle]
pub unsafe extern "C" fn dat_provider_init(
    info: *const DAT_PROVIDER_INFO,
    instance_data: *const c_char,
) {
    crate::log::init();
    let _ = crate::guard("dat_provider_init", || {
        pin_library();
        if info.is_null() {
            return Err(crate::err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
        }
        // SAFETY: libdat2 passes its own, valid entry (contract: the dat.conf line).
        let info_ref = unsafe { &*info };
        // SAFETY: ia_name is a NUL-terminated array inside the entry.
        let name = unsafe { CStr::from_ptr(info_ref.ia_name.as_ptr()) }.to_owned();
        let params = if instance_data.is_null() {
            String::new()
        } else {
            // SAFETY: libdat2 passes the NUL-terminated ia_params field.
            unsafe { CStr::from_ptr(instance_data) }
                .to_string_lossy()
                .into_owned()
        };
        let link = parse_ia_params(&params);
        if let Err(why) = &link {
            eprintln!(
                "daplrs: dat.conf entry {:?}: ia_params {params:?}: {why}",
                name.to_string_lossy()
            );
        }
        let entry = register(name, link);
        // SAFETY: registering our stable DAT_PROVIDER under libdat2's own key.
        let r = unsafe { dat_registry_add_provider(&entry.provider, info) };
        if r != DAT_SUCCESS {
            eprintln!(
                "daplrs: dat_registry_add_provider({:?}) failed: {r:#010x}",
                entry.name.to_string_lossy()
            );
        }
        Ok(())
    });
}

/// Called by libdat2 after the last IA of a name closed: unregister that name.
///
/// # Safety
/// `info` is libdat2's entry for the dat.conf line.
#[no_mangle]
pub unsafe extern "C" fn dat_provider_fini(info: *const DAT_PROVIDER_INFO) {
    let _ = crate::guard("dat_provider_fini", || {
        if info.is_null() {
            return Ok(());
        }
        // SAFETY: libdat2 passes its own, valid entry.
        let name = unsafe { CStr::from_ptr((*info).ia_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if let Some(e) = entry(&name) {
            // SAFETY: unregistering the provider we registered under this key.
            unsafe { dat_registry_remove_provider(&e.provider, info) };
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::parse_ia_params;

    #[test]
    fn ia_params_select_the_link_and_address() {
        assert_eq!(parse_ia_params("tcp 127.0.0.1").unwrap(), "tcp:127.0.0.1");
        assert_eq!(
            parse_ia_params("  tcp  10.0.0.2 crc ").unwrap(),
            "tcp:10.0.0.2,crc"
        );
        assert_eq!(
            parse_ia_params("tcp 10.0.0.2 dead_peer=5 crc").unwrap(),
            "tcp:10.0.0.2,dead_peer=5,crc"
        );
        assert_eq!(
            parse_ia_params("tcp 10.0.0.2 nocoalesce").unwrap(),
            "tcp:10.0.0.2,nocoalesce"
        );
        assert!(parse_ia_params("tcp 10.0.0.2 dead_peer=0").is_err());
        assert!(parse_ia_params("tcp 10.0.0.2 dead_peer=x").is_err());
        assert_eq!(parse_ia_params("127.0.0.1 0").unwrap(), "tcp:127.0.0.1");
        assert_eq!(parse_ia_params("loopback").unwrap(), "loopback");
        assert_eq!(parse_ia_params("shm 127.0.0.1").unwrap(), "shm:127.0.0.1");
        assert_eq!(parse_ia_params("shm").unwrap(), "shm");
        assert!(parse_ia_params("shm 127.0.0.1 crc").is_err());
        assert_eq!(
            parse_ia_params("tcp 10.0.0.2 max_eps=50000 crc").unwrap(),
            "tcp:10.0.0.2,crc,max_eps=50000"
        );
        assert_eq!(
            parse_ia_params("shm max_eps=20000").unwrap(),
            "shm:127.0.0.1,max_eps=20000"
        );
        assert!(parse_ia_params("tcp 10.0.0.2 max_eps=0").is_err());
        assert!(parse_ia_params("loopback max_eps=lots").is_err());
        assert_eq!(
            parse_ia_params("loopback 127.0.0.2").unwrap(),
            "loopback:127.0.0.2"
        );
        for bad in [
            "",
            "tcp",
            "tcp localhost",
            "tcp 127.0.0.1 fast",
            "ib0 1",
            "loopback a b",
        ] {
            assert!(parse_ia_params(bad).is_err(), "{bad:?} accepted");
        }
    }
}
