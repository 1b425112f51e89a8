//! Tests that run this test binary again as a peer process: the child runs one ignored test
//! (the role's body), under an optional command prefix (`ip netns exec NS`).

use std::process::Command;

/// The command that runs ignored test `test` of this test binary alone, with its output shown,
/// after `prefix` (empty: directly), with `env` set. The caller adds stdio and spawns it.
pub fn self_as_child(prefix: &[&str], test: &str, env: &[(&str, String)]) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}
