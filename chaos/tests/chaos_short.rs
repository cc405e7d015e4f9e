//! The short set of the chaos suite in the test command: a few seeds of `rozone-chaos` on
//! real processes (3 SCM, 3 OM, 4 datanodes), one after another so the 2-core machine is
//! not oversubscribed. Fails on a linearizability violation, a failed end-state check, or
//! a run that could not be carried out; prints every seed's summary (faults, op counts,
//! verdict). The longer set: `scripts/chaos.sh 100 60s`.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-chaos");

/// (seed, duration, fault families): every family is in the set.
const SEEDS: &[(u64, &str, &str)] = &[
    (1, "30s", "all"),
    (2, "30s", "process,network"),
    (3, "20s", "network,membership"),
];

#[test]
fn short_seeds_are_linearizable_and_heal() {
    let bins = std::path::Path::new(BIN).parent().expect("bin dir");
    for b in ["rozone-scm", "rozone-om", "rozone-datanode"] {
        assert!(
            bins.join(b).is_file(),
            "{b} not built next to rozone-chaos: run `cargo build --bins` (the workspace test run does)"
        );
    }
    let out_root = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    for (seed, duration, faults) in SEEDS {
        let out = out_root.path().join(format!("seed-{seed}"));
        let o = Command::new(BIN)
            .args([
                "--seed",
                &seed.to_string(),
                "--duration",
                duration,
                "--faults",
                faults,
            ])
            .arg("--out")
            .arg(&out)
            .env("RUST_LOG", "info")
            .output()
            .expect("run rozone-chaos");
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        eprintln!("=== rozone-chaos --seed {seed} --duration {duration} --faults {faults}\n{stdout}{stderr}");
        if !o.status.success() {
            // Keep what the run wrote where a developer can read it after the test.
            let keep = std::env::temp_dir().join(format!("rozone-chaos-failed-seed-{seed}"));
            let _ = std::fs::remove_dir_all(&keep);
            let _ = std::fs::rename(&out, &keep);
            failures.push(format!(
                "seed {seed}: {} (history and logs in {})",
                o.status,
                keep.display()
            ));
        }
        assert!(
            stdout.contains("checked ") && stdout.contains("verdict: "),
            "seed {seed} printed no verdict:\n{stdout}{stderr}"
        );
    }
    assert!(
        failures.is_empty(),
        "chaos seeds failed:\n{}",
        failures.join("\n")
    );
}
