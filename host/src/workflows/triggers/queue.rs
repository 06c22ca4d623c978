//! The run queue of the triggers: concurrent requests to queue a run are written together, in
//! one transaction per batch, by one writer task, and each request is answered once its batch is
//! committed (so a 202 means the run is durable).
//!
//! Why: one commit per run is one WAL sync per run on SQLite (and one round trip more on
//! PostgreSQL); a webhook under load then spends its time waiting for syncs. Within the
//! transaction the runs go in multi-row inserts, so a batch of 64 is a few round trips, not 64. The writer takes
//! whatever arrived while the previous batch was being written (up to [`BATCH`]), so an idle
//! server writes each run at once and a busy one shares each sync between many runs, without a
//! timer. Within a batch the store's partial unique index still decides: two runs of one
//! workflow on one record in the same batch give one `Created` and one `Ongoing`.
//!
//! Runs are inserted in key order, so that two instances writing batches into one PostgreSQL
//! store take the unique index's locks in the same order and cannot deadlock. A batch that fails
//! (a run naming a version that was just deleted, a lost connection) is retried run by run, so
//! one bad run fails alone.

use std::sync::Arc;

use tokio::sync::{Notify, mpsc, oneshot};

use crate::platform::{Result, Store};
use crate::workflows::{NewRun, Queued};

/// Most runs written in one transaction.
pub const BATCH: usize = 512;
/// Requests waiting for the writer before `queue` waits for room (backpressure, not loss).
const CAPACITY: usize = 16_384;

struct Pending {
    run: NewRun,
    reply: oneshot::Sender<Result<Queued>>,
}

/// The handle the triggers queue runs through.
pub struct RunQueue {
    store: Store,
    sender: mpsc::Sender<Pending>,
    queued: Arc<Notify>,
}

impl RunQueue {
    /// Starts the writer task over `store` (call it inside a tokio runtime). It ends when the
    /// handle is dropped.
    pub fn start(store: Store) -> Self {
        let (sender, receiver) = mpsc::channel(CAPACITY);
        let queued = Arc::new(Notify::new());
        tokio::spawn(write_batches(store.clone(), receiver, Arc::clone(&queued)));
        Self {
            store,
            sender,
            queued,
        }
    }

    /// Notified after each batch that created runs.
    pub fn signal(&self) -> Arc<Notify> {
        Arc::clone(&self.queued)
    }

    /// Queues `run`; answers once it is committed (or refused as ongoing).
    pub async fn queue(&self, run: NewRun) -> Result<Queued> {
        let (reply, answer) = oneshot::channel();
        match self.sender.send(Pending { run, reply }).await {
            Ok(()) => match answer.await {
                Ok(outcome) => outcome,
                // The writer ended with the request (only when the runtime shuts down).
                Err(_) => Err(stopped()),
            },
            // No writer (shut down): write it alone.
            Err(mpsc::error::SendError(pending)) => self.store.queue_run(&pending.run).await,
        }
    }
}

fn stopped() -> crate::platform::Error {
    crate::platform::Error::Invalid("the run queue has stopped".to_owned())
}

/// The writer: a batch of whatever is waiting, written and answered, then the next.
async fn write_batches(store: Store, mut receiver: mpsc::Receiver<Pending>, queued: Arc<Notify>) {
    let mut batch: Vec<Pending> = Vec::with_capacity(BATCH);
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        while batch.len() < BATCH {
            match receiver.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let created = write(&store, &mut batch).await;
        if created {
            queued.notify_one();
        }
    }
}

/// Writes `batch` (emptied) and answers each request; whether any run was created.
async fn write(store: &Store, batch: &mut Vec<Pending>) -> bool {
    batch.sort_by(|a, b| {
        (&a.run.workflow_id, &a.run.collection_name, &a.run.record_id).cmp(&(
            &b.run.workflow_id,
            &b.run.collection_name,
            &b.run.record_id,
        ))
    });
    let (runs, replies): (Vec<NewRun>, Vec<_>) = batch.drain(..).map(|p| (p.run, p.reply)).unzip();
    let outcomes = match in_one_transaction(store, &runs).await {
        Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
        Err(error) => {
            tracing::warn!(
                runs = runs.len(),
                %error,
                "queuing a batch of runs failed; queuing them one by one"
            );
            let mut outcomes = Vec::with_capacity(runs.len());
            for run in &runs {
                outcomes.push(store.queue_run(run).await);
            }
            outcomes
        }
    };
    let mut created = false;
    for (reply, outcome) in replies.into_iter().zip(outcomes) {
        created |= matches!(outcome, Ok(Queued::Created(_)));
        // The requester may have gone (client hung up): the run stays queued all the same.
        let _ = reply.send(outcome);
    }
    created
}

/// The batch in one transaction, in multi-row inserts (`Store::queue_runs_in`).
async fn in_one_transaction(store: &Store, runs: &[NewRun]) -> Result<Vec<Queued>> {
    let mut tx = store.pool().begin().await?;
    let outcomes = store.queue_runs_in(&mut tx, runs).await?;
    tx.commit().await?;
    Ok(outcomes)
}
