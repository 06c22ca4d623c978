//! `canopy test-server`: a throwaway server for a plugin's own test suite. Everything it keeps
//! (its store, schema file, plugin folder and, by default, its database) lives in a temporary
//! folder removed when it stops; it listens on a free port, seeds the database with the test's
//! SQL, and serves one user with the rights the test asks for, whose session token it prints
//! with its address as one JSON line on stdout. The client libraries of the testing kit
//! (`sdk/rust-testing`, `canopy_sdk.testing`, `sdk/js-testing`) start it and read that line.
//!
//! The user is made the way every user is: a permissions file (mode `seed`, see
//! `platform::declarative`) written into the temporary folder and applied by the serve start,
//! so its names are checked against the served schema like any permissions file's.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value as Json, json};

use crate::config::ServeArgs;
use crate::datasource::sql::Pool;
use crate::platform::declarative::PermissionsFile;

/// The user a test server serves, unless `--permissions-file` names others (then `--as`).
pub const TEST_USER_EMAIL: &str = "tester@canopy.test";
const TEST_ROLE: &str = "Tester";
const TEST_TEAM: &str = "Testers";

/// How long the printed token is valid: longer than any test run.
const TOKEN_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// `canopy test-server`.
#[derive(Debug, Args)]
pub struct TestServerArgs {
    /// A plugin component to serve (`.wasm`), e.g. target/wasm32-wasip2/release/my_plugin.wasm
    /// or my-plugin.wasm; repeat for several. Copied into the server's own plugin folder, beside
    /// the plugins of --plugins DIR if given.
    #[arg(long, value_name = "FILE")]
    pub plugin: Vec<PathBuf>,
    /// The settings of the one --plugin (its `NAME.toml`, e.g. my-plugin.toml): the plugin is
    /// served as NAME with them. [default: the `.toml` beside the component, if any]
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// SQL run on the database before it is served (several statements; e.g. CREATE TABLE and
    /// INSERT); repeat for several files, run in order, before --seed-sql.
    #[arg(long, value_name = "FILE")]
    pub seed: Vec<PathBuf>,
    /// SQL text run on the database before it is served, after the --seed files.
    #[arg(long, value_name = "SQL")]
    pub seed_sql: Vec<String>,
    /// The rights of the served user's role, as JSON in the shape of a role of the permissions
    /// file: `{"collections": {"customers": ["browse", "read"]}, "actions": {"customers":
    /// ["Say hello"]}}` ("*" for every collection or action, "all" for every right).
    /// [default: every right on every collection and action]
    #[arg(long, value_name = "JSON")]
    pub rights: Option<String>,
    /// The served user's team, as JSON in the shape of a team of the permissions file:
    /// `{"scopes": {"orders": {"field": "status", "operator": "equal", "value": "paid"}}}`.
    /// [default: no scope]
    #[arg(long, value_name = "JSON")]
    pub team: Option<String>,
    /// The served user's permission level: admin, developer, editor or user.
    #[arg(long, value_name = "LEVEL", default_value = "admin",
          value_parser = ["admin", "developer", "editor", "user"])]
    pub level: String,
    /// With --permissions-file (your own users, roles and teams, mode "seed" or "managed"): the
    /// email of the user the printed token is for, instead of the one made from --rights.
    #[arg(long = "as", value_name = "EMAIL", requires = "permissions_file")]
    pub as_user: Option<String>,
    /// The settings of `serve` (a --config file with dashboard charts or no-code actions,
    /// --database-url, --plugins, log settings…), except the store, the schema file and the
    /// listen address, which are the test server's own (--listen: 127.0.0.1 and a free port
    /// unless given). Without --database-url (nor --config), the database is a new SQLite file
    /// in the temporary folder. The secrets are random unless given.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The temporary folder of one test server: removed when dropped, whatever ended the command.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    fn create() -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "canopy-test-server-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a folder left in the system's temporary directory is harmless.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A test server's settings, ready for the serve start.
