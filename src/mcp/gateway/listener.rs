//! The gateway's accept loop: at most `max_connections` connections served at once (past it
//! a new one waits in the listen backlog), each closed when no byte moved on it either way for
//! `idle_timeout_secs` and when its request headers take longer than `request_timeout_secs`
//! (the first request's counted from the connection's start, whatever it sent);
//! a failed `accept` (out of file descriptors, say) is retried after a growing pause and
//! reported at most once per [`ACCEPT_REPORT_EVERY`], so the loop never spins.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Semaphore;

use super::config::Limits;
use super::core::log;

/// First pause after a failed `accept`; it doubles on each further failure.
pub const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(10);
/// Longest pause after failed `accept`s.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Failed `accept`s are reported at most once in this long (with how many were not).
pub const ACCEPT_REPORT_EVERY: Duration = Duration::from_secs(10);

/// The pause after the `failures`-th failed `accept` in a row (1 for the first):
/// [`ACCEPT_BACKOFF_FIRST`] doubled each time, at most [`ACCEPT_BACKOFF_MAX`].
pub fn accept_backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    ACCEPT_BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(ACCEPT_BACKOFF_MAX)
}

/// Reports failed `accept`s at most once per `every`: the first failure of a window is
/// reported with how many were left unreported since the last report.
#[derive(Debug)]
pub struct ErrorReport {
    every: Duration,
    last: Option<Instant>,
    unreported: u64,
}

impl ErrorReport {
    /// A report of at most one line per `every`.
    pub fn new(every: Duration) -> ErrorReport {
        ErrorReport {
            every,
            last: None,
            unreported: 0,
        }
    }

    /// Notes a failure `e` at `now`; returns the line to log, when one is due.
    pub fn note(&mut self, now: Instant, e: &dyn std::fmt::Display) -> Option<String> {
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < self.every)
        {
            self.unreported += 1;
            return None;
        }
        let line = match self.unreported {
            0 => format!("cannot accept a connection: {e}"),
            n => {
                format!("cannot accept a connection: {e} ({n} more failures since the last report)")
            }
        };
        self.last = Some(now);
        self.unreported = 0;
        Some(line)
    }
}

/// A connection that notes when a byte last moved on it, either way.
struct Watched<T> {
    inner: T,
    start: Instant,
    last: Arc<AtomicU64>,
}

impl<T> Watched<T> {
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.touch();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Serves `app` on `listener` until Ctrl-C within `limits` (`max_connections`,
/// `idle_timeout`, `request_timeout` for headers), HTTP/1.1 and HTTP/2.
///
/// # Errors
///
/// Never in practice: a message if the connection counter closes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: &Limits,
) -> Result<(), String> {
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut failures: u32 = 0;
    let mut report = ErrorReport::new(ACCEPT_REPORT_EVERY);
    loop {
        // Past the cap, wait for a connection to close; the kernel holds new ones meanwhile.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.map_err(|e| e.to_string())?,
            _ = &mut stop => return Ok(()),
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    failures = 0;
                    // An answer goes out as soon as it is written (an event stream is several
                    // small writes; Nagle's algorithm would hold the later ones for an ACK).
                    let _ = stream.set_nodelay(true);
                    stream
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    if let Some(line) = report.note(Instant::now(), &e) {
                        log(&line);
                    }
                    drop(permit);
                    tokio::select! {
                        _ = tokio::time::sleep(accept_backoff(failures)) => {}
                        _ = &mut stop => return Ok(()),
                    }
                    continue;
                }
            },
            _ = &mut stop => return Ok(()),
        };
        let app = app.clone();
        let (header_timeout, idle) = (limits.request_timeout, limits.idle_timeout);
        tokio::spawn(async move {
            connection(stream, app, header_timeout, idle).await;
            drop(permit);
        });
    }
}

/// Serves one connection until it ends, stays silent for `idle`, or has not sent its first
/// request's headers `header_timeout` after it began.
async fn connection(
    stream: tokio::net::TcpStream,
    app: axum::Router,
    header_timeout: Duration,
    idle: Duration,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    let last = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let io = Watched {
        inner: stream,
        start,
        last: last.clone(),
    };
    // The first request's headers are due `header_timeout` after the connection began, so a
    // socket that sends nothing, or half a preface ("P"), does not hold a slot for `idle`:
    // hyper's own header timer starts only once it knows the protocol. Later requests on a
    // kept-alive connection have hyper's timer.
    let dispatched = Arc::new(AtomicBool::new(false));
    let seen = dispatched.clone();
    let app = app.layer(axum::middleware::map_request(
        move |request: axum::extract::Request| {
            seen.store(true, Ordering::Relaxed);
            std::future::ready(request)
        },
    ));
    let headers_due = start + header_timeout;
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn =
        builder.serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(app));
    tokio::pin!(conn);
    loop {
        let since = Duration::from_millis(last.load(Ordering::Relaxed));
        let waiting = !dispatched.load(Ordering::Relaxed);
        let deadline = if waiting {
            (start + since + idle).min(headers_due)
        } else {
            start + since + idle
        };
        tokio::select! {
            _ = &mut conn => return,
            _ = tokio::time::sleep_until(deadline.into()) => {
                if !dispatched.load(Ordering::Relaxed) && Instant::now() >= headers_due {
                    return;
                }
                let since = Duration::from_millis(last.load(Ordering::Relaxed));
                if start.elapsed() >= since + idle {
                    // Dropping the connection closes it.
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_after_failed_accepts_doubles_up_to_a_second() {
        let pauses: Vec<u128> = [1, 2, 3, 7, 8, 100]
            .iter()
            .map(|n| accept_backoff(*n).as_millis())
            .collect();
        assert_eq!(pauses, [10, 20, 40, 640, 1000, 1000]);
    }

    #[test]
    fn failed_accepts_are_reported_once_per_window_with_the_count_left_out() {
        let mut r = ErrorReport::new(Duration::from_secs(10));
        let t = Instant::now();
        let e = "Too many open files (os error 24)";
        assert_eq!(
            r.note(t, &e).as_deref(),
            Some("cannot accept a connection: Too many open files (os error 24)")
        );
        for i in 1..=5 {
            assert_eq!(r.note(t + Duration::from_secs(i), &e), None);
        }
        assert_eq!(
            r.note(t + Duration::from_secs(10), &e).as_deref(),
            Some("cannot accept a connection: Too many open files (os error 24) (5 more failures since the last report)")
        );
    }
}
