//! `canopy plugin new NAME`: writes a ready-to-build plugin crate (templates in `scaffold/`):
//! its own `[workspace]`, a `.cargo/config.toml` that targets wasm32-wasip2, an example computed
//! field and action, the `NAME.toml` settings to copy beside the built plugin, and a README with
//! the write → build → copy → reload loop.

use std::path::{Component, Path, PathBuf};

const CARGO_TOML: &str = include_str!("scaffold/Cargo.toml.tmpl");
const CARGO_CONFIG: &str = include_str!("scaffold/config.toml.tmpl");
const GITIGNORE: &str = include_str!("scaffold/gitignore.tmpl");
const LIB_RS: &str = include_str!("scaffold/lib.rs.tmpl");
const PLUGIN_TOML: &str = include_str!("scaffold/plugin.toml.tmpl");
const README: &str = include_str!("scaffold/README.md.tmpl");

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
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

/// A crate written by [`new_plugin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The crate's folder.
    pub dir: PathBuf,
    /// Where `cargo build --release` puts the component, relative to `dir`.
    pub artifact: PathBuf,
    /// The name to give the component in the plugin directory (`NAME.wasm`).
    pub plugin_file: String,
}

/// Writes the crate of plugin `name` into `dir` (default: `./name`), which must not exist or be
/// empty. `sdk` is the `guest-sdk` folder to depend on by path; by default, the one of the
/// checkout this binary was built from, when it is still there.
pub fn new_plugin(name: &str, dir: Option<&Path>, sdk: Option<&Path>) -> Result<Created> {
    check_name(name)?;
    let dir = dir.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    let sdk = match sdk {
        Some(path) => path.to_path_buf(),
        None => built_from().ok_or(Error::NoSdk)?,
    };
    let sdk = std::fs::canonicalize(&sdk).map_err(|_| Error::NotSdk(sdk.clone()))?;
    let manifest = std::fs::read_to_string(sdk.join("Cargo.toml")).unwrap_or_default();
    if !manifest.contains("name = \"canopy-sdk\"") {
        return Err(Error::NotSdk(sdk));
    }
    let occupied = std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied || dir.is_file() {
        return Err(Error::Exists(dir));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
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
        artifact: Path::new("target/wasm32-wasip2/release").join(format!("{crate_name}.wasm")),
        plugin_file: format!("{name}.wasm"),
    })
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
        let created = new_plugin("vip-rules", Some(&dir), None).unwrap();
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

        let again = new_plugin("vip-rules", Some(&dir), None).unwrap_err();
        assert!(matches!(again, Error::Exists(_)), "{again}");
        assert_eq!(
            std::fs::read_to_string(dir.join("Cargo.toml")).unwrap(),
            manifest
        );
        let not_sdk = new_plugin("other", Some(&root.join("other")), Some(&root)).unwrap_err();
        assert!(matches!(not_sdk, Error::NotSdk(_)), "{not_sdk}");
        std::fs::remove_dir_all(root).unwrap();
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
