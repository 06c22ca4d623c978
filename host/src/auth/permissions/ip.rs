//! The IP whitelist (§5.7, the agent's `routes/security/ip-whitelist.ts`): rules of three kinds
//! (`{type: 0, ip}` one address, `{type: 1, ipMinimum, ipMaximum}` an inclusive range of one
//! family, any other type `{range: "ip/prefix"}` a CIDR block), rules that do not read ignored
//! with a warning; the caller is the raw `x-forwarded-for` header (the whole text, as the agent
//! reads it) or else the socket's address. A loopback socket without `x-forwarded-for` is
//! exempt (a caller on this host). IPv4 callers seen as IPv4-mapped IPv6 addresses match IPv4
//! rules.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use ipnet::IpNet;
use serde_json::Value as Json;

use super::Permissions;
use crate::auth::{Error, Result};
use crate::platform::documents::IpWhitelist;

/// One readable rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpRule {
    Address(IpAddr),
    Range(IpAddr, IpAddr),
    Subnet(IpNet),
}

impl IpRule {
    /// Reads one rule of the server's document; `None` for a rule the agent would ignore.
    pub fn parse(rule: &Json) -> Option<Self> {
        let text = |key: &str| rule.get(key).and_then(Json::as_str).map(str::trim);
        match rule.get("type").and_then(Json::as_i64) {
            Some(0) => text("ip")?.parse().ok().map(Self::Address),
            Some(1) => {
                let min: IpAddr = text("ipMinimum")?.parse().ok()?;
                let max: IpAddr = text("ipMaximum")?.parse().ok()?;
                let same_family = min.is_ipv4() == max.is_ipv4();
                (same_family && min <= max).then_some(Self::Range(min, max))
            }
            // The agent treats every other type as a CIDR rule (`else` branch).
            _ => {
                let range = text("range")?;
                // A block needs its prefix: `10.0.0.0` alone is not one.
                range.contains('/').then_some(())?;
                range.parse().ok().map(Self::Subnet)
            }
        }
    }

    fn matches(&self, ip: IpAddr) -> bool {
        match self {
            Self::Address(address) => *address == ip,
            Self::Range(min, max) => min.is_ipv4() == ip.is_ipv4() && *min <= ip && ip <= *max,
            Self::Subnet(net) => net.contains(&ip),
        }
    }
}

/// Whether `ip` is allowed by one of `rules`; an IPv4-mapped IPv6 address is also tried as the
/// IPv4 address it carries.
pub fn allowed(rules: &[IpRule], ip: IpAddr) -> bool {
    let mapped = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    rules
        .iter()
        .any(|rule| rule.matches(ip) || mapped.is_some_and(|v4| rule.matches(v4)))
}

/// A fetched whitelist document and its readable rules.
type Parsed = (Arc<IpWhitelist>, Arc<Vec<IpRule>>);

/// The rules of the cached whitelist document, parsed once per fetched document.
#[derive(Default)]
pub(super) struct RuleCache {
    parsed: Mutex<Option<Parsed>>,
}

impl RuleCache {
    fn rules(&self, whitelist: &Arc<IpWhitelist>) -> Arc<Vec<IpRule>> {
        let mut parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((doc, rules)) = parsed.as_ref()
            && Arc::ptr_eq(doc, whitelist)
        {
            return Arc::clone(rules);
        }
        let rules: Vec<IpRule> = whitelist
            .rules
            .iter()
            .filter_map(|rule| {
                let parsed = IpRule::parse(rule);
                if parsed.is_none() {
                    tracing::warn!("IP whitelist: ignoring invalid rule {rule}");
                }
                parsed
            })
            .collect();
        let rules = Arc::new(rules);
        *parsed = Some((Arc::clone(whitelist), Arc::clone(&rules)));
        rules
    }
}

