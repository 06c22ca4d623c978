//! `canopy plugin new NAME [--lang rust|python|ts]`: writes a ready-to-build plugin (templates in
//! `scaffold/`) with an example computed field and action, the `NAME.toml` settings to copy
//! beside the built plugin, and a README with the write → build → copy → reload loop.
//!
//! Rust: a crate with its own `[workspace]` and a `.cargo/config.toml` that targets
//! wasm32-wasip2, depending on `guest-sdk` by path. Python: a module, a `build.sh` that runs
//! componentize-py, and a copy of the Python SDK and of the WIT contract *embedded in this
//! binary*: a Python plugin has no package manager resolving the SDK at build time, so the folder
//! carries the SDK that matches the host that wrote it, and builds anywhere, checkout or not.
//! TypeScript: the same (a module, `build.sh`, the SDK's sources and build script in
//! `vendor/canopy-sdk`, the WIT), plus the `package.json` and `package-lock.json` that pin the
//! toolchain (TypeScript, esbuild, jco, ComponentizeJS), which `build.sh` installs with `npm ci`.

use std::path::{Component, Path, PathBuf};

use crate::typings::Language;

const CARGO_TOML: &str = include_str!("scaffold/Cargo.toml.tmpl");
const CARGO_CONFIG: &str = include_str!("scaffold/config.toml.tmpl");
const GITIGNORE: &str = include_str!("scaffold/gitignore.tmpl");
const LIB_RS: &str = include_str!("scaffold/lib.rs.tmpl");
const PLUGIN_TOML: &str = include_str!("scaffold/plugin.toml.tmpl");
const README: &str = include_str!("scaffold/README.md.tmpl");

const PY_MODULE: &str = include_str!("scaffold/python/plugin.py.tmpl");
const PY_BUILD: &str = include_str!("scaffold/python/build.sh.tmpl");
const PY_GITIGNORE: &str = include_str!("scaffold/python/gitignore.tmpl");
const PY_README: &str = include_str!("scaffold/python/README.md.tmpl");
const PY_PLUGIN_TOML: &str = include_str!("scaffold/python/plugin.toml.tmpl");

const TS_MODULE: &str = include_str!("scaffold/ts/plugin.ts.tmpl");
const TS_BUILD: &str = include_str!("scaffold/ts/build.sh.tmpl");
const TS_GITIGNORE: &str = include_str!("scaffold/ts/gitignore.tmpl");
const TS_README: &str = include_str!("scaffold/ts/README.md.tmpl");
const TS_PLUGIN_TOML: &str = include_str!("scaffold/ts/plugin.toml.tmpl");
const TS_TSCONFIG: &str = include_str!("scaffold/ts/tsconfig.json.tmpl");

/// The TypeScript SDK's manifest: its pinned toolchain becomes the plugin's `devDependencies`.
const TS_PACKAGE: &str = include_str!("../../sdk/ts/package.json");
/// The toolchain's lock file, copied as is: `npm ci` installs exactly what the SDK is tested with.
const TS_LOCK: &str = include_str!("../../sdk/ts/package-lock.json");

/// The TypeScript SDK's files, copied to `vendor/canopy-sdk/` (a test checks the list is the
/// whole of `sdk/ts/src`).
const TS_SDK: &[(&str, &str)] = &[
    ("build.mjs", include_str!("../../sdk/ts/build.mjs")),
    (
        "src/actions.ts",
        include_str!("../../sdk/ts/src/actions.ts"),
    ),
    (
        "src/contexts.ts",
        include_str!("../../sdk/ts/src/contexts.ts"),
    ),
    (
        "src/customize.ts",
        include_str!("../../sdk/ts/src/customize.ts"),
    ),
    ("src/data.ts", include_str!("../../sdk/ts/src/data.ts")),
    ("src/errors.ts", include_str!("../../sdk/ts/src/errors.ts")),
    (
        "src/exports.ts",
        include_str!("../../sdk/ts/src/exports.ts"),
    ),
    (
        "src/globals.d.ts",
        include_str!("../../sdk/ts/src/globals.d.ts"),
    ),
    ("src/index.ts", include_str!("../../sdk/ts/src/index.ts")),
    ("src/wit.ts", include_str!("../../sdk/ts/src/wit.ts")),
];

