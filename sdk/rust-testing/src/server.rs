//! Running `canopy test-server`: its arguments, its ready line, and its end.

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::client::Client;
use crate::error::{Error, Result};

/// How long a stopping server may take to finish its requests before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The settings of a test server, given one by one; [`Builder::start`] runs it.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    binary: Option<PathBuf>,
    args: Vec<OsString>,
}

impl Builder {
    fn flag(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.args.push(name.into());
        self.args.push(value.into());
        self
    }

    /// The `canopy` binary to run. [default: `$CANOPY_BIN`, else `canopy` on the `PATH`]
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// A built plugin component (`.wasm`) to serve; call again for several.
    pub fn plugin(self, path: impl AsRef<Path>) -> Self {
        self.flag("--plugin", path.as_ref())
    }

    /// The settings of the one plugin (`NAME.toml`): it is served as `NAME` with them.
    pub fn settings(self, path: impl AsRef<Path>) -> Self {
        self.flag("--settings", path.as_ref())
    }

    /// SQL run on the database before it is served, from a file.
    pub fn seed_file(self, path: impl AsRef<Path>) -> Self {
        self.flag("--seed", path.as_ref())
    }

    /// SQL run on the database before it is served (after the seed files), e.g. `CREATE
    /// TABLE` and `INSERT` statements. The database is a new SQLite file unless
    /// [`Builder::database_url`] names one.
    pub fn seed_sql(self, sql: impl Into<String>) -> Self {
        self.flag("--seed-sql", sql.into())
    }

    /// The database to serve instead of a new SQLite file: `sqlite://path`, `postgres://…`.
    pub fn database_url(self, url: impl Into<String>) -> Self {
        self.flag("--database-url", url.into())
    }

    /// The rights of the user, as a role of the permissions file:
    /// `{"collections": {"customers": ["browse", "read"]}, "actions": {"customers": ["Say
    /// hello"]}}`. [default: every right]
    pub fn rights(self, rights: &Json) -> Self {
        self.flag("--rights", rights.to_string())
    }

    /// The user's team, as a team of the permissions file: `{"scopes": {…}}`.
    pub fn team(self, team: &Json) -> Self {
        self.flag("--team", team.to_string())
    }

    /// The user's permission level: `admin` (the default), `developer`, `editor` or `user`.
    pub fn level(self, level: &str) -> Self {
        self.flag("--level", level)
    }

    /// Any other argument of `canopy test-server` (see `canopy test-server --help`), e.g.
    /// `--config` with a config file.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(self) -> Result<TestServer> {
        let binary = self
            .binary
            .or_else(|| std::env::var_os("CANOPY_BIN").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("canopy"));
        let mut command = Command::new(&binary);
        for (name, _) in std::env::vars_os() {
            if inherited_setting(&name.to_string_lossy()) {
                command.env_remove(name);
            }
        }
        let mut child = command
            .arg("test-server")
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn {
                binary: binary.display().to_string(),
                source,
            })?;
        let stderr = forward_stderr(&mut child);
        let mut stdout = child.stdout.take().map(BufReader::new);
        let mut line = String::new();
        if let Some(stdout) = stdout.as_mut() {
            stdout
                .read_line(&mut line)
                .map_err(|e| Error::io("reading canopy test-server's output", e))?;
        }
        if line.trim().is_empty() {
            let status = child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            // Its last words are on stderr, which ends with the process.
            let stderr = stderr.join().unwrap_or_default();
            return Err(Error::NotReady { status, stderr });
        }
        let ready: Json = serde_json::from_str(&line).map_err(|e| {
            Error::Unexpected(format!(
                "canopy test-server's first line is not JSON ({e}): {line}"
            ))
        })?;
        let text = |key: &str| {
            ready[key].as_str().map(str::to_owned).ok_or_else(|| {
                Error::Unexpected(format!("canopy test-server's line has no {key:?}: {line}"))
            })
        };
        let client = Client::new(&text("forestUrl")?, text("token")?, text("schemaPath")?)?;
        Ok(TestServer {
            url: text("url")?,
            token: text("token")?,
            auth_secret: text("authSecret")?,
            env_secret: text("envSecret")?,
            email: text("email")?,
            ready,
            client,
            stdin: child.stdin.take(),
            _stdout: stdout,
            child,
        })
    }
}

