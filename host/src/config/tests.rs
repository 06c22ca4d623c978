//! Config loading: precedence, defaults, and one test per validation rule.

use std::path::Path;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use super::*;

const HEX: &str = "0123456789abcdef0123456789abcdef0123456789ABCDEF0123456789abcdef";

/// The minimum a server needs, as environment variables.
const REQUIRED: [(&str, &str); 3] = [
    ("CANOPY_DATABASE_URL", "sqlite::memory:"),
    ("CANOPY_AUTH_SECRET", "a-long-random-auth-secret"),
    ("CANOPY_ENV_SECRET", HEX),
];

#[derive(Debug, Parser)]
struct TestCli {
    #[command(flatten)]
    args: ServeArgs,
}

/// Parses `argv` as clap would, with `env` standing for the process environment: each variable
/// becomes its argument's default, which clap ranks below a flag exactly as it ranks a variable.
/// The real environment is ignored so that a `CANOPY_*` variable on the test machine cannot leak in.
fn parse(argv: &[&str], env: &[(&'static str, &'static str)]) -> ServeArgs {
    let command = TestCli::command().mut_args(|arg| {
        let name = arg.get_env().and_then(|e| e.to_str()).map(str::to_owned);
        let arg = arg.env(None::<&'static str>);
        match env.iter().find(|(key, _)| Some(*key) == name.as_deref()) {
            Some((_, value)) => arg.default_value(*value),
            None => arg,
        }
    });
    let matches = command
        .try_get_matches_from(std::iter::once("canopy").chain(argv.iter().copied()))
        .unwrap();
    TestCli::from_arg_matches(&matches).unwrap().args
}

fn with_required(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut env: Vec<_> = extra.to_vec();
    for (key, value) in REQUIRED {
        if !extra.iter().any(|(k, _)| *k == key) {
            env.push((key, value));
        }
    }
    env
}

fn load(
    argv: &[&str],
    env: &[(&'static str, &'static str)],
    file: Option<&str>,
) -> Result<(Config, Vec<Warning>), ConfigError> {
    let args = parse(argv, env);
    let file = match file {
        Some(text) => {
            let path = Path::new("canopy.toml");
            Some((path.to_owned(), parse_file(path, text)?))
        }
        None => None,
    };
    resolve(args, file)
}

fn ok(argv: &[&str], env: &[(&'static str, &'static str)], file: Option<&str>) -> Config {
    load(argv, &with_required(env), file).unwrap().0
}

#[test]
fn defaults_apply_where_no_source_gives_a_value() {
    let (config, warnings) = load(&[], &REQUIRED, None).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(config.datasources.len(), 1);
    assert_eq!(config.datasources[0].url, "sqlite::memory:");
    assert_eq!(config.auth.env_secret.expose(), HEX);
    assert!(!config.is_production);
    assert_eq!(config.http.listen.to_string(), "127.0.0.1:3351");
    assert_eq!(config.http.prefix, "");
    assert_eq!(config.http.mount_path(), "/forest");
    assert_eq!(config.http.json_limit, 50 * 1024 * 1024);
    assert!(!config.http.enable_raw_checking);
    assert_eq!(config.http.limit_export_size, None);
    assert!(config.http.customize_error_message.is_none());
    assert_eq!(config.schema.path, Path::new(".forestadmin-schema.json"));
    assert!(!config.schema.skip_schema_update);
    assert!(!config.schema.ignore_missing_schema_element_errors);
    assert_eq!(config.schema.typings_path, None);
    assert_eq!(config.schema.typings_max_depth, 5);
    assert_eq!(
        config.log,
        LogConfig {
            filter: "info".into(),
            format: LogFormat::Text,
            traces: None,
        }
    );
    assert_eq!(
        config.permissions,
        PermissionsConfig {
            instant_cache_refresh: true,
            cache_duration: Duration::from_secs(900),
            skip_relation_read_permissions: false,
            strict_scopes: true,
        }
    );
    assert_eq!(
        config.actions,
        ActionsConfig {
            max_records_for_approval: 500,
            use_unsafe_action_endpoint: false
        }
    );
    assert_eq!(config.plugin_dir, None);
    assert_eq!(config.workflow_executor_url, None);
    assert_eq!(config.audit_trail, None);
    assert_eq!(config.experimental, ExperimentalConfig::default());
    assert_eq!(config.http.max_header_size, 16 * 1024);
    assert_eq!(config.http.headers_timeout, Duration::from_secs(30));
    assert_eq!(config.http.keep_alive_timeout, Duration::from_secs(5));
    assert_eq!(config.http.max_page_size, 1000);
    assert_eq!(
        config.http.cors_allowed_origins,
        ["https://app.forestadmin.com"]
    );
    assert_eq!(config.native_query_timeout, Duration::from_secs(30));
}

#[test]
fn the_limits_read_from_every_source() {
    let file = "maxHeaderSize = \"32kb\"\nheadersTimeoutInSeconds = 10\n\
                keepAliveTimeoutInSeconds = 2\nmaxPageSize = 50\n\
                corsAllowedOrigins = [\"https://a.example\", \"http://localhost:4200\"]\n\
                nativeQueryTimeoutInSeconds = 5";
    let config = ok(&[], &[], Some(file));
    assert_eq!(config.http.max_header_size, 32 * 1024);
    assert_eq!(config.http.headers_timeout, Duration::from_secs(10));
    assert_eq!(config.http.keep_alive_timeout, Duration::from_secs(2));
    assert_eq!(config.http.max_page_size, 50);
    assert_eq!(
        config.http.cors_allowed_origins,
        ["https://a.example", "http://localhost:4200"]
    );
    assert_eq!(config.native_query_timeout, Duration::from_secs(5));

    let env = [
        ("CANOPY_MAX_HEADER_SIZE", "8192"),
        ("CANOPY_CORS_ALLOWED_ORIGINS", "https://b.example,*"),
        ("CANOPY_MAX_PAGE_SIZE", "200"),
    ];
    let config = ok(
        &[
            "--native-query-timeout-in-seconds",
            "60",
            "--keep-alive-timeout-in-seconds",
            "1",
        ],
        &env,
        Some(file),
    );
    assert_eq!(config.http.max_header_size, 8192);
    assert_eq!(config.http.cors_allowed_origins, ["https://b.example", "*"]);
    assert_eq!(config.http.max_page_size, 200);
    assert_eq!(config.native_query_timeout, Duration::from_secs(60));
    assert_eq!(config.http.keep_alive_timeout, Duration::from_secs(1));
    assert_eq!(config.http.headers_timeout, Duration::from_secs(10));
}

#[test]
fn a_flag_beats_its_variable_which_beats_the_file() {
    let file = Some("listen = \"0.0.0.0:1\"\ninstantCacheRefresh = false\nprefix = \"file\"");
    let from_file = ok(&[], &[], file);
    assert_eq!(from_file.http.listen.port(), 1);
    assert!(!from_file.permissions.instant_cache_refresh);
    assert_eq!(from_file.http.prefix, "file");

    let env = [
        ("CANOPY_LISTEN", "0.0.0.0:2"),
        ("CANOPY_INSTANT_CACHE_REFRESH", "true"),
    ];
    let from_env = ok(&[], &env, file);
    assert_eq!(from_env.http.listen.port(), 2);
    assert!(from_env.permissions.instant_cache_refresh);
    assert_eq!(from_env.http.prefix, "file");

    let argv = [
        "--listen",
        "0.0.0.0:3",
        "--instant-cache-refresh=false",
        "--prefix",
        "flag",
    ];
    let from_flag = ok(&argv, &env, file);
    assert_eq!(from_flag.http.listen.port(), 3);
    assert!(!from_flag.permissions.instant_cache_refresh);
    assert_eq!(from_flag.http.prefix, "flag");
}

#[test]
fn boolean_flags_alone_mean_true_and_variables_take_boolish_words() {
    assert!(ok(&["--production"], &[], None).is_production);
    assert!(!ok(&["--production=false"], &[], Some("isProduction = true")).is_production);
    assert!(ok(&[], &[("CANOPY_PRODUCTION", "yes")], None).is_production);
    assert!(
        !ok(
            &[],
            &[("CANOPY_PRODUCTION", "0")],
            Some("isProduction = true")
        )
        .is_production
    );
}

#[test]
fn the_secrets_may_come_from_the_file() {
    let file =
        format!("databaseUrl = \"sqlite::memory:\"\nauthSecret = \"s\"\nenvSecret = \"{HEX}\"");
    let (config, _) = load(&[], &[], Some(&file)).unwrap();
    assert_eq!(config.auth.auth_secret.expose(), "s");
    assert_eq!(config.datasources[0].url, "sqlite::memory:");
}

#[test]
fn every_create_agent_option_reads_from_the_file() {
    let file = r#"
        isProduction = true
        prefix = "/admin/"
        schemaPath = "schema.json"
        pluginDir = "plugins"
        loggerLevel = "Warn"
        logFormat = "json"
        typingsPath = "typings.d.ts"
        typingsMaxDepth = 3
        skipSchemaUpdate = true
        ignoreMissingSchemaElementErrors = true
        customizeErrorMessage = "Oops: {message}"
        instantCacheRefresh = false
        permissionsCacheDurationInSeconds = 120
        skipRelationReadPermissions = true
        maxRecordsForApproval = 100
        limitExportSize = 1000
        useUnsafeActionEndpoint = true
        workflowExecutorUrl = "https://workflows.example.com"
        [bodyParserOptions]
        jsonLimit = "1kb"
        enableRawChecking = true
        [auditTrail]
        databaseUrl = "postgres://audit@db/audit"
        [experimental]
        webhookCustomActions = false
        updateRecordCustomActions = false
    "#;
    let (config, warnings) = load(&[], &REQUIRED, Some(file)).unwrap();
    assert!(config.is_production);
    assert_eq!(config.http.mount_path(), "/admin/forest");
    assert_eq!(config.schema.path, Path::new("schema.json"));
    assert_eq!(config.plugin_dir.as_deref(), Some(Path::new("plugins")));
    assert_eq!(config.log.filter, "warn");
    assert_eq!(config.log.format, LogFormat::Json);
    assert_eq!(
        config.schema.typings_path.as_deref(),
        Some(Path::new("typings.d.ts"))
    );
    assert_eq!(config.schema.typings_max_depth, 3);
    assert!(config.schema.skip_schema_update);
    assert!(config.schema.ignore_missing_schema_element_errors);
    let template = config.http.customize_error_message.as_ref().unwrap();
    assert_eq!(template.render("InternalServerError", "boom"), "Oops: boom");
    assert!(!config.permissions.instant_cache_refresh);
    assert_eq!(config.permissions.cache_duration, Duration::from_secs(120));
    assert!(config.permissions.skip_relation_read_permissions);
    assert_eq!(config.actions.max_records_for_approval, 100);
    assert!(config.actions.use_unsafe_action_endpoint);
    assert_eq!(config.http.limit_export_size, Some(1000));
    assert_eq!(
        config.workflow_executor_url.as_deref(),
        Some("https://workflows.example.com")
    );
    assert_eq!(config.http.json_limit, 1024);
    assert!(config.http.enable_raw_checking);
    let audit_trail = config.audit_trail.unwrap();
    assert_eq!(
        audit_trail.database_url.as_deref(),
        Some("postgres://audit@db/audit")
    );
    assert!(audit_trail.critical, "critical by default");
    let keys: Vec<_> = warnings.iter().map(|w| w.key).collect();
    assert_eq!(keys, ["skipSchemaUpdate", "skipRelationReadPermissions"]);
}

#[test]
fn json_limit_takes_bytes_or_size_strings_from_every_source() {
    assert_eq!(
        ok(&["--json-limit", "1kb"], &[], None).http.json_limit,
        1024
    );
    assert_eq!(
        ok(&[], &[("CANOPY_JSON_LIMIT", "50mb")], None)
            .http
            .json_limit,
        50 << 20
    );
    assert_eq!(
        ok(&["--json-limit", "1048576"], &[], None).http.json_limit,
        1_048_576
    );
    let file = Some("[bodyParserOptions]\njsonLimit = 1048576");
    assert_eq!(ok(&[], &[], file).http.json_limit, 1_048_576);
}

#[test]
fn max_body_size_is_accepted_with_a_deprecation_warning() {
    let (config, warnings) = load(&[], &REQUIRED, Some("maxBodySize = \"2mb\"")).unwrap();
    assert_eq!(config.http.json_limit, 2 << 20);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].key, "maxBodySize");
    assert!(warnings[0].to_string().contains("deprecated"));

    let both = "maxBodySize = \"2mb\"\n[bodyParserOptions]\njsonLimit = \"1mb\"";
    let (config, warnings) = load(&[], &REQUIRED, Some(both)).unwrap();
    assert_eq!(
        config.http.json_limit,
        1 << 20,
        "jsonLimit wins over maxBodySize"
    );
    assert_eq!(warnings.len(), 1);
}