#[derive(Debug)]
pub struct Prepared {
    /// The settings of `serve`, pointing at the temporary folder.
    pub serve: ServeArgs,
    /// The user whose token is printed.
    pub email: String,
    /// Run on the database before it is served, in order.
    pub seeds: Vec<(String, String)>,
    /// Kept until the server stops.
    pub dir: TempDir,
}

/// Makes the temporary folder and the settings of `serve` from the command's arguments: the
/// store, schema file, plugin folder and permissions file in the folder, a free port, random
/// secrets, and quiet logs. Nothing is started yet.
pub fn prepare(args: TestServerArgs) -> anyhow::Result<Prepared> {
    let seeds = read_seeds(&args.seed, &args.seed_sql)?;
    // Seeds write: they run on a database the test names, never on one a shell exported for
    // `canopy serve` (clap fills --database-url from CANOPY_DATABASE_URL too).
    if !seeds.is_empty()
        && args.serve.database_url.is_some()
        && std::env::var("CANOPY_DATABASE_URL").ok() == args.serve.database_url
    {
        anyhow::bail!(
            "--seed would write to the database of CANOPY_DATABASE_URL: unset it, and the test \
             server seeds a new SQLite file (or the database its --database-url names)"
        );
    }
    let dir = TempDir::create()?;
    let mut serve = args.serve;
    let root = dir.path();
    serve.data_dir = Some(root.join("store"));
    serve.state_url = Some(crate::platform::store::default_sqlite_url(
        &root.join("store"),
    ));
    serve.schema_path = Some(root.join(".forestadmin-schema.json"));
    serve.listen.get_or_insert_with(|| "127.0.0.1:0".to_owned());
    // Each request's log line would drown the test's own output; errors still show.
    serve.log_level.get_or_insert_with(|| "warn".to_owned());
    serve
        .auth_secret
        .get_or_insert_with(|| random_hex(1).to_string());
    serve.env_secret.get_or_insert_with(|| random_hex(2));
    if serve.database_url.is_none() && serve.config.is_none() {
        serve.database_url = Some(format!(
            "sqlite://{}?mode=rwc",
            root.join("test.sqlite").display()
        ));
    }
    if !args.plugin.is_empty() {
        serve.plugin_dir = Some(plugin_folder(
            &root.join("plugins"),
            serve.plugin_dir.as_deref(),
            &args.plugin,
            args.settings.as_deref(),
        )?);
    } else if args.settings.is_some() {
        anyhow::bail!("--settings names the settings of a --plugin: give the plugin too");
    }
    let email = match (&serve.permissions_file, args.as_user) {
        (Some(_), Some(email)) => email,
        (Some(_), None) => anyhow::bail!(
            "with --permissions-file, say which of its users the token is for with --as EMAIL"
        ),
        (None, _) => {
            let text = permissions_file(args.rights.as_deref(), args.team.as_deref(), &args.level)?;
            let path = root.join("permissions.toml");
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            serve.permissions_file = Some(path);
            TEST_USER_EMAIL.to_owned()
        }
    };
    Ok(Prepared {
        serve,
        email,
        seeds,
        dir,
    })
}

/// `n` v4 UUIDs' worth of random hex (32 characters each): the env secret is 64 hexadecimal
/// characters, and a throwaway server needs no more than the generator's randomness.
fn random_hex(n: usize) -> String {
    (0..n)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect()
}

/// The seed files' text (named by their path) then the `--seed-sql` texts, in order.
fn read_seeds(files: &[PathBuf], texts: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut seeds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--seed {}: cannot read it", file.display()))?;
        seeds.push((file.display().to_string(), text));
    }
    seeds.extend(texts.iter().map(|t| ("--seed-sql".to_owned(), t.clone())));
    Ok(seeds)
}

