//! What one plugin may take from the others (issue 10: eight requests on a looping computed
//! field made every other route wait). Two bounds, shared by every application of one plugin
//! file within one generation of the plugin set (a reload starts them afresh):
//!
//! - a concurrency limit: at most `[limits] concurrency` calls run at once; a call beyond it
//!   waits up to `queue_ms` for one to end, then is refused with an error naming the plugin;
//! - a circuit breaker: after `breaker_failures` calls in a row timed out or crashed (within
//!   `breaker_window_ms` of the first of them), the plugin's calls fail at once, naming it, for
//!   `breaker_cooldown_ms`; then one trial call is let through, and it closes the breaker if it
//!   answers, or opens it again if it times out or crashes.
//!
//! A guest error (a validation, a refusal) is an answer: only timeouts and traps count. The
//! breaker's state machine takes the time as an argument so that its tests drive the clock.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use super::loader::Limits;

tokio::task_local! {
    /// The guards whose permit the current task holds. A call made from inside a call of the
    /// same plugin (a callback that reads a collection carrying one of its computed fields)
    /// runs on the outer call's permit: waiting for a second one could make the plugin wait
    /// for itself.
    static HELD: Vec<u64>;
}

/// Distinguishes guards in [`HELD`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The limit and the breaker of one plugin file.
pub struct Guard {
    id: u64,
    /// The plugin's file name, for messages and logs.
    name: String,
    limit: usize,
    queue: Duration,
    permits: Semaphore,
    breaker: Breaker,
}

/// A call admitted by [`Guard::enter`]: it holds a permit (unless nested in a call of the same
/// plugin) and, when it is the breaker's trial, must report how it ended ([`Entry::finish`]);
/// dropped without it (the request was cancelled), a trial lets the next call try instead.
pub struct Entry<'g> {
    guard: &'g Guard,
    admit: Admit,
    _permit: Option<SemaphorePermit<'g>>,
    finished: bool,
}

impl Guard {
    pub fn new(name: &str, limits: &Limits) -> Self {
        let limit = limits.concurrency.max(1) as usize;
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.to_owned(),
            limit,
            queue: Duration::from_millis(limits.queue_ms),
            permits: Semaphore::new(limit),
            breaker: Breaker::new(
                limits.breaker_failures,
                Duration::from_millis(limits.breaker_window_ms),
                Duration::from_millis(limits.breaker_cooldown_ms),
            ),
        }
    }

    /// Whether the breaker is open now (its calls fail at once), for `/metrics`.
    pub fn is_open(&self, now: Instant) -> bool {
        self.breaker.open(now).is_some()
    }

    /// Admits one call, or refuses it with the message of the request's error: at once when the
    /// breaker is open, after `queue_ms` when the plugin's calls stay at its limit.
    pub async fn enter(&self) -> Result<Entry<'_>, String> {
        let admit = self
            .breaker
            .admit(Instant::now())
            .map_err(|open| self.open_message(&open))?;
        let permit = if self.held() {
            None
        } else {
            match self.permit().await {
                Some((permit, waited)) => {
                    // The breaker may have opened while this call waited its turn (the calls
                    // ahead of it timed out): it fails now rather than run.
                    if waited
                        && admit == Admit::Call
                        && let Some(open) = self.breaker.open(Instant::now())
                    {
                        drop(permit);
                        return Err(self.open_message(&open));
                    }
                    Some(permit)
                }
                None => {
                    self.breaker.abandon(admit);
                    tracing::warn!(
                        plugin = %self.name,
                        limit = self.limit,
                        queue_ms = self.queue.as_millis() as u64,
                        "plugin call refused: the plugin is at its concurrency limit"
                    );
                    return Err(self.busy_message());
                }
            }
        };
        Ok(Entry {
            guard: self,
            admit,
            _permit: permit,
            finished: false,
        })
    }

    /// A permit at once, else the first one released within `queue_ms`; with whether it had
    /// to wait.
    async fn permit(&self) -> Option<(SemaphorePermit<'_>, bool)> {
        if let Ok(permit) = self.permits.try_acquire() {
            return Some((permit, false));
        }
        // The semaphore is never closed: an error is as much a refusal as the timeout.
        let permit = tokio::time::timeout(self.queue, self.permits.acquire())
            .await
            .ok()?
            .ok()?;
        Some((permit, true))
    }

    /// Runs `call` with this guard's permit marked as held by the task (see [`HELD`]).
    pub fn scoped<F: Future>(&self, call: F) -> impl Future<Output = F::Output> {
        let mut ids = HELD.try_with(Clone::clone).unwrap_or_default();
        if !ids.contains(&self.id) {
            ids.push(self.id);
        }
        HELD.scope(ids, call)
    }

    fn held(&self) -> bool {
        HELD.try_with(|ids| ids.contains(&self.id)).unwrap_or(false)
    }

    fn busy_message(&self) -> String {
        let calls = if self.limit == 1 { "call" } else { "calls" };
        format!(
            "Plugin `{}` is busy: it is running {} {calls}, its limit (`[limits] concurrency` in \
             {}.toml), and none ended within {} ms; try again later",
            self.name,
            self.limit,
            self.name,
            self.queue.as_millis()
        )
    }

    fn open_message(&self, open: &Open) -> String {
        let when = match open.retry_in {
            Some(wait) => format!("next try in {} s", wait.as_millis().div_ceil(1000).max(1)),
            None => "a trial call is running".to_owned(),
        };
        format!(
            "Plugin `{}` is not called for now: its last {} calls timed out or crashed, so its \
             circuit breaker is open ({when})",
            self.name, open.failures
        )
    }

    /// Logs a change of the breaker's state: a warning when it opens, information when it
    /// closes.
    fn log(&self, change: Change) {
        let cooldown_ms = self.breaker.cooldown.as_millis() as u64;
        match change {
            Change::Opened { failures } => tracing::warn!(
                plugin = %self.name,
                failures,
                cooldown_ms,
                "plugin circuit breaker opened: its calls fail at once until a trial call answers"
            ),
            Change::Reopened => tracing::warn!(
                plugin = %self.name,
                cooldown_ms,
                "plugin circuit breaker opened again: the trial call timed out or crashed"
            ),
            Change::Closed => tracing::info!(
                plugin = %self.name,
                "plugin circuit breaker closed: the trial call answered"
            ),
        }
    }
}