#[test]
fn a_short_permission_cache_is_raised_to_sixty_seconds_with_a_warning() {
    let file = Some("instantCacheRefresh = false\npermissionsCacheDurationInSeconds = 10");
    let (config, warnings) = load(&[], &REQUIRED, file).unwrap();
    assert_eq!(config.permissions.cache_duration, Duration::from_secs(60));
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].key, "permissionsCacheDurationInSeconds");
    assert!(warnings[0].message.contains("raised to 60"));
}

#[test]
fn a_permission_cache_duration_is_ignored_with_a_warning_under_instant_refresh() {
    let argv = ["--permissions-cache-duration-in-seconds", "300"];
    let (_, warnings) = load(&argv, &REQUIRED, None).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]
            .message
            .contains("ignored while instantCacheRefresh")
    );
}

#[test]
fn a_file_lists_several_datasources() {
    let file = r#"
        [[datasources]]
        url = "postgres://app:pw@db/app"
        include = ["customers", "orders"]
        rename = { customers = "clients" }
        nativeQueryConnection = "main"

        [[datasources]]
        url = "sqlite:archive.db"
        exclude = ["logs"]
    "#;
    let env = [("CANOPY_AUTH_SECRET", "s"), ("CANOPY_ENV_SECRET", HEX)];
    let (config, _) = load(&[], &env, Some(file)).unwrap();
    assert_eq!(
        config.datasources,
        [
            DatasourceConfig {
                url: "postgres://app:pw@db/app".into(),
                include: vec!["customers".into(), "orders".into()],
                exclude: vec![],
                rename: BTreeMap::from([("customers".into(), "clients".into())]),
                native_query_connection: Some("main".into()),
            },
            DatasourceConfig {
                url: "sqlite:archive.db".into(),
                include: vec![],
                exclude: vec!["logs".into()],
                rename: BTreeMap::new(),
                native_query_connection: None,
            },
        ]
    );
}

