//! The stderr `tracing` subscriber, installed when `DAPLRS_LOG` (a filter: `debug`,
//! `dapl::link::tcp=trace`) or `DAPLRS_DEBUG` (an alias of `DAPLRS_LOG=debug`) asks for one,
//! as `libdaplrs.so` does (docs/tracing.md). With neither set nothing is installed.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber if the environment asks for one.
pub fn init() {
    let directives = match std::env::var("DAPLRS_LOG") {
        Ok(d) if !d.is_empty() => d,
        _ => match std::env::var_os("DAPLRS_DEBUG") {
            Some(v) if v != "0" => "debug".to_owned(),
            _ => return,
        },
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::builder().parse_lossy(directives))
        .with_writer(std::io::stderr)
        .with_thread_names(true)
        .try_init();
}
