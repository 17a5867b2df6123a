//! The embedded PTX, checked without a GPU: the kernels each crate declares (`#[kernel]`) are
//! exactly the entry points of every architecture of its PTX (the library's holds no lesson,
//! the lessons' no library kernel), and kernels that use shared memory reach it with
//! `ld.shared` / `st.shared` rather than generic loads and stores.
use ferrocuda::EmbeddedPtx;
use ferrocuda::kernels as k;
use ferrocuda::kernels::entry::EntryInfo;
use ferrocuda::runtime::gpu::EMBEDDED_PTX;
use ferrocuda_lessons::LESSON_PTX;
use ferrocuda_lessons::kernels as lesson;

/// Each PTX table with the entry points its crate declares: the library's, the lessons'.
fn tables() -> [(&'static [EmbeddedPtx], Vec<&'static EntryInfo>); 2] {
    [
        (EMBEDDED_PTX, ferrocuda::runtime::kernel::entry_points()),
        (LESSON_PTX, ferrocuda_lessons::entry_points()),
    ]
}

/// Every declared entry point, of both crates.
fn entry_points() -> Vec<&'static EntryInfo> {
    tables().into_iter().flat_map(|(_, e)| e).collect()
}

/// The PTX table of the crate that declares `symbol`.
fn ptx_of(symbol: &str) -> &'static [EmbeddedPtx] {
    tables()
        .into_iter()
        .find(|(_, entries)| entries.iter().any(|e| e.symbol == symbol))
        .unwrap_or_else(|| panic!("{symbol} is declared by neither crate"))
        .0
}

/// The body of `.entry name` in `ptx`, if present.
fn entry_body<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".visible .entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest.find("\n}").map_or(rest.len(), |e| e + 2);
    Some(&rest[..end])
}

#[test]
fn every_declared_kernel_is_an_entry_of_every_ptx_and_nothing_else_is() {
    let [(library, library_entries), (lessons, lesson_entries)] = tables();
    // The library's module holds its own kernels only: the fast reductions (also in thread
    // block clusters), the reproducible sum, the fast stencils (also with bulk copies and in
    // clusters), the iterated stencils and the bulk copy (168 entry points), none of the
    // lessons' (185).
    assert!(
        (40..200).contains(&library_entries.len()),
        "{} library entry points",
        library_entries.len()
    );
    assert!(
        lesson_entries.len() > 150,
        "{} lesson entry points",
        lesson_entries.len()
    );
    for (table, entries) in [(library, library_entries), (lessons, lesson_entries)] {
        for ptx in table {
            // Cluster and bulk-copy kernels exist from sm_90 on.
            let declared: Vec<&str> = entries
                .iter()
                .filter(|e| e.built_for(ptx.arch))
                .map(|e| e.symbol)
                .collect();
            assert!(
                ptx.source.contains(&format!(".target {}", ptx.arch)),
                "{} PTX has the wrong target",
                ptx.arch
            );
            let missing: Vec<&&str> = declared
                .iter()
                .filter(|s| entry_body(ptx.source, s).is_none())
                .collect();
            assert!(
                missing.is_empty(),
                "{}: missing entries {missing:?}",
                ptx.arch
            );
            let undeclared: Vec<&str> = ptx
                .source
                .match_indices(".visible .entry ")
                .map(|(i, m)| {
                    let name = &ptx.source[i + m.len()..];
                    &name[..name.find('(').unwrap()]
                })
                .filter(|s| !declared.contains(s))
                .collect();
            assert!(
                undeclared.is_empty(),
                "{}: entries without a declaration {undeclared:?}",
                ptx.arch
            );
        }
    }
}

/// Every instance of the kernel behind `handle` (all its types and radii).
fn instances_of(handle: &EntryInfo) -> Vec<&'static EntryInfo> {
    entry_points()
        .into_iter()
        .filter(|e| e.module == handle.module && e.kernel == handle.kernel)
        .collect()
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
fn stencil_shared_tile_kernels() -> Vec<&'static EntryInfo> {
    [
        lesson::stencil::stencil_1d_shared::<f32>(3).unwrap().info(),
        lesson::stencil::stencil_1d_weighted::<f32>(3)
            .unwrap()
            .info(),
        k::stencil::stencil_1d_fast::<f32>(3).unwrap().info(),
        k::stencil::stencil_1d_fast_weighted::<f32>(3)
            .unwrap()
            .info(),
    ]
    .into_iter()
    .flat_map(instances_of)
    .collect()
}

