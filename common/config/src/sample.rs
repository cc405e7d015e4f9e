//! `--print-sample-config`: the default config as TOML, every key under a
//! comment saying what it is.

use std::fmt::Write as _;

use serde::Serialize;

use crate::{ConfigError, Docs, Documented};

/// The default config of `C` as TOML, each key and section preceded by its
/// doc as `#` comments, keys in declaration order. Parses back to
/// `C::default()` (checked per daemon by
/// [`testing::assert_config_declaration_sound`](crate::testing::assert_config_declaration_sound)).
pub fn sample_config<C: Serialize + Default + Documented>() -> Result<String, ConfigError> {
    let table = default_table::<C>()?;
    let mut out = String::from(
        "# Every value below is the default. Environment variables\n\
         # ROZONE_<SECTION>__<KEY> override this file; flags override both.\n",
    );
    render(&mut out, &table, &C::docs(), "");
    Ok(out)
}

/// Checks that every key `C` serializes has a doc and every doc has a key,
/// so the sample config documents exactly what exists.
pub fn check_documented<C: Serialize + Default + Documented>() -> Result<(), String> {
    fn keys(prefix: &str, table: &toml::Table, out: &mut Vec<String>) {
        for (key, value) in table {
            let path = join(prefix, key);
            if let toml::Value::Table(sub) = value {
                keys(&path, sub, out);
            }
            out.push(path);
        }
    }
    let table = default_table::<C>().map_err(|e| e.to_string())?;
    let docs = C::docs();
    let mut serialized = Vec::new();
    keys("", &table, &mut serialized);
    let undocumented: Vec<_> = serialized
        .iter()
        .filter(|key| docs.get(key).is_none_or(|doc| doc.trim().is_empty()))
        .collect();
    let stale: Vec<_> = docs
        .iter()
        .map(|(key, _)| key)
        .filter(|key| !serialized.iter().any(|k| k == key))
        .collect();
    if undocumented.is_empty() && stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "config keys without docs: {undocumented:?}; docs without a key \
             (an Option that is None, or a skipped field?): {stale:?}"
        ))
    }
}

fn default_table<C: Serialize + Default>() -> Result<toml::Table, ConfigError> {
    toml::Table::try_from(C::default())
        .map_err(|e| ConfigError::Load(format!("serialize default config: {e}")))
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn comment(out: &mut String, doc: &str) {
    for line in doc.lines() {
        // Blank doc lines become a bare `#`, not `# ` with trailing space.
        let _ = writeln!(out, "{}", format!("# {line}").trim_end());
    }
}

/// TOML wants a table's own keys before its sub-tables, so two passes.
/// Lists (including lists of tables such as `peers`) are written inline.
fn render(out: &mut String, table: &toml::Table, docs: &Docs, section: &str) {
    for (name, doc) in docs.children(section) {
        match table.get(name) {
            Some(toml::Value::Table(_)) | None => {}
            Some(value) => {
                comment(out, doc);
                let _ = writeln!(out, "{name} = {value}");
            }
        }
    }
    for (name, doc) in docs.children(section) {
        if let Some(toml::Value::Table(sub)) = table.get(name) {
            let path = join(section, name);
            out.push('\n');
            comment(out, doc);
            let _ = writeln!(out, "[{path}]");
            render(out, sub, docs, &path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ByteSize, NodeSection, Peer, RaftSection};

    crate::config_struct! {
        /// A config with one of everything.
        pub struct Everything {
            /// Ring members.
            pub peers: Vec<Peer> = vec![Peer {
                id: 1,
                peer_addr: "a:1".into(),
                client_addr: "a:2".into(),
            }],
            /// Node.
            /// Two lines.
            pub node: NodeSection = NodeSection::default(),
            /// Raft.
            pub raft: RaftSection = RaftSection::default(),
            /// A size.
            pub size: ByteSize = ByteSize::mib(64),
        }
    }

    crate::config_struct! {
        /// Forgot a doc? Impossible: the macro demands one. But a section
        /// type without docs (a plain struct) would go unnoticed here.
        pub struct Undocumented {
            /// A section whose keys have no docs.
            pub inner: Plain = Plain { x: 1 },
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    pub struct Plain {
        x: u64,
    }
    impl Documented for Plain {}

    #[test]
    fn sample_puts_a_comment_above_every_key_and_section() {
        let sample = sample_config::<Everything>().unwrap();
        let expected_start = "\
# Ring members.
peers = [{ client_addr = \"a:2\", id = 1, peer_addr = \"a:1\" }]
# A size.
size = \"64MiB\"

# Node.
# Two lines.
[node]
";
        assert!(sample.contains(expected_start), "{sample}");
        assert!(sample.contains("\n[raft]\n"), "{sample}");
        assert!(
            sample.contains("election_timeout_min = \"1s\"\n"),
            "{sample}"
        );
        let mut previous = "";
        for line in sample.lines() {
            if !line.is_empty() && !line.starts_with('#') {
                assert!(
                    previous.starts_with('#'),
                    "no comment above {line:?}:\n{sample}"
                );
            }
            previous = line;
        }
        let parsed: Everything = toml::from_str(&sample).unwrap();
        assert_eq!(parsed, Everything::default());
    }

    #[test]
    fn every_key_must_be_documented() {
        assert_eq!(check_documented::<Everything>(), Ok(()));
        let err = check_documented::<Undocumented>().unwrap_err();
        assert!(err.contains("[\"inner.x\"]"), "{err}");
    }
}
