//! The parser of compute-sanitizer's reports, on text in the formats the tools print.
use ferrocuda::sanitize::parse_report;

fn kernels() -> Vec<String> {
    [
        "reduce_cg_f32",
        "reduce_cg_vector4_f32",
        "broken_stencil_1d_no_sync_f32",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn a_clean_run_has_no_errors() {
    let text = "========= COMPUTE-SANITIZER\nkernel reduce_cg_f32 PASS\n========= ERROR SUMMARY: 0 errors\n";
    let r = parse_report(text, &kernels());
    assert_eq!(r.total, 0);
    assert!(r.per_kernel.is_empty());
}

#[test]
fn memcheck_errors_are_attributed_to_the_kernel_they_name() {
    let text = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at reduce_cg_vector4_f32+0x1f0
=========     by thread (3,0,0) in block (0,0,0)
========= Invalid __global__ read of size 4 bytes
=========     at 0x70 in reduce_cg_f32
=========     by thread (1,0,0) in block (2,0,0)
========= ERROR SUMMARY: 2 errors
";
    let r = parse_report(text, &kernels());
    assert_eq!(r.total, 2);
    assert_eq!(
        r.per_kernel.get("reduce_cg_vector4_f32"),
        Some(&1),
        "the longer name wins"
    );
    assert_eq!(r.per_kernel.get("reduce_cg_f32"), Some(&1));
}

#[test]
fn racecheck_hazards_count_once_each() {
    let text = "\
========= Error: Race reported between Write access at broken_stencil_1d_no_sync_f32+0x1a0
=========     and Read access at broken_stencil_1d_no_sync_f32+0x2c0 [128 hazards]
========= Error: Race reported between Write access at broken_stencil_1d_no_sync_f32+0x1b0
=========     and Read access at broken_stencil_1d_no_sync_f32+0x2c0 [64 hazards]
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
";
    let r = parse_report(text, &kernels());
    assert_eq!(r.total, 2);
    assert_eq!(r.per_kernel.get("broken_stencil_1d_no_sync_f32"), Some(&2));
}
