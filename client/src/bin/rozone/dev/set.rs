//! `rozone dev up --set SECTION.KEY=VALUE`: a config key of one daemon kind's main section
//! (`scm`, `om`, `datanode`, `s3g`), written into the `config.toml` of every daemon of that
//! kind at this start (e.g. `--set om.block_token_lifetime=30s`). Other sections are not
//! offered: the dev cluster writes them itself. A key the daemon does not know is refused
//! by the daemon's own config check when it starts. `--set om.raft.KEY=VALUE` (or scm,
//! datanode) sets a key of that kind's `[raft]` section instead, e.g. to compare Raft
//! settings in one run (`om.raft.snapshot_logs_since_last=100`).

use anyhow::{bail, Context};

use super::layout::Kind;

/// One `--set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub kind: Kind,
    /// A key of the kind's `[raft]` section rather than its main section.
    pub raft: bool,
    pub key: String,
    /// The value as a TOML value (a bare word is taken as a string).
    pub value: String,
}

/// Parses `SECTION.KEY=VALUE` (clap's value parser).
pub fn parse(s: &str) -> anyhow::Result<Setting> {
    let (name, value) = s
        .split_once('=')
        .context("want SECTION.KEY=VALUE, e.g. om.block_token_lifetime=30s")?;
    let (section, key) = name
        .trim()
        .split_once('.')
        .context("want SECTION.KEY=VALUE, e.g. om.block_token_lifetime=30s")?;
    let kind = match section {
        "scm" => Kind::Scm,
        "om" => Kind::Om,
        "datanode" => Kind::Datanode,
        "s3g" => Kind::S3g,
        other => bail!("--set covers the scm, om, datanode and s3g sections, not {other:?}"),
    };
    let (raft, key) = match key.trim().strip_prefix("raft.") {
        Some(k) if kind != Kind::S3g => (true, k),
        Some(_) => bail!("the S3 gateway has no [raft] section"),
        None => (false, key),
    };
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        bail!("{key:?} is not a config key (lower-case letters, digits and _)");
    }
    let value = value.trim();
    // A TOML value as given (number, boolean, quoted string, array), else a string.
    let value = if toml::from_str::<toml::Table>(&format!("v = {value}")).is_ok() {
        value.to_string()
    } else {
        toml::Value::String(value.to_string()).to_string()
    };
    Ok(Setting {
        kind,
        raft,
        key: key.to_string(),
        value,
    })
}

/// The main-section lines of `kind`: `optional` (lines `key = value`) except the keys a
/// setting replaces, then the settings.
pub fn lines(optional: &str, settings: &[Setting], kind: Kind) -> String {
    section_lines(optional, settings, kind, false)
}

/// The `[raft]` section of `kind`: `defaults` (lines `key = value`) with the settings.
pub fn raft_section(defaults: &str, settings: &[Setting], kind: Kind) -> String {
    format!("[raft]\n{}", section_lines(defaults, settings, kind, true))
}

fn section_lines(optional: &str, settings: &[Setting], kind: Kind, raft: bool) -> String {
    let mine: Vec<&Setting> = settings
        .iter()
        .filter(|s| s.kind == kind && s.raft == raft)
        .collect();
    let mut out: String = optional
        .lines()
        .filter(|l| {
            let k = l.split('=').next().unwrap_or("").trim();
            !mine.iter().any(|s| s.key == k)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    for s in mine {
        out.push_str(&format!("{} = {}\n", s.key, s.value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_into_toml_lines_of_their_kind() {
        let a = parse("om.block_token_lifetime=30s").unwrap();
        assert_eq!(a.kind, Kind::Om);
        assert_eq!(a.value, "\"30s\"");
        let b = parse("datanode.heartbeat_interval = \"2s\"").unwrap();
        assert_eq!(b.value, "\"2s\"");
        let c = parse("scm.safe_mode_min_datanodes=2").unwrap();
        assert_eq!(c.value, "2");
        let l = lines(
            "heartbeat_interval = \"1s\"\nother = 1\n",
            &[a, b, c],
            Kind::Datanode,
        );
        assert_eq!(l, "other = 1\nheartbeat_interval = \"2s\"\n");
        let r = parse("om.raft.snapshot_logs_since_last=100").unwrap();
        assert!(r.raft);
        assert_eq!(
            (r.key.as_str(), r.value.as_str()),
            ("snapshot_logs_since_last", "100")
        );
        let main = parse("om.block_token_lifetime=30s").unwrap();
        let both = [r.clone(), main];
        assert_eq!(
            raft_section("heartbeat_interval = \"1s\"\n", &both, Kind::Om),
            "[raft]\nheartbeat_interval = \"1s\"\nsnapshot_logs_since_last = 100\n"
        );
        assert_eq!(
            lines("", &both, Kind::Om),
            "block_token_lifetime = \"30s\"\n",
            "a raft key stays out of the main section"
        );
        assert_eq!(raft_section("", &both, Kind::Scm), "[raft]\n");
        for bad in [
            "om",
            "om.x",
            "raft.election_timeout_min=1s",
            "s3g.raft.fsync=false",
            "om.raft.=1",
            "om.=1",
            "om.A-b=1",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
