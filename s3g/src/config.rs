//! The `rozone-s3g` config: `[s3g]`, `[http]`, `[log]`, `[security]`. The gateway keeps
//! no state of its own: it needs only where the OM ring is and its own certificate.

use std::net::SocketAddr;
use std::time::Duration;

use rozone_config::{
    check_host_ports, check_listen_addrs, config_struct, listen_on, ByteSize, ConfigError,
    DaemonConfig, HttpSection, LogFormat, LogSection, Problems, SecuritySection,
};

config_struct! {
    /// The S3 listener and the cluster behind it.
    pub struct S3gSection {
        /// This gateway's id: its certificate must be issued to s3g-<id>.
        pub id: u64 = 1,
        /// The S3 (HTTP) listener, path-style requests.
        pub addr: SocketAddr = listen_on(9878),
        /// Client addresses (host:port) of the OM ring's members.
        pub om_addrs: Vec<String> = vec!["127.0.0.1:9862".into()],
        /// The volume S3 buckets live in (Ozone's convention), created on
        /// first use.
        pub volume: String = "s3v".into(),
        /// How long a looked-up secret is reused before asking the OM again:
        /// a revoked access key stops working within this time. 0s asks on
        /// every request.
        #[serde(with = "rozone_config::duration")]
        pub secret_cache_ttl: Duration = Duration::from_secs(5),
        /// Largest object a single PutObject may carry.
        pub max_object_size: ByteSize = ByteSize::gib(5),
        /// One call to the OM or a datanode, every retry included.
        #[serde(with = "rozone_config::duration")]
        pub call_deadline: Duration = Duration::from_secs(30),
    }
}

config_struct! {
    /// Configuration of one `rozone-s3g` process.
    pub struct Config {
        /// The S3 listener and the cluster behind it.
        pub s3g: S3gSection = S3gSection::default(),
        /// The /metrics, /health and /ready endpoint.
        pub http: HttpSection = HttpSection::on(19878),
        /// Log layout.
        pub log: LogSection = LogSection::default(),
        /// Mutual TLS to the OM and datanodes (certificate role s3g), or
        /// (explicitly) plaintext.
        pub security: SecuritySection = SecuritySection::default(),
    }
}

impl DaemonConfig for Config {
    fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Problems::default();
        self.security.check(&mut problems);
        check_host_ports("s3g.om_addrs", &self.s3g.om_addrs, &mut problems);
        let s = &self.s3g;
        problems.check(crate::mapping::check_bucket_name(&s.volume).is_ok(), || {
            format!("s3g.volume {:?} is not a valid volume name", s.volume)
        });
        problems.check(s.max_object_size.as_u64() > 0, || {
            "s3g.max_object_size must be above 0".to_string()
        });
        problems.check(!s.call_deadline.is_zero(), || {
            "s3g.call_deadline must be above 0".to_string()
        });
        check_listen_addrs(
            &[("s3g.addr", s.addr), ("http.addr", self.http.addr)],
            &mut problems,
        );
        problems.into_result()
    }

    fn log_format(&self) -> LogFormat {
        self.log.format
    }
}

impl Config {
    /// How the gateway reaches the cluster: the client config of the OM ring with this
    /// process's certificate (checked to be `s3g-<id>`), or plaintext when insecure.
    pub fn client_config(&self) -> anyhow::Result<rozone_client::ClientConfig> {
        let s = &self.security;
        let sec = rozone_rpc::Security::from_settings(s.insecure, &s.ca_cert, &s.cert, &s.key)?;
        sec.check_identity(rozone_rpc::Role::S3g, self.s3g.id)?;
        let mut c = rozone_client::ClientConfig {
            om_addrs: self.s3g.om_addrs.clone(),
            call_deadline: self.s3g.call_deadline,
            insecure: s.insecure,
            ..Default::default()
        };
        if !s.insecure {
            c.ca_cert = Some(s.ca_cert.clone());
            c.cert = Some(s.cert.clone());
            c.key = Some(s.key.clone());
        }
        c.attempt_timeout = c.attempt_timeout.min(c.call_deadline);
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declaration_is_documented_and_sample_round_trips() {
        rozone_config::testing::assert_config_declaration_sound::<Config>();
    }

    #[test]
    fn defaults_are_ozones_ports() {
        let c = Config::default();
        assert_eq!((c.s3g.addr.port(), c.http.addr.port()), (9878, 19878));
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut c = Config::default();
        c.s3g.volume = "S3V".into();
        c.s3g.om_addrs.clear();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("s3g.volume") && e.contains("s3g.om_addrs"),
            "{e}"
        );
    }
}