#[test]
fn the_database_url_variable_fills_the_files_lone_datasource() {
    let file = Some("[[datasources]]\ninclude = [\"products\"]");
    let config = ok(&[], &[], file);
    assert_eq!(config.datasources.len(), 1);
    assert_eq!(config.datasources[0].url, "sqlite::memory:");
    assert_eq!(config.datasources[0].include, ["products"]);
}

/// Loads and expects a refusal that names `key`, in `key()` and in the message.
fn refused(
    argv: &[&str],
    env: &[(&'static str, &'static str)],
    file: Option<&str>,
    key: &str,
) -> String {
    let Err(error) = load(argv, env, file) else {
        panic!("expected {key} to be refused");
    };
    let message = error.to_string();
    assert_eq!(error.key(), Some(key), "{message}");
    assert!(
        message.starts_with(&format!("invalid configuration: {key} ")),
        "{message}"
    );
    message
}

#[test]
fn the_secrets_and_a_datasource_are_required() {
    let only = |keep: &str| -> Vec<(&'static str, &'static str)> {
        REQUIRED
            .iter()
            .copied()
            .filter(|(k, _)| *k != keep)
            .collect()
    };
    refused(&[], &only("CANOPY_DATABASE_URL"), None, "databaseUrl");
    refused(&[], &only("CANOPY_AUTH_SECRET"), None, "authSecret");
    refused(&[], &only("CANOPY_ENV_SECRET"), None, "envSecret");
}

