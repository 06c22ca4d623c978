//! The admin log and the activity log of the served environment, as an admin reads them (the
//! console's logs page; `/v1/…/admin-logs` reads the admin log through [`admin`] too).

use crate::datasource::Caller;
use crate::platform::AdminLog;
use crate::platform::activity::{ActivityFilter, ActivityRow};
use crate::platform::store::AdminLogFilter;

use super::tokens::{require_admin, store};
use super::{Ops, Result};

/// The admin log entries matching `filter`, newest first: admins only.
pub async fn admin(ops: &Ops, caller: &Caller, filter: &AdminLogFilter) -> Result<Vec<AdminLog>> {
    require_admin(ops, caller).await?;
    Ok(store(ops)?.admin_logs_matching(filter).await?)
}

/// The served environment's activity entries matching `filter`, newest first: admins only.
pub async fn activity(
    ops: &Ops,
    caller: &Caller,
    filter: &ActivityFilter,
) -> Result<Vec<ActivityRow>> {
    require_admin(ops, caller).await?;
    Ok(store(ops)?.activity_logs(filter).await?)
}
