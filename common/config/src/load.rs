//! Loading: defaults < TOML file < environment < flags, then validation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{ConfigError, Documented, LogFormat, Overrides};

/// Environment variables `ROZONE_<SECTION>__<KEY>` set config keys:
/// `ROZONE_RAFT__ELECTION_TIMEOUT_MIN=2s` sets `raft.election_timeout_min`.
/// List values are comma-separated: `ROZONE_DATANODE__SCM_ADDRS=a:9860,b:9860`.
pub const ENV_PREFIX: &str = "ROZONE_";

/// Separates nesting levels in an environment variable name.
const ENV_SEPARATOR: &str = "__";

/// A daemon's whole config: a [`config_struct!`](crate::config_struct) plus
/// the rules between its values.
pub trait DaemonConfig: Documented + Default + PartialEq + Serialize + DeserializeOwned {
    /// Checks the rules between values (ranges, orderings, required peers).
    /// Every message names the exact key, e.g. `raft.election_timeout_min
    /// (300ms) must be less than raft.election_timeout_max (150ms)`.
    fn validate(&self) -> Result<(), ConfigError>;

    /// How this daemon's log lines are laid out.
    fn log_format(&self) -> LogFormat;
}

/// Where a config comes from, lowest layer first; the defaults are the
/// config type's own.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The TOML file given with `--config`.
    pub file: Option<PathBuf>,
    /// TOML text in the file's place; for tests and tools that hold a
    /// config in memory. Applied after `file` if both are set.
    pub toml: Option<String>,
    /// Environment variables: only `ROZONE_<SECTION>__<KEY>` ones are read.
    pub env: BTreeMap<String, String>,
    /// Command-line flags, the top layer.
    pub flags: Overrides,
}

impl Sources {
    /// Just a file, nothing from the environment or flags.
    pub fn file_only(path: &Path) -> Self {
        Self {
            file: Some(path.to_owned()),
            ..Self::default()
        }
    }

    /// Just TOML text, nothing from the environment or flags.
    pub fn from_toml(text: &str) -> Self {
        Self {
            toml: Some(text.to_owned()),
            ..Self::default()
        }
    }
}

/// This process's config variables: `ROZONE_*` with a `__` after the
/// section. Others such as `ROZONE_CONFIG` (the `--config` flag's variable)
/// are not config keys, so they are left out rather than rejected.
/// A config variable that is not valid Unicode is an error.
pub fn env_from_process() -> Result<BTreeMap<String, String>, ConfigError> {
    let mut vars = BTreeMap::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if !is_config_var(name) {
            continue;
        }
        let value = value.into_string().map_err(|_| {
            ConfigError::Load(format!("environment variable {name} is not valid Unicode"))
        })?;
        vars.insert(name.to_owned(), value);
    }
    Ok(vars)
}

fn is_config_var(name: &str) -> bool {
    name.strip_prefix(ENV_PREFIX)
        .is_some_and(|rest| rest.contains(ENV_SEPARATOR))
}

/// Loads a config from its layers and validates it. Unknown keys in any
/// layer are errors naming the key and where it came from.
pub fn load<C: DaemonConfig>(sources: &Sources) -> Result<C, ConfigError> {
    let config: C = parse(sources)?;
    config.validate()?;
    Ok(config)
}