#[test]
fn the_env_secret_must_be_64_hex_characters_and_the_message_names_its_source() {
    let message = refused(
        &[],
        &with_required(&[("CANOPY_ENV_SECRET", "abc")]),
        None,
        "envSecret",
    );
    assert_eq!(
        message,
        "invalid configuration: envSecret must be 64 hexadecimal characters \
         (from --env-secret or CANOPY_ENV_SECRET)"
    );
    let not_hex = HEX.replace('0', "g");
    let file = format!("envSecret = \"{not_hex}\"");
    let env: Vec<_> = REQUIRED
        .iter()
        .copied()
        .filter(|(k, _)| *k != "CANOPY_ENV_SECRET")
        .collect();
    let message = refused(&[], &env, Some(&file), "envSecret");
    assert!(message.ends_with("(from canopy.toml)"), "{message}");
}

#[test]
fn each_invalid_setting_is_refused_by_its_key() {
    let env = with_required(&[]);
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (&["--database-url", "oracle://db"], None, "databaseUrl"),
        (&["--listen", "localhost"], None, "listen"),
        (&["--prefix", "admin panel"], None, "prefix"),
        (&["--prefix", "a.b"], None, "prefix"),
        (&["--log-level", "verbose"], None, "loggerLevel"),
        (&["--log-level", "canopy=loud"], None, "loggerLevel"),
        (&["--log-format", "xml"], None, "logFormat"),
        (&["--otel-endpoint", "collector:4318"], None, "otelEndpoint"),
        (
            &[],
            Some("otelEndpoint = \"ftp://collector\""),
            "otelEndpoint",
        ),
        (
            &["--customize-error-message", "{stack}"],
            None,
            "customizeErrorMessage",
        ),
        (
            &["--max-records-for-approval", "501"],
            None,
            "maxRecordsForApproval",
        ),
        (
            &["--max-records-for-approval", "0"],
            None,
            "maxRecordsForApproval",
        ),
        (
            &["--json-limit", "lots"],
            None,
            "bodyParserOptions.jsonLimit",
        ),
        (
            &[],
            Some("[bodyParserOptions]\njsonLimit = \"5 parsecs\""),
            "bodyParserOptions.jsonLimit",
        ),
        (&[], Some("maxBodySize = \"huge\""), "maxBodySize"),
        (&["--limit-export-size", "0"], None, "limitExportSize"),
        (
            &["--workflow-executor-url", "ftp://x"],
            None,
            "workflowExecutorUrl",
        ),
        (
            &["--audit-trail-database-url", "audit.db"],
            None,
            "auditTrail.databaseUrl",
        ),
        (
            &[
                "--skip-schema-update",
                "--experimental-webhook-custom-actions",
            ],
            None,
            "experimental",
        ),
        (
            &[],
            Some("skipSchemaUpdate = true\n[experimental]\nupdateRecordCustomActions = true"),
            "experimental",
        ),
    ];
    for (argv, file, key) in cases {
        refused(argv, &env, *file, key);
    }
    let limits: &[(&[&str], &str)] = &[
        (&["--max-header-size", "512"], "maxHeaderSize"),
        (&["--max-header-size", "big"], "maxHeaderSize"),
        (
            &["--headers-timeout-in-seconds", "0"],
            "headersTimeoutInSeconds",
        ),
        (
            &["--keep-alive-timeout-in-seconds", "0"],
            "keepAliveTimeoutInSeconds",
        ),
        (
            &["--native-query-timeout-in-seconds", "0"],
            "nativeQueryTimeoutInSeconds",
        ),
        (&["--max-page-size", "0"], "maxPageSize"),
        (
            &["--cors-allowed-origins", "app.forestadmin.com"],
            "corsAllowedOrigins",
        ),
        (
            &["--cors-allowed-origins", "https://a.example/"],
            "corsAllowedOrigins",
        ),
        (
            &["--cors-allowed-origins", "https://a.example/path"],
            "corsAllowedOrigins",
        ),
    ];
    for (argv, key) in limits {
        refused(argv, &env, None, key);
    }
}

