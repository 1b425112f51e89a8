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

/// This process's resident set in KiB (`/proc/self/statm`).
pub fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}
