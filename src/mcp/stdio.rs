//! The MCP stdio transport: runs a server as a child process and moves newline-delimited
//! JSON-RPC between it and our own stdin/stdout through a [`Session`].
//!
//! Two threads read: client (our stdin) -> session -> server (the child's stdin), and server
//! (the child's stdout) -> session -> client (our stdout). The session is locked only while it
//! handles one message, never while writing, so a large message or a slow peer on one side
//! never blocks the other. The child's stderr is inherited; the proxy's own notes go to stderr
//! prefixed `toolwarden mcp-proxy:`, with peer text escaped.
//!
//! A held call may be confirmed only by a line the client sent after it received the held
//! answer: the client reader numbers its reads, the writer notes (before writing) the reads
//! done and whether input already waits, and the session arms a hold only for a line from a
//! later read.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::mcp::message::MAX_MESSAGE_BYTES;
use crate::mcp::session::{Outcome, Session};

/// How long calls wait for the server's tool list, and how long the server gets to exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StdioOptions {
    /// How long a call waits for the proxy's own listing of the server's tools before it is
    /// refused (10 s by default).
    pub listing_wait: Duration,
    /// How long the server gets to exit after its stdin is closed, and again after SIGTERM
    /// (3 s by default).
    pub grace: Duration,
}

