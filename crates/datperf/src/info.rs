//! `datperf info`: the IAs this provider offers on this machine and their attributes, like
//! `ibv_devinfo` (`-v`: every attribute and limit, as `ibv_devinfo -v`).

use std::net::{IpAddr, Ipv4Addr};

use dapl::{CloseFlags, CrossMemoryAttach, InterfaceAdapter};

use crate::args::size_label;
use anyhow::{Context, Result};

/// The local IPv4 addresses with the name of their interface, loopback first, each once.
pub fn local_addresses() -> Vec<(Ipv4Addr, String)> {
    let mut v: Vec<(Ipv4Addr, String)> = match nix::ifaddrs::getifaddrs() {
        Ok(it) => it
            .filter_map(|i| {
                let a = i.address?.as_sockaddr_in()?.ip();
                Some((a, i.interface_name))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if !v.iter().any(|(a, _)| *a == Ipv4Addr::LOCALHOST) {
        v.push((Ipv4Addr::LOCALHOST, "lo".into()));
    }
    v.sort_by_key(|(a, _)| (!a.is_loopback(), *a));
    v.dedup_by_key(|(a, _)| *a);
    v
}

/// Every IA this machine offers: loopback, then the tcp and shm links on each local IPv4
/// address.
pub fn every_ia() -> Vec<String> {
    let mut v = vec!["loopback".to_string()];
    for (a, _) in local_addresses() {
        v.push(format!("tcp:{a}"));
        v.push(format!("shm:{a}"));
    }
    v
}

/// Opens `name`, reads its attributes, closes it, and returns the description: the main
/// attributes, or with `verbose` every one.
pub fn describe(name: &str, verbose: bool) -> Result<String> {
    let (ia, _async) = InterfaceAdapter::open(name, 16).with_context(|| {
        format!("opening IA {name:?} (see `datperf info` for the IAs of this machine)")
    })?;
    let r = text(name, &ia, verbose);
    let _ = ia.close(CloseFlags::Abrupt);
    r
}

/// A byte count, with its binary size when it is a round one: `2147483648 (2GiB)`.
fn bytes(n: u64) -> String {
    let l = size_label(n);
    if l.ends_with("iB") {
        format!("{n} ({l})")
    } else {
        n.to_string()
    }
}

fn text(name: &str, ia: &InterfaceAdapter, verbose: bool) -> Result<String> {
    let a = ia.query().with_context(|| "ia_query")?;
    let p = ia.provider_attr().with_context(|| "ia_query (provider)")?;
    let caps = p.link_caps;
    let ip = a.ia_address.ip();
    let interface = match ip {
        IpAddr::V4(v4) => local_addresses()
            .into_iter()
            .find(|(x, _)| *x == v4)
            .map(|(_, i)| i),
        IpAddr::V6(_) => None,
    };
    let mut rows: Vec<(&str, String)> = vec![
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
        (
            "ia_address",
            match interface {
                Some(i) if p.link != "loopback" => format!("{ip} ({i})"),
                _ => ip.to_string(),
            },
        ),
        ("max_eps", a.max_eps.to_string()),
        ("max_message_size", bytes(a.max_message_size)),
        ("max_rdma_size", bytes(a.max_rdma_size)),
        (
            "cross_memory_attach",
            match caps.cross_memory_attach {
                CrossMemoryAttach::NotUsed => "not used by this link".to_string(),
                CrossMemoryAttach::Available => {
                    "available (probed on each connection, in each direction)".to_string()
                }
                CrossMemoryAttach::Denied(why) => {
                    format!("denied: {why}; large messages go through the rings")
                }
            },
        ),
        (
            "map_library_memory",
            if a.map_library_memory {
                "on (peers map lmr_allocate memory: RDMA to it is a copy by the initiator)"
            } else if p.link == "shm" {
                "off (map=off)"
            } else {
                "off (shm link only)"
            }
            .to_string(),
        ),
        (
            "dead_peer_timeout",
            match a.dead_peer_timeout {
                Some(d) => format!("{} s", d.as_secs()),
                None => "none (a dead peer is seen at once; loopback, shm)".to_string(),
            },
        ),
    ];
    if verbose {
        let srq = match (p.srq_supported, p.srq_watermarks_supported) {
            (true, true) => "supported, with low watermark",
            (true, false) => "supported",
            _ => "not supported",
        };
        rows.extend([
            ("srq", srq.to_string()),
            (
                "dto_completes",
                if caps.completes_at_peer {
                    "once the peer has placed it"
                } else {
                    "once the transport has taken its last byte"
                }
                .to_string(),
            ),
            (
                "send_without_receive",
                if caps.rnr_waits_forever {
                    "waits at the sender until the peer posts a receive"
                } else {
                    "held by the receiver for a grace period, then the connection breaks"
                }
                .to_string(),
            ),
            ("max_dto_per_ep", a.max_dto_per_ep.to_string()),
            ("max_rdma_read_per_ep", a.max_rdma_read_per_ep.to_string()),
            ("max_evds", a.max_evds.to_string()),
            ("max_evd_qlen", a.max_evd_qlen.to_string()),
            (
                "max_iov_segments_per_dto",
                a.max_iov_segments_per_dto.to_string(),
            ),
            ("max_lmrs", a.max_lmrs.to_string()),
            ("max_lmr_block_size", bytes(a.max_lmr_block_size)),
            ("max_pzs", a.max_pzs.to_string()),
            ("max_rmrs", a.max_rmrs.to_string()),
            ("max_srqs", a.max_srqs.to_string()),
            ("max_recv_per_srq", a.max_recv_per_srq.to_string()),
            ("max_private_data_size", a.max_private_data_size.to_string()),
        ]);
    }
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
        let t = describe("loopback", false).unwrap();
        assert!(t.starts_with("ia_name:\t\t\tloopback\n"));
        assert!(t.contains("\tlink:") && t.contains("max_message_size:"));
        assert!(t.contains("2147483648 (2GiB)"), "{t}");
        assert!(t.contains("cross_memory_attach:") && t.contains("not used by this link"));
        assert!(!t.contains("max_rdma_read_per_ep"), "{t}");
    }

    #[test]
    fn verbose_has_every_limit() {
        let t = describe("tcp", true).unwrap();
        for k in [
            "link:",
            "ia_address:",
            "srq:",
            "dto_completes:",
            "send_without_receive:",
            "max_eps:",
            "max_dto_per_ep:",
            "max_rdma_read_per_ep:",
            "max_evds:",
            "max_evd_qlen:",
            "max_iov_segments_per_dto:",
            "max_lmrs:",
            "max_lmr_block_size:",
            "max_pzs:",
            "max_message_size:",
            "max_rdma_size:",
            "max_rmrs:",
            "max_srqs:",
            "max_recv_per_srq:",
            "max_private_data_size:",
            "dead_peer_timeout:",
        ] {
            assert_eq!(t.matches(&format!("\t{k}")).count(), 1, "{k} in {t}");
        }
        assert!(t.contains("127.0.0.1 (lo)"), "{t}");
        assert!(t.contains("30 s"), "{t}");
        assert!(t.contains("max_eps:                    16384\n"), "{t}");
    }

    #[test]
    fn shm_reports_cross_memory_attach() {
        let t = describe("shm", false).unwrap();
        assert!(t.contains("\tlink:") && t.contains(" shm\n"), "{t}");
        assert!(t.contains("cross_memory_attach:        available"), "{t}");
        assert!(t.contains("map_library_memory:         on"), "{t}");
        let t = describe("shm,map=off", false).unwrap();
        assert!(
            t.contains("map_library_memory:         off (map=off)"),
            "{t}"
        );
    }

    #[test]
    fn every_local_address_offers_tcp_and_shm() {
        let addrs = local_addresses();
        assert_eq!(addrs[0].0, Ipv4Addr::LOCALHOST);
        let ias = every_ia();
        assert_eq!(ias[0], "loopback");
        assert_eq!(ias.len(), 1 + 2 * addrs.len());
        for (a, _) in &addrs {
            assert!(ias.contains(&format!("tcp:{a}")) && ias.contains(&format!("shm:{a}")));
        }
    }

    #[test]
    fn unknown_ia_is_an_error_with_the_dat_text() {
        let e = format!("{:#}", describe("nonesuch", false).unwrap_err());
        assert!(
            e.contains("nonesuch") && e.contains("DAT_PROVIDER_NOT_FOUND"),
            "{e}"
        );
        assert!(e.contains("datperf info"), "{e}");
    }
}
