//! `datperf info`: the IAs this provider offers and their attributes, like `ibv_devinfo`.

use dapl::{CloseFlags, CrossMemoryAttach, InterfaceAdapter};

use crate::error::{Context, Result};

/// The IA names listed when none are given.
pub const DEFAULT_IAS: [&str; 3] = ["loopback", "tcp", "shm"];

/// Opens `name`, reads its attributes, closes it, and returns the description.
pub fn describe(name: &str) -> Result<String> {
    let (ia, _async) = InterfaceAdapter::open(name, 16).ctx(format!("opening IA {name:?}"))?;
    let r = text(name, &ia);
    let _ = ia.close(CloseFlags::Abrupt);
    r
}

fn text(name: &str, ia: &InterfaceAdapter) -> Result<String> {
    let a = ia.query().ctx("ia_query")?;
    let p = ia.provider_attr().ctx("ia_query (provider)")?;
    let srq = match (p.srq_supported, p.srq_watermarks_supported) {
        (true, true) => "supported, with low watermark",
        (true, false) => "supported",
        _ => "not supported",
    };
    let rows: Vec<(&str, String)> = vec![
        ("link", p.link.to_string()),
        (
            "provider",
            format!(
                "{} {}.{} (DAT {}.{})",
                p.provider_name,
                p.provider_version.0,
                p.provider_version.1,
                p.dapl_version.0,
                p.dapl_version.1
            ),
        ),
        ("vendor", a.vendor_name.to_string()),
        ("ia_address", a.ia_address.ip().to_string()),
        ("srq", srq.to_string()),
        (
            "cross_memory_attach",
            match p.link_caps.cross_memory_attach {
                CrossMemoryAttach::NotUsed => "not used by this link".to_string(),
                CrossMemoryAttach::Available => {
                    "available (probed on each connection, in each direction)".to_string()
                }
                CrossMemoryAttach::Denied(why) => {
                    format!("denied: {why}; large messages go through the rings")
                }
            },
        ),
        ("max_eps", a.max_eps.to_string()),
        ("max_dto_per_ep", a.max_dto_per_ep.to_string()),
        ("max_rdma_read_per_ep", a.max_rdma_read_per_ep.to_string()),
        ("max_evds", a.max_evds.to_string()),
        ("max_evd_qlen", a.max_evd_qlen.to_string()),
        (
            "max_iov_segments_per_dto",
            a.max_iov_segments_per_dto.to_string(),
        ),
        ("max_lmrs", a.max_lmrs.to_string()),
        ("max_lmr_block_size", a.max_lmr_block_size.to_string()),
        ("max_pzs", a.max_pzs.to_string()),
        ("max_message_size", a.max_message_size.to_string()),
        ("max_rdma_size", a.max_rdma_size.to_string()),
        ("max_rmrs", a.max_rmrs.to_string()),
        ("max_srqs", a.max_srqs.to_string()),
        ("max_recv_per_srq", a.max_recv_per_srq.to_string()),
        ("max_private_data_size", a.max_private_data_size.to_string()),
        (
            "dead_peer_timeout",
            match a.dead_peer_timeout {
                Some(d) => format!("{} s", d.as_secs()),
                None => "none (a dead peer is seen at once; loopback, shm)".to_string(),
            },
        ),
    ];
    let mut out = format!("ia_name:\t\t\t{name}\n");
    for (k, v) in rows {
        out.push_str(&format!("\t{:<28}{v}\n", format!("{k}:")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_described() {
        let t = describe("loopback").unwrap();
        assert!(t.starts_with("ia_name:\t\t\tloopback\n"));
        assert!(t.contains("link:") && t.contains("max_message_size:"));
        assert!(t.contains("cross_memory_attach:") && t.contains("not used by this link"));
    }

    #[test]
    fn shm_reports_cross_memory_attach() {
        let t = describe("shm").unwrap();
        assert!(t.contains("\tlink:") && t.contains(" shm\n"), "{t}");
        assert!(t.contains("cross_memory_attach:        available"), "{t}");
    }

    #[test]
    fn unknown_ia_is_an_error_with_the_dat_text() {
        let e = describe("nonesuch").unwrap_err().to_string();
        assert!(e.contains("nonesuch") && e.contains("DAT error"), "{e}");
    }
}
