//! Settings of sign-in (`auth::login`): where browsers reach this Canopy, where a signed-in
//! browser is sent with its one-time code, the sign-in rate limits, and the OpenID Connect
//! provider that replaces the built-in sign-in page when configured.

use std::num::NonZeroU32;

use clap::Args;
use serde::Deserialize;

use super::file::FileConfig;
use super::{ConfigError, Layers, Origin, Secret, invalid};

/// Attempts per minute on the sign-in form from one client address: a few people behind one
/// office NAT mistyping now and then stay well under it.
pub const DEFAULT_ATTEMPTS_PER_IP: u32 = 20;
/// Attempts per minute on one email, from anywhere: enough for a person, far too few to guess a
/// password.
pub const DEFAULT_ATTEMPTS_PER_EMAIL: u32 = 5;
/// The scopes asked of an OpenID provider when none are configured (the agent's own).
pub const DEFAULT_OIDC_SCOPES: &[&str] = &["openid", "email", "profile"];

/// `canopy serve`'s sign-in flags (flattened into [`super::ServeArgs`]).
#[derive(Debug, Default, Clone, Args)]
pub struct LoginArgs {
    /// The URL browsers reach this Canopy at (scheme, host, port, no path), for the sign-in page
    /// and the OpenID Connect redirect URI. [default: from each request's Host header, http]
    /// [file key: publicUrl]
    #[arg(long, env = "CANOPY_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// Where a signed-in browser is sent with `?code=…&state=…`: the application's callback page,
    /// which exchanges the code at `GET /forest/authentication/callback`. [default: that route of
    /// this Canopy, so the browser ends on `{token, tokenData}`] [file key: loginRedirectUrl]
    #[arg(long, env = "CANOPY_LOGIN_REDIRECT_URL", value_name = "URL")]
    pub login_redirect_url: Option<String>,

    /// Sign-in attempts per minute from one client address; more are answered 429.
    /// [default: 20] [file key: loginAttemptsPerMinutePerIp]
    #[arg(
        long,
        env = "CANOPY_LOGIN_ATTEMPTS_PER_MINUTE_PER_IP",
        value_name = "COUNT"
    )]
    pub login_attempts_per_minute_per_ip: Option<u32>,

    /// Sign-in attempts per minute on one email, from any address; more are answered 429.
    /// [default: 5] [file key: loginAttemptsPerMinutePerEmail]
    #[arg(
        long,
        env = "CANOPY_LOGIN_ATTEMPTS_PER_MINUTE_PER_EMAIL",
        value_name = "COUNT"
    )]
    pub login_attempts_per_minute_per_email: Option<u32>,

    /// Sign in through this OpenID Connect provider (its issuer URL, discovered at
    /// `/.well-known/openid-configuration`) instead of the built-in sign-in page.
    /// [default: none] [file key: oidc.issuerUrl]
    #[arg(long, env = "CANOPY_OIDC_ISSUER_URL", value_name = "URL")]
    pub oidc_issuer_url: Option<String>,

    /// The client id registered at the OpenID provider. Required with --oidc-issuer-url.
    /// [default: none] [file key: oidc.clientId]
    #[arg(long, env = "CANOPY_OIDC_CLIENT_ID", value_name = "ID")]
    pub oidc_client_id: Option<String>,

    /// The client secret registered at the OpenID provider. [default: none, a public client
    /// (PKCE only)] [file key: oidc.clientSecret]
    #[arg(
        long,
        env = "CANOPY_OIDC_CLIENT_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub oidc_client_secret: Option<String>,

    /// Scopes asked of the OpenID provider, comma separated. [default: openid,email,profile]
    /// [file key: oidc.scopes]
    #[arg(
        long,
        env = "CANOPY_OIDC_SCOPES",
        value_name = "SCOPES",
        value_delimiter = ','
    )]
    pub oidc_scopes: Option<Vec<String>>,

    /// The claim naming the user's teams (a string or a list; names of Canopy teams, others
    /// ignored), set at each sign-in, e.g. `groups`. [default: none, teams are kept]
    /// [file key: oidc.teamClaim]
    #[arg(long, env = "CANOPY_OIDC_TEAM_CLAIM", value_name = "CLAIM")]
    pub oidc_team_claim: Option<String>,

    /// The claim naming the user's role (the name of a Canopy role), set at each sign-in, e.g.
    /// `canopy_role`. [default: none, the role is kept] [file key: oidc.roleClaim]
    #[arg(long, env = "CANOPY_OIDC_ROLE_CLAIM", value_name = "CLAIM")]
    pub oidc_role_claim: Option<String>,

    /// The role of a user created at their first sign-in when the role claim names none.
    /// [default: none] [file key: oidc.defaultRole]
    #[arg(long, env = "CANOPY_OIDC_DEFAULT_ROLE", value_name = "ROLE")]
    pub oidc_default_role: Option<String>,

    /// The team of a user created at their first sign-in when the team claim names none.
    /// [default: none] [file key: oidc.defaultTeam]
    #[arg(long, env = "CANOPY_OIDC_DEFAULT_TEAM", value_name = "TEAM")]
    pub oidc_default_team: Option<String>,
}

