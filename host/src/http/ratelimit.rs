//! Rate limits of the public API `/v1` (issue 12 §5, platform-api.md §1.6, §2.3 and decision 4):
//! GCRA (governor, keyed, in memory) per credential — an application token by its id, a session
//! by its user — and per client address for requests without valid credentials (none,
//! malformed, unknown, expired, revoked), so guessing tokens is slow.
//!
//! Every `/v1` answer carries the limit that applied to it: `X-RateLimit-Limit`,
//! `X-RateLimit-Remaining`, `X-RateLimit-Reset` (unix seconds when the quota is whole again, as
//! the platform and GitHub send them) and the IETF draft's `RateLimit-Policy` / `RateLimit`. Over
//! the limit: 429 with an integer `Retry-After` and `{code: "rate_limited", message, error: "Too
//! Many Requests", retry_after}`, readable by clients of each documented error shape.
//!
//! The limiters live in [`RateLimits`], built once per process and shared by every generation of
//! the served stack (a plugin reload must not hand every client a fresh quota). The client
//! address is the connection's peer: `X-Forwarded-For` is not trusted here, since any client
//! could set it to get a fresh quota per request (behind a proxy, every client shares the
//! proxy's address; raise `apiRateLimitPerMinutePerIp` there).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use governor::clock::{Clock as _, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use super::SharedState;
use super::caller::{VerifiedClaims, cookie_header};
use super::platform::{Error, bearer_api_token, check_api_token};
use crate::config::RateLimitConfig;
use crate::platform::Store;
use crate::platform::rate_limits::Spent;

/// Keys a limiter holds before it forgets the ones back to a full quota.
const MAX_KEYS: usize = 100_000;

type Limiter =
    RateLimiter<Key, DefaultKeyedStateStore<Key>, DefaultClock, StateInformationMiddleware>;

/// Whose quota a request spends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// An application token, by id.
    Token(String),
    /// A signed-in session, by user id.
    User(i64),
    /// Requests without valid credentials, by client address.
    Address(IpAddr),
}

impl Key {
    /// The key as the store's shared limits name it (never shown to anyone).
    fn stored(&self) -> String {
        match self {
            Self::Token(id) => format!("t:{id}"),
            Self::User(id) => format!("u:{id}"),
            Self::Address(ip) => format!("a:{ip}"),
        }
    }

    /// Which quota the key spends, as `/metrics` labels a refusal (never the key itself).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Token(_) => "token",
            Self::User(_) => "user",
            Self::Address(_) => "address",
        }
    }
}

/// One limiter with the numbers its headers show.
struct Policy {
    name: &'static str,
    limiter: Limiter,
    /// Requests per minute.
    per_minute: u32,
    burst: u32,
    /// Time for one request of quota to come back.
    interval: Duration,
}

impl Policy {
    fn new(name: &'static str, per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        let quota = Quota::per_minute(per_minute).allow_burst(burst);
        Self {
            name,
            limiter: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            per_minute: per_minute.get(),
            burst: burst.get(),
            interval: quota.replenish_interval(),
        }
    }

    fn check(&self, key: &Key) -> Decision {
        if self.limiter.len() > MAX_KEYS {
            self.limiter.retain_recent();
        }
        match self.limiter.check_key(key) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                let spent = self.burst.saturating_sub(remaining);
                Decision {
                    policy: self.name,
                    per_minute: self.per_minute,
                    limit: self.burst,
                    remaining,
                    reset_after: ceil_secs(self.interval.saturating_mul(spent)),
                    retry_after: None,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.limiter.clock().now());
                let retry_after = ceil_secs(wait).max(1);
                Decision {
                    policy: self.name,
                    per_minute: self.per_minute,
                    limit: self.burst,
                    remaining: 0,
                    reset_after: ceil_secs(wait + self.interval.saturating_mul(self.burst - 1)),
                    retry_after: Some(retry_after),
                }
            }
        }
    }
}

