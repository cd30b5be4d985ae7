//! Prometheus metrics: the queue's figures in the text exposition format,
//! served on a plain HTTP listener (`GET /metrics`).
//!
//! Written by hand on tokio's TCP listener rather than with a metrics crate
//! and an HTTP server: five gauges and two counters do not pay for a new
//! dependency graph in a process whose idle footprint matters.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The queue's figures at the last decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Index slugs (not revoked) without a ledger record, or with an
    /// unreadable one.
    pub pending: u64,
    /// Jobs running.
    pub running: u64,
    /// Index slugs recorded `failed`.
    pub failed: u64,
    /// Index slugs recorded `not-yet`.
    pub not_yet: u64,
    /// The latest `ok` record of an index slug, in Unix seconds.
    pub last_success: Option<i64>,
}

#[derive(Debug, Default)]
struct State {
    leader: bool,
    summary: Option<Summary>,
    reconciles: u64,
    failures: u64,
}

/// The operator's metrics, shared by the reconciler and the listener.
#[derive(Debug, Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Records whether this replica leads; a follower publishes no queue
    /// figures (they would be stale).
    pub fn set_leader(&self, leader: bool) {
        self.with(|s| {
            s.leader = leader;
            if !leader {
                s.summary = None;
            }
        });
    }

    /// Records the figures of a decision.
    pub fn set_summary(&self, summary: Summary) {
        self.with(|s| s.summary = Some(summary));
    }

    /// Counts a reconcile, failed or not.
    pub fn reconciled(&self, ok: bool) {
        self.with(|s| {
            s.reconciles += 1;
            if !ok {
                s.failures += 1;
            }
        });
    }

    /// The text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        let s = self.with(|s| (s.leader, s.summary, s.reconciles, s.failures));
        let (leader, summary, reconciles, failures) = s;
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {value}");
        };
        metric(
            "migrate_operator_leader",
            "gauge",
            "1 when this replica leads and acts, 0 when it follows.",
            u8::from(leader).to_string(),
        );
        metric(
            "migrate_operator_reconciles_total",
            "counter",
            "Reconciles run by this replica.",
            reconciles.to_string(),
        );
        metric(
            "migrate_operator_reconcile_failures_total",
            "counter",
            "Reconciles that failed (retried after a pause).",
            failures.to_string(),
        );
        if let Some(q) = summary {
            for (name, help, value) in [
                (
                    "pending",
                    "Background migrations with no ledger record.",
                    q.pending,
                ),
                ("running", "Migration Jobs running.", q.running),
                ("failed", "Background migrations recorded failed.", q.failed),
                (
                    "not_yet",
                    "Background migrations recorded not-yet.",
                    q.not_yet,
                ),
            ] {
                metric(
                    &format!("migrate_operator_migrations_{name}"),
                    "gauge",
                    help,
                    value.to_string(),
                );
            }
            if let Some(at) = q.last_success {
                metric(
                    "migrate_operator_last_success_timestamp_seconds",
                    "gauge",
                    "When the latest background migration recorded ok was recorded.",
                    at.to_string(),
                );
            }
        }
        out
    }
}

/// How long a connection may take to send its request: a scraper sends it
/// at once; a connection that sends nothing is closed after this, so idle
/// connections cannot pile up.
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves `GET /metrics` on `listener` until the task is dropped, and the
/// probes `GET /healthz` and `GET /readyz` (the process answers: its
/// runtime is not wedged); any other path answers 404. One request per
/// connection (Prometheus reconnects); a connection that has not sent its
/// request within [`IDLE_TIMEOUT`] is closed.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    serve_with(listener, metrics, IDLE_TIMEOUT).await;
}

/// As [`serve`], closing connections silent for `idle`.
pub async fn serve_with(listener: TcpListener, metrics: Arc<Metrics>, idle: std::time::Duration) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            let mut read = 0;
            // The request line is all that matters; read until the header
            // ends (or the buffer is full: a request that long is not ours),
            // within `idle`.
            let head = async {
                while read < buf.len() {
                    match stream.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                    if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            };
            if tokio::time::timeout(idle, head).await.is_err() {
                return;
            }
            let head = String::from_utf8_lossy(&buf[..read]);
            let line = head.lines().next().unwrap_or_default();
            let (status, body) = match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["GET", "/metrics", ..] => ("200 OK", metrics.render()),
                ["GET", "/healthz" | "/readyz", ..] => ("200 OK", "ok\n".to_owned()),
                _ => (
                    "404 Not Found",
                    "not found: GET /metrics, /healthz or /readyz\n".to_owned(),
                ),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tokio::time::timeout(idle, async {
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            })
            .await;
        });
    }
}

/// Binds `addr` for [`serve`].
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_exposes_the_queue_and_a_follower_only_that_it_follows() {
        let m = Metrics::default();
        m.set_leader(true);
        m.set_summary(Summary {
            pending: 2,
            running: 1,
            failed: 1,
            not_yet: 0,
            last_success: Some(1_786_529_040),
        });
        m.reconciled(true);
        m.reconciled(false);
        let text = m.render();
        for line in [
            "# TYPE migrate_operator_migrations_pending gauge\nmigrate_operator_migrations_pending 2\n",
            "migrate_operator_migrations_running 1\n",
            "migrate_operator_migrations_failed 1\n",
            "migrate_operator_migrations_not_yet 0\n",
            "migrate_operator_last_success_timestamp_seconds 1786529040\n",
            "migrate_operator_leader 1\n",
            "# TYPE migrate_operator_reconciles_total counter\nmigrate_operator_reconciles_total 2\n",
            "migrate_operator_reconcile_failures_total 1\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        m.set_leader(false);
        let text = m.render();
        assert!(text.contains("migrate_operator_leader 0\n"), "{text}");
        assert!(!text.contains("migrations_pending"), "{text}");
    }

    #[tokio::test]
    async fn the_listener_answers_get_metrics_and_nothing_else() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::default());
        tokio::spawn(serve(listener, metrics));
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let ok = get("/metrics").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.ends_with("migrate_operator_reconcile_failures_total 0\n"),
            "{ok}"
        );
        let other = get("/").await;
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        for probe in ["/healthz", "/readyz"] {
            let ok = get(probe).await;
            assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{probe}: {ok}");
        }
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let idle = std::time::Duration::from_millis(300);
        tokio::spawn(serve_with(listener, Arc::new(Metrics::default()), idle));
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = std::time::Instant::now();
        let mut out = Vec::new();
        let closed = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            silent.read_to_end(&mut out),
        )
        .await;
        assert!(closed.is_ok(), "the silent connection was kept open");
        assert!(out.is_empty(), "{out:?}");
        assert!(started.elapsed() >= idle, "{:?}", started.elapsed());
    }
}
