//! What every private surface checks of a signed-in user before serving them, whatever the
//! transport: the IP whitelist (§5.7), then that the user is an enabled user of the users
//! document (a removed or disabled user's live credentials are refused). The `/forest` routes
//! (`http::security`), the console and the MCP tools call it; nothing is checked when
//! permissions are not enforced.

use std::net::IpAddr;

use super::{Error, Permissions};

/// The private checks of `user_id` calling from `socket`, with the raw `x-forwarded-for` text
/// (several headers joined with `, `) when the transport has one.
pub async fn private_checks(
    permissions: &Permissions,
    user_id: i64,
    forwarded_for: Option<&str>,
    socket: Option<IpAddr>,
) -> Result<(), Error> {
    if !permissions.enforced() {
        return Ok(());
    }
    if permissions.ip_whitelist_enabled().await? {
        permissions.check_ip(forwarded_for, socket).await?;
    }
    permissions.enabled_user(user_id).await?;
    Ok(())
}