#[test]
fn shared_memory_kernels_use_ld_st_shared_only() {
    let mut shared_kernels: Vec<&str> = [
        lesson::selftest::selftest_shared_static().symbol(),
        lesson::selftest::selftest_shared_dynamic().symbol(),
        lesson::selftest::selftest_last_block_sum().symbol(),
        lesson::selftest::selftest_sync_predicates().symbol(),
    ]
    .to_vec();
    shared_kernels.extend(stencil_shared_tile_kernels().iter().map(|e| e.symbol));
    for k in &shared_kernels {
        for ptx in ptx_of(k) {
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
    }
    for ptx in LESSON_PTX {
        let reverse = entry_body(
            ptx.source,
            lesson::selftest::selftest_shared_static().symbol(),
        )
        .unwrap();
        assert!(
            reverse.contains("st.shared") && reverse.contains("ld.shared"),
            "{}: no shared access",
            ptx.arch
        );
    }
}

#[test]
fn vector_copy_uses_16_byte_accesses() {
    for ptx in LESSON_PTX {
        let body = entry_body(
            ptx.source,
            lesson::selftest::selftest_vector_copy_f32().symbol(),
        )
        .unwrap();
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
    let fast = [
        k::stencil::stencil_1d_fast::<f32>(3).unwrap().info(),
        k::stencil::stencil_1d_fast_weighted::<f32>(3)
            .unwrap()
            .info(),
    ];
    let textbook = [
        lesson::stencil::stencil_1d_shared::<f32>(3).unwrap().info(),
        lesson::stencil::stencil_1d_weighted::<f32>(3)
            .unwrap()
            .info(),
    ];
    for ptx in EMBEDDED_PTX {
        for k in fast.into_iter().flat_map(instances_of).map(|e| e.symbol) {
            let body = entry_body(ptx.source, k).unwrap();
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
    }
    for ptx in LESSON_PTX {
        for k in textbook
            .into_iter()
            .flat_map(instances_of)
            .map(|e| e.symbol)
        {
            {
                let body = entry_body(ptx.source, k).unwrap();
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

/// The 16-bit stencils round their `f32` outputs two at a time with `cvt.rn.f16x2.f32` /
/// `cvt.rn.bf16x2.f32` where the architecture has them (sm_80 and newer); on sm_70 `f16` rounds
/// one lane at a time with `cvt.rn.f16.f32` and `bf16` with integer instructions (sm_70 has no
/// bf16 conversion: that PTX would not assemble for it).
#[test]
fn the_16_bit_stencils_round_two_lanes_per_instruction_from_sm_80() {
    let mut checked = 0;
    for ptx in EMBEDDED_PTX {
        let packed = ptx.compute_capability >= (8, 0);
        for r in k::config::STENCIL_RADII {
            for ty in ["f16", "bf16"] {
                let name = format!("stencil_1d_fast_r{r}_{ty}");
                let body = entry_body(ptx.source, &name)
                    .unwrap_or_else(|| panic!("{}: no {name}", ptx.arch));
                let what = format!("{}: {name}", ptx.arch);
                assert_eq!(
                    body.contains(&format!("cvt.rn.{ty}x2.f32")),
                    packed,
                    "{what}"
                );
                if !packed {
                    assert_eq!(body.contains("cvt.rn.f16.f32"), ty == "f16", "{what}");
                    assert!(!body.contains("cvt.rn.bf16"), "{what}");
                }
                checked += 1;
            }
        }
    }
    // Both sides of the line: a PTX without the conversions and one with them.
    let caps: Vec<(u32, u32)> = EMBEDDED_PTX.iter().map(|p| p.compute_capability).collect();
    assert!(
        caps.iter().any(|&c| c < (8, 0)) && caps.iter().any(|&c| c >= (8, 0)),
        "the PTX is built for {caps:?}: both an architecture before sm_80 and one from it are needed"
    );
    // Every radius of both types in every PTX.
    assert_eq!(
        checked,
        EMBEDDED_PTX.len() * k::config::STENCIL_RADII.len() * 2,
        "{checked} kernels checked"
    );
}
