//! Two network namespaces joined by a veth pair, as two hosts (10.231.0.1 in the first,
//! 10.231.0.2 in the second): created by [`Netns::create`], removed on drop. Needs root (CI
//! runs as root).

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A pair of network namespaces and the veth pair between them.
pub struct Netns {
    /// The namespaces' names.
    pub names: [String; 2],
    /// The veth ends, one in each namespace.
    pub veth: [String; 2],
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed (this test needs root)");
}

impl Netns {
    /// Creates the namespaces, the veth pair and the addresses; unique per process and call.
    pub fn create() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let id = std::process::id() % 1000 * 10 + NEXT.fetch_add(1, Ordering::Relaxed) % 10;
        let n = Netns {
            names: [format!("dapl-a-{id}"), format!("dapl-b-{id}")],
            veth: [format!("dva{id}"), format!("dvb{id}")],
        };
        for ns in &n.names {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link",
            "add",
            &n.veth[0],
            "netns",
            &n.names[0],
            "type",
            "veth",
            "peer",
            "name",
            &n.veth[1],
            "netns",
            &n.names[1],
        ]);
        for i in 0..2 {
            let addr = Netns::addr(i);
            ip(&[
                "-n",
                &n.names[i],
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &n.veth[i],
            ]);
            ip(&["-n", &n.names[i], "link", "set", &n.veth[i], "up"]);
        }
        n
    }

    /// The address of namespace `i` (0 or 1).
    pub fn addr(i: usize) -> &'static str {
        ["10.231.0.1", "10.231.0.2"][i]
    }

    /// The command prefix that runs a program in namespace `i`.
    pub fn exec(&self, i: usize) -> [&str; 4] {
        ["ip", "netns", "exec", self.names[i].as_str()]
    }

    /// Takes namespace `i`'s veth end down or up: a network that goes silent (nothing passes
    /// either way, nobody is told) and comes back.
    pub fn set_link(&self, i: usize, up: bool) {
        let state = if up { "up" } else { "down" };
        ip(&["-n", &self.names[i], "link", "set", &self.veth[i], state]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