/// The componentize-py release the Python SDK is written and tested against (its bindings'
/// module names and its embedded CPython); `build.sh` warns on another one.
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// The Python SDK's files, copied to `vendor/canopy_sdk/` (a test checks the list is the whole
/// package).
const PY_SDK: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../sdk/python/src/canopy_sdk/__init__.py"),
    ),
    (
        "_wit.py",
        include_str!("../../sdk/python/src/canopy_sdk/_wit.py"),
    ),
    (
        "actions.py",
        include_str!("../../sdk/python/src/canopy_sdk/actions.py"),
    ),
    (
        "charts.py",
        include_str!("../../sdk/python/src/canopy_sdk/charts.py"),
    ),
    (
        "customize.py",
        include_str!("../../sdk/python/src/canopy_sdk/customize.py"),
    ),
    (
        "data.py",
        include_str!("../../sdk/python/src/canopy_sdk/data.py"),
    ),
    (
        "errors.py",
        include_str!("../../sdk/python/src/canopy_sdk/errors.py"),
    ),
    (
        "exports.py",
        include_str!("../../sdk/python/src/canopy_sdk/exports.py"),
    ),
    (
        "hooks.py",
        include_str!("../../sdk/python/src/canopy_sdk/hooks.py"),
    ),
    (
        "py.typed",
        include_str!("../../sdk/python/src/canopy_sdk/py.typed"),
    ),
    (
        "testing.py",
        include_str!("../../sdk/python/src/canopy_sdk/testing.py"),
    ),
    (
        "workflow.py",
        include_str!("../../sdk/python/src/canopy_sdk/workflow.py"),
    ),
    (
        "write.py",
        include_str!("../../sdk/python/src/canopy_sdk/write.py"),
    ),
];

/// The contract the Python and TypeScript SDKs build against, copied to `wit/plugin@0.3.0/`.
const CONTRACT: &[(&str, &str)] = &[(
    "plugin.wit",
    include_str!("../../wit/plugin@0.3.0/plugin.wit"),
)];

/// Why no crate was written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "invalid plugin name `{0}`: use lower-case ASCII letters, digits, `-` and `_`, starting \
         with a letter, at most 64 characters, and not a Rust keyword or a standard crate's name"
    )]
    InvalidName(String),
    #[error("{} already exists and is not empty: choose another --dir", .0.display())]
    Exists(PathBuf),
    #[error(
        "cannot find canopy-sdk: pass --sdk PATH (or set CANOPY_SDK) to the `guest-sdk` folder of \
         a Canopy checkout"
    )]
    NoSdk,
    #[error("{} is not canopy-sdk (no Cargo.toml naming `canopy-sdk`)", .0.display())]
    NotSdk(PathBuf),
    #[error(
        "--sdk is for Rust plugins: a Python plugin gets a copy of the SDK this binary carries"
    )]
    SdkNotForPython,
    #[error(
        "--sdk is for Rust plugins: a TypeScript plugin gets a copy of the SDK this binary carries"
    )]
    SdkNotForTs,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

/// A plugin folder written by [`new_plugin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The plugin's folder.
    pub dir: PathBuf,
    /// The command that builds it, run in `dir`.
    pub build: &'static str,
    /// Where the build puts the component, relative to `dir`.
    pub artifact: PathBuf,
    /// The name to give the component in the plugin directory (`NAME.wasm`).
    pub plugin_file: String,
}

/// Writes plugin `name` in `language` into `dir` (default: `./name`), which must not exist or
/// be empty. For Rust, `sdk` is the `guest-sdk` folder to depend on by path; by default, the one
/// of the checkout this binary was built from, when it is still there. Python takes no `sdk`.
pub fn new_plugin(
    name: &str,
    language: Language,
    dir: Option<&Path>,
    sdk: Option<&Path>,
) -> Result<Created> {
    check_name(name)?;
    let dir = dir.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    match language {
        Language::Rust => new_rust_plugin(name, dir, sdk),
        Language::Python if sdk.is_some() => Err(Error::SdkNotForPython),
        Language::Python => new_python_plugin(name, dir),
        Language::Ts if sdk.is_some() => Err(Error::SdkNotForTs),
        Language::Ts => new_ts_plugin(name, dir),
    }
}