/// The server's own plugin folder: the `.wasm` and `.toml` files of `dir` (the user's
/// `--plugins`), then each component of `plugins`, named after its settings file when one is
/// given (a Rust build's `my_plugin.wasm` is served as `my-plugin` with `my-plugin.toml`),
/// else after itself, with the `.toml` beside it if there is one.
fn plugin_folder(
    folder: &Path,
    dir: Option<&Path>,
    plugins: &[PathBuf],
    settings: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    if settings.is_some() && plugins.len() > 1 {
        anyhow::bail!(
            "--settings goes with one --plugin; with several, put each NAME.toml beside its \
             NAME.wasm"
        );
    }
    std::fs::create_dir_all(folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let copy = |from: &Path, name: &str| {
        std::fs::copy(from, folder.join(name))
            .with_context(|| format!("cannot copy {} into the plugin folder", from.display()))
            .map(drop)
    };
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("--plugins {}: cannot read it", dir.display()))?;
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let kept = path.extension().is_some_and(|x| x == "wasm" || x == "toml");
            if kept && path.is_file() {
                copy(&path, &file_name(&path)?)?;
            }
        }
    }
    for plugin in plugins {
        if plugin.extension().is_none_or(|x| x != "wasm") || !plugin.is_file() {
            anyhow::bail!(
                "--plugin {}: expected a built component (a .wasm file)",
                plugin.display()
            );
        }
        let (name, toml) = match settings {
            Some(settings) => (stem(settings)?, Some(settings.to_owned())),
            None => {
                let beside = plugin.with_extension("toml");
                (stem(plugin)?, beside.is_file().then_some(beside))
            }
        };
        copy(plugin, &format!("{name}.wasm"))?;
        if let Some(toml) = toml {
            copy(&toml, &format!("{name}.toml"))?;
        }
    }
    Ok(folder.to_owned())
}

fn file_name(path: &Path) -> anyhow::Result<String> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{} names no file", path.display()))
}

fn stem(path: &Path) -> anyhow::Result<String> {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{} names no file", path.display()))
}

/// The permissions file of the served user: a role with `rights`, a team with `team`, and the
/// user at `level` in both, in seed mode. Checked here for its shape (so that a mistake names
/// the flag), and against the served schema when the server applies it.
fn permissions_file(
    rights: Option<&str>,
    team: Option<&str>,
    level: &str,
) -> anyhow::Result<String> {
    let parse = |flag: &str, text: &str| -> anyhow::Result<Json> {
        let value: Json =
            serde_json::from_str(text).with_context(|| format!("--{flag} is not JSON: {text}"))?;
        if !value.is_object() {
            anyhow::bail!("--{flag} must be a JSON object, e.g. {}", example(flag));
        }
        Ok(value)
    };
    let rights = match rights {
        Some(text) => parse("rights", text)?,
        None => json!({"collections": {"*": "all"}, "actions": {"*": "all"}}),
    };
    let team = match team {
        Some(text) => parse("team", text)?,
        None => json!({}),
    };
    let document = json!({
        "mode": "seed",
        "roles": {TEST_ROLE: rights},
        "teams": {TEST_TEAM: team},
        "users": [{
            "email": TEST_USER_EMAIL,
            "first_name": "Test",
            "last_name": "User",
            "level": level,
            "role": TEST_ROLE,
            "teams": [TEST_TEAM],
        }],
    });
    // The file's own types say which key is wrong (`deny_unknown_fields`), one flag at a time.
    let fits = |flag: &str, part: Json| {
        serde_json::from_value::<PermissionsFile>(part).map_err(|error| {
            anyhow::anyhow!("--{flag} does not fit the permissions file's {flag}: {error}")
        })
    };
    fits(
        "rights",
        json!({"mode": "seed", "roles": document["roles"]}),
    )?;
    fits("team", json!({"mode": "seed", "teams": document["teams"]}))?;
    let mut text = String::from("# Written by `canopy test-server`: the served user.\n");
    if let Json::Object(map) = &document {
        for (key, value) in map {
            text.push_str(&format!("{key} = {}\n", super::admin::toml_inline(value)));
        }
    }
    Ok(text)
}

fn example(flag: &str) -> &'static str {
    match flag {
        "rights" => r#"{"collections": {"customers": ["browse", "read"]}}"#,
        _ => r#"{"scopes": {"orders": {"field": "status", "operator": "equal", "value": "paid"}}}"#,
    }
}

