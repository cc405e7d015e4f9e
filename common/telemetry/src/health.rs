//! What a daemon reports about itself, for the HTTP endpoint ([`crate::http`]) and for
//! systemd readiness ([`crate::notify`]) alike: readiness with a reason, and Prometheus text.

/// What a daemon reports on its HTTP endpoint.
pub trait HealthSource: Send + Sync + 'static {
    /// `Ok` when ready to serve; otherwise why not (shown to the operator).
    fn ready(&self) -> Result<(), String>;
    /// Prometheus text exposition of the daemon's metrics.
    fn metrics(&self) -> String;
}

/// Appends one Prometheus sample with its HELP and TYPE lines.
pub fn metric(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}