fn parse<C: DaemonConfig>(sources: &Sources) -> Result<C, ConfigError> {
    use config::{Config, Environment, File, FileFormat};

    let mut builder = Config::builder();
    if let Some(path) = &sources.file {
        // Read it ourselves: `config` guesses the format from the file name
        // and says little when the file is missing.
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Load(format!("read config file {}: {e}", path.display())))?;
        let origin = format!("config file {}", path.display());
        check_toml(&text, &origin)?;
        builder = builder.add_source(File::from_str(&text, FileFormat::Toml));
    }
    if let Some(text) = &sources.toml {
        check_toml(text, "config text")?;
        builder = builder.add_source(File::from_str(text, FileFormat::Toml));
    }
    let env: BTreeMap<_, _> = sources
        .env
        .iter()
        .filter(|(name, _)| is_config_var(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    if !env.is_empty() {
        let mut environment = Environment::with_prefix(ENV_PREFIX.trim_end_matches('_'))
            .prefix_separator("_")
            .separator(ENV_SEPARATOR)
            .try_parsing(true)
            .list_separator(",")
            .source(Some(env.into_iter().collect()));
        // Only keys whose default is a list are split on commas, so a
        // string value may still contain one.
        for key in list_keys::<C>()? {
            environment = environment.with_list_parse_key(&key);
        }
        builder = builder.add_source(environment);
    }
    builder = sources.flags.apply(builder)?;
    let merged = builder
        .build()
        .map_err(|e| ConfigError::Load(e.to_string()))?;
    merged
        .try_deserialize::<C>()
        .map_err(|e| ConfigError::Load(explain(&e.to_string(), sources)))
}

/// Parses TOML up front so syntax errors carry the file name and line.
fn check_toml(text: &str, origin: &str) -> Result<(), ConfigError> {
    text.parse::<toml::Table>()
        .map(drop)
        .map_err(|e| ConfigError::Load(format!("{origin}: {}", one_line(&e.to_string()))))
}

/// `config` reports a misspelt key as "unknown field `x`, expected one of
/// ... for key `raft`", and a bad value as "... for key `raft.x`";
/// operators want the dotted key and the layer that set it.
fn explain(message: &str, sources: &Sources) -> String {
    let message = one_line(message);
    // "... for key `k`" may be followed by config's own " in <origin>",
    // which is vaguer than ours ("the environment"), so it is replaced.
    let for_key = message.rsplit_once(" for key `").and_then(|(head, rest)| {
        let (key, _) = rest.split_once('`')?;
        Some((head, key))
    });
    let unknown = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(field, _)| field);
    match (unknown, for_key) {
        (Some(field), Some((_, section))) => {
            let key = format!("{section}.{field}");
            format!("unknown config key `{key}`{}", origin(&key, sources))
        }
        (Some(field), None) => format!("unknown config key `{field}`{}", origin(field, sources)),
        (None, Some((head, key))) => format!("{head} for key `{key}`{}", origin(key, sources)),
        (None, None) => message,
    }
}

