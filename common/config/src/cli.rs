//! The command line: flags every daemon shares, and [`Overrides`], the
//! top config layer that flags write into.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use config::builder::DefaultState;
use config::ConfigBuilder;

use crate::ConfigError;

/// Flags every daemon binary accepts; a daemon's own parser flattens this in
/// (`#[command(flatten)]`) and adds its listen addresses.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// TOML config file. Environment variables ROZONE_<SECTION>__<KEY>
    /// override it, and flags override both.
    #[arg(long, short = 'c', value_name = "FILE", env = "ROZONE_CONFIG")]
    pub config: Option<PathBuf>,

    /// Print a sample config (every key, its default and what it does) and exit.
    #[arg(long, conflicts_with = "config_check")]
    pub print_sample_config: bool,

    /// Load and validate the config, print "config OK" or the error, and exit.
    #[arg(long)]
    pub config_check: bool,

    /// Sets node.id: this member's Raft node id.
    #[arg(long, value_name = "ID")]
    pub node_id: Option<u64>,

    /// Sets node.data_dir: where this node keeps its state.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Sets http.addr: the /metrics, /health and /ready listener.
    #[arg(long, value_name = "ADDR")]
    pub http_addr: Option<SocketAddr>,

    /// Sets security.insecure: plaintext gRPC trusting every caller (test
    /// clusters only; logged loudly at start).
    #[arg(long)]
    pub insecure: bool,

    /// Sets security.join_token: redeem this one-time token for this process's
    /// certificate when its files do not exist yet (also ROZONE_SECURITY__JOIN_TOKEN,
    /// which keeps it out of the process list).
    #[arg(long, value_name = "TOKEN")]
    pub join_token: Option<String>,

    /// Sets security.enroll_addrs (repeat for each SCM): host:port of an SCM's
    /// enrollment listener, for --join-token.
    #[arg(long = "enroll-addr", value_name = "HOST:PORT")]
    pub enroll_addrs: Vec<String>,
}

impl CommonArgs {
    /// The config keys these flags set.
    pub fn overrides(&self) -> Overrides {
        let mut flags = Overrides::default();
        flags
            .flag("node.id", self.node_id)
            .flag_path("node.data_dir", self.data_dir.as_deref())
            .flag("http.addr", self.http_addr)
            .flag("security.insecure", self.insecure.then_some(true))
            .flag("security.join_token", self.join_token.clone())
            .flag_list("security.enroll_addrs", &self.enroll_addrs);
        flags
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    One(String),
    List(Vec<String>),
}

/// Config keys set from the command line: the top layer. Keys are dotted
/// (`"scm.client_addr"`); a key that does not exist fails the load, so a
/// flag wired to a misspelt key cannot go unnoticed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    values: Vec<(String, Value)>,
    errors: Vec<String>,
}

impl Overrides {
    /// Sets `key` to `value` when the flag was given (`Some`).
    pub fn flag(&mut self, key: &str, value: Option<impl ToString>) -> &mut Self {
        if let Some(value) = value {
            self.values
                .push((key.to_owned(), Value::One(value.to_string())));
        }
        self
    }

    /// Sets `key` to a path when the flag was given. TOML and environment
    /// values are Unicode, so a path that is not fails the load.
    pub fn flag_path(&mut self, key: &str, value: Option<&Path>) -> &mut Self {
        if let Some(path) = value {
            match path.to_str() {
                Some(path) => self.flag(key, Some(path)),
                None => {
                    self.errors.push(format!(
                        "{key}: path {} is not valid Unicode",
                        path.display()
                    ));
                    self
                }
            }
        } else {
            self
        }
    }

    /// Sets list `key` when the flag was given at least once.
    pub fn flag_list<T: ToString>(&mut self, key: &str, values: &[T]) -> &mut Self {
        if !values.is_empty() {
            let list = values.iter().map(ToString::to_string).collect();
            self.values.push((key.to_owned(), Value::List(list)));
        }
        self
    }

    /// Adds `other`'s keys; they win over this one's.
    pub fn extend(&mut self, other: Overrides) -> &mut Self {
        self.values.extend(other.values);
        self.errors.extend(other.errors);
        self
    }

    /// Whether a flag set `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.values.iter().any(|(k, _)| k == key)
    }

    pub(crate) fn apply(
        &self,
        mut builder: ConfigBuilder<DefaultState>,
    ) -> Result<ConfigBuilder<DefaultState>, ConfigError> {
        if let Some(error) = self.errors.first() {
            return Err(ConfigError::Load(error.clone()));
        }
        let bad_key = |key: &str, e: config::ConfigError| {
            ConfigError::Load(format!("flag for config key `{key}`: {e}"))
        };
        for (key, value) in &self.values {
            builder = match value {
                Value::One(v) => builder.set_override(key, v.as_str()),
                Value::List(v) => builder.set_override(key, v.clone()),
            }
            .map_err(|e| bad_key(key, e))?;
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn common_flags_become_overrides() {
        let cli = Cli::try_parse_from([
            "d",
            "--node-id",
            "3",
            "--data-dir",
            "/d",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .unwrap();
        let flags = cli.common.overrides();
        assert!(flags.contains("node.id"));
        assert!(flags.contains("node.data_dir"));
        assert!(flags.contains("http.addr"));
        assert!(!Cli::try_parse_from(["d"])
            .unwrap()
            .common
            .overrides()
            .contains("node.id"));
    }

    #[test]
    fn sample_and_check_are_exclusive_and_addresses_are_checked_early() {
        assert!(Cli::try_parse_from(["d", "--print-sample-config", "--config-check"]).is_err());
        assert!(Cli::try_parse_from(["d", "--http-addr", "nowhere"]).is_err());
    }
}
