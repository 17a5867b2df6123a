//! The embedded PTX, checked without a GPU: every kernel the host knows is an entry point of
//! every architecture's PTX, and kernels that use shared memory reach it with `ld.shared` /
//! `st.shared` rather than generic loads and stores.
use ferrocuda::runtime::gpu::EMBEDDED_PTX;

/// The body of `.entry name` in `ptx`, if present.
fn entry_body<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".visible .entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest.find("\n}").map_or(rest.len(), |e| e + 2);
    Some(&rest[..end])
}

fn known_symbols() -> Vec<String> {
    let mut v = ferrocuda::library_symbols();
    v.extend(ferrocuda_tests::selftest::symbols());
    v.extend(ferrocuda::sanitize::BROKEN_KERNELS.map(String::from));
    v
}

#[test]
fn every_host_kernel_is_an_entry_of_every_ptx() {
    let symbols = known_symbols();
    assert!(symbols.len() > 30);
    for ptx in EMBEDDED_PTX {
        assert!(
            ptx.source.contains(&format!(".target {}", ptx.arch)),
            "{} PTX has the wrong target",
            ptx.arch
        );
        let missing: Vec<&String> = symbols
            .iter()
            .filter(|s| entry_body(ptx.source, s).is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "{}: missing entries {missing:?}",
            ptx.arch
        );
    }
}

/// Loads and stores with no state space (`ld.b32`, `st.v4.f32`) go through generic addressing.
fn generic_accesses(body: &str) -> Vec<&str> {
    body.lines()
        .map(str::trim)
        .filter(|l| {
            let op = l.split_whitespace().next().unwrap_or("");
            let mut parts = op.split('.');
            matches!(parts.next(), Some("ld" | "st"))
                && !parts.any(|p| ["global", "shared", "param", "const", "local"].contains(&p))
        })
        .collect()
}

/// The 1D stencil kernels that stage their input in a shared tile.
fn stencil_shared_tile_kernels() -> Vec<String> {
    use ferrocuda::stencil::StencilVariant;
    [
        StencilVariant::Shared,
        StencilVariant::Weighted,
        StencilVariant::Fast,
    ]
    .iter()
    .flat_map(|v| v.all_symbols())
    .collect()
}

#[test]
fn shared_memory_kernels_use_ld_st_shared_only() {
    let mut shared_kernels: Vec<String> = [
        "selftest_shared_static",
        "selftest_shared_dynamic",
        "selftest_last_block_sum",
        "selftest_sync_predicates",
    ]
    .map(String::from)
    .to_vec();
    shared_kernels.extend(stencil_shared_tile_kernels());
    for ptx in EMBEDDED_PTX {
        for k in &shared_kernels {
            let body =
                entry_body(ptx.source, k).unwrap_or_else(|| panic!("{k} missing in {}", ptx.arch));
            assert!(
                generic_accesses(body).is_empty(),
                "{} {k}: generic accesses {:?}",
                ptx.arch,
                generic_accesses(body)
            );
            assert!(
                !body.contains("ld.local") && !body.contains("st.local"),
                "{} {k}: local memory",
                ptx.arch
            );
        }
        let reverse = entry_body(ptx.source, "selftest_shared_static").unwrap();
        assert!(
            reverse.contains("st.shared") && reverse.contains("ld.shared"),
            "{}: no shared access",
            ptx.arch
        );
    }
}

#[test]
fn vector_copy_uses_16_byte_accesses() {
    for ptx in EMBEDDED_PTX {
        let body = entry_body(ptx.source, "selftest_vector_copy_f32").unwrap();
        assert!(
            body.contains("ld.global.v4") && body.contains("st.global.v4"),
            "{}: {body}",
            ptx.arch
        );
    }
}

/// The fast stencil moves its tile and its outputs in 16-byte vectors (`f32`, `i32`: `.v4`;
/// `f64`: `.v2.b64`), and the textbook tile kernels read and write shared memory.
#[test]
fn stencil_kernels_use_16_byte_global_and_shared_accesses() {
    use ferrocuda::stencil::StencilVariant;
    for ptx in EMBEDDED_PTX {
        for k in StencilVariant::Fast.all_symbols() {
            let body = entry_body(ptx.source, &k).unwrap();
            let v = if k.ends_with("f64") {
                ".v2.b64"
            } else {
                ".v4.b32"
            };
            for op in ["ld.global", "st.global", "ld.shared", "st.shared"] {
                assert!(
                    body.contains(&format!("{op}{v}")),
                    "{} {k}: no {op}{v}",
                    ptx.arch
                );
            }
        }
        for v in [StencilVariant::Shared, StencilVariant::Weighted] {
            for k in v.all_symbols() {
                let body = entry_body(ptx.source, &k).unwrap();
                assert!(
                    body.contains("st.shared")
                        && body.contains("ld.shared")
                        && body.contains("bar.sync"),
                    "{} {k}: no shared tile",
                    ptx.arch
                );
            }
        }
    }
}

#[test]
fn generic_access_detector_bites() {
    let ptx = "ld.b32 %r1, [%rd1];\nld.shared.b32 %r2, [%rd2];\nld.volatile.global.b32 %r3, [%rd1];\nst.v4.f32 [%rd1], {%r1};";
    assert_eq!(
        generic_accesses(ptx),
        ["ld.b32 %r1, [%rd1];", "st.v4.f32 [%rd1], {%r1};"]
    );
}
