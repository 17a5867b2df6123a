//! The parser of compute-sanitizer's reports, on text in the formats the tools print.
use ferrocuda::kernels::{broken, reduce};
use ferrocuda_cli::sanitize::parse_report;

/// Two kernels whose names share a prefix, and a broken one: `(cg, cg_vector4, broken)`.
fn names() -> (&'static str, &'static str, &'static str) {
    (
        reduce::reduce_cg::<f32>().unwrap().symbol(),
        reduce::reduce_cg_vector4::<f32>().unwrap().symbol(),
        broken::broken_stencil_1d_no_sync_f32().symbol(),
    )
}

fn kernels() -> Vec<String> {
    let (cg, cg_vector4, broken) = names();
    [cg, cg_vector4, broken].map(String::from).to_vec()
}

#[test]
fn a_clean_run_has_no_errors() {
    let (cg, _, _) = names();
    let text = format!(
        "========= COMPUTE-SANITIZER\nkernel {cg} PASS\n========= ERROR SUMMARY: 0 errors\n"
    );
    let r = parse_report(&text, &kernels());
    assert_eq!(r.total, 0);
    assert!(r.per_kernel.is_empty());
}

#[test]
fn memcheck_errors_are_attributed_to_the_kernel_they_name() {
    let (cg, cg_vector4, _) = names();
    let text = format!(
        "\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at {cg_vector4}+0x1f0
=========     by thread (3,0,0) in block (0,0,0)
========= Invalid __global__ read of size 4 bytes
=========     at 0x70 in {cg}
=========     by thread (1,0,0) in block (2,0,0)
========= ERROR SUMMARY: 2 errors
"
    );
    let r = parse_report(&text, &kernels());
    assert_eq!(r.total, 2);
    assert_eq!(
        r.per_kernel.get(cg_vector4),
        Some(&1),
        "the longer name wins"
    );
    assert_eq!(r.per_kernel.get(cg), Some(&1));
}

#[test]
fn racecheck_hazards_count_once_each() {
    let (_, _, broken) = names();
    let text = format!(
        "\
========= Error: Race reported between Write access at {broken}+0x1a0
=========     and Read access at {broken}+0x2c0 [128 hazards]
========= Error: Race reported between Write access at {broken}+0x1b0
=========     and Read access at {broken}+0x2c0 [64 hazards]
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"
    );
    let r = parse_report(&text, &kernels());
    assert_eq!(r.total, 2);
    assert_eq!(r.per_kernel.get(broken), Some(&2));
}