/// A crate depending on `guest-sdk` by path.
fn new_rust_plugin(name: &str, dir: PathBuf, sdk: Option<&Path>) -> Result<Created> {
    let sdk = match sdk {
        Some(path) => path.to_path_buf(),
        None => built_from().ok_or(Error::NoSdk)?,
    };
    let sdk = std::fs::canonicalize(&sdk).map_err(|_| Error::NotSdk(sdk.clone()))?;
    let manifest = std::fs::read_to_string(sdk.join("Cargo.toml")).unwrap_or_default();
    if !manifest.contains("name = \"canopy-sdk\"") {
        return Err(Error::NotSdk(sdk));
    }
    ensure_empty(&dir)?;
    let io = io_error;
    std::fs::create_dir_all(dir.join("src")).map_err(io(&dir))?;
    std::fs::create_dir_all(dir.join(".cargo")).map_err(io(&dir))?;
    let absolute = std::fs::canonicalize(&dir).map_err(io(&dir))?;
    let crate_name = name.replace('-', "_");
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &crate_name)
            .replace("{{type}}", &type_name(name))
            .replace(
                "{{sdk}}",
                &format!(
                    "canopy-sdk = {{ path = {} }}",
                    toml_string(&sdk_path(&absolute, &sdk))
                ),
            )
    };
    for (path, template) in [
        ("Cargo.toml", CARGO_TOML),
        (".cargo/config.toml", CARGO_CONFIG),
        (".gitignore", GITIGNORE),
        ("src/lib.rs", LIB_RS),
        ("README.md", README),
        (&format!("{name}.toml") as &str, PLUGIN_TOML),
    ] {
        let path = dir.join(path);
        std::fs::write(&path, fill(template)).map_err(io(&path))?;
    }
    Ok(Created {
        dir,
        build: "cargo build --release",
        artifact: Path::new("target/wasm32-wasip2/release").join(format!("{crate_name}.wasm")),
        plugin_file: format!("{name}.wasm"),
    })
}

/// A module, its `build.sh`, and the SDK and WIT this binary carries.
fn new_python_plugin(name: &str, dir: PathBuf) -> Result<Created> {
    ensure_empty(&dir)?;
    let module = python_module(name);
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{module}}", &module)
            .replace("{{componentize_py}}", COMPONENTIZE_PY)
    };
    let mut files: Vec<(PathBuf, String)> = vec![
        (PathBuf::from(format!("{module}.py")), fill(PY_MODULE)),
        (PathBuf::from("build.sh"), fill(PY_BUILD)),
        (PathBuf::from(".gitignore"), fill(PY_GITIGNORE)),
        (PathBuf::from("README.md"), fill(PY_README)),
        (PathBuf::from(format!("{name}.toml")), fill(PY_PLUGIN_TOML)),
    ];
    let sdk = Path::new("vendor/canopy_sdk");
    files.extend(
        PY_SDK
            .iter()
            .map(|(file, text)| (sdk.join(file), (*text).to_owned())),
    );
    let wit = Path::new("wit/plugin@0.3.0");
    files.extend(
        CONTRACT
            .iter()
            .map(|(file, text)| (wit.join(file), (*text).to_owned())),
    );
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_error(parent))?;
        }
        std::fs::write(&path, text).map_err(io_error(&path))?;
    }
    make_executable(&dir.join("build.sh"))?;
    Ok(Created {
        dir,
        build: "./build.sh",
        artifact: PathBuf::from(format!("{name}.wasm")),
        plugin_file: format!("{name}.wasm"),
    })
}

