//! Property tests of the launch arithmetic and the CPU models (proptest, fixed seed by the
//! runner's defaults; a failure prints the minimal case to replay), and the messages of the
//! errors a GPU machine cannot easily produce on demand.
use ferrocuda::LaunchConfig;
use ferrocuda::{DeviceProps, Error};
use ferrocuda_cli::args::parse_count;
use ferrocuda_lessons::all_entry_points as entry_points;
use ferrocuda_lessons::cpu::warp::{ShflMode, shfl_source};
use ferrocuda_lessons::kernels::config::{
    STENCIL_FAST_VECTORS_PER_THREAD, STENCIL_STEPS_VECTORS_PER_THREAD, stencil_steps_per_pass,
};
use ferrocuda_lessons::reduce::ReduceVariant;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One thread per element: enough blocks, and not one block too many; `None` exactly when
    /// the grid would not fit in `u32`.
    #[test]
    fn per_element_grid_covers_n_exactly(n in 1usize..1 << 44, block in 1u32..=1024) {
        let blocks = n.div_ceil(block as usize);
        match LaunchConfig::per_element(n, block, 0) {
            None => prop_assert!(blocks > u32::MAX as usize),
            Some(c) => {
                let threads = c.grid[0] as u64 * block as u64;
                prop_assert!(threads >= n as u64 && threads - (block as u64) < n as u64);
                prop_assert_eq!(c.architectural_violation().is_none(), c.grid[0] <= i32::MAX as u32);
            }
        }
    }

    /// Blocks over 1024 threads never pass, whatever the shape.
    #[test]
    fn architectural_limits_reject_every_oversized_block(x in 1u32..2048, y in 1u32..64, z in 1u32..8) {
        let c = LaunchConfig { grid: [1, 1, 1], block: [x, y, z], dynamic_shared_bytes: 0 };
        let threads = x as u64 * y as u64 * z as u64;
        prop_assert_eq!(c.architectural_violation().is_none(), threads <= 1024 && x <= 1024 && y <= 1024 && z <= 64);
    }

    #[test]
    fn counts_parse_in_every_notation(k in 0u32..40, c in 0usize..1000) {
        prop_assert_eq!(parse_count(&format!("2^{k}+{c}")), Ok((1usize << k) + c));
        prop_assert_eq!(parse_count(&format!("1<<{k}")), Ok(1usize << k));
        prop_assert_eq!(parse_count(&((1usize << k) + c).to_string()), Ok((1usize << k) + c));
    }

    /// A shuffle reads inside its segment, except xor, which may also read an earlier one.
    #[test]
    fn shuffles_read_inside_the_segment(width_log in 0u32..=5, lane in 0u32..32, b in 0u32..64) {
        let width = 1 << width_log;
        let seg = lane / width * width;
        for mode in [ShflMode::Idx, ShflMode::Up, ShflMode::Down] {
            let src = shfl_source(mode, lane, b, width);
            prop_assert!((seg..seg + width).contains(&src), "{mode:?} lane {lane} b {b} w {width} -> {src}");
        }
        let src = shfl_source(ShflMode::Xor, lane, b, width);
        prop_assert!(src < seg + width);
    }

    /// The textbook reductions take exactly the powers of two from 64 to 1024.
    #[test]
    fn textbook_blocks_are_powers_of_two_from_64(block in 0u32..4096) {
        let ok = block.is_power_of_two() && (64..=1024).contains(&block);
        prop_assert_eq!(ReduceVariant::Interleaved.block_error(block).is_none(), ok);
        prop_assert_eq!(ReduceVariant::Fast.block_error(block).is_none(), block % 32 == 0 && (32..=1024).contains(&block));
    }

    /// Every stencil kernel that declares a shared tile asks, at every block size, for room for
    /// the block's outputs and both halos of `R` elements (the slide's `BLOCK_SIZE + 2 * RADIUS`;
    /// the fast path's outputs are 16-byte vectors, `STENCIL_FAST_VECTORS_PER_THREAD` per thread).
    #[test]
    fn declared_stencil_tiles_hold_the_outputs_and_both_halos(block in 1u32..=32) {
        let block = block * 32;
        let fast = ferrocuda::kernels::stencil::stencil_1d_fast::<f32>(3).unwrap().info().kernel;
        let fast_weighted =
            ferrocuda::kernels::stencil::stencil_1d_fast_weighted::<f32>(3).unwrap().info().kernel;
        let bulk = ferrocuda::kernels::stencil::stencil_1d_bulk::<f32>(3).unwrap().info().kernel;
        let steps = ferrocuda::kernels::stencil::stencil_1d_steps::<f32>(3).unwrap().info().kernel;
        let steps_weighted =
            ferrocuda::kernels::stencil::stencil_1d_steps_weighted::<f32>(3).unwrap().info().kernel;
        let tiles = entry_points().into_iter().filter(|e| {
            e.module.ends_with("::stencil") && e.dynamic_shared_bytes.is_some()
        });
        let mut seen = 0;
        for e in tiles {
            seen += 1;
            let radius: usize = e.instance_value("R").unwrap().parse().unwrap();
            let size = ferrocuda::runtime::element::ElemType::from_name(&e.instance_value("T").unwrap().to_lowercase())
                .unwrap()
                .size();
            // The iterated stencil: two buffers, each its outputs and halos of `steps * R`.
            if [steps, steps_weighted].contains(&e.kernel) {
                let lanes = 16 / size;
                let k = stencil_steps_per_pass(radius as u32, lanes as u32) as usize;
                let outputs = block as usize * STENCIL_STEPS_VECTORS_PER_THREAD * lanes;
                prop_assert!(
                    e.dynamic_shared_bytes(block) as usize >= 2 * (outputs + 2 * k * radius) * size,
                    "{} at block {block}: {} B", e.symbol, e.dynamic_shared_bytes(block)
                );
                continue;
            }
            // The bulk-copy stencil's stages each hold a fast tile.
            let outputs = if [fast, fast_weighted, bulk].contains(&e.kernel) {
                block as usize * STENCIL_FAST_VECTORS_PER_THREAD * (16 / size)
            } else {
                block as usize
            };
            prop_assert!(
                e.dynamic_shared_bytes(block) as usize >= (outputs + 2 * radius) * size,
                "{} at block {block}: {} B", e.symbol, e.dynamic_shared_bytes(block)
            );
        }
        // Two lesson families (3 and 2 types); fast (5 types, with the 16-bit floats), fast
        // weighted, bulk, cluster, steps (5), steps weighted (2) (library); six radii each.
        prop_assert_eq!(seen, (3 + 2 + 5 + 2 + 3 + 3 + 5 + 2) * 6);
    }
}

