//! rozone-config: the configuration machinery shared by `rozone-scm`,
//! `rozone-om` and `rozone-datanode`.
//!
//! A daemon declares its config with [`config_struct!`]: one struct per TOML
//! section, each field with its `///` doc and its default in one place. From
//! that one declaration come the serde impls (unknown keys are errors), the
//! `Default` impl, and the docs that `--print-sample-config` writes above
//! every key ([`sample_config`]).
//!
//! Values are layered, later wins: serde defaults < TOML file (`--config`) <
//! environment `ROZONE_<SECTION>__<KEY>` < command-line flags ([`load`]).
//! Then [`DaemonConfig::validate`] checks the rules between values; every
//! message names the exact key.
//!
//! This crate must stay cheap to link: no tokio, RocksDB, openraft or tonic,
//! so tools and tests can read a daemon's config without building a server.

mod bytesize;
mod cli;
mod docs;
mod error;
mod load;
mod rpc;
mod sample;
mod sections;
mod security;

pub use bytesize::ByteSize;
pub use cli::{CommonArgs, Overrides};
pub use docs::{Docs, Documented};
pub use error::{ConfigError, Problems};
pub use humantime::format_duration;
pub use load::{env_from_process, load, DaemonConfig, Sources, ENV_PREFIX};
pub use rpc::RpcSection;
pub use sample::{check_documented, sample_config};
pub use sections::{
    check_host_port, check_host_ports, check_listen_addrs, check_peers, leader_lease, listen_on,
    HttpSection, LogFormat, LogSection, NodeSection, Peer, RaftSection,
};
pub use security::SecuritySection;

/// `#[serde(with = "rozone_config::duration")]`: durations written the way
/// people say them (`"150ms"`, `"5s"`, `"1h 30m"`), not as seconds + nanos.
pub mod duration {
    pub use humantime_serde::{deserialize, serialize};
}

/// Checks every daemon's config declaration should pass; call it from a unit
/// test in each daemon crate. Panics with a readable message on failure.
pub mod testing {
    use crate::{check_documented, load, sample_config, DaemonConfig, Sources};

    /// The default config validates; every key it serializes has a doc and
    /// every doc has a key; the sample config parses back to the default.
    pub fn assert_config_declaration_sound<C: DaemonConfig>() {
        let default = C::default();
        if let Err(e) = default.validate() {
            panic!("the default config does not validate: {e}");
        }
        if let Err(e) = check_documented::<C>() {
            panic!("{e}");
        }
        let sample = match sample_config::<C>() {
            Ok(sample) => sample,
            Err(e) => panic!("cannot render the sample config: {e}"),
        };
        let parsed: C = match load(&Sources::from_toml(&sample)) {
            Ok(parsed) => parsed,
            Err(e) => panic!("the sample config does not load: {e}\n{sample}"),
        };
        assert!(
            parsed == default,
            "the sample config does not parse back to the default:\n{sample}"
        );
    }
}