#[test]
fn datasource_entries_are_refused_by_their_index_and_field() {
    let env: Vec<_> = REQUIRED
        .iter()
        .copied()
        .filter(|(k, _)| *k != "CANOPY_DATABASE_URL")
        .collect();
    let two = "[[datasources]]\nurl = \"sqlite:a\"\n[[datasources]]\n";
    refused(&[], &env, Some(two), "datasources[1].url");
    refused(
        &[],
        &env,
        Some("[[datasources]]\nurl = \"redis://x\""),
        "datasources[0].url",
    );
    let rename = "[[datasources]]\nurl = \"sqlite:a\"\nrename = { a = \"c\", b = \"c\" }";
    refused(&[], &env, Some(rename), "datasources[0].rename");
    let connections = "[[datasources]]\nurl = \"sqlite:a\"\nnativeQueryConnection = \"x\"\n\
                       [[datasources]]\nurl = \"sqlite:b\"\nnativeQueryConnection = \"x\"";
    refused(
        &[],
        &env,
        Some(connections),
        "datasources[1].nativeQueryConnection",
    );
    let both = "databaseUrl = \"sqlite:a\"\n[[datasources]]\nurl = \"sqlite:b\"";
    refused(&[], &env, Some(both), "databaseUrl");
    let several = "[[datasources]]\nurl = \"sqlite:a\"\n[[datasources]]\nurl = \"sqlite:b\"";
    refused(&[], &REQUIRED, Some(several), "databaseUrl");
}

