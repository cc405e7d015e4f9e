//! Failpoints in a daemon process, for fault tests that drive the real binaries (the chaos
//! suite, `rozone-chaos --daemon-failpoints`): `ROZONE_FAILPOINTS="name=actions;..."` is
//! applied at start, and `PUT /failpoints/NAME` (body: the actions) / `DELETE
//! /failpoints/NAME` on the HTTP endpoint change them while it runs.
//!
//! Both exist only in a build compiled with the `fail/failpoints` feature (the test build):
//! a build without it refuses to start with the variable set (a fault test would otherwise
//! pass without injecting anything) and has no such route, so no one can inject faults into
//! a release binary, by mistake or on purpose.

/// The environment variable read at start.
pub const ENV: &str = "ROZONE_FAILPOINTS";

/// Longest accepted spec or actions string (they are parsed by the `fail` crate).
const MAX_SPEC: usize = 4096;

/// Whether this build evaluates failpoints at all.
pub fn compiled_in() -> bool {
    fail::has_failpoints()
}

/// Applies [`ENV`] if set; returns how many failpoints it configured.
pub fn from_env() -> Result<usize, String> {
    match std::env::var(ENV) {
        Ok(spec) => apply(&spec),
        Err(std::env::VarError::NotPresent) => Ok(0),
        Err(e) => Err(format!("{ENV}: {e}")),
    }
}

/// Applies `name=actions;name=actions` (blank items ignored).
pub fn apply(spec: &str) -> Result<usize, String> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Ok(0);
    }
    if !compiled_in() {
        return Err(format!(
            "{ENV} is set, but this build has no failpoints (build with the `failpoints` feature)"
        ));
    }
    if spec.len() > MAX_SPEC {
        return Err(format!("{ENV}: longer than {MAX_SPEC} bytes"));
    }
    let mut n = 0;
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, actions) = item
            .split_once('=')
            .ok_or_else(|| format!("{ENV}: {item:?} is not name=actions"))?;
        set(name.trim(), actions.trim()).map_err(|e| format!("{ENV}: {e}"))?;
        n += 1;
    }
    Ok(n)
}

/// Sets one failpoint (the `fail` crate's action syntax, e.g. `return`, `50%return(eio)`,
/// `pause`, `off`).
pub fn set(name: &str, actions: &str) -> Result<(), String> {
    if !compiled_in() {
        return Err("this build has no failpoints".into());
    }
    if name.is_empty() || name.len() > 128 || actions.len() > MAX_SPEC {
        return Err(format!("bad failpoint name or actions: {name:?}"));
    }
    fail::cfg(name, actions).map_err(|e| format!("{name}: {e}"))
}

/// Removes one failpoint (releasing any thread paused in it).
pub fn remove(name: &str) {
    if compiled_in() {
        fail::remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_parsed_or_refused_clearly() {
        assert_eq!(apply("  "), Ok(0));
        if compiled_in() {
            assert_eq!(
                apply("telemetry-test-a=off; ;telemetry-test-b=return"),
                Ok(2)
            );
            assert!(apply("no-equals-sign")
                .unwrap_err()
                .contains("name=actions"));
            assert!(apply("telemetry-test-c=bogus(").is_err());
            remove("telemetry-test-a");
            remove("telemetry-test-b");
        } else {
            assert!(apply("x=return").unwrap_err().contains("no failpoints"));
        }
    }
}