/// `[oidc]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileOidc {
    pub issuer_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Option<Vec<String>>,
    pub team_claim: Option<String>,
    pub role_claim: Option<String>,
    pub default_role: Option<String>,
    pub default_team: Option<String>,
}

/// Sign-in settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginConfig {
    /// `publicUrl`, without a trailing slash.
    pub public_url: Option<String>,
    /// `loginRedirectUrl`.
    pub redirect_url: Option<String>,
    pub attempts_per_ip: NonZeroU32,
    pub attempts_per_email: NonZeroU32,
    /// The OpenID provider; `None` serves the built-in sign-in page.
    pub oidc: Option<OidcConfig>,
}

impl Default for LoginConfig {
    fn default() -> Self {
        Self {
            public_url: None,
            redirect_url: None,
            attempts_per_ip: NonZeroU32::new(DEFAULT_ATTEMPTS_PER_IP).unwrap_or(NonZeroU32::MIN),
            attempts_per_email: NonZeroU32::new(DEFAULT_ATTEMPTS_PER_EMAIL)
                .unwrap_or(NonZeroU32::MIN),
            oidc: None,
        }
    }
}

/// An OpenID Connect provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    pub issuer_url: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    pub scopes: Vec<String>,
    pub team_claim: Option<String>,
    pub role_claim: Option<String>,
    pub default_role: Option<String>,
    pub default_team: Option<String>,
}

/// An absolute http(s) URL, or the error naming `key`.
fn http_url(key: &'static str, value: &str, origin: &Origin) -> Result<String, ConfigError> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
            Ok(value.to_owned())
        }
        _ => Err(invalid(
            key,
            format!("{value:?} must be an absolute http:// or https:// URL"),
            origin,
        )),
    }
}

fn attempts(
    key: &'static str,
    value: Option<super::Sourced<u32>>,
    default: u32,
) -> Result<NonZeroU32, ConfigError> {
    match value {
        Some(v) => {
            NonZeroU32::new(v.value).ok_or_else(|| invalid(key, "must be at least 1", &v.origin))
        }
        None => Ok(NonZeroU32::new(default).unwrap_or(NonZeroU32::MIN)),
    }
}

