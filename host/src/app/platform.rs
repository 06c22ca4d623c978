//! Canopy's store and the permission service built from the configuration: one per process,
//! shared by every generation of the served stack.

use std::sync::Arc;

use anyhow::Context as _;

use crate::auth::{CachePolicy, Permissions};
use crate::config::Config;
use crate::datasource::DataSourceSchema;
use crate::platform::{PermissionSource, Store, bootstrap};

/// The store and the permission checks fed from it (or from a remote permission server).
#[derive(Clone, Debug)]
pub struct Platform {
    pub store: Store,
    pub permissions: Arc<Permissions>,
}

impl Platform {
    /// Opens (and migrates) the store of `config.platform`, and the permission service over it.
    pub async fn open(config: &Config) -> anyhow::Result<Self> {
        let settings = &config.platform;
        let store = Store::open(
            &settings.state_url,
            &settings.project,
            &settings.environment,
        )
        .await
        .context("opening Canopy's store (--state-url)")?;
        // Changes made by `canopy users|permissions …` or another instance take effect here too.
        store.watch_changes(std::time::Duration::from_secs(2));
        let source: Arc<dyn PermissionSource> = Arc::new(store.clone());
        let mut permissions = Permissions::new(
            source,
            CachePolicy::new(
                config.permissions.instant_cache_refresh,
                config.permissions.cache_duration,
            ),
        );
        permissions.skip_relation_read_permissions =
            config.permissions.skip_relation_read_permissions;
        Ok(Self {
            store,
            permissions: Arc::new(permissions),
        })
    }

    /// Applies the permissions file (`permissionsFile`, see `admin::startup`), then gives a
    /// fresh store its first admin and Admin rights (see `platform::bootstrap`), printing how to
    /// sign in when it created the admin.
    pub async fn bootstrap(
        &self,
        config: &Config,
        schema: &DataSourceSchema,
    ) -> anyhow::Result<()> {
        super::admin::startup(&self.store, config, schema)
            .await
            .context("applying the permissions file")?;
        let email = std::env::var("CANOPY_ADMIN_EMAIL")
            .unwrap_or_else(|_| bootstrap::DEFAULT_ADMIN_EMAIL.to_owned());
        let password = std::env::var("CANOPY_ADMIN_PASSWORD").ok();
        let done = bootstrap::bootstrap(&self.store, schema, &email, password.as_deref())
            .await
            .context("creating the first admin")?;
        if let Some(admin) = &done.first_admin {
            // Printed once, to the operator's terminal (stderr: stdout says where it serves);
            // never logged.
            eprint!(
                "{}",
                super::admin::sign_in_instructions(
                    admin,
                    password.is_some(),
                    &format!("http://{}", config.http.listen)
                )
            );
        }
        if done.granted_admin {
            tracing::info!(
                role = bootstrap::ADMIN_ROLE,
                "environment permissions created: the Admin role has every right"
            );
        }
        Ok(())
    }
}