impl Policy {
    /// The decision for a request the store's shared limiter counted or refused (GCRA with the
    /// same quota as `limiter`: the numbers and headers are the same as a local check's).
    fn shared(&self, spent: Spent) -> Decision {
        let interval = millis(self.interval);
        let owed = Duration::from_millis(u64::try_from(spent.tat - spent.now).unwrap_or(0));
        if spent.allowed {
            // What is left of the burst: the tolerance not yet spent ahead, in requests.
            let tolerance = interval.saturating_mul(i64::from(self.burst));
            let left = (tolerance - (spent.tat - spent.now)).max(0) / interval.max(1);
            Decision {
                policy: self.name,
                per_minute: self.per_minute,
                limit: self.burst,
                remaining: u32::try_from(left).unwrap_or(0),
                reset_after: ceil_secs(owed),
                retry_after: None,
            }
        } else {
            let tolerance = interval.saturating_mul(i64::from(self.burst) - 1);
            let wait = Duration::from_millis(
                u64::try_from(spent.tat - tolerance - spent.now).unwrap_or(0),
            );
            Decision {
                policy: self.name,
                per_minute: self.per_minute,
                limit: self.burst,
                remaining: 0,
                reset_after: ceil_secs(owed),
                retry_after: Some(ceil_secs(wait).max(1)),
            }
        }
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Whole seconds, rounded up.
fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

/// What one check decided, and what the headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    policy: &'static str,
    per_minute: u32,
    limit: u32,
    pub remaining: u32,
    /// Seconds until the quota is whole again.
    reset_after: u64,
    /// `Some` when refused: seconds until one more request passes.
    pub retry_after: Option<u64>,
}

impl Decision {
    /// Writes the rate-limit headers of this decision.
    fn write(&self, headers: &mut HeaderMap) {
        let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
        let mut set = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        };
        set("x-ratelimit-limit", self.limit.to_string());
        set("x-ratelimit-remaining", self.remaining.to_string());
        set(
            "x-ratelimit-reset",
            now.saturating_add(self.reset_after).to_string(),
        );
        set(
            "ratelimit-policy",
            format!("\"{}\";q={};w=60", self.policy, self.per_minute),
        );
        set(
            "ratelimit",
            format!(
                "\"{}\";r={};t={}",
                self.policy, self.remaining, self.reset_after
            ),
        );
    }
}

/// The public API's limiters: per credential and per address. One per process; on a PostgreSQL
/// store, their state is the store's, shared by every instance (`RateLimits::shared_in`).
pub struct RateLimits {
    per_credential: Policy,
    per_address: Policy,
    /// The store holding the limits of every instance, when it is PostgreSQL.
    shared: Option<Store>,
    /// When the store's spent quotas were last pruned (unix ms).
    pruned_at: AtomicI64,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("per_minute", &self.per_credential.per_minute)
            .field("burst", &self.per_credential.burst)
            .field("per_minute_per_ip", &self.per_address.per_minute)
            .finish()
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        Self::new(&RateLimitConfig::default())
    }
}

impl RateLimits {
    pub fn new(config: &RateLimitConfig) -> Self {
        Self {
            per_credential: Policy::new("token", config.per_minute, config.burst),
            per_address: Policy::new("ip", config.per_minute_per_ip, config.per_minute_per_ip),
            shared: None,
            pruned_at: AtomicI64::new(0),
        }
    }

    /// These limits with their state in `store`, shared by the instances on it: one upsert per
    /// request instead of a lookup in memory, so that N instances allow the quota once, not N
    /// times. Only on PostgreSQL (a SQLite store serves one instance).
    pub fn shared_in(mut self, store: &Store) -> Self {
        if store.dialect() == crate::platform::store::Dialect::Postgres {
            self.shared = Some(store.clone());
        }
        self
    }

    /// Spends one request of `key`'s quota. With shared limits, a store that cannot be read
    /// falls back to this instance's own limiter (logged): the API stays limited, and up.
    pub async fn check(&self, key: &Key) -> Decision {
        let policy = match key {
            Key::Address(_) => &self.per_address,
            _ => &self.per_credential,
        };
        // This instance's own count first: what it saw alone is part of what every instance saw,
        // so a refusal here is a refusal overall (to within one request's interval, when the
        // store refused a request this count let through), answered without a write to the store. A client
        // flooding the API (one key hammered: about 1,100 upserts a second on one row here)
        // then costs the store only its quota's worth of writes per instance.
        let local = policy.check(key);
        let Some(store) = &self.shared else {
            return local;
        };
        if local.retry_after.is_some() {
            return local;
        }
        self.prune_now_and_then(store);
        let interval = millis(policy.interval);
        let tolerance = interval.saturating_mul(i64::from(policy.burst) - 1);
        match store
            .spend_rate_limit(policy.name, &key.stored(), interval, tolerance)
            .await
        {
            Ok(spent) => policy.shared(spent),
            Err(error) => {
                tracing::warn!(%error, "shared rate limits unavailable: limiting per instance");
                local
            }
        }
    }

    /// Once a minute, deletes the store's quotas that are whole again, off the request path.
    fn prune_now_and_then(&self, store: &Store) {
        let now = chrono::Utc::now().timestamp_millis();
        let last = self.pruned_at.load(Ordering::Relaxed);
        if now - last < 60_000
            || self
                .pruned_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let store = store.clone();
        tokio::spawn(async move {
            if let Err(error) = store.prune_rate_limits().await {
                tracing::warn!(%error, "pruning the shared rate limits failed");
            }
        });
    }
}