/// A module, its `build.sh`, the toolchain's manifest and lock file, and the SDK and WIT this
/// binary carries.
fn new_ts_plugin(name: &str, dir: PathBuf) -> Result<Created> {
    ensure_empty(&dir)?;
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{module}}", name)
    };
    let mut files: Vec<(PathBuf, String)> = vec![
        (PathBuf::from(format!("{name}.ts")), fill(TS_MODULE)),
        (PathBuf::from("build.sh"), fill(TS_BUILD)),
        (PathBuf::from(".gitignore"), fill(TS_GITIGNORE)),
        (PathBuf::from("README.md"), fill(TS_README)),
        (PathBuf::from(format!("{name}.toml")), fill(TS_PLUGIN_TOML)),
        (PathBuf::from("tsconfig.json"), TS_TSCONFIG.to_owned()),
        (PathBuf::from("package.json"), ts_package(name)),
        (PathBuf::from("package-lock.json"), TS_LOCK.to_owned()),
    ];
    let sdk = Path::new("vendor/canopy-sdk");
    files.extend(
        TS_SDK
            .iter()
            .map(|(file, text)| (sdk.join(file), (*text).to_owned())),
    );
    let wit = Path::new("wit/plugin@0.3.0");
    files.extend(
        CONTRACT
            .iter()
            .map(|(file, text)| (wit.join(file), (*text).to_owned())),
    );
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_error(parent))?;
        }
        std::fs::write(&path, text).map_err(io_error(&path))?;
    }
    make_executable(&dir.join("build.sh"))?;
    Ok(Created {
        dir,
        build: "./build.sh",
        artifact: PathBuf::from(format!("{name}.wasm")),
        plugin_file: format!("{name}.wasm"),
    })
}

/// The plugin's `package.json`: its name, and the SDK's pinned toolchain as its
/// `devDependencies` (the lock file beside it is the SDK's).
fn ts_package(name: &str) -> String {
    let sdk: serde_json::Value = serde_json::from_str(TS_PACKAGE).unwrap_or_default();
    let package = serde_json::json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "description": "A Canopy plugin in TypeScript",
        "type": "module",
        "devDependencies": sdk["devDependencies"],
        "engines": sdk["engines"],
    });
    let mut text = serde_json::to_string_pretty(&package).unwrap_or_default();
    text.push('\n');
    text
}

/// The module componentize-py imports: `vip-rules` → `vip_rules_plugin`. The suffix keeps it
/// from shadowing a standard module the SDK imports (a plugin named `json` or `typing` would).
fn python_module(name: &str) -> String {
    let module = name.replace('-', "_");
    if module.ends_with("plugin") {
        module
    } else {
        format!("{module}_plugin")
    }
}

/// Refuses a folder that holds anything, or a file in its place.
fn ensure_empty(dir: &Path) -> Result<()> {
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied || dir.is_file() {
        return Err(Error::Exists(dir.to_path_buf()));
    }
    Ok(())
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, source }
}

/// `build.sh` runs as `./build.sh`.
#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(io_error(path))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<()> {
    Ok(())
}

/// A package name cargo accepts, that is also a valid crate name, file stem and identifier
/// part once `-` becomes `_`.
fn check_name(name: &str) -> Result<()> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !RESERVED.contains(&name.replace('-', "_").as_str());
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidName(name.to_owned()))
    }
}

/// Crate names that cannot be used: keywords, the standard crates, and the SDK itself.
const RESERVED: &[&str] = &[
    "abstract",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "union",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
    "alloc",
    "core",
    "proc_macro",
    "std",
    "test",
    "canopy_sdk",
];

/// The plugin's type: `my-shop` → `MyShopPlugin` (never a name of the SDK's prelude).
fn type_name(name: &str) -> String {
    let mut out: String = name
        .split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect();
    if !out.ends_with("Plugin") || out == "Plugin" {
        out.push_str("Plugin");
    }
    out
}

/// The `guest-sdk` folder of the checkout this binary was built from, if it is still there.
fn built_from() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .join("guest-sdk");
    sdk.join("Cargo.toml").is_file().then_some(sdk)
}

/// How the crate at `dir` refers to `sdk`: relative when both are in the same checkout (the
/// crate moves with it), absolute otherwise.
fn sdk_path(dir: &Path, sdk: &Path) -> String {
    let same_checkout = sdk.parent().is_some_and(|root| dir.starts_with(root));
    if same_checkout {
        relative(dir, sdk).display().to_string()
    } else {
        sdk.display().to_string()
    }
}

