//! Cost of the per-request log line (the event `http::middleware::request_log` emits) with: the
//! writer `canopy` used before (`fmt()` straight to stderr, ANSI on), the same without ANSI,
//! `tracing-appender`'s `non_blocking` channel to a writer thread, and `canopy::logging`'s batch
//! writer (text and JSON).
//!
//! Run with stderr sent to a file, as a server's is: `cargo bench -p canopy --bench log_lines
//! 2>/tmp/log_lines.out`. For each set-up it prints, per line: the wall time on the logging
//! thread and the CPU time of the whole process (flush thread included: what throughput pays),
//! with `THREADS` threads logging at once like tokio workers, first back to back, then paced
//! like a server whose workers park between requests.

use std::time::{Duration, Instant};

use canopy::config::LogFormat;
use tracing::Dispatch;

const THREADS: usize = 2;

/// Back to back (a flood), or one line per `pause` on each thread (a server whose workers park
/// between requests: the case where a background writer's thread has to be woken per line).
#[derive(Clone, Copy)]
enum Pace {
    Burst,
    Paced(Duration),
}

impl Pace {
    fn lines_per_thread(self) -> usize {
        match self {
            Self::Burst => 100_000,
            Self::Paced(_) => 10_000,
        }
    }
}

fn request_line(i: usize) {
    tracing::info!(
        target: "canopy::http",
        method = %"GET",
        path = %"/forest/orders",
        status = 200_u16,
        duration_ms = 1.234 + (i % 7) as f64,
        correlation_id = "7f9c2a1e-4b7d-4c59-9a51-2f0d6c1b8e3a",
        "request"
    );
}

/// Process CPU time (user + system) from `/proc/self/stat`, in clock ticks of 10 ms.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Logs `LINES_PER_THREAD` lines on each of `THREADS` threads through `dispatch`; `finish` runs
/// after (it drops the writer's guard, so queued lines are written inside the measurement).
fn measure(pace: Pace, name: &str, dispatch: &Dispatch, finish: impl FnOnce()) {
    let lines_per_thread = pace.lines_per_thread();
    let cpu_before = process_cpu();
    let started = Instant::now();
    let waits: Vec<Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let dispatch = dispatch.clone();
                scope.spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        let started = Instant::now();
                        for i in 0..lines_per_thread {
                            request_line(i);
                            if let Pace::Paced(pause) = pace {
                                std::thread::sleep(pause);
                            }
                        }
                        started.elapsed()
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    finish();
    let wall = started.elapsed();
    let lines = (lines_per_thread * THREADS) as f64;
    let wait_per_line = waits.iter().map(Duration::as_secs_f64).sum::<f64>() / lines * 1e6;
    let cpu_per_line = match (cpu_before, process_cpu()) {
        (Some(before), Some(after)) => {
            format!("{:6.2} µs", (after - before).as_secs_f64() / lines * 1e6)
        }
        _ => "     n/a".to_owned(),
    };
    println!(
        "{name:<44} {wait_per_line:6.2} µs/line on the logging thread, {cpu_per_line} CPU/line, {:.0} lines/s",
        lines / wall.as_secs_f64()
    );
}

fn main() -> anyhow::Result<()> {
    println!(
        "{THREADS} threads logging the request line; stderr is {}",
        std::fs::read_link("/proc/self/fd/2")
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "?".to_owned())
    );
    for pace in [Pace::Burst, Pace::Paced(Duration::from_micros(100))] {
        match pace {
            Pace::Burst => println!(
                "\nburst: {} lines per thread back to back",
                pace.lines_per_thread()
            ),
            Pace::Paced(pause) => println!(
                "\npaced: {} lines per thread, one per {pause:?} (subtract the filtered-out CPU)",
                pace.lines_per_thread()
            ),
        }
        scenarios(pace)?;
    }
    Ok(())
}

fn scenarios(pace: Pace) -> anyhow::Result<()> {
    let filtered = canopy::logging::subscriber("warn", LogFormat::Text, std::io::stderr, false)?;
    measure(
        pace,
        "filtered out (loggerLevel = warn)",
        &Dispatch::new(filtered),
        || {},
    );

    // The set-up of `canopy` before `logging`: `fmt()` defaults, ANSI on, unbuffered stderr.
    let before = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new("info")?)
        .with_writer(std::io::stderr)
        .finish();
    measure(
        pace,
        "before: fmt() to stderr, ANSI",
        &Dispatch::new(before),
        || {},
    );

    let plain = canopy::logging::subscriber("info", LogFormat::Text, std::io::stderr, false)?;
    measure(
        pace,
        "text to stderr, no ANSI",
        &Dispatch::new(plain),
        || {},
    );

    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let sub = canopy::logging::subscriber("info", LogFormat::Text, writer, false)?;
    measure(
        pace,
        "text via tracing-appender non_blocking",
        &Dispatch::new(sub),
        move || drop(guard),
    );

    for format in [LogFormat::Text, LogFormat::Json] {
        let (writer, guard) = canopy::logging::stderr_writer()?;
        let sub = canopy::logging::subscriber("info", format, writer, false)?;
        measure(
            pace,
            &format!("now: {format:?} via canopy::logging"),
            &Dispatch::new(sub),
            move || drop(guard),
        );
    }
    Ok(())
}