/// Which layer set `key`, as " (from ...)", or "" when only a default or
/// in-memory text could have.
fn origin(key: &str, sources: &Sources) -> String {
    let env_name = format!(
        "{ENV_PREFIX}{}",
        key.replace('.', ENV_SEPARATOR).to_ascii_uppercase()
    );
    if sources.flags.contains(key) {
        " (from a command-line flag)".to_owned()
    } else if sources.env.contains_key(&env_name) {
        format!(" (from environment variable {env_name})")
    } else if let Some(path) = &sources.file {
        format!(" (in config file {})", path.display())
    } else {
        String::new()
    }
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Dotted keys whose default value is a list (e.g. `datanode.scm_addrs`).
fn list_keys<C: DaemonConfig>() -> Result<Vec<String>, ConfigError> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut Vec<String>) {
        for (key, value) in table {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                toml::Value::Table(sub) => walk(&path, sub, out),
                toml::Value::Array(_) => out.push(path),
                _ => {}
            }
        }
    }
    let table = toml::Table::try_from(C::default())
        .map_err(|e| ConfigError::Load(format!("serialize default config: {e}")))?;
    let mut out = Vec::new();
    walk("", &table, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use super::*;
    use crate::{HttpSection, NodeSection, Problems, RaftSection};

    crate::config_struct! {
        /// A small daemon's config, shaped like the real ones.
        pub struct TestConfig {
            /// Node.
            pub node: NodeSection = NodeSection::in_dir("/var/lib/rozone/test"),
            /// Raft.
            pub raft: RaftSection = RaftSection::default(),
            /// HTTP.
            pub http: HttpSection = HttpSection::on(9999),
            /// Seeds.
            pub seeds: Vec<String> = vec!["a:1".into()],
        }
    }

    impl DaemonConfig for TestConfig {
        fn validate(&self) -> Result<(), ConfigError> {
            let mut problems = Problems::default();
            self.node.check(&mut problems);
            self.raft.check(&mut problems);
            problems.into_result()
        }
        fn log_format(&self) -> LogFormat {
            LogFormat::Text
        }
    }

    fn env(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn flags(pairs: &[(&'static str, &str)]) -> Overrides {
        let mut flags = Overrides::default();
        for (key, value) in pairs {
            flags.flag(key, Some(value));
        }
        flags
    }

    const FILE: &str = r#"
        [node]
        id = 2
        data_dir = "/from/file"
        [raft]
        election_timeout_min = "150ms"
        election_timeout_max = "300ms"
        heartbeat_interval = "50ms"
        [http]
        addr = "127.0.0.1:1000"
    "#;

    #[test]
    fn later_layers_win_file_then_env_then_flags() {
        let sources = Sources {
            toml: Some(FILE.into()),
            env: env(&[
                ("ROZONE_NODE__DATA_DIR", "/from/env"),
                ("ROZONE_HTTP__ADDR", "127.0.0.1:2000"),
                ("ROZONE_RAFT__FSYNC", "false"),
                ("ROZONE_RAFT__SNAPSHOT_LOGS_SINCE_LAST", "7"),
                ("ROZONE_CONFIG", "/ignored: not a config key"),
                ("OTHER_NODE__ID", "9"),
            ]),
            flags: flags(&[("http.addr", "127.0.0.1:3000")]),
            ..Sources::default()
        };
        let c: TestConfig = load(&sources).unwrap();
        assert_eq!(c.node.id, 2, "file over default");
        assert_eq!(c.node.data_dir, PathBuf::from("/from/env"), "env over file");
        assert_eq!(
            c.http.addr,
            "127.0.0.1:3000".parse::<SocketAddr>().unwrap(),
            "flag over env"
        );
        assert_eq!(c.raft.election_timeout_min, Duration::from_millis(150));
        assert!(!c.raft.fsync);
        assert_eq!(c.raft.snapshot_logs_since_last, 7);
        assert_eq!(c.raft.max_in_snapshot_log_to_keep, 1000, "default kept");
    }

    #[test]
    fn env_lists_split_on_commas_and_durations_read_humanly() {
        let sources = Sources {
            env: env(&[
                ("ROZONE_RAFT__ELECTION_TIMEOUT_MAX", "1m 30s"),
                ("ROZONE_NODE__DATA_DIR", "/a,b"),
            ]),
            ..Sources::default()
        };
        let c: TestConfig = load(&sources).unwrap();
        assert_eq!(c.raft.election_timeout_max, Duration::from_secs(90));
        assert_eq!(c.node.data_dir, PathBuf::from("/a,b"), "only lists split");
        assert_eq!(list_keys::<TestConfig>().unwrap(), ["seeds"]);
    }

    #[test]
    fn unknown_keys_are_named_with_their_origin() {
        let err = |sources: Sources| load::<TestConfig>(&sources).unwrap_err().to_string();
        assert_eq!(
            err(Sources::from_toml("[raft]\nelection_timeout = \"2s\"")),
            "unknown config key `raft.election_timeout`"
        );
        assert_eq!(
            err(Sources::from_toml("colour = 1")),
            "unknown config key `colour`"
        );
        assert_eq!(
            err(Sources {
                env: env(&[("ROZONE_RAFT__ELECTION_TIMEOUT", "2s")]),
                ..Sources::default()
            }),
            "unknown config key `raft.election_timeout` (from environment variable \
             ROZONE_RAFT__ELECTION_TIMEOUT)"
        );
        assert_eq!(
            err(Sources {
                flags: flags(&[("http.adr", "x")]),
                ..Sources::default()
            }),
            "unknown config key `http.adr` (from a command-line flag)"
        );
    }

    #[test]
    fn file_errors_are_one_line_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rozone.toml");
        let e = load::<TestConfig>(&Sources::file_only(&path))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("read config file {}: ", path.display())),
            "{e}"
        );

        std::fs::write(&path, "[raft\nfsync = true").unwrap();
        let e = load::<TestConfig>(&Sources::file_only(&path))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("config file {}: ", path.display())),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");

        std::fs::write(&path, "[raft]\nelection_timeout_min = \"soon\"").unwrap();
        let e = load::<TestConfig>(&Sources::file_only(&path))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "invalid value: string \"soon\", expected a duration for key \
                 `raft.election_timeout_min` (in config file {})",
                path.display()
            )
        );
    }

    #[test]
    fn bad_values_name_the_layer_that_set_them() {
        let sources = Sources {
            flags: flags(&[("node.id", "seven")]),
            ..Sources::default()
        };
        let e = load::<TestConfig>(&sources).unwrap_err().to_string();
        assert!(
            e.ends_with("for key `node.id` (from a command-line flag)"),
            "{e}"
        );
        let sources = Sources {
            env: env(&[("ROZONE_RAFT__FSYNC", "maybe")]),
            ..Sources::default()
        };
        let e = load::<TestConfig>(&sources).unwrap_err().to_string();
        assert!(
            e.ends_with("for key `raft.fsync` (from environment variable ROZONE_RAFT__FSYNC)"),
            "{e}"
        );
    }

    #[test]
    fn validation_runs_after_all_layers() {
        let sources = Sources {
            env: env(&[("ROZONE_RAFT__ELECTION_TIMEOUT_MIN", "5s")]),
            ..Sources::default()
        };
        assert_eq!(
            load::<TestConfig>(&sources).unwrap_err(),
            ConfigError::Invalid(vec![
                "raft.election_timeout_min (5s) must be less than raft.election_timeout_max (2s)"
                    .into()
            ])
        );
    }

    #[test]
    fn config_vars_need_a_section_separator() {
        assert!(is_config_var("ROZONE_RAFT__FSYNC"));
        assert!(!is_config_var("ROZONE_CONFIG"));
        assert!(!is_config_var("XROZONE_RAFT__FSYNC"));
    }
}
