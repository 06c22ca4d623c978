//! Coalesced reads: concurrent webhook calls that need the same row of the store (the same
//! trigger, the same token's user) share one query instead of sending one each. Nothing is kept
//! once the query answers, so unlike a cache every call that starts after a change committed
//! sees it (a regenerated URL is refused at once on every instance); a call that joins a query in
//! flight sees the store as that query read it, as if it had raced the change.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::{BoxFuture, FutureExt as _, Shared};

/// A query's answer as those who share it get it: errors as text, since they cannot be cloned.
type Answer<V> = Result<V, Arc<String>>;

type Flight<V> = Shared<BoxFuture<'static, Answer<V>>>;

/// The queries in flight, by key.
pub(super) struct Coalesce<K, V> {
    flights: Mutex<HashMap<K, Flight<V>>>,
}

impl<K, V> Coalesce<K, V>
where
    K: Hash + Eq + Clone + Send + 'static,
    V: Clone + Send + Sync + 'static,
{
    pub(super) fn new() -> Self {
        Self {
            flights: Mutex::new(HashMap::new()),
        }
    }

    /// The answer of the query in flight for `key`, or of `query`, started now for those who
    /// come while it runs.
    pub(super) async fn get<F>(&self, key: K, query: F) -> Answer<V>
    where
        F: Future<Output = Result<V, String>> + Send + 'static,
    {
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            flights
                .entry(key.clone())
                .or_insert_with(|| query.map(|r| r.map_err(Arc::new)).boxed().shared())
                .clone()
        };
        let answer = flight.clone().await;
        // Whoever gets the answer first ends the flight: later calls query again.
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if flights.get(&key).is_some_and(|f| f.ptr_eq(&flight)) {
            flights.remove(&key);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_calls_share_one_query_and_later_ones_query_again() {
        let coalesce = Arc::new(Coalesce::<&str, usize>::new());
        let queries = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let calls: Vec<_> = (0..10)
            .map(|_| {
                let coalesce = Arc::clone(&coalesce);
                let queries = Arc::clone(&queries);
                let mut released = released.clone();
                tokio::spawn(async move {
                    coalesce
                        .get("trigger", async move {
                            let n = queries.fetch_add(1, Ordering::SeqCst) + 1;
                            let _ = released.wait_for(|go| *go).await;
                            Ok(n)
                        })
                        .await
                })
            })
            .collect();
        // Every call has joined before the query answers.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        release.send(true).unwrap();
        for call in calls {
            assert_eq!(call.await.unwrap().unwrap(), 1);
        }
        assert_eq!(queries.load(Ordering::SeqCst), 1);
        // The flight is over: the next call reads the store again.
        let queries_after = Arc::clone(&queries);
        let next = coalesce
            .get("trigger", async move {
                Ok(queries_after.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await;
        assert_eq!(next.unwrap(), 2);
    }

    #[tokio::test]
    async fn an_error_reaches_every_caller_as_text() {
        let coalesce = Coalesce::<u8, u8>::new();
        let answer = coalesce
            .get(1, async { Err("the store is down".to_owned()) })
            .await;
        assert_eq!(answer.unwrap_err().as_str(), "the store is down");
    }
}