#[test]
fn a_device_older_than_every_ptx_is_named_with_its_capability() {
    let e = Error::NoPtxForDevice {
        device: "Tesla P100".into(),
        compute_capability: (6, 0),
        oldest: "sm_70",
    };
    let msg = e.to_string();
    assert!(
        msg.contains("Tesla P100") && msg.contains("6.0") && msg.contains("sm_70"),
        "{msg}"
    );
}

/// The message's own parts: the architecture, the driver's version as CUDA major.minor, and the
/// hint it is given, last. (The hint `Gpu::new` gives is written inline there and only reached
/// with a device, so it is not checked here: this test passes its own placeholder.)
#[test]
fn a_failed_module_load_names_the_arch_and_the_drivers_cuda_version() {
    let e = Error::ModuleLoad {
        arch: "sm_90",
        driver_version: 11040,
        hint: "<hint>",
        cause: ferrocuda::DriverError::from_code(218).expect("CUDA_ERROR_INVALID_PTX"),
    };
    let msg = e.to_string();
    assert!(
        msg.contains("sm_90")
            && msg.contains("CUDA 11.4")
            && msg.contains("CUDA_ERROR_INVALID_PTX")
            && msg.ends_with(": <hint>"),
        "{msg}"
    );
}

#[test]
fn a_device_with_another_warp_size_is_refused_by_name() {
    let mut props = DeviceProps {
        ordinal: 0,
        name: "wave64 GPU".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        warp_size: 64,
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [u32::MAX >> 1, 65535, 65535],
        shared_mem_per_block: 48 << 10,
        shared_mem_per_block_optin: 227 << 10,
        shared_mem_per_sm: 228 << 10,
        cluster_launch: true,
        regs_per_block: 65536,
        regs_per_sm: 65536,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        l2_bytes: 50 << 20,
        memory_bus_width_bits: 5120,
        memory_clock_khz: 2_619_000,
        total_memory: 80 << 30,
        driver_version: 13000,
    };
    let msg = props
        .check_warp_size()
        .expect_err("a 64-lane warp")
        .to_string();
    assert!(
        msg.contains("wave64 GPU") && msg.contains("64") && msg.contains("32-lane"),
        "{msg}"
    );
    props.warp_size = 32;
    assert!(props.check_warp_size().is_ok(), "a 32-lane warp is refused");
}