/// Whether `name` is a setting of `canopy serve` the shell may hold for another server
/// (`CANOPY_DATABASE_URL`, `SERVICE_SERVER_URL`…): the test server gets only what the test gives
/// it, except the plugin compile cache's folder, which only makes it start faster.
fn inherited_setting(name: &str) -> bool {
    (name.starts_with("CANOPY_") || name.starts_with("SERVICE_"))
        && name != "CANOPY_PLUGIN_CACHE_DIR"
}

/// Copies the server's stderr to this process's as it comes (a test shows the server's errors
/// next to its own), keeping it for the error of a server that stops before it is ready.
fn forward_stderr(child: &mut Child) -> std::thread::JoinHandle<String> {
    let stderr = child.stderr.take();
    std::thread::spawn(move || {
        let Some(stderr) = stderr else {
            return String::new();
        };
        let mut text = String::new();
        for line in BufReader::new(stderr)
            .lines()
            .map_while(std::io::Result::ok)
        {
            eprintln!("{line}");
            text.push_str(&line);
            text.push('\n');
        }
        text
    })
}

/// A running `canopy test-server`; stopped (and its temporary folder removed) when dropped.
#[derive(Debug)]
pub struct TestServer {
    url: String,
    token: String,
    auth_secret: String,
    env_secret: String,
    email: String,
    ready: Json,
    client: Client,
    stdin: Option<ChildStdin>,
    /// Kept open, so that a late write of the server never meets a closed pipe.
    _stdout: Option<BufReader<ChildStdout>>,
    child: Child,
}

impl TestServer {
    /// A [`Builder`] with the defaults: a new SQLite database, no plugin, a user with every
    /// right.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A client of the server's `/forest` routes as its user.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `http://127.0.0.1:PORT`: the server's origin (another Canopy's `--server-url`, when this
    /// one stands in for the platform).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The session token of the user the client acts as (for another client, or a request of
    /// your own).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The email of the user the client acts as.
    pub fn email(&self) -> &str {
        &self.email
    }

    /// The secret the server signs session tokens with.
    pub fn auth_secret(&self) -> &str {
        &self.auth_secret
    }

    /// The server's environment secret: another Canopy given it and `--server-url` takes its
    /// permissions from this server.
    pub fn env_secret(&self) -> &str {
        &self.env_secret
    }

    /// The whole ready line: `url`, `forestUrl`, `token`, `email`, `schemaPath`, `databaseUrl`,
    /// `authSecret`, `envSecret`.
    pub fn info(&self) -> &Json {
        &self.ready
    }

    /// Stops the server: closes its stdin, waits for it to finish its requests (killing it
    /// after 10 s), and says how it ended.
    pub fn close(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            let waited = self
                .child
                .try_wait()
                .map_err(|e| Error::io("waiting for canopy test-server", e))?;
            match waited {
                Some(status) if status.success() => return Ok(()),
                Some(status) => {
                    return Err(Error::Unexpected(format!(
                        "canopy test-server ended with {status}"
                    )));
                }
                None if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(Error::Unexpected(format!(
                        "canopy test-server did not stop within {STOP_GRACE:?}: killed"
                    )));
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            // Dropped without `close`: stopped all the same; how it ended is not news here.
            let _ = self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shells_serve_settings_stay_out_of_the_test_server_but_its_compile_cache() {
        assert!(inherited_setting("CANOPY_DATABASE_URL"));
        assert!(inherited_setting("SERVICE_SERVER_URL"));
        assert!(!inherited_setting("CANOPY_PLUGIN_CACHE_DIR"));
        assert!(!inherited_setting("PATH"));
    }
}
