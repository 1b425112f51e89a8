//! Process limits the scale tests need.

/// Raises the soft file-descriptor limit to at least `need` (up to the hard limit).
pub fn raise_fd_limit(need: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if l.current.is_some_and(|c| c < need) {
        l.current = l.maximum.map(|m| m.min(need.max(4096))).or(Some(need));
        setrlimit(Resource::Nofile, l).expect("raise RLIMIT_NOFILE");
    }
}

/// This process's resident set in KiB (`/proc/self/statm`, in pages of the system's size).
pub fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * (rustix::param::page_size() as u64 / 1024)
}

#[cfg(test)]
mod tests {
    /// `VmRSS` of `/proc/self/status`, in KiB: the same count, kept by the kernel in KiB.
    fn vm_rss_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
        let line = s
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .expect("a VmRSS line");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn rss_kib_agrees_with_vm_rss() {
        // 16 MiB touched, so the resident set is well above what the two reads' gap changes.
        let mut block = vec![0u8; 16 << 20];
        for b in block.iter_mut().step_by(1024) {
            *b = 1;
        }
        let (a, b, c) = (vm_rss_kib(), super::rss_kib(), vm_rss_kib());
        std::hint::black_box(&block);
        let (lo, hi) = (a.min(c), a.max(c));
        assert!(
            b + 1024 >= lo && b <= hi + 1024,
            "rss_kib() = {b}, VmRSS = {a} then {c}"
        );
        assert!(b >= 16 << 10, "rss_kib() = {b} KiB with 16 MiB touched");
    }
}
