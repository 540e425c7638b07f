//! The `toolwarden` command line: a thin front end over the library.

mod cli;

fn main() {
    restore_sigpipe();
    std::process::exit(cli::run());
}

/// Restores the default SIGPIPE action, which Rust's runtime sets to "ignore": output piped
/// into a reader that stops early (`toolwarden offer ... | head`) then ends the process
/// quietly, as for any Unix filter, instead of panicking in `println!` on a broken pipe.
#[cfg(unix)]
fn restore_sigpipe() {
    // SAFETY: called first thing in `main`, before any other thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_sigpipe() {}