#[test]
fn an_unknown_or_mistyped_file_key_is_a_syntax_error_naming_it() {
    let error = load(&[], &REQUIRED, Some("permissionCacheDuration = 60")).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("invalid configuration: canopy.toml: "),
        "{message}"
    );
    assert!(message.contains("permissionCacheDuration"), "{message}");
    let error = load(&[], &REQUIRED, Some("typingsMaxDepth = -1")).unwrap_err();
    assert!(error.to_string().contains("typingsMaxDepth"), "{error}");
}

#[test]
fn load_reads_the_file_named_by_config_and_names_a_missing_one() {
    let path = std::env::temp_dir().join(format!("canopy-config-test-{}.toml", std::process::id()));
    std::fs::write(&path, "listen = \"127.0.0.1:4000\"").unwrap();
    let mut args = parse(&[], &REQUIRED);
    args.config = Some(path.clone());
    let loaded = Config::load(args.clone());
    std::fs::remove_file(&path).unwrap();
    assert_eq!(loaded.unwrap().0.http.listen.port(), 4000);

    let error = Config::load(args).unwrap_err();
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
}

#[test]
fn debug_output_hides_secrets_and_passwords() {
    let config = ok(
        &["--database-url", "postgres://app:hunter2@db/app"],
        &[],
        None,
    );
    let debug = format!("{config:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(!debug.contains(HEX), "{debug}");
    assert!(!debug.contains("a-long-random-auth-secret"), "{debug}");
}

#[test]
fn mount_path_joins_the_prefix_like_path_posix_join() {
    for (prefix, path) in [
        ("", "/forest"),
        ("admin", "/admin/forest"),
        ("/a//b/", "/a/b/forest"),
    ] {
        let config = ok(&["--prefix", prefix], &[], None);
        assert_eq!(config.http.mount_path(), path);
    }
}

#[test]
fn help_lists_every_setting_with_its_variable_and_default() {
    for arg in TestCli::command().get_arguments() {
        let id = arg.get_id().as_str();
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(arg.get_env().is_some(), "{id} has no environment variable");
        assert!(
            arg.get_default_values().is_empty(),
            "{id} must leave defaults to the config layer"
        );
        assert!(
            help.contains("[default: ") || help.contains("Required"),
            "{id}: {help}"
        );
    }
}

/// `main` has a global `--log-level`; flattening `ServeArgs` into a subcommand must still build.
#[test]
fn serve_args_flatten_under_a_cli_with_a_global_log_level() {
    #[derive(Debug, Parser)]
    struct Cli {
        #[arg(long, env = "CANOPY_LOG_LEVEL", default_value = "info", global = true)]
        log_level: String,
        #[command(subcommand)]
        command: Command,
    }
    #[derive(Debug, Subcommand)]
    enum Command {
        Serve(ServeArgs),
    }
    Cli::command().debug_assert();
    let cli = Cli::try_parse_from(["canopy", "serve", "--log-level", "debug"]).unwrap();
    let Command::Serve(args) = cli.command;
    assert_eq!(args.log_level.as_deref(), Some("debug"));
}

#[test]
fn activity_logging_is_on_by_default_and_turned_off_from_every_source() {
    let env = with_required(&[]);
    assert!(ok(&[], &env, None).platform.activity_logs);
    assert!(
        !ok(&[], &env, Some("activityLogs = false"))
            .platform
            .activity_logs
    );
    let off = with_required(&[("CANOPY_ACTIVITY_LOGS", "off")]);
    assert!(
        !ok(&[], &off, Some("activityLogs = true"))
            .platform
            .activity_logs
    );
    assert!(ok(&["--activity-logs"], &off, None).platform.activity_logs);
    assert!(
        !ok(&["--activity-logs=false"], &env, None)
            .platform
            .activity_logs
    );
}

#[test]
fn activity_log_retention_is_90_days_without_a_cap_by_default_and_read_from_every_source() {
    use crate::platform::activity::Retention;
    let env = with_required(&[]);
    let retention = |argv: &[&str], env: &[(&'static str, &'static str)], file: Option<&str>| {
        ok(argv, env, file).platform.activity_retention
    };
    assert_eq!(
        retention(&[], &env, None),
        Retention {
            days: Some(90),
            max_rows: None
        }
    );
    // 0 keeps entries forever, and sets no cap.
    assert_eq!(
        retention(
            &[],
            &env,
            Some("activityLogRetentionDays = 0\nactivityLogMaxRows = 0")
        ),
        Retention::default()
    );
    assert_eq!(
        retention(
            &[],
            &env,
            Some("activityLogRetentionDays = 30\nactivityLogMaxRows = 5000000")
        ),
        Retention {
            days: Some(30),
            max_rows: Some(5_000_000)
        }
    );
    let from_env = with_required(&[
        ("CANOPY_ACTIVITY_LOG_RETENTION_DAYS", "7"),
        ("CANOPY_ACTIVITY_LOG_MAX_ROWS", "1000"),
    ]);
    assert_eq!(
        retention(&[], &from_env, Some("activityLogRetentionDays = 30")),
        Retention {
            days: Some(7),
            max_rows: Some(1000)
        }
    );
    assert_eq!(
        retention(
            &[
                "--activity-log-retention-days",
                "365",
                "--activity-log-max-rows",
                "10"
            ],
            &from_env,
            None
        ),
        Retention {
            days: Some(365),
            max_rows: Some(10)
        }
    );
    let message = refused(
        &["--activity-log-retention-days", "36501"],
        &env,
        None,
        "activityLogRetentionDays",
    );
    assert!(message.contains("0 keeps the entries forever"), "{message}");
    refused(
        &[],
        &env,
        Some("activityLogRetentionDays = 100000000000"),
        "activityLogRetentionDays",
    );
}

#[test]
fn the_audit_trail_is_on_by_flag_table_or_url_and_critical_by_default() {
    let in_store = |config: Config| config.audit_trail.map(|a| (a.database_url, a.critical));
    assert_eq!(
        in_store(ok(&["--audit-trail"], &[], None)),
        Some((None, true))
    );
    assert_eq!(
        in_store(ok(&[], &[("CANOPY_AUDIT_TRAIL", "true")], None)),
        Some((None, true))
    );
    assert_eq!(
        in_store(ok(&[], &[], Some("[auditTrail]\ncritical = false"))),
        Some((None, false))
    );
    assert_eq!(
        in_store(ok(
            &["--audit-trail-database-url", "sqlite://audit.db"],
            &[],
            None
        )),
        Some((Some("sqlite://audit.db".to_owned()), true))
    );
    // Off wins over a table (and a URL) when said explicitly.
    assert_eq!(
        in_store(ok(&["--audit-trail=false"], &[], Some("[auditTrail]"))),
        None
    );
    assert_eq!(
        in_store(ok(
            &[],
            &[],
            Some("[auditTrail]\nenabled = false\ndatabaseUrl = \"sqlite://a.db\"")
        )),
        None
    );
    assert_eq!(in_store(ok(&[], &[], None)), None);
}

#[test]
fn strict_scopes_is_on_by_default_and_turned_off_by_file_env_or_flag_with_a_warning() {
    let (config, warnings) = load(&[], &REQUIRED, None).unwrap();
    assert!(config.permissions.strict_scopes);
    assert!(!warnings.iter().any(|w| w.key == "strictScopes"));
    let (config, warnings) = load(&[], &REQUIRED, Some("strictScopes = false")).unwrap();
    assert!(!config.permissions.strict_scopes);
    assert!(warnings.iter().any(|w| w.key == "strictScopes"));
    let env = with_required(&[("CANOPY_STRICT_SCOPES", "false")]);
    let (config, _) = load(&[], &env, None).unwrap();
    assert!(!config.permissions.strict_scopes);
    // A flag wins over the file, as every setting does.
    let (config, _) = load(
        &["--strict-scopes"],
        &REQUIRED,
        Some("strictScopes = false"),
    )
    .unwrap();
    assert!(config.permissions.strict_scopes);
    let (config, _) = load(&["--strict-scopes=false"], &REQUIRED, None).unwrap();
    assert!(!config.permissions.strict_scopes);
}

#[test]
fn dashboard_charts_are_read_from_the_file_and_a_bad_one_is_refused_by_its_index() {
    let file = "[[dashboard.chart]]\ntitle = \"Orders\"\nkind = \"value\"\ncollection = \"orders\"\n\
                [[dashboard.chart]]\ntitle = \"By status\"\nkind = \"distribution\"\n\
                collection = \"orders\"\ngroupBy = \"status\"\ndashboard = \"orders\"\n";
    let (config, _) = load(&[], &REQUIRED, Some(file)).unwrap();
    assert_eq!(config.dashboard.len(), 2);
    assert_eq!(config.dashboard[1].dashboard.as_deref(), Some("orders"));
    let (config, _) = load(&[], &REQUIRED, None).unwrap();
    assert!(config.dashboard.is_empty());
    let bad = format!(
        "{file}[[dashboard.chart]]\ntitle = \"Goal\"\nkind = \"objective\"\ncollection = \"orders\"\n"
    );
    let message = refused(&[], &REQUIRED, Some(&bad), "dashboard.chart[2]");
    assert!(message.contains("objective"), "{message}");
}