/// The loopback addresses a caller on this host comes from.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The raw `x-forwarded-for` text of a request from its header values: several headers are
/// joined with `, ` as Node joins them; `None` without any.
pub fn forwarded_for<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<String> {
    let values: Vec<String> = values
        .into_iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

impl Permissions {
    /// What every private route and console page checks of a signed-in user (every surface the
    /// same): the IP whitelist (§5.7), then that the user is enabled. `forwarded_for` and
    /// `socket` are as [`Permissions::check_ip`] takes them.
    pub async fn private_checks(
        &self,
        user_id: i64,
        forwarded_for: Option<&str>,
        socket: Option<IpAddr>,
    ) -> Result<()> {
        if !self.enforced() {
            return Ok(());
        }
        if self.ip_whitelist_enabled().await? {
            self.check_ip(forwarded_for, socket).await?;
        }
        self.enabled_user(user_id).await
    }

    /// Whether the whitelist is on (a cheap look at the cached document): the middleware skips
    /// every other step when it is off.
    pub async fn ip_whitelist_enabled(&self) -> Result<bool> {
        if !self.enforced() {
            return Ok(false);
        }
        Ok(self.ip_whitelist().await?.use_ip_whitelist)
    }

    /// §5.7: 403 `IP address rejected (<ip>)` unless the caller's address is allowed.
    /// `forwarded_for` is the raw `x-forwarded-for` text, `socket` the peer's address (`None`
    /// for an in-process request, which is then refused when the whitelist is on and no header
    /// names an address).
    pub async fn check_ip(
        &self,
        forwarded_for: Option<&str>,
        socket: Option<IpAddr>,
    ) -> Result<()> {
        if !self.enforced() {
            return Ok(());
        }
        // `!headers['x-forwarded-for']`: an empty header counts as none for the exemption.
        if forwarded_for.is_none_or(str::is_empty) && socket.is_some_and(is_loopback) {
            return Ok(());
        }
        let shown = match (forwarded_for, socket) {
            (Some(header), _) => header.to_owned(),
            (None, Some(ip)) => ip.to_string(),
            (None, None) => String::new(),
        };
        let address: Option<IpAddr> = shown.trim().parse().ok();
        if self.ip_allowed(address).await? {
            return Ok(());
        }
        if self.policy.refetch_on_denial() {
            self.ip_whitelist.clear();
            if self.ip_allowed(address).await? {
                return Ok(());
            }
        }
        tracing::debug!(ip = %shown, "IP address rejected");
        Err(Error::Forbidden(format!("IP address rejected ({shown})")))
    }

    async fn ip_allowed(&self, address: Option<IpAddr>) -> Result<bool> {
        let whitelist = self.ip_whitelist().await?;
        if !whitelist.use_ip_whitelist {
            return Ok(true);
        }
        let rules = self.ip_rules.rules(&whitelist);
        Ok(address.is_some_and(|ip| allowed(&rules, ip)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(rules: &[Json]) -> Vec<IpRule> {
        rules.iter().filter_map(IpRule::parse).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn exact_range_and_cidr_rules_match() {
        let r = rules(&[
            json!({"type": 0, "ip": "10.20.15.10"}),
            json!({"type": 1, "ipMinimum": "192.168.1.10", "ipMaximum": "192.168.1.20"}),
            json!({"type": 2, "range": "172.16.0.0/12"}),
            json!({"type": 2, "range": "2001:db8::/32"}),
            json!({"type": 1, "ipMinimum": "2001::1", "ipMaximum": "2001:1::1"}),
        ]);
        assert_eq!(r.len(), 5);
        for yes in [
            "10.20.15.10",
            "192.168.1.10",
            "192.168.1.20",
            "172.31.255.255",
            "2001:db8::1",
            "2001:0db8:0000:0000:0000:ff00:0042:8329",
            "2001::2",
            "::ffff:10.20.15.10",
        ] {
            assert!(allowed(&r, ip(yes)), "{yes}");
        }
        for no in ["10.20.15.11", "192.168.1.21", "172.32.0.1", "2001:db9::1"] {
            assert!(!allowed(&r, ip(no)), "{no}");
        }
    }

    #[test]
    fn unreadable_rules_are_ignored() {
        for rule in [
            json!({"type": 0, "ip": "not-an-ip"}),
            json!({"type": 1, "ipMinimum": "10.20.15.11", "ipMaximum": "10.20.15.10"}),
            json!({"type": 1, "ipMinimum": "10.20.15.10", "ipMaximum": "2001::2"}),
            json!({"type": 2, "range": "10.20.15.0/33"}),
            json!({"type": 2, "range": "10.20.15.0"}),
            json!({"type": 9, "ip": "10.20.15.10"}),
            json!("nonsense"),
        ] {
            assert_eq!(IpRule::parse(&rule), None, "{rule}");
        }
        // Another type with a range reads as a block, as the agent's `else` does.
        assert!(IpRule::parse(&json!({"type": 9, "range": "10.0.0.0/8"})).is_some());
    }

    #[test]
    fn loopback_forms() {
        assert!(is_loopback(ip("127.0.0.1")));
        assert!(is_loopback(ip("::1")));
        assert!(is_loopback(ip("::ffff:127.0.0.1")));
        assert!(!is_loopback(ip("10.0.0.1")));
    }
}