impl Entry<'_> {
    /// Records how the call ended: `failed` for a timeout or a trap.
    pub fn finish(mut self, failed: bool) {
        self.finished = true;
        if let Some(change) = self
            .guard
            .breaker
            .record(self.admit, failed, Instant::now())
        {
            self.guard.log(change);
        }
    }
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.guard.breaker.abandon(self.admit);
        }
    }
}

/// How a call got past the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Call,
    /// The one call let through after the cool-down.
    Trial,
}

/// A refusal by an open breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// Until the next trial; `None` while a trial call runs.
    pub retry_in: Option<Duration>,
    /// The failures in a row that opened it.
    pub failures: u32,
}

/// A change of state worth a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Opened { failures: u32 },
    Reopened,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Calls go through; `failures` timeouts or traps in a row, the first at `since`.
    Closed {
        failures: u32,
        since: Option<Instant>,
    },
    Open {
        until: Instant,
        failures: u32,
    },
    /// The trial call is running; the others are refused.
    Trial {
        failures: u32,
    },
}

/// The circuit breaker's state machine.
pub struct Breaker {
    /// Failures in a row that open it; 0 disables it.
    threshold: u32,
    window: Duration,
    cooldown: Duration,
    state: Mutex<State>,
}

impl Breaker {
    pub fn new(threshold: u32, window: Duration, cooldown: Duration) -> Self {
        Self {
            threshold,
            window,
            cooldown,
            state: Mutex::new(State::Closed {
                failures: 0,
                since: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a plain value: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets a call through, makes it the trial once the cool-down is over, or refuses it.
    pub fn admit(&self, now: Instant) -> Result<Admit, Open> {
        let mut state = self.state();
        match *state {
            State::Closed { .. } => Ok(Admit::Call),
            State::Open { until, failures } if now >= until => {
                *state = State::Trial { failures };
                Ok(Admit::Trial)
            }
            State::Open { until, failures } => Err(Open {
                retry_in: Some(until - now),
                failures,
            }),
            State::Trial { failures } => Err(Open {
                retry_in: None,
                failures,
            }),
        }
    }

    /// Whether calls are refused now (open, or a trial running), without changing the state.
    pub fn open(&self, now: Instant) -> Option<Open> {
        match *self.state() {
            State::Closed { .. } => None,
            State::Open { until, failures } => Some(Open {
                retry_in: Some(until.saturating_duration_since(now)),
                failures,
            }),
            State::Trial { failures } => Some(Open {
                retry_in: None,
                failures,
            }),
        }
    }

    /// Records the end of an admitted call; returns the change of state, if any.
    pub fn record(&self, admit: Admit, failed: bool, now: Instant) -> Option<Change> {
        if self.threshold == 0 {
            return None;
        }
        let mut state = self.state();
        match (*state, admit, failed) {
            (State::Trial { .. }, Admit::Trial, false) => {
                *state = State::Closed {
                    failures: 0,
                    since: None,
                };
                Some(Change::Closed)
            }
            (State::Trial { failures }, Admit::Trial, true) => {
                *state = State::Open {
                    until: now + self.cooldown,
                    failures,
                };
                Some(Change::Reopened)
            }
            (State::Closed { .. }, _, false) => {
                *state = State::Closed {
                    failures: 0,
                    since: None,
                };
                None
            }
            (State::Closed { failures, since }, _, true) => {
                // Failures in a row count within the window of the first one; an older streak
                // starts again from this failure.
                let (failures, since) = match since {
                    Some(first) if now.duration_since(first) <= self.window => {
                        (failures + 1, first)
                    }
                    _ => (1, now),
                };
                if failures >= self.threshold {
                    *state = State::Open {
                        until: now + self.cooldown,
                        failures,
                    };
                    Some(Change::Opened { failures })
                } else {
                    *state = State::Closed {
                        failures,
                        since: Some(since),
                    };
                    None
                }
            }
            // Calls admitted before the breaker opened end while it is open or in trial: the
            // breaker already decided, they change nothing.
            _ => None,
        }
    }

    /// A call admitted but never run to its end (refused by the limit, or cancelled): if it was
    /// the trial, the next call becomes the trial.
    pub fn abandon(&self, admit: Admit) {
        let mut state = self.state();
        if let (State::Trial { failures }, Admit::Trial) = (*state, admit) {
            *state = State::Open {
                until: Instant::now(),
                failures,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);
    const COOLDOWN: Duration = Duration::from_secs(30);

    fn breaker() -> Breaker {
        Breaker::new(3, WINDOW, COOLDOWN)
    }

    fn limits(concurrency: u32, queue_ms: u64) -> Limits {
        Limits {
            concurrency,
            queue_ms,
            breaker_failures: 2,
            breaker_window_ms: 60_000,
            breaker_cooldown_ms: 1_000,
            ..Limits::default()
        }
    }

    #[test]
    fn the_breaker_opens_after_the_threshold_of_failures_in_a_row() {
        let b = breaker();
        let t = Instant::now();
        assert_eq!(b.record(Admit::Call, true, t), None);
        assert_eq!(
            b.record(Admit::Call, true, t + Duration::from_secs(1)),
            None
        );
        assert_eq!(b.admit(t + Duration::from_secs(2)), Ok(Admit::Call));
        assert_eq!(
            b.record(Admit::Call, true, t + Duration::from_secs(2)),
            Some(Change::Opened { failures: 3 })
        );
        assert_eq!(
            b.admit(t + Duration::from_secs(12)),
            Err(Open {
                retry_in: Some(Duration::from_secs(20)),
                failures: 3
            })
        );
    }

    #[test]
    fn an_answer_or_a_streak_older_than_the_window_starts_the_count_again() {
        let b = breaker();
        let t = Instant::now();
        b.record(Admit::Call, true, t);
        b.record(Admit::Call, true, t);
        // A success in between: two more failures do not open it.
        assert_eq!(b.record(Admit::Call, false, t), None);
        b.record(Admit::Call, true, t);
        assert_eq!(b.record(Admit::Call, true, t), None);
        // The third failure comes after the window of the streak's first: a new streak.
        let late = t + WINDOW + Duration::from_secs(1);
        assert_eq!(b.record(Admit::Call, true, late), None);
        assert_eq!(b.admit(late), Ok(Admit::Call));
        b.record(Admit::Call, true, late);
        assert_eq!(
            b.record(Admit::Call, true, late),
            Some(Change::Opened { failures: 3 })
        );
    }

    #[test]
    fn after_the_cooldown_one_trial_closes_or_reopens_the_breaker() {
        let b = breaker();
        let t = Instant::now();
        for _ in 0..3 {
            b.record(Admit::Call, true, t);
        }
        let after = t + COOLDOWN;
        assert_eq!(b.admit(after), Ok(Admit::Trial));
        // One trial at a time: the others are refused while it runs.
        assert_eq!(
            b.admit(after),
            Err(Open {
                retry_in: None,
                failures: 3
            })
        );
        // A call admitted before the breaker opened changes nothing when it ends.
        assert_eq!(b.record(Admit::Call, false, after), None);
        assert!(b.admit(after).is_err());
        // The trial fails: open again for a full cool-down.
        assert_eq!(b.record(Admit::Trial, true, after), Some(Change::Reopened));
        assert_eq!(
            b.admit(after + COOLDOWN - Duration::from_secs(1)),
            Err(Open {
                retry_in: Some(Duration::from_secs(1)),
                failures: 3
            })
        );
        // The next trial answers: closed, calls go through again.
        let later = after + COOLDOWN;
        assert_eq!(b.admit(later), Ok(Admit::Trial));
        assert_eq!(b.record(Admit::Trial, false, later), Some(Change::Closed));
        assert_eq!(b.admit(later), Ok(Admit::Call));
        assert_eq!(b.record(Admit::Call, true, later), None);
    }

    #[test]
    fn an_abandoned_trial_lets_the_next_call_try() {
        let b = breaker();
        let t = Instant::now();
        for _ in 0..3 {
            b.record(Admit::Call, true, t);
        }
        assert_eq!(b.admit(t + COOLDOWN), Ok(Admit::Trial));
        b.abandon(Admit::Trial);
        assert_eq!(b.admit(Instant::now() + COOLDOWN), Ok(Admit::Trial));
    }

    #[test]
    fn a_threshold_of_zero_disables_the_breaker() {
        let b = Breaker::new(0, WINDOW, COOLDOWN);
        let t = Instant::now();
        for _ in 0..100 {
            assert_eq!(b.record(Admit::Call, true, t), None);
        }
        assert_eq!(b.admit(t), Ok(Admit::Call));
    }

    #[tokio::test]
    async fn calls_beyond_the_limit_wait_for_a_permit_then_are_refused_naming_the_plugin() {
        let guard = Guard::new("slow", &limits(2, 50));
        let (a, b) = (guard.enter().await.unwrap(), guard.enter().await.unwrap());
        let started = std::time::Instant::now();
        let refused = guard.enter().await.err().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(
            refused,
            "Plugin `slow` is busy: it is running 2 calls, its limit (`[limits] concurrency` in \
             slow.toml), and none ended within 50 ms; try again later"
        );
        // A waiting call gets the permit a call releases.
        let waiting = guard.enter();
        drop(a);
        let c = waiting.await.unwrap();
        drop((b, c));
    }

    #[tokio::test]
    async fn a_call_that_waited_while_the_breaker_opened_is_refused_instead_of_run() {
        let guard = Guard::new("p", &limits(1, 5_000));
        let first = guard.enter().await.unwrap();
        let second = guard.enter();
        tokio::pin!(second);
        // The second call waits for the permit; meanwhile two calls time out (the threshold).
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut second)
                .await
                .is_err()
        );
        guard.breaker.record(Admit::Call, true, Instant::now());
        first.finish(true);
        let refused = second.await.err().unwrap();
        assert!(refused.contains("circuit breaker is open"), "{refused}");
    }

    #[tokio::test]
    async fn a_call_nested_in_a_call_of_the_same_plugin_runs_on_its_permit() {
        let guard = Guard::new("p", &limits(1, 10));
        let outer = guard.enter().await.unwrap();
        guard
            .scoped(async {
                // Without the outer permit marked as held, this would wait and be refused.
                let inner = guard.enter().await.unwrap();
                inner.finish(false);
            })
            .await;
        // Outside the scope, another call is refused: the limit still holds.
        assert!(guard.enter().await.is_err());
        outer.finish(false);
        assert!(guard.enter().await.is_ok());
    }

    #[tokio::test]
    async fn an_open_breaker_refuses_at_once_naming_the_plugin_and_its_failures() {
        let guard = Guard::new("loops", &limits(4, 1_000));
        for _ in 0..2 {
            guard.enter().await.unwrap().finish(true);
        }
        let started = std::time::Instant::now();
        let refused = guard.enter().await.err().unwrap();
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(
            refused,
            "Plugin `loops` is not called for now: its last 2 calls timed out or crashed, so its \
             circuit breaker is open (next try in 1 s)"
        );
    }
}