/// The middleware of every `/v1` route (and of their 404 and 405 answers): finds whose request
/// it is, spends one request of that quota, answers 429 when none is left, and adds the headers
/// to whatever the route answers. A verified application token or session is left in the
/// request for the route's extractor, which then does not verify it again.
pub async fn limit(State(state): State<SharedState>, mut request: Request, next: Next) -> Response {
    // A workflow webhook spends its own quota (per webhook, `workflows::triggers`), after its
    // URL is verified, so that one integration does not starve another.
    if crate::workflows::webhook::is_hook_path(request.uri().path()) {
        return next.run(request).await;
    }
    let key = match bearer_api_token(request.headers()) {
        Some(presented) => {
            let presented = presented.to_owned();
            let check = check_api_token(&state, &presented).await;
            let key = match &check.0 {
                Ok(token) => Some(Key::Token(token.id().to_owned())),
                Err(_) => None,
            };
            request.extensions_mut().insert(check);
            key
        }
        None => {
            let cookie = cookie_header(request.headers());
            let authorization = request
                .headers()
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            if cookie.is_none() && authorization.is_none() {
                None
            } else {
                match state.session.authenticate(cookie.as_deref(), authorization) {
                    Ok(claims) => {
                        let key = Key::User(claims.id);
                        request.extensions_mut().insert(VerifiedClaims(claims));
                        Some(key)
                    }
                    Err(_) => None,
                }
            }
        }
    };
    let key = key.unwrap_or_else(|| {
        Key::Address(
            request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |ConnectInfo(a)| a.ip()),
        )
    });
    let decision = state.rate_limits.check(&key).await;
    let mut response = match decision.retry_after {
        Some(retry_after) => {
            crate::metrics::metrics().rate_limited(key.kind());
            if let Key::Token(id) = &key {
                tracing::info!(token = %id, retry_after, "public API: rate limited");
            }
            Error::RateLimited { retry_after }.into_response()
        }
        None => next.run(request).await,
    };
    decision.write(response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_minute: u32, burst: u32, per_ip: u32) -> RateLimits {
        let n = |v| NonZeroU32::new(v).unwrap();
        RateLimits::new(&RateLimitConfig {
            per_minute: n(per_minute),
            burst: n(burst),
            per_minute_per_ip: n(per_ip),
        })
    }

    #[tokio::test]
    async fn a_burst_is_spent_then_refused_with_a_retry_time() {
        let limits = limits(60, 3, 300);
        let key = Key::Token("t".into());
        let mut remaining = Vec::new();
        for _ in 0..3 {
            remaining.push(limits.check(&key).await.remaining);
        }
        assert_eq!(remaining, [2, 1, 0]);
        let refused = limits.check(&key).await;
        assert_eq!(refused.remaining, 0);
        // One request per second comes back at 60/min.
        assert_eq!(refused.retry_after, Some(1));
        // Another token has its own quota.
        assert_eq!(
            limits.check(&Key::Token("u".into())).await.retry_after,
            None
        );
    }

    #[test]
    fn the_shared_limiter_decides_as_the_local_one() {
        // 60 a minute, a burst of 3: three requests at the same instant, then a refusal.
        let policy = Policy::new(
            "token",
            NonZeroU32::new(60).unwrap(),
            NonZeroU32::new(3).unwrap(),
        );
        let now = 1_000_000;
        let allowed = |owed: i64| {
            policy.shared(Spent {
                allowed: true,
                tat: now + owed,
                now,
            })
        };
        let remaining: Vec<u32> = [1000, 2000, 3000].map(|o| allowed(o).remaining).to_vec();
        assert_eq!(remaining, [2, 1, 0]);
        assert_eq!(allowed(3000).reset_after, 3);
        let refused = policy.shared(Spent {
            allowed: false,
            tat: now + 3000,
            now,
        });
        assert_eq!((refused.remaining, refused.retry_after), (0, Some(1)));
        // Later, the quota came back: a whole burst again.
        assert_eq!(allowed(1000).remaining, 2);
    }

    #[tokio::test]
    async fn addresses_have_their_own_quota() {
        let limits = limits(1, 1, 2);
        let address = Key::Address(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(limits.check(&address).await.remaining, 1);
        assert_eq!(limits.check(&address).await.remaining, 0);
        let refused = limits.check(&address).await;
        assert_eq!(refused.retry_after, Some(30));
        assert_eq!(limits.check(&Key::User(1)).await.retry_after, None);
    }

    #[tokio::test]
    async fn headers_say_limit_remaining_reset_and_the_draft_fields() {
        let limits = limits(60, 60, 300);
        let decision = limits.check(&Key::User(7)).await;
        let mut headers = HeaderMap::new();
        decision.write(&mut headers);
        assert_eq!(headers["x-ratelimit-limit"], "60");
        assert_eq!(headers["x-ratelimit-remaining"], "59");
        let reset: u64 = headers["x-ratelimit-reset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap();
        assert!((now..=now + 2).contains(&reset), "{reset} vs {now}");
        assert_eq!(headers["ratelimit-policy"], "\"token\";q=60;w=60");
        assert_eq!(headers["ratelimit"], "\"token\";r=59;t=1");
    }
}
