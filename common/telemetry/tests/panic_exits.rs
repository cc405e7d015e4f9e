//! A panic in any tokio task ends the whole process with code 101, after
//! logging it: a daemon must not run on half-dead.

use rozone_telemetry::testkit::{command, Daemon, TIMEOUT};
use rozone_telemetry::LogFormat;

/// Set in the child copy of this test binary, which does the panicking.
const CHILD_ENV: &str = "ROZONE_TELEMETRY_TEST_PANIC_CHILD";
const NAME: &str = "panic_in_a_spawned_task_exits_the_process_with_101";

#[test]
fn panic_in_a_spawned_task_exits_the_process_with_101() {
    if std::env::var_os(CHILD_ENV).is_some() {
        panic_in_a_task();
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = command(exe);
    child
        .args(["--exact", NAME, "--nocapture"])
        .env(CHILD_ENV, "1");
    let mut daemon = Daemon::spawn(child).expect("start child");
    let status = daemon.wait_exit(TIMEOUT).expect("child exits");
    let stderr = daemon.stderr();
    assert_eq!(status.code(), Some(101), "stderr:\n{stderr}");
    assert!(
        stderr.contains("panic-test panicked: boom; exiting"),
        "stderr:\n{stderr}"
    );
    assert!(stderr.contains("ERROR"), "logged as an error:\n{stderr}");
}

fn panic_in_a_task() -> ! {
    rozone_telemetry::init("panic-test", LogFormat::Text).expect("init telemetry");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        tokio::spawn(async { panic!("boom") });
        // Without the hook this waits forever: tokio hands the panic to the
        // task's JoinHandle, which nobody awaits.
        std::future::pending::<()>().await;
    });
    unreachable!("the panic hook exits the process")
}
