//! What `#[kernel]` generates on the host, checked against the names the notes use: the PTX
//! symbol of each instance (kernel name, then `_<first letter><value>` per const parameter, then
//! `_<type>`), the instances a declaration lists and no others, the parameter lists, and the
//! declared dynamic shared memory.
use ferrocuda_kernels::entry::{ENTRY_POINTS, entry_point, entry_points_of};
use ferrocuda_kernels::{reduce as fast_reduce, stencil as fast_stencil};
use ferrocuda_lesson_kernels::{reduce, selftest, smoke, stencil};

#[test]
fn symbols_follow_the_notes_names() {
    let cases = [
        (
            reduce::reduce_neighbored::<f32>().unwrap().symbol(),
            "reduce_neighbored_f32",
        ),
        (
            reduce::reduce_neighbored_less::<i32>().unwrap().symbol(),
            "reduce_neighbored_less_i32",
        ),
        (
            reduce::reduce_unroll_warps8::<u64>().unwrap().symbol(),
            "reduce_unroll_warps8_u64",
        ),
        (
            reduce::reduce_complete_unroll::<f32>(512).unwrap().symbol(),
            "reduce_complete_unroll_b512_f32",
        ),
        (
            reduce::reduce_shfl::<f32>().unwrap().symbol(),
            "reduce_shfl_f32",
        ),
        (
            reduce::reduce1_parallelism::<f64>().unwrap().symbol(),
            "reduce1_parallelism_f64",
        ),
        (
            reduce::reduce2_static::<f32>().unwrap().symbol(),
            "reduce2_static_f32",
        ),
        (
            reduce::reduce_cg_vector4::<i32>().unwrap().symbol(),
            "reduce_cg_vector4_i32",
        ),
        (
            fast_reduce::reduce_fast::<fast_reduce::Max, f64>()
                .unwrap()
                .symbol(),
            "reduce_fast_max_f64",
        ),
        (
            fast_reduce::reduce_fast_sum_i32_to_i64().symbol(),
            "reduce_fast_sum_i32_to_i64",
        ),
        (
            stencil::stencil_1d_shared::<f32>(3).unwrap().symbol(),
            "stencil_1d_shared_r3_f32",
        ),
        (
            stencil::stencil_1d_naive::<i32>(16).unwrap().symbol(),
            "stencil_1d_naive_r16_i32",
        ),
        (
            fast_stencil::stencil_1d_fast_weighted::<f32>(3)
                .unwrap()
                .symbol(),
            "stencil_1d_fast_weighted_r3_f32",
        ),
        (
            selftest::selftest_tile(8).unwrap().symbol(),
            "selftest_tile_n8",
        ),
        (smoke::smoke_saxpy().symbol(), "smoke_saxpy"),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn a_combination_without_an_instance_has_no_handle() {
    assert!(reduce::reduce_syncwarp::<i32>().is_none());
    assert!(reduce::reduce_cg_vector4::<u32>().is_none());
    assert!(reduce::reduce_complete_unroll::<f32>(32).is_none());
    assert!(reduce::reduce_complete_unroll::<u8>(512).is_none());
    assert!(fast_stencil::stencil_1d_fast::<f32>(5).is_none());
    assert!(stencil::stencil_1d_weighted::<i32>(3).is_none());
}

#[test]
fn every_instance_is_listed_once_with_its_parameters() {
    let library = entry_points_of("ferrocuda-kernels");
    let lessons = entry_points_of("ferrocuda-lesson-kernels");
    assert_eq!(library.len() + lessons.len(), ENTRY_POINTS.len());
    let mut all = [library.clone(), lessons.clone()].concat();
    all.sort_by_key(|e| e.symbol);
    let mut symbols: Vec<&str> = all.iter().map(|e| e.symbol).collect();
    symbols.dedup();
    assert_eq!(symbols.len(), all.len(), "a symbol is listed twice");
    let count = |package: &[&ferrocuda_kernels::entry::EntryInfo], module: &str| {
        package
            .iter()
            .filter(|e| e.module.ends_with(module))
            .count()
    };
    // The lessons: 9 textbook kernels x 6 types (complete_unroll x 5 blocks), 3 float warp-level
    // trees, the two grid-stride kernels, the CG vector sum on 2 types and the
    // grid-synchronised sum on 6. The library: sum/min/max x 6 (and again in thread block
    // clusters), the widening sum, the reproducible sum on 2 types, and the 16-bit floats'
    // sum/min/max in f32 and reproducible first level on 2 types.
    assert_eq!(
        count(&lessons, "::reduce"),
        8 * 6 + 5 * 6 + 3 * 2 + 2 * 2 + 2 + 6
    );
    assert_eq!(count(&library, "::reduce"), 2 * 3 * 6 + 1 + 2 + 3 * 2 + 2);
    let e = entry_point("reduce_fast_half_sum_bf16").unwrap();
    assert_eq!(
        e.params,
        ["*const Bf16", "usize", "*mut f32", "*mut u32", "*mut f32"]
    );
    let e = entry_point("reduce_grid_sync_f32").unwrap();
    assert_eq!(
        e.params,
        ["*const f32", "usize", "*mut f32", "GridBarrier", "*mut f32"]
    );
    // Taking the grid barrier is what makes a kernel cooperative, and only that.
    for e in &all {
        assert_eq!(
            e.cooperative,
            e.params.contains(&"GridBarrier"),
            "{}",
            e.symbol
        );
    }
    assert!(e.cooperative);
    // naive and shared on 3 types and weighted on 2 in the lessons; in the library fast on 5
    // (with the 16-bit floats), fast weighted on 2, the bulk-copy and the cluster tiles on 3
    // each, the iterated stencil on 5 and weighted on 2; 6 radii each.
    assert_eq!(count(&lessons, "::stencil"), (3 + 3 + 2) * 6);
    assert_eq!(count(&library, "::stencil"), (5 + 2 + 3 + 3 + 5 + 2) * 6);
    let e = entry_point("reduce_fast_sum_i32_to_i64").unwrap();
    assert_eq!(
        e.params,
        ["*const i32", "usize", "*mut i64", "*mut u32", "*mut i64"]
    );
    assert_eq!(e.kernel, "reduce_fast_sum_i32_to_i64");
    let e = entry_point("stencil_1d_fast_r3_f64").unwrap();
    assert_eq!(e.instance, [("T", "f64"), ("R", "3")]);
}

#[test]
fn dynamic_shared_memory_is_what_the_declaration_says() {
    // `block * size_of::<T>()` for the warp-level trees.
    let e = reduce::reduce_shfl::<f64>().unwrap();
    assert_eq!(e.dynamic_shared_bytes(128), 128 * 8);
    // The slide's `BLOCK_SIZE + 2 * RADIUS` tile.
    let e = stencil::stencil_1d_shared::<f32>(3).unwrap();
    assert_eq!(e.dynamic_shared_bytes(256), (256 + 6) * 4);
    // None declared: zero.
    assert_eq!(
        fast_reduce::reduce_fast::<fast_reduce::Sum, f32>()
            .unwrap()
            .dynamic_shared_bytes(512),
        0
    );
}

#[test]
fn retype_succeeds_only_for_the_same_parameter_list() {
    let e = fast_reduce::reduce_fast::<fast_reduce::Sum, f32>().unwrap();
    assert!(
        e.retype::<(*const f32, usize, *mut f32, *mut u32, *mut f32)>()
            .is_some()
    );
    assert!(
        e.retype::<(*const f32, usize, *mut f64, *mut u32, *mut f64)>()
            .is_none()
    );
}