/// `to` relative to `from`; both absolute and canonical.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to[common..] {
        out.push(part.as_os_str());
    }
    out
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("canopy-scaffold-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn names_are_checked_before_anything_is_written() {
        for bad in [
            "",
            "My",
            "1st",
            "-a",
            "a b",
            "a/b",
            "café",
            "fn",
            "std",
            "canopy-sdk",
            "type",
        ] {
            assert!(
                matches!(check_name(bad), Err(Error::InvalidName(_))),
                "{bad:?} accepted"
            );
        }
        for good in ["shop", "my-plugin", "vip_rules2"] {
            check_name(good).unwrap();
        }
        assert!(check_name(&"a".repeat(65)).is_err());
        assert_eq!(type_name("my-shop"), "MyShopPlugin");
        assert_eq!(type_name("vip_rules2"), "VipRules2Plugin");
        assert_eq!(type_name("my-plugin"), "MyPlugin");
        assert_eq!(type_name("plugin"), "PluginPlugin");
    }

    #[test]
    fn a_crate_is_written_with_its_settings_and_never_over_another() {
        let root = temp_dir();
        let dir = root.join("vip");
        let created = new_plugin("vip-rules", Language::Rust, Some(&dir), None).unwrap();
        assert_eq!(
            created.artifact,
            Path::new("target/wasm32-wasip2/release/vip_rules.wasm")
        );
        assert_eq!(created.plugin_file, "vip-rules.wasm");
        for file in [
            "Cargo.toml",
            ".cargo/config.toml",
            ".gitignore",
            "src/lib.rs",
            "README.md",
            "vip-rules.toml",
        ] {
            assert!(dir.join(file).is_file(), "{file}");
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"vip-rules\""));
        assert!(manifest.contains("\n[workspace]\n"));
        // Outside the checkout: the SDK by absolute path.
        let sdk = built_from().unwrap().canonicalize().unwrap();
        assert!(
            manifest.contains(&format!("canopy-sdk = {{ path = \"{}\" }}", sdk.display())),
            "{manifest}"
        );
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("struct VipRulesPlugin;"));
        assert!(lib.contains("canopy_sdk::export_plugin!(VipRulesPlugin);"));
        assert!(!lib.contains("{{"), "{lib}");
        let settings: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.join("vip-rules.toml")).unwrap()).unwrap();
        assert_eq!(
            settings["options"]["collection"].as_str(),
            Some("customers")
        );

        let again = new_plugin("vip-rules", Language::Rust, Some(&dir), None).unwrap_err();
        assert!(matches!(again, Error::Exists(_)), "{again}");
        assert_eq!(
            std::fs::read_to_string(dir.join("Cargo.toml")).unwrap(),
            manifest
        );
        let not_sdk = new_plugin(
            "other",
            Language::Rust,
            Some(&root.join("other")),
            Some(&root),
        )
        .unwrap_err();
        assert!(matches!(not_sdk, Error::NotSdk(_)), "{not_sdk}");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_python_plugin_carries_its_sdk_and_contract() {
        let root = temp_dir();
        let dir = root.join("vip");
        let created = new_plugin("vip-rules", Language::Python, Some(&dir), None).unwrap();
        assert_eq!(created.build, "./build.sh");
        assert_eq!(created.artifact, Path::new("vip-rules.wasm"));
        for file in [
            "vip_rules_plugin.py",
            "build.sh",
            ".gitignore",
            "README.md",
            "vip-rules.toml",
            "vendor/canopy_sdk/__init__.py",
            "vendor/canopy_sdk/py.typed",
            "wit/plugin@0.3.0/plugin.wit",
        ] {
            assert!(dir.join(file).is_file(), "{file}");
        }
        let build = std::fs::read_to_string(dir.join("build.sh")).unwrap();
        assert!(build.contains("want=\"0.25.1\""), "{build}");
        assert!(build.contains(" vip_rules_plugin -o \"$out\""), "{build}");
        assert!(
            build.contains("out=\"${1:-$here/vip-rules.wasm}\""),
            "{build}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.join("build.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111);
        }
        let module = std::fs::read_to_string(dir.join("vip_rules_plugin.py")).unwrap();
        assert!(module.contains("Customizer, Workflow = export_plugin(customize)"));
        assert!(module.contains("Hello from vip-rules, "));
        for text in [&module, &build] {
            assert!(!text.contains("{{"), "{text}");
        }
        let settings: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.join("vip-rules.toml")).unwrap()).unwrap();
        assert_eq!(settings["options"]["field"].as_str(), Some("id"));
        // The copied SDK is the checkout's, byte for byte.
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/src/canopy_sdk");
        assert_eq!(
            std::fs::read(dir.join("vendor/canopy_sdk/customize.py")).unwrap(),
            std::fs::read(sdk.join("customize.py")).unwrap()
        );

        let again = new_plugin("vip-rules", Language::Python, Some(&dir), None).unwrap_err();
        assert!(matches!(again, Error::Exists(_)), "{again}");
        let sdk_given =
            new_plugin("x", Language::Python, Some(&root.join("x")), Some(&root)).unwrap_err();
        assert!(matches!(sdk_given, Error::SdkNotForPython), "{sdk_given}");
        assert!(!root.join("x").exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// A file added to the Python SDK must be added to [`PY_SDK`], or scaffolded plugins would
    /// miss it.
    #[test]
    fn the_embedded_python_sdk_is_the_whole_package() {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/src/canopy_sdk");
        let mut on_disk: Vec<String> = std::fs::read_dir(sdk)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".py") || n == "py.typed")
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = PY_SDK.iter().map(|(n, _)| *n).collect();
        assert_eq!(on_disk, embedded);
        assert_eq!(python_module("shop"), "shop_plugin");
        assert_eq!(python_module("my-plugin"), "my_plugin");
    }

    #[test]
    fn a_ts_plugin_carries_its_sdk_contract_and_pinned_toolchain() {
        let root = temp_dir();
        let dir = root.join("vip");
        let created = new_plugin("vip-rules", Language::Ts, Some(&dir), None).unwrap();
        assert_eq!(created.build, "./build.sh");
        assert_eq!(created.artifact, Path::new("vip-rules.wasm"));
        for file in [
            "vip-rules.ts",
            "build.sh",
            ".gitignore",
            "README.md",
            "vip-rules.toml",
            "tsconfig.json",
            "package.json",
            "package-lock.json",
            "vendor/canopy-sdk/build.mjs",
            "vendor/canopy-sdk/src/index.ts",
            "wit/plugin@0.3.0/plugin.wit",
        ] {
            assert!(dir.join(file).is_file(), "{file}");
        }
        let build = std::fs::read_to_string(dir.join("build.sh")).unwrap();
        assert!(
            build.contains("build.mjs\" \"$here/vip-rules.ts\" \"$out\""),
            "{build}"
        );
        let module = std::fs::read_to_string(dir.join("vip-rules.ts")).unwrap();
        assert!(
            module.contains("export const { customizer, workflow } = exportPlugin(customize);")
        );
        assert!(module.contains("Hello from vip-rules, "));
        for text in [&module, &build] {
            assert!(!text.contains("{{"), "{text}");
        }
        // The toolchain is the SDK's, pinned: the same versions and the same lock file.
        let package: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap())
                .unwrap();
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/ts");
        let sdk_package: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sdk.join("package.json")).unwrap())
                .unwrap();
        assert_eq!(package["name"], "vip-rules");
        assert_eq!(package["devDependencies"], sdk_package["devDependencies"]);
        assert_eq!(
            std::fs::read(dir.join("package-lock.json")).unwrap(),
            std::fs::read(sdk.join("package-lock.json")).unwrap()
        );
        assert_eq!(
            std::fs::read(dir.join("vendor/canopy-sdk/src/customize.ts")).unwrap(),
            std::fs::read(sdk.join("src/customize.ts")).unwrap()
        );
        let sdk_given =
            new_plugin("x", Language::Ts, Some(&root.join("x")), Some(&root)).unwrap_err();
        assert!(matches!(sdk_given, Error::SdkNotForTs), "{sdk_given}");
        std::fs::remove_dir_all(root).unwrap();
    }

    /// A file added to the TypeScript SDK's sources must be added to [`TS_SDK`].
    #[test]
    fn the_embedded_ts_sdk_is_the_whole_of_its_sources() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/ts/src");
        let mut on_disk: Vec<String> = std::fs::read_dir(src)
            .unwrap()
            .map(|e| format!("src/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.push("build.mjs".to_owned());
        on_disk.sort();
        let embedded: Vec<&str> = TS_SDK.iter().map(|(n, _)| *n).collect();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn inside_the_checkout_the_sdk_is_a_relative_path() {
        let sdk = Path::new("/repo/guest-sdk");
        assert_eq!(
            sdk_path(Path::new("/repo/plugins/vip"), sdk),
            "../../guest-sdk"
        );
        assert_eq!(
            sdk_path(Path::new("/elsewhere/vip"), sdk),
            "/repo/guest-sdk"
        );
        assert_eq!(toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
