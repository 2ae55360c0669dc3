//! The service's log lines: stderr (the journal, under systemd), prefixed with its name and
//! pid so the lines of the service and of the helpers it starts can be told apart.

/// Logs one line to stderr, prefixed with the service's name and pid.
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("confine-service[{}]: {}", std::process::id(), format_args!($($arg)*))
    };
}

pub(crate) use log;