pub(super) fn resolve_login(
    layers: &Layers,
    args: &mut LoginArgs,
    file: &mut FileConfig,
) -> Result<LoginConfig, ConfigError> {
    let public_url = match layers.pick(
        args.public_url.take(),
        ("--public-url", "CANOPY_PUBLIC_URL"),
        file.public_url.take(),
    ) {
        Some(url) => {
            let checked = http_url("publicUrl", &url.value, &url.origin)?;
            let parsed = reqwest::Url::parse(&checked)
                .map_err(|e| invalid("publicUrl", e.to_string(), &url.origin))?;
            if parsed.query().is_some() || parsed.fragment().is_some() {
                return Err(invalid(
                    "publicUrl",
                    "must not have a query or a fragment",
                    &url.origin,
                ));
            }
            Some(checked.trim_end_matches('/').to_owned())
        }
        None => None,
    };
    let redirect_url = match layers.pick(
        args.login_redirect_url.take(),
        ("--login-redirect-url", "CANOPY_LOGIN_REDIRECT_URL"),
        file.login_redirect_url.take(),
    ) {
        Some(url) => Some(http_url("loginRedirectUrl", &url.value, &url.origin)?),
        None => None,
    };
    let attempts_per_ip = attempts(
        "loginAttemptsPerMinutePerIp",
        layers.pick(
            args.login_attempts_per_minute_per_ip.take(),
            (
                "--login-attempts-per-minute-per-ip",
                "CANOPY_LOGIN_ATTEMPTS_PER_MINUTE_PER_IP",
            ),
            file.login_attempts_per_minute_per_ip.take(),
        ),
        DEFAULT_ATTEMPTS_PER_IP,
    )?;
    let attempts_per_email = attempts(
        "loginAttemptsPerMinutePerEmail",
        layers.pick(
            args.login_attempts_per_minute_per_email.take(),
            (
                "--login-attempts-per-minute-per-email",
                "CANOPY_LOGIN_ATTEMPTS_PER_MINUTE_PER_EMAIL",
            ),
            file.login_attempts_per_minute_per_email.take(),
        ),
        DEFAULT_ATTEMPTS_PER_EMAIL,
    )?;
    let oidc = resolve_oidc(layers, args, file.oidc.take().unwrap_or_default())?;
    Ok(LoginConfig {
        public_url,
        redirect_url,
        attempts_per_ip,
        attempts_per_email,
        oidc,
    })
}

