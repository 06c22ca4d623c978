//! A log writer that appends each line to a shared in-memory buffer and writes the buffer out in
//! one `write` every [`INTERVAL`], or at once on the logging thread when it holds [`BATCH_BYTES`].
//!
//! Why not a channel to a writer thread (`tracing-appender`'s `non_blocking`): when lines arrive
//! slower than the thread writes them, which is the case of a server at a few thousand requests
//! per second, the thread is asleep at every line and each send wakes it: a futex call, two
//! context switches and a `write` per line, more CPU than the plain `write` it replaces
//! (`benches/log_lines.rs`, "paced"). Here a line costs a lock and a copy; the flush thread
//! wakes on a timer, never per line.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// Longest a line waits in memory before it reaches the sink.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// A buffer this large is written out by the thread that filled it, without waiting for the
/// timer: one `write` per batch in a flood, and memory stays bounded.
pub const BATCH_BYTES: usize = 64 * 1024;

/// What the logging threads and the flush thread share.
struct Shared<S> {
    /// Lines not yet handed to the sink.
    pending: Mutex<Vec<u8>>,
    /// The sink. Whoever writes takes it before emptying `pending`, so batches reach it in the
    /// order their lines were logged.
    sink: Mutex<S>,
    /// Set by [`BatchGuard`]'s drop: from then on every line is written at once.
    closed: AtomicBool,
    /// Wakes the flush thread early, at shutdown.
    stop: (Mutex<bool>, Condvar),
}

/// A poisoned lock only means a panic elsewhere while logging; the bytes are still good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Write> Shared<S> {
    /// Writes every pending line to the sink.
    fn flush(&self) -> io::Result<()> {
        let mut sink = lock(&self.sink);
        let batch = std::mem::take(&mut *lock(&self.pending));
        if batch.is_empty() {
            return Ok(());
        }
        sink.write_all(&batch)?;
        sink.flush()
    }
}

/// The `MakeWriter` of the subscriber: cheap to call per event (it borrows, no `Arc` traffic).
pub struct BatchWriter<S> {
    shared: Arc<Shared<S>>,
}

/// One event's writer.
pub struct LineWriter<'a, S> {
    shared: &'a Shared<S>,
}

impl<S: Write> Write for LineWriter<'_, S> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let len = {
            let mut pending = lock(&self.shared.pending);
            pending.extend_from_slice(bytes);
            pending.len()
        };
        if len >= BATCH_BYTES || self.shared.closed.load(Ordering::Acquire) {
            self.shared.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Lines are flushed by the timer; a per-event flush would undo the batching.
        Ok(())
    }
}

impl<'a, S: Write + 'a> MakeWriter<'a> for BatchWriter<S> {
    type Writer = LineWriter<'a, S>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            shared: &self.shared,
        }
    }
}

/// Stops the flush thread when dropped, after writing out every pending line; lines logged
/// later are written at once.
#[must_use = "dropping the guard stops the flush thread"]
pub struct BatchGuard {
    stop: Box<dyn Fn() + Send + Sync>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for BatchGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchGuard").finish_non_exhaustive()
    }
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        (self.stop)();
        if let Some(thread) = self.thread.take() {
            // The thread only loops and flushes; if it panicked there is nothing left to do.
            let _ = thread.join();
        }
    }
}

/// A writer to `sink` and the guard of its flush thread (named `canopy-log`).
pub fn batch_writer<S: Write + Send + 'static>(
    sink: S,
) -> io::Result<(BatchWriter<S>, BatchGuard)> {
    let shared = Arc::new(Shared {
        pending: Mutex::new(Vec::with_capacity(BATCH_BYTES)),
        sink: Mutex::new(sink),
        closed: AtomicBool::new(false),
        stop: (Mutex::new(false), Condvar::new()),
    });
    let for_thread = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("canopy-log".to_owned())
        .spawn(move || {
            let (stopped, wake) = &for_thread.stop;
            let mut stop = lock(stopped);
            while !*stop {
                stop = wake
                    .wait_timeout(stop, INTERVAL)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                // Nowhere to report a failing stderr; the next flush tries again.
                let _ = for_thread.flush();
            }
            drop(stop);
            // The guard may stop the thread before it first waits (a loaded machine schedules
            // it late): the loop then never ran, and this flush is the one that writes the
            // lines logged so far.
            let _ = for_thread.flush();
        })?;
    let for_guard = Arc::clone(&shared);
    let stop = move || {
        for_guard.closed.store(true, Ordering::Release);
        let (stopped, wake) = &for_guard.stop;
        *lock(stopped) = true;
        wake.notify_all();
    };
    Ok((
        BatchWriter { shared },
        BatchGuard {
            stop: Box::new(stop),
            thread: Some(thread),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that keeps every byte and counts the writes.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut inner = lock(&self.0);
            inner.0.extend_from_slice(buf);
            inner.1 += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn line(writer: &BatchWriter<Sink>, text: &str) {
        writer
            .make_writer()
            .write_all(text.as_bytes())
            .expect("buffered");
    }

    #[test]
    fn lines_wait_for_the_timer_then_reach_the_sink_in_one_write() {
        let sink = Sink::default();
        let (writer, _guard) = batch_writer(sink.clone()).expect("thread");
        line(&writer, "a\n");
        line(&writer, "b\n");
        std::thread::sleep(INTERVAL * 4);
        let (bytes, writes) = lock(&sink.0).clone();
        assert_eq!(bytes, b"a\nb\n");
        assert_eq!(writes, 1);
    }

    #[test]
    fn a_full_batch_is_written_by_the_logging_thread_without_waiting() {
        let sink = Sink::default();
        let (writer, _guard) = batch_writer(sink.clone()).expect("thread");
        let text = "x".repeat(BATCH_BYTES);
        line(&writer, &text);
        assert_eq!(lock(&sink.0).0.len(), BATCH_BYTES);
    }

    #[test]
    fn dropping_the_guard_writes_everything_in_order_and_later_lines_at_once() {
        let sink = Sink::default();
        let (writer, guard) = batch_writer(sink.clone()).expect("thread");
        let writer = Arc::new(writer);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let writer = Arc::clone(&writer);
                scope.spawn(move || {
                    for i in 0..5_000 {
                        line(&writer, &format!("{t} {i}\n"));
                    }
                });
            }
        });
        drop(guard);
        let text = String::from_utf8(lock(&sink.0).0.clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 20_000);
        // Each thread's lines keep their order.
        for t in 0..4 {
            let own: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("{t} ")))
                .map(|i| i.parse().expect("number"))
                .collect();
            assert_eq!(own, (0..5_000).collect::<Vec<_>>());
        }
        line(&writer, "late\n");
        assert!(lock(&sink.0).0.ends_with(b"late\n"));
    }
}
