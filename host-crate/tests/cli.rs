//! The `ferrocuda` command line on bad input: a clear message and a non-zero exit, never a
//! panic or a backtrace. These run with or without a GPU; each case states what it expects in
//! both situations.
use std::process::{Command, Output};

/// The binary under test: `FERROCUDA_BIN` when set (the GPU bundle runs tests away from the
/// build tree), else the one cargo built.
fn ferrocuda(args: &[&str]) -> Output {
    let bin =
        std::env::var("FERROCUDA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").into());
    Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_clean_failure(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected failure, got success; stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "panic: {err}"
    );
    assert!(
        needles.iter().all(|n| err.contains(n)),
        "stderr lacks {needles:?}: {err}"
    );
}

#[test]
fn smoke_block_0_is_rejected_before_touching_the_gpu() {
    assert_clean_failure(
        &ferrocuda(&["smoke", "--block", "0"]),
        &["smoke_saxpy", "block"],
    );
}

#[test]
fn smoke_block_2048_is_rejected_naming_kernel_and_configuration() {
    assert_clean_failure(
        &ferrocuda(&["smoke", "--block", "2048"]),
        &["smoke_saxpy", "block 2048", "at most 1024"],
    );
}

#[test]
fn smoke_shared_memory_over_every_gpu_limit_is_rejected() {
    assert_clean_failure(
        &ferrocuda(&["smoke", "--dynamic-shared", "1000000"]),
        &["smoke_saxpy", "shared memory"],
    );
}

#[test]
fn unknown_subcommand_exits_2_with_usage() {
    let o = ferrocuda(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage"));
}

#[test]
fn non_numeric_n_is_rejected() {
    let o = ferrocuda(&["smoke", "--n", "many"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--n"));
}

/// Without a GPU: one line saying there is no CUDA device. With one: device 7 does not exist
/// (the GPU machines have fewer than 8 devices).
#[test]
fn device_7_or_no_device_is_a_clear_error() {
    let o = ferrocuda(&["--device", "7", "info"]);
    let err = stderr(&o);
    assert_clean_failure(&o, &["device 7"]);
    assert!(
        err.contains("no CUDA device") || err.contains("does not exist"),
        "{err}"
    );
}

/// `--n 0` is valid: no launch, exit 0 on a GPU; without one, the only error is the missing
/// device.
#[test]
fn smoke_n_0_is_valid() {
    let o = ferrocuda(&["smoke", "--n", "0"]);
    if !o.status.success() {
        assert_clean_failure(&o, &["no CUDA device"]);
    }
}