/// A view of `len` `u32`s at the device address `address` (never dereferenced on the host).
fn fake_view(address: u64, len: usize) -> ferrocuda::View<'static, u32> {
    // SAFETY: only the address arithmetic is exercised; nothing reads or writes the memory.
    unsafe { ferrocuda::View::from_raw_parts(ferrocuda::DevicePointer::from_raw(address), len) }
}

/// Sub-slices carry the right address and length, out-of-range indices panic as slice indexing
/// does, a mutable split gives two disjoint halves, and the null address of an empty buffer
/// survives the reference that stands in for it.
#[test]
fn device_slice_indexing_and_splitting_keep_addresses_and_bounds() {
    let v = fake_view(0x1000, 10);
    assert_eq!((v.as_device_ptr().as_raw(), v.len()), (0x1000, 10));
    let part = v.index(3..7);
    assert_eq!((part.as_device_ptr().as_raw(), part.len()), (0x100c, 4));
    let inner = part.index(1..=2);
    assert_eq!((inner.as_device_ptr().as_raw(), inner.len()), (0x1010, 2));
    let (head, tail) = v.split_at(10);
    assert_eq!((head.len(), tail.len()), (10, 0));
    assert_eq!(tail.as_device_ptr().as_raw(), 0x1028);
    for bad in [(5usize, 11usize), (6, 5), (11, 11)] {
        let caught = std::panic::catch_unwind(|| fake_view(0x1000, 10).index(bad.0..bad.1).len());
        assert!(caught.is_err(), "{bad:?} was accepted");
    }
    // SAFETY: as in `fake_view`.
    let mut m = unsafe {
        ferrocuda::ViewMut::<u32>::from_raw_parts(ferrocuda::DevicePointer::from_raw(0x2000), 8)
    };
    let (a, b) = m.split_at_mut(3);
    assert_eq!((a.as_device_ptr().as_raw(), a.len()), (0x2000, 3));
    assert_eq!((b.as_device_ptr().as_raw(), b.len()), (0x200c, 5));
    let empty = fake_view(0, 0);
    assert_eq!((empty.as_device_ptr().as_raw(), empty.len()), (0, 0));
    assert!(empty.index(..).is_empty());
}

/// A driver status by number: its name and description, the two kinds a program tests for, and
/// no error for success or for a number the driver API does not have.
#[test]
fn driver_errors_are_found_by_number_and_name_themselves() {
    use ferrocuda::DriverError;
    let oom = DriverError::from_code(2).expect("CUDA_ERROR_OUT_OF_MEMORY");
    assert_eq!(oom.code(), 2);
    assert_eq!(oom.name(), "CUDA_ERROR_OUT_OF_MEMORY");
    assert!(oom.is_out_of_memory() && !oom.is_sticky());
    assert!(
        oom.to_string().contains("CUDA_ERROR_OUT_OF_MEMORY"),
        "{oom}"
    );
    let fault = DriverError::from_code(700).expect("CUDA_ERROR_ILLEGAL_ADDRESS");
    assert!(fault.is_sticky() && !fault.is_out_of_memory(), "{fault:?}");
    assert_eq!(DriverError::from_code(0), None, "success is no error");
    assert_eq!(DriverError::from_code(12_345), None);
    let e = ferrocuda::Error::Driver {
        call: "cuMemcpyDtoH_v2",
        launch: None,
        error: fault,
    };
    assert!(
        e.to_string().starts_with("cuMemcpyDtoH_v2 failed: ")
            && e.to_string().ends_with("(CUDA_ERROR_ILLEGAL_ADDRESS)"),
        "{e}"
    );
}