/// Runs each seed on the database at `url` (SQLite, PostgreSQL or MySQL), in order; a failure
/// names the seed.
pub async fn seed(url: &str, seeds: &[(String, String)]) -> anyhow::Result<()> {
    if seeds.is_empty() {
        return Ok(());
    }
    let pool = Pool::connect(url, 1)
        .await
        .context("connecting to the database to seed it")?;
    let mut done = Ok(());
    for (name, sql) in seeds {
        let ran = match &pool {
            Pool::Sqlite(p) => sqlx::raw_sql(sql).execute(p).await.map(drop),
            Pool::Postgres(p) => sqlx::raw_sql(sql).execute(p).await.map(drop),
            Pool::MySql(p) => sqlx::raw_sql(sql).execute(p).await.map(drop),
        };
        if let Err(error) = ran {
            done = Err(anyhow::anyhow!("seeding the database with {name}: {error}"));
            break;
        }
    }
    pool.close().await;
    done
}

/// The line the client libraries read once the server accepts connections (one JSON object).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyLine {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The agent's routes: `{url}/forest` (under --prefix, `{url}/{prefix}/forest`).
    pub forest_url: String,
    /// A session token of the served user.
    pub token: String,
    pub email: String,
    /// The schema file written at start: the clients find each action's route in it.
    pub schema_path: PathBuf,
    pub database_url: Option<String>,
    /// For another Canopy (or Node agent) that takes its permissions from this one
    /// (`--server-url`), and for tokens minted by the test itself.
    pub auth_secret: String,
    pub env_secret: String,
}

/// The served user's session token, from the store the serve start filled.
pub async fn token(
    store: &crate::platform::Store,
    auth_secret: &str,
    email: &str,
) -> anyhow::Result<String> {
    super::admin::session_token(store, auth_secret, email, TOKEN_TTL)
        .await
        .with_context(|| format!("the token of {email}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_user_gets_every_right_through_a_seed_file() {
        let text = permissions_file(None, None, "admin").expect("valid");
        let file: PermissionsFile = toml::from_str(&text).expect("a permissions file");
        assert_eq!(file.mode, crate::platform::declarative::Mode::Seed);
        assert!(text.contains(r#""*" = "all""#), "{text}");
        assert!(text.contains(TEST_USER_EMAIL), "{text}");
    }

    #[test]
    fn rights_with_an_unknown_key_are_refused_naming_the_flag() {
        let error =
            permissions_file(Some(r#"{"collection": {}}"#), None, "user").expect_err("unknown key");
        assert!(
            error.to_string().starts_with("--rights does not fit"),
            "{error}"
        );
    }

    #[test]
    fn a_team_with_an_unknown_key_is_refused_naming_the_flag() {
        let error =
            permissions_file(None, Some(r#"{"scope": {}}"#), "user").expect_err("unknown key");
        assert!(
            error.to_string().starts_with("--team does not fit"),
            "{error}"
        );
    }

    #[test]
    fn rights_that_are_not_an_object_are_refused_with_an_example() {
        let error = permissions_file(Some("[]"), None, "user").expect_err("not an object");
        assert!(
            error.to_string().contains("must be a JSON object"),
            "{error}"
        );
    }

    #[test]
    fn a_rust_build_is_served_under_its_settings_name() {
        let dir = TempDir::create().expect("temp dir");
        let built = dir.path().join("my_plugin.wasm");
        let settings = dir.path().join("my-plugin.toml");
        std::fs::write(&built, b"\0asm").expect("write");
        std::fs::write(&settings, "[options]\n").expect("write");
        let folder = plugin_folder(&dir.path().join("plugins"), None, &[built], Some(&settings))
            .expect("folder");
        assert!(folder.join("my-plugin.wasm").is_file());
        assert!(folder.join("my-plugin.toml").is_file());
    }

    #[test]
    fn the_temporary_folder_is_removed_when_dropped() {
        let dir = TempDir::create().expect("temp dir");
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());
    }
}
