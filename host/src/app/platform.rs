//! Canopy's store and the permission service built from the configuration: one per process,
//! shared by every generation of the served stack.

use std::sync::Arc;

use anyhow::Context as _;

use crate::auth::login::Login;
use crate::auth::{CachePolicy, Permissions};
use crate::config::Config;
use crate::datasource::DataSourceSchema;
use crate::platform::{PermissionSource, Store, bootstrap};

/// The store and the permission checks fed from it (or from a remote permission server).
#[derive(Clone, Debug)]
pub struct Platform {
    pub store: Store,
    pub permissions: Arc<Permissions>,
    /// Sign-in over the store: its rate limits and OpenID provider outlive plugin reloads.
    pub login: Arc<Login>,
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
        let login = Login::new(
            &config.login,
            config.auth.auth_secret.expose(),
            &config.http.mount_path(),
            store.clone(),
        )
        .map_err(anyhow::Error::msg)?;
        Ok(Self {
            store,
            permissions: Arc::new(permissions),
            login: Arc::new(login),
        })
    }

    /// A fresh store's first admin and Admin rights (see `platform::bootstrap`); prints how to
    /// sign in when it created the admin.
    pub async fn bootstrap(
        &self,
        _config: &Config,
        schema: &DataSourceSchema,
    ) -> anyhow::Result<()> {
        let email = std::env::var("CANOPY_ADMIN_EMAIL")
            .unwrap_or_else(|_| bootstrap::DEFAULT_ADMIN_EMAIL.to_owned());
        let password = std::env::var("CANOPY_ADMIN_PASSWORD").ok();
        let done = bootstrap::bootstrap(&self.store, schema, &email, password.as_deref())
            .await
            .context("creating the first admin")?;
        if let Some(admin) = &done.first_admin {
            // Printed once, to the operator's terminal; never logged.
            eprintln!(
                "First admin created: {} (password: {})",
                admin.email,
                if password.is_some() {
                    "from CANOPY_ADMIN_PASSWORD"
                } else {
                    admin.password.as_str()
                }
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