impl Default for StdioOptions {
    fn default() -> StdioOptions {
        StdioOptions {
            listing_wait: Duration::from_secs(10),
            grace: Duration::from_secs(3),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn log(message: &str) {
    eprintln!(
        "toolwarden mcp-proxy: {}",
        crate::mcp::message::escape_log(message)
    );
}

struct Shared {
    session: Mutex<Session>,
    to_server: Mutex<Option<std::io::BufWriter<ChildStdin>>>,
    /// Messages for the server from the threads that must never block on it (the server
    /// reader and the timers); a writer thread sends them.
    later: Mutex<std::sync::mpsc::Sender<Vec<Value>>>,
    to_client: Mutex<std::io::Stdout>,
    options: StdioOptions,
    /// Set while answers holding a new call for confirmation are written and not yet reported
    /// to the session ([`Session::answers_written`]).
    reporting: AtomicBool,
    /// The latest hold serial reported written.
    reported: AtomicU64,
    /// How many reads of client input the client reader has done.
    client_reads: AtomicU64,
}

impl Shared {
    /// Logs, then writes to the server, then to the client (audit records were written by the
    /// session already), and arms the listing timer when asked. `blocking`: whether this
    /// thread may wait for the server to read (only the client reader may: that is the
    /// back-pressure on a client that floods a slow server).
    /// Client input read so far, and input already waiting on stdin when the answers are
    /// written, was sent before the client could see them: it confirms no call held in them.
    fn apply(self: &Arc<Shared>, outcome: Outcome, blocking: bool) {
        for line in &outcome.log {
            log(line);
        }
        if !outcome.to_server.is_empty() {
            if blocking {
                self.write_server(&outcome.to_server);
            } else {
                let _ = lock(&self.later).send(outcome.to_server);
            }
        }
        if !outcome.to_client.is_empty() {
            let mut o = lock(&self.to_client);
            // Checked before writing: what is read or waiting now was sent before the answers
            // (waiting input comes in the next read at the latest).
            let reads_before =
                self.client_reads.load(Ordering::SeqCst) + u64::from(stdin_readable());
            let new_holds = outcome.holds_through > self.reported.load(Ordering::SeqCst);
            if new_holds {
                self.reporting.store(true, Ordering::SeqCst);
            }
            let mut written = true;
            for msg in &outcome.to_client {
                if let Err(e) = write_line(&mut *o, msg) {
                    log(&format!("cannot write to the client: {e}"));
                    written = false;
                    break;
                }
            }
            // Still holding the client's stdout (lock order: stdout, then session), so the
            // client reader, which passes through that lock before each message, cannot
            // handle a reply to these answers before they are reported written.
            if written {
                // Held calls in these answers may be confirmed by what the client sends next,
                // not by what it had sent already.
                lock(&self.session).answers_written(outcome.holds_through, reads_before);
                self.reported
                    .fetch_max(outcome.holds_through, Ordering::SeqCst);
            }
            self.reporting.store(false, Ordering::SeqCst);
            drop(o);
        }
        if let Some(generation) = outcome.wait {
            let shared = self.clone();
            std::thread::spawn(move || {
                std::thread::sleep(shared.options.listing_wait);
                let outcome = lock(&shared.session).wait_expired(generation);
                shared.apply(outcome, false);
            });
        }
    }

    fn write_server(&self, messages: &[Value]) {
        let mut guard = lock(&self.to_server);
        if let Some(w) = guard.as_mut() {
            for msg in messages {
                if let Err(e) = write_line(w, msg) {
                    log(&format!("cannot write to the server: {e}"));
                    break;
                }
            }
        }
    }
}

fn write_line(w: &mut impl Write, msg: &Value) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    text.push(b'\n');
    w.write_all(&text)?;
    w.flush()
}

/// Starts `command` (the program and its arguments) as the MCP server and proxies our stdin and
/// stdout to it through `session` until the server exits. Returns the server's exit code (128
/// + the signal number when a signal ended it).
///
/// When our stdin closes, the server's stdin is closed; a server still running after
/// [`StdioOptions::grace`] gets SIGTERM, then SIGKILL after as long again (the MCP stdio
/// shutdown sequence). SIGPIPE is ignored from here on, so a peer that goes away cannot kill
/// the process: a failed write is logged and the server's exit code stands.
///
/// # Errors
///
/// A message when `command` is empty or the server cannot be started.
pub fn run(session: Session, command: &[String], options: StdioOptions) -> Result<i32, String> {
    let (program, rest) = command
        .split_first()
        .ok_or("no server command given after `--`")?;
    #[cfg(unix)]
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; changing it races with nothing the
    // proxy runs (its threads start below).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the server `{program}`: {e}"))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err("the server's stdio could not be piped".to_string());
    };
    let (later, later_rx) = std::sync::mpsc::channel::<Vec<Value>>();
    let shared = Arc::new(Shared {
        session: Mutex::new(session),
        to_server: Mutex::new(Some(std::io::BufWriter::new(server_in))),
        later: Mutex::new(later),
        to_client: Mutex::new(std::io::stdout()),
        options,
        reporting: AtomicBool::new(false),
        reported: AtomicU64::new(0),
        client_reads: AtomicU64::new(0),
    });
    {
        let shared = Arc::downgrade(&shared);
        std::thread::spawn(move || {
            for messages in later_rx {
                match shared.upgrade() {
                    Some(s) => s.write_server(&messages),
                    None => return,
                }
            }
        });
    }
    let exited = Arc::new(AtomicBool::new(false));
    {
        let (shared, exited) = (shared.clone(), exited.clone());
        let pid = child.id();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            // Larger than the standard input's own buffer, so that one stays empty and
            // `buffer()` shows every byte read ahead.
            let mut reader = BufReader::with_capacity(64 * 1024, stdin.lock());
            lock(&shared.session).answers_written(0, 0);
            pump(
                &mut reader,
                |line, first_read| {
                    // Answers that hold a call, being written, are reported first (see
                    // `Shared::apply`).
                    if shared.reporting.load(Ordering::SeqCst) {
                        drop(lock(&shared.to_client));
                    }
                    let outcome = {
                        let mut session = lock(&shared.session);
                        session.next_client_read(first_read);
                        match line {
                            Line::Text(text) => session.from_client(text),
                            Line::TooLong(len) => session.client_too_large(len),
                        }
                    };
                    shared.apply(outcome, true);
                },
                |reader| !reader.buffer().is_empty(),
                || shared.client_reads.fetch_add(1, Ordering::SeqCst) + 1,
            );
            // The client went away: closing the server's stdin asks it to exit.
            drop(lock(&shared.to_server).take());
            shut_down(pid, &exited, shared.options.grace);
        });
    }
    let reader = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            pump(
                &mut BufReader::new(server_out),
                |line, _| {
                    let outcome = match line {
                        Line::Text(text) => lock(&shared.session).from_server(text),
                        Line::TooLong(len) => lock(&shared.session).server_too_large(len),
                    };
                    shared.apply(outcome, false);
                },
                |_| false,
                || 0,
            );
        })
    };
    let _ = reader.join();
    let code = wait_code(&mut child);
    exited.store(true, Ordering::SeqCst);
    let _ = lock(&shared.to_client).flush();
    Ok(code)
}