fn resolve_oidc(
    layers: &Layers,
    args: &mut LoginArgs,
    mut file: FileOidc,
) -> Result<Option<OidcConfig>, ConfigError> {
    let pick = |cli: Option<String>, flag, env, from_file: Option<String>| {
        layers.pick(cli, (flag, env), from_file)
    };
    let issuer = pick(
        args.oidc_issuer_url.take(),
        "--oidc-issuer-url",
        "CANOPY_OIDC_ISSUER_URL",
        file.issuer_url.take(),
    );
    let client_id = pick(
        args.oidc_client_id.take(),
        "--oidc-client-id",
        "CANOPY_OIDC_CLIENT_ID",
        file.client_id.take(),
    );
    let client_secret = pick(
        args.oidc_client_secret.take(),
        "--oidc-client-secret",
        "CANOPY_OIDC_CLIENT_SECRET",
        file.client_secret.take(),
    );
    let text = |cli: Option<String>, flag, env, from_file: Option<String>| {
        layers
            .pick(cli, (flag, env), from_file)
            .map(|v| v.value.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let team_claim = text(
        args.oidc_team_claim.take(),
        "--oidc-team-claim",
        "CANOPY_OIDC_TEAM_CLAIM",
        file.team_claim.take(),
    );
    let role_claim = text(
        args.oidc_role_claim.take(),
        "--oidc-role-claim",
        "CANOPY_OIDC_ROLE_CLAIM",
        file.role_claim.take(),
    );
    let default_role = text(
        args.oidc_default_role.take(),
        "--oidc-default-role",
        "CANOPY_OIDC_DEFAULT_ROLE",
        file.default_role.take(),
    );
    let default_team = text(
        args.oidc_default_team.take(),
        "--oidc-default-team",
        "CANOPY_OIDC_DEFAULT_TEAM",
        file.default_team.take(),
    );
    let scopes = layers.pick(
        args.oidc_scopes.take(),
        ("--oidc-scopes", "CANOPY_OIDC_SCOPES"),
        file.scopes.take(),
    );
    let Some(issuer) = issuer else {
        if let Some(id) = client_id {
            return Err(invalid(
                "oidc.clientId",
                "is set without oidc.issuerUrl: set the provider's issuer URL too",
                &id.origin,
            ));
        }
        return Ok(None);
    };
    let issuer_url = http_url("oidc.issuerUrl", &issuer.value, &issuer.origin)?;
    let client_id = client_id
        .filter(|id| !id.value.is_empty())
        .ok_or_else(|| {
            invalid(
                "oidc.clientId",
                "is required with oidc.issuerUrl: the client id registered at the provider",
                &issuer.origin,
            )
        })?
        .value;
    let scopes = match scopes {
        Some(scopes) => {
            let mut list: Vec<String> = scopes
                .value
                .iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            // Without `openid` the provider answers with no ID token at all.
            if !list.iter().any(|s| s == "openid") {
                list.insert(0, "openid".to_owned());
            }
            list
        }
        None => DEFAULT_OIDC_SCOPES
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    };
    Ok(Some(OidcConfig {
        issuer_url,
        client_id,
        client_secret: client_secret
            .filter(|s| !s.value.is_empty())
            .map(|s| Secret(s.value)),
        scopes,
        team_claim,
        role_claim,
        default_role,
        default_team,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ServeArgs};

    fn args(login: LoginArgs) -> ServeArgs {
        ServeArgs {
            database_url: Some("sqlite::memory:".into()),
            auth_secret: Some("secret".into()),
            env_secret: Some("0".repeat(64)),
            login,
            ..ServeArgs::default()
        }
    }

    #[test]
    fn defaults_serve_the_built_in_page() {
        let (config, _) = Config::load(args(LoginArgs::default())).unwrap();
        assert_eq!(config.login, LoginConfig::default());
        assert_eq!(config.login.attempts_per_email.get(), 5);
    }

    #[test]
    fn oidc_needs_a_client_id_and_adds_openid() {
        let error = Config::load(args(LoginArgs {
            oidc_issuer_url: Some("https://idp.example.com".into()),
            ..LoginArgs::default()
        }))
        .unwrap_err();
        assert_eq!(error.key(), Some("oidc.clientId"));
        let (config, _) = Config::load(args(LoginArgs {
            oidc_issuer_url: Some("https://idp.example.com".into()),
            oidc_client_id: Some("canopy".into()),
            oidc_scopes: Some(vec!["email".into(), "groups".into()]),
            ..LoginArgs::default()
        }))
        .unwrap();
        let oidc = config.login.oidc.unwrap();
        assert_eq!(oidc.scopes, ["openid", "email", "groups"]);
        assert!(oidc.client_secret.is_none());
    }

    #[test]
    fn urls_and_counts_are_checked() {
        for (login, key) in [
            (
                LoginArgs {
                    public_url: Some("canopy.example.com".into()),
                    ..LoginArgs::default()
                },
                "publicUrl",
            ),
            (
                LoginArgs {
                    login_redirect_url: Some("/callback".into()),
                    ..LoginArgs::default()
                },
                "loginRedirectUrl",
            ),
            (
                LoginArgs {
                    login_attempts_per_minute_per_ip: Some(0),
                    ..LoginArgs::default()
                },
                "loginAttemptsPerMinutePerIp",
            ),
        ] {
            assert_eq!(Config::load(args(login)).unwrap_err().key(), Some(key));
        }
        let (config, _) = Config::load(args(LoginArgs {
            public_url: Some("https://canopy.example.com/".into()),
            ..LoginArgs::default()
        }))
        .unwrap();
        assert_eq!(
            config.login.public_url.as_deref(),
            Some("https://canopy.example.com")
        );
    }
}