enum Line<'a> {
    Text(&'a [u8]),
    TooLong(usize),
}

/// Whether our standard input has bytes ready to read now (never blocks); `true` when it
/// cannot tell (fail closed: a confirmation then waits for the next message).
fn stdin_readable() -> bool {
    #[cfg(unix)]
    {
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, timeout 0.
        let n = unsafe { libc::poll(&mut fd, 1, 0) };
        n != 0
    }
    #[cfg(not(unix))]
    true
}

/// Reads lines (without `\n` or `\r\n`), skipping blank ones, until end of input; a line over
/// [`MAX_MESSAGE_BYTES`] is skipped without being kept whole and reported by its length.
/// `handle` gets each line and the number of the read that brought its first byte: `buffered`
/// says whether the reader still holds unread bytes, and `read` counts a read from the
/// source and returns its number.
fn pump<R: BufRead>(
    reader: &mut R,
    mut handle: impl FnMut(Line<'_>, u64),
    buffered: impl Fn(&R) -> bool,
    mut read: impl FnMut() -> u64,
) {
    let mut last_read = 0;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let mut len = 0usize;
        let mut too_long = false;
        let mut eof = false;
        let mut first_read = None;
        loop {
            let fresh = !buffered(reader);
            let chunk = match reader.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log(&format!("read error: {e}"));
                    eof = true;
                    break;
                }
            };
            if chunk.is_empty() {
                eof = true;
                break;
            }
            if fresh {
                last_read = read();
            }
            first_read.get_or_insert(last_read);
            let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (&chunk[..i], Some(i + 1)),
                None => (chunk, None),
            };
            len += part.len();
            if len > MAX_MESSAGE_BYTES {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
            let used = done.unwrap_or(chunk.len());
            reader.consume(used);
            if done.is_some() {
                break;
            }
        }
        if too_long {
            handle(Line::TooLong(len), first_read.unwrap_or(last_read));
        } else {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            if !buf.iter().all(u8::is_ascii_whitespace) {
                handle(Line::Text(&buf), first_read.unwrap_or(last_read));
            }
        }
        if eof {
            return;
        }
    }
}

/// The server's exit code; 128 + the signal number when a signal ended it.
fn wait_code(child: &mut Child) -> i32 {
    match child.wait() {
        Ok(status) => {
            if let Some(code) = status.code() {
                return code;
            }
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                if let Some(sig) = status.signal() {
                    return 128 + sig;
                }
            }
            1
        }
        Err(e) => {
            log(&format!("cannot wait for the server: {e}"));
            1
        }
    }
}

/// After the client went away (its stdin closed, now the server's too): give the server
/// `grace` to exit, then SIGTERM, then SIGKILL.
fn shut_down(pid: u32, exited: &AtomicBool, grace: Duration) {
    let wait = || {
        let steps = grace.as_millis() / 50;
        for _ in 0..steps {
            if exited.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        exited.load(Ordering::SeqCst)
    };
    if wait() {
        return;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return;
        };
        log("the server did not exit after its stdin closed; sending SIGTERM");
        // SAFETY: kill(2) with a pid we spawned and have not yet reaped (`exited` is false).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        if wait() {
            return;
        }
        log("the server ignored SIGTERM; sending SIGKILL");
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    #[cfg(not(unix))]
    let _ = pid;
}
