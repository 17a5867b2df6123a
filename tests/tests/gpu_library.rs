//! The library as a program calls it: reusable plans, the workspace each `Gpu` caches for
//! `reduce::sum` and friends, results left on the device, caller streams, `apply_into`, and
//! what happens on bad input. The speed of these calls is measured by `ferrocuda bench` (the
//! `api` family), never here.
use std::process::ExitCode;

use anyhow::{Context, anyhow, ensure};
use ferrocuda::runtime::element::Element;
use ferrocuda::stencil::{self, Boundary, Taps};
use ferrocuda::{DeviceSlice, Stream, View, ViewMut};
use ferrocuda::{Error, Gpu, LaunchConfig};
use ferrocuda_lessons::cpu::{ReduceReference, check_stencil};
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda_lessons::reduce::{self, ReduceOp, ReducePlan, ReduceRun, ReduceVariant};
use ferrocuda_tests::{TestResult, exact_sum_input, gpu_test, random_vec, run_gpu_suite, scaled};

fn main() -> ExitCode {
    run_gpu_suite(vec![
        gpu_test(
            "copy_bulk_copies_every_size_and_offset_bit_for_bit_and_refuses_what_it_cannot_copy",
            copy_bulk_checks,
        ),
        gpu_test(
            "a_kernel_past_48_kib_of_shared_memory_opts_in_and_one_past_the_device_limit_is_refused",
            shared_opt_in,
        ),
        gpu_test(
            "a_plan_reused_across_sizes_and_types_matches_the_cpu_and_a_fresh_run",
            plan_reuse_matches_fresh,
        ),
        gpu_test(
            "a_device_resident_result_chained_into_a_second_kernel_is_right",
            device_result_chained,
        ),
        gpu_test(
            "caller_streams_order_the_reduction_and_stencil_with_the_callers_copies",
            caller_streams,
        ),
        gpu_test(
            "safe_calls_on_caller_streams_are_ordered_with_downloads_copies_and_other_streams",
            caller_streams_are_ordered,
        ),
        gpu_test(
            "apply_into_matches_the_cpu_and_apply_and_refuses_wrong_lengths_and_overlap",
            apply_into_checks,
        ),
        gpu_test(
            "bad_input_is_a_clear_error_and_the_plan_still_works_after_it",
            bad_input_leaves_plans_usable,
        ),
        gpu_test(
            "a_grid_synchronised_sum_is_right_and_a_grid_that_cannot_be_co_resident_is_refused",
            grid_sync_launches,
        ),
        gpu_test(
            "the_suggested_block_size_maximises_occupancy_with_the_shared_memory_each_block_declares",
            suggested_block_with_declared_shared,
        ),
        gpu_test(
            "a_copy_and_a_kernel_on_two_streams_give_right_results_and_consistent_event_times",
            streams_and_events,
        ),
        gpu_test(
            "soak_100000_mixed_calls_on_two_threads_end_with_the_memory_they_started_with",
            soak,
        ),
        gpu_test(
            "a_kernel_asked_of_another_crates_ptx_is_refused_by_package",
            kernels_are_taken_from_their_own_package,
        ),
        gpu_test(
            "a_plan_outlives_the_gpu_handle_it_was_made_from_and_runs_on_another_thread",
            plans_own_their_gpu,
        ),
        gpu_test(
            "a_sum_of_negative_zeros_is_negative_zero_and_nans_leave_min_and_max_to_the_rest",
            signed_zeros_and_nans,
        ),
    ])
}

/// The sizes every reuse test walks: empty, one, ragged, a power of two and a large ragged one.
const SIZES: [usize; 6] = [0, 1, 31, 1000, 1 << 24, (1 << 20) + 3];

/// The fast variant run fresh (a `ReduceRun`, its own buffers) on the same input.
fn fresh<T: Element, A: Element>(
    gpu: &Gpu,
    op: ReduceOp,
    input: &DeviceSlice<T>,
) -> anyhow::Result<A> {
    Ok(ReduceRun::<T, A>::new(
        gpu,
        ReduceVariant::Fast,
        op,
        input,
        ReduceVariant::Fast.default_block(),
    )?
    .run()?)
}

fn bits<A: Element>(a: A) -> Vec<u8> {
    let mut out = vec![0u8; size_of::<A>()];
    // SAFETY: `A` is a plain numeric type of `size_of::<A>()` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping((&a as *const A).cast::<u8>(), out.as_mut_ptr(), out.len())
    };
    out
}

fn reuse_one<T: Element, A: Element>(gpu: &Gpu, op: ReduceOp) -> TestResult {
    let mut plan = ReducePlan::<T, A>::new(gpu, op)?;
    // Sizes up and down and up again: nothing of a larger run may leak into a smaller one.
    for (round, n) in SIZES
        .iter()
        .chain(SIZES.iter().rev())
        .map(|&n| scaled(n))
        .enumerate()
    {
        if n == 0 && op != ReduceOp::Sum {
            let empty = gpu.upload::<T>(&[], "empty")?;
            let err = plan.run(&empty).unwrap_err();
            ensure!(err.to_string().contains("empty input"), "{err}");
            continue;
        }
        let x: Vec<T> = exact_sum_input(n, n as u64 * 31 + round as u64);
        let d = gpu.upload(&x, "input")?;
        let got = plan.run(&d)?;
        let want = fresh::<T, A>(gpu, op, &d)?;
        let widen = |v: T| -> A { A::from_f64(v.to_f64()) };
        let check = if A::TYPE == T::TYPE {
            ReduceReference::of(op, &x, |v| bits_cast::<T, A>(v)).check(got, 0.0)
        } else {
            ReduceReference::of(op, &x, widen).check(got, 0.0)
        };
        ensure!(
            check.passed,
            "{} {op:?} n = {n}: plan against the CPU: {}",
            T::TYPE,
            check.detail
        );
        let cached: A = match (op, A::TYPE == T::TYPE) {
            (ReduceOp::Sum, true) => bits_cast(reduce::sum::<T>(gpu, &d)?),
            (ReduceOp::Min, _) => bits_cast(reduce::min::<T>(gpu, &d)?),
            (ReduceOp::Max, _) => bits_cast(reduce::max::<T>(gpu, &d)?),
            (ReduceOp::Sum, false) => want,
        };
        ensure!(
            bits(got) == bits(want) && bits(cached) == bits(want),
            "{} {op:?} n = {n}: plan {got}, cached workspace {cached}, fresh run {want}",
            T::TYPE
        );
        let mut device = gpu.alloc::<A>(1, "device result")?;
        plan.run_to_device(&d, &mut device)?;
        let on_device = gpu.download(&device)?[0];
        ensure!(
            bits(on_device) == bits(want),
            "{} {op:?} n = {n}: device result {on_device}, fresh run {want}",
            T::TYPE
        );
    }
    Ok(())
}

/// `T` as `A` when they are the same type (the caller checked).
fn bits_cast<T: Element, A: Element>(t: T) -> A {
    assert_eq!(size_of::<T>(), size_of::<A>());
    // SAFETY: same size; the caller only uses it where `T` and `A` are the same type.
    unsafe { std::mem::transmute_copy(&t) }
}

fn plan_reuse_matches_fresh(gpu: &Gpu) -> TestResult {
    for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
        reuse_one::<f32, f32>(gpu, op)?;
        reuse_one::<f64, f64>(gpu, op)?;
        reuse_one::<i32, i32>(gpu, op)?;
        reuse_one::<u64, u64>(gpu, op)?;
    }
    reuse_one::<i32, i64>(gpu, ReduceOp::Sum)?;
    // The widening sum through its convenience call.
    let x: Vec<i32> = random_vec(100_003, 5);
    let d = gpu.upload(&x, "i32")?;
    let want: i64 = x.iter().map(|&v| v as i64).sum();
    ensure!(reduce::sum_i32_to_i64(gpu, &d)? == want);
    Ok(())
}

/// The sum stays on the device and feeds `smoke_saxpy` (y = a * x + y) as its `x`, on the same
/// stream, with no host round trip in between.
fn device_result_chained(gpu: &Gpu) -> TestResult {
    let x: Vec<f32> = (0..scaled((1 << 20) + 7))
        .map(|i| (i % 13) as f32)
        .collect();
    let want: f32 = x.iter().sum(); // small integers: every partial sum is exact
    let d = gpu.upload(&x, "x")?;
    let mut plan = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
    let mut total = gpu.alloc::<f32>(1, "total")?;
    gpu.poison_async(&mut total)?;
    plan.run_to_device(&d, &mut total)?;
    let y = gpu.upload(&[1.0f32], "y")?;
    let out = gpu.alloc::<f32>(1, "saxpy out")?;
    let saxpy = ferrocuda_lessons::kernel(gpu, smoke_saxpy())?;
    let config = LaunchConfig::per_element(1, 32, 0).context("a grid")?;
    // SAFETY: `total`, `y` and `out` hold one element each.
    unsafe {
        saxpy.launch_and_wait(
            config,
            (
                1usize,
                2.0f32,
                total.as_device_ptr(),
                y.as_device_ptr(),
                out.as_device_ptr(),
            ),
        )?
    };
    let got = gpu.download(&out)?[0];
    ensure!(
        got == 2.0 * want + 1.0,
        "chained: {got}, want {}",
        2.0 * want + 1.0
    );
    Ok(())
}

/// A caller's own non-blocking stream: its async upload, then the reduction and the stencil on
/// it, are ordered without any synchronisation in between.
fn caller_streams(gpu: &Gpu) -> TestResult {
    let stream = gpu.new_stream()?;
    let n = scaled((1 << 22) + 5);
    let host = gpu.pin(&vec![3i32; n])?;
    let mut d = gpu.alloc::<i32>(n, "input")?;
    let mut plan = ReducePlan::<i32, i64>::new(gpu, ReduceOp::Sum)?;
    for round in 0..5 {
        // Poisoned on the GPU's stream, overwritten on the caller's: ordered by the record of
        // which stream used `d`, with no host wait in between.
        gpu.poison_async(&mut d)?;
        gpu.upload_async_on(&stream, &host, &mut d)?;
        let got = plan.run_on(&stream, &d)?;
        ensure!(got == 3 * n as i64, "round {round}: {got}");
    }
    let mut out = gpu.alloc::<i32>(n, "stencil output")?;
    let taps = Taps::Sum { radius: 3 };
    stencil::apply_into_on(gpu, &stream, &d, &mut out, &taps, Boundary::Periodic)?;
    let got = gpu.download(&out)?;
    ensure!(
        got.iter().all(|&v| v == 21),
        "stencil on the caller's stream"
    );
    Ok(())
}

/// What safe code can do right after a safe call returned with work in flight on a caller's
/// stream: download the output, overwrite the input with a synchronous copy, or read the output
/// from another stream, the `Gpu`'s own included. None of it may race the kernel. Each case
/// first keeps the caller's stream busy for about a millisecond (ten reductions of 256 MiB), so
/// that an unordered download, copy or launch would run before the kernel and see the poison
/// or the old input.
fn caller_streams_are_ordered(gpu: &Gpu) -> TestResult {
    let (s1, s2) = (gpu.new_stream()?, gpu.new_stream()?);
    let blocking = gpu.new_blocking_stream()?;
    let n = scaled(1 << 26);
    let (taps, boundary) = (Taps::Sum { radius: 3 }, Boundary::Periodic);
    let host: Vec<f32> = exact_sum_input(n, 7);
    let other: Vec<f32> = exact_sum_input(n, 8);
    let want: f32 = host.iter().sum();
    let mut x = gpu.upload(&host, "input")?;
    let mut busy_plan = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
    let mut plan = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
    let mut second = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
    let mut busy_total = gpu.alloc::<f32>(1, "busy total")?;
    let mut busy = |stream: &Stream, x: &DeviceSlice<f32>| -> TestResult {
        for _ in 0..10 {
            busy_plan.run_to_device_on(stream, x, &mut busy_total)?;
        }
        Ok(())
    };
    for round in 0..3 {
        let mut out = gpu.upload(&vec![f32::poison(); n], "output")?;
        busy(&s1, &x)?;
        stencil::apply_into_on(gpu, &s1, &x, &mut out, &taps, boundary)?;
        let check = check_stencil(&host, &taps, boundary, &gpu.download(&out)?);
        ensure!(
            check.passed,
            "round {round}: download after launch: {}",
            check.detail
        );

        busy(&s1, &x)?;
        stencil::apply_into_on(gpu, &s1, &x, &mut out, &taps, boundary)?;
        gpu.upload_into(&mut x, &other)?;
        let check = check_stencil(&host, &taps, boundary, &gpu.download(&out)?);
        ensure!(
            check.passed,
            "round {round}: input overwritten in flight: {}",
            check.detail
        );
        gpu.upload_into(&mut x, &host)?;

        for (what, stream) in [("non-blocking", &*s1), ("blocking", &*blocking)] {
            let mut total = gpu.upload(&[f32::poison()], "total")?;
            busy(stream, &x)?;
            plan.run_to_device_on(stream, &x, &mut total)?;
            let on_s2 = second.run_on(&s2, &total)?;
            let on_gpu = second.run(&total)?;
            ensure!(
                on_s2 == want && on_gpu == want,
                "round {round}, {what} stream: another stream read {on_s2}, the Gpu's {on_gpu}, want {want}"
            );
        }
    }
    Ok(())
}

fn apply_into_checks(gpu: &Gpu) -> TestResult {
    for n in [0usize, 1, 33, (1 << 16) + 1, 1 << 24].map(scaled) {
        let x: Vec<f32> = random_vec(n, n as u64);
        let d = gpu.upload(&x, "input")?;
        for (taps, boundary) in [
            (Taps::Sum { radius: 3 }, Boundary::Zero),
            (Taps::Weighted(vec![0.25, 0.5, 0.25]), Boundary::Clamp),
        ] {
            let mut out = gpu.alloc::<f32>(n, "output")?;
            gpu.poison_async(&mut out)?;
            stencil::apply_into(gpu, &d, &mut out, &taps, boundary)?;
            let fresh = stencil::apply(gpu, &d, &taps, boundary)?;
            let fresh = gpu.download(&fresh)?;
            let into = gpu.download(&out)?;
            let check = check_stencil(&x, &taps, boundary, &into);
            ensure!(
                check.passed,
                "n = {n}: apply_into against the CPU: {}",
                check.detail
            );
            ensure!(
                into.iter()
                    .map(|v| v.to_bits())
                    .eq(fresh.iter().map(|v| v.to_bits())),
                "n = {n}: apply_into differs from apply"
            );
        }
    }
    let d = gpu.upload(&vec![1.0f32; 1000], "input")?;
    let taps = Taps::Sum { radius: 3 };
    let mut short = gpu.alloc::<f32>(999, "short output")?;
    let err = stencil::apply_into(gpu, &d, &mut short, &taps, Boundary::Zero).unwrap_err();
    ensure!(err.to_string().contains("999"), "wrong length: {err}");
    // Overlap: the output is the input shifted by one element.
    let mut both = gpu.upload(&vec![1.0f32; 1001], "both")?;
    let base = both.as_device_ptr();
    // SAFETY: both views lie inside `both` (1001 elements); only their addresses are compared.
    let (input, mut output) = unsafe {
        (
            View::from_raw_parts(base, 1000),
            ViewMut::from_raw_parts(base.wrapping_add(1), 1000),
        )
    };
    let err = stencil::apply_into(gpu, &input, &mut output, &taps, Boundary::Zero).unwrap_err();
    ensure!(err.to_string().contains("overlaps"), "overlap: {err}");
    ensure!(
        gpu.download(&both)?.iter().all(|&v| v == 1.0),
        "refused, yet written"
    );
    let _ = &mut both;
    Ok(())
}

/// The cooperative launch: the grid-synchronised sum over ragged sizes (its grid at the
/// resident count, so that blocks loop and every block meets the barrier), twice in a row (the
/// barrier needs no reset); a grid one block larger than can be resident, and an ordinary
/// launch of a grid-synchronised kernel, are refused with errors that say why.
fn grid_sync_launches(gpu: &Gpu) -> TestResult {
    use ferrocuda_lessons::kernels::reduce::reduce_grid_sync;
    for n in [1usize, 31, 4099, (1 << 20) + 3, (1 << 24) + 1].map(scaled) {
        let host = random_vec::<i64>(n, n as u64);
        let x = gpu.upload(&host, "grid sync input")?;
        let want = host.iter().fold(0i64, |a, &b| a.wrapping_add(b));
        for _ in 0..2 {
            let mut run =
                ReduceRun::<i64>::new(gpu, ReduceVariant::GridSync, ReduceOp::Sum, &x, 256)?;
            let got = run.run()?;
            ensure!(got == want, "n = {n}: {got} vs {want}");
        }
    }
    let kernel =
        ferrocuda_lessons::kernel(gpu, reduce_grid_sync::<f32>().context("f32 instance")?)?;
    let resident = kernel.max_active_blocks_per_sm(256, 0)? * gpu.props().sm_count;
    let x = gpu.upload(&vec![1.0f32; 1000], "x")?;
    let partials = gpu.alloc::<f32>(resident as usize + 1, "partials")?;
    let out = gpu.alloc::<f32>(1, "out")?;
    let too_large = kernel.config(resident + 1, 256);
    // SAFETY: `x` holds 1000 elements, `partials` one per block, `out` one.
    let refused = unsafe {
        kernel.launch_cooperative(too_large, |barrier| {
            (
                x.as_device_ptr(),
                1000,
                partials.as_device_ptr(),
                barrier,
                out.as_device_ptr(),
            )
        })
    };
    match refused {
        Err(e @ Error::InvalidLaunch { .. }) => {
            let text = e.to_string();
            ensure!(
                text.contains("reduce_grid_sync_f32")
                    && text.contains(&format!("all {} blocks resident", resident + 1))
                    && text.contains(&format!("only {resident} fit")),
                "unclear refusal: {text}"
            );
        }
        other => anyhow::bail!(
            "a grid of {} blocks was not refused: {other:?}",
            resident + 1
        ),
    }
    // The same kernel through an ordinary launch: refused before anything is enqueued (it
    // needs a barrier only `launch_cooperative` makes; any value here is a stand-in).
    // SAFETY: refused before the launch, so the stand-in barrier is never used.
    let stand_in = unsafe { ferrocuda::kernels::grid::GridBarrier::from_raw(0) };
    let ordinary = unsafe {
        kernel.launch(
            kernel.config(1, 256),
            (
                x.as_device_ptr(),
                1000,
                partials.as_device_ptr(),
                stand_in,
                out.as_device_ptr(),
            ),
        )
    };
    match ordinary {
        Err(e @ Error::InvalidLaunch { .. }) if e.to_string().contains("launch_cooperative") => {}
        other => anyhow::bail!("an ordinary launch was not refused: {other:?}"),
    }
    // And the GPU still works: a good cooperative launch after the refusals.
    // SAFETY: as above, with a grid of one block.
    unsafe {
        kernel.launch_cooperative(kernel.config(1, 256), |barrier| {
            (
                x.as_device_ptr(),
                1000,
                partials.as_device_ptr(),
                barrier,
                out.as_device_ptr(),
            )
        })?
    };
    ensure!(
        gpu.download(&out)?[0] == 1000.0,
        "one-block cooperative sum"
    );
    Ok(())
}

/// `suggested_block_size_declared` asks the driver with the dynamic shared memory each block
/// size declares; its answer must reach the best occupancy over every block size, each with
/// its own declared memory (for the stencil with R = 16 whose tile grows with the block, and
/// for a kernel that declares none).
fn suggested_block_with_declared_shared(gpu: &Gpu) -> TestResult {
    use ferrocuda_lessons::kernels::stencil::stencil_1d_shared;
    let entries = [
        stencil_1d_shared::<f64>(16)
            .context("stencil instance")?
            .info(),
        smoke_saxpy().info(),
    ];
    for entry in entries {
        let kernel = ferrocuda_lessons::kernel_info(gpu, entry)?;
        let (_, suggested) = kernel.suggested_block_size_declared()?;
        let warps = |b: u32| -> anyhow::Result<u32> {
            Ok(kernel.max_active_blocks_per_sm(b, entry.dynamic_shared_bytes(b))? * b.div_ceil(32))
        };
        let best = (1..=32)
            .map(|k| warps(32 * k))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let best = best.into_iter().max().unwrap_or(0);
        ensure!(
            suggested > 0 && warps(suggested)? == best,
            "{}: suggested block {suggested} reaches {} resident warps per SM, the best is {best}",
            entry.symbol,
            warps(suggested)?
        );
    }
    Ok(())
}

/// The streams demo: results right, and the event times consistent (each arrangement of two
/// operations takes at least as long as the longer one alone). How much overlaps is measured
/// by `ferrocuda streams`, not asserted here.
fn streams_and_events(gpu: &Gpu) -> TestResult {
    let r = ferrocuda_lessons::lab::stream_overlap(gpu, scaled((1 << 22) + 5), 4, 3)?;
    ensure!(r.correct, "the copy or the stencil output is wrong");
    if gpu.is_cpu() {
        // The CPU device runs each call to its end: its times are the host's, not the GPU's.
        return Ok(());
    }
    let longer = r.copy_s.max(r.kernel_s);
    ensure!(
        r.copy_s > 0.0
            && r.kernel_s > 0.0
            && r.serial_s >= 0.9 * longer
            && r.concurrent_s >= 0.9 * longer
            && r.concurrent_kernels_first_s >= 0.9 * longer,
        "inconsistent times: {r:?}"
    );
    Ok(())
}

fn bad_input_leaves_plans_usable(gpu: &Gpu) -> TestResult {
    let mut plan = ReducePlan::<f32>::new(gpu, ReduceOp::Max)?;
    let empty = gpu.upload::<f32>(&[], "empty")?;
    let err = plan.run(&empty).unwrap_err();
    ensure!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    let mut none = gpu.alloc::<f32>(0, "no result slot")?;
    let d = gpu.upload(&[1.0f32, 5.0, 2.0], "x")?;
    let err = plan.run_to_device(&d, &mut none).unwrap_err();
    ensure!(
        matches!(
            err,
            Error::LengthMismatch {
                expected: 1,
                found: 0,
                ..
            }
        ) && err.to_string().contains("one element"),
        "{err}"
    );
    ensure!(
        plan.run(&d)? == 5.0,
        "the plan works after refusing bad input"
    );
    // No min of i32 into i64: refused by name, not a wrong answer.
    let err = ReducePlan::<i32, i64>::new(gpu, ReduceOp::Min)
        .err()
        .context("min into i64")?;
    ensure!(
        matches!(err, Error::Unsupported { .. })
            && err.to_string().contains("min")
            && err.to_string().contains("i64"),
        "{err}"
    );
    // A stream of another device's context is refused before anything is enqueued. Safe code
    // gets streams only from a `Gpu` (a cust stream does not type-check: the compile-fail
    // case), so a foreign one needs a second device.
    let devices = cust::device::Device::num_devices()?;
    if devices > 1 {
        let other = Gpu::new(u32::from(gpu.props().ordinal == 0))?;
        let foreign = other.new_stream()?;
        let err = plan.run_on(&foreign, &d).unwrap_err();
        ensure!(
            matches!(err, Error::ForeignDevice { expected, found: None, .. }
                if expected == gpu.props().ordinal)
                && err.to_string().contains("another context"),
            "{err}"
        );
        // And memory of the other device, named by both ordinals.
        let elsewhere = other.upload(&[1.0f32], "on the other device")?;
        match gpu.download(&elsewhere) {
            Err(Error::ForeignDevice {
                expected,
                found: Some(found),
                ..
            }) if expected == gpu.props().ordinal && found == other.props().ordinal => {}
            other => anyhow::bail!("a slice of another device: {other:?}"),
        }
        ensure!(
            plan.run(&d)? == 5.0,
            "the plan works after refusing a foreign stream"
        );
    }
    // One device, one `Gpu`: opening it again gives the same stream, so work through either
    // handle is ordered as one.
    let again = Gpu::new(gpu.props().ordinal)?;
    ensure!(
        again.stream().as_raw() == gpu.stream().as_raw(),
        "Gpu::new of an open device made a second stream"
    );
    Ok(())
}

/// 100 000 calls: sizes alternating between small and large, four types, reductions and
/// stencils, on two host threads sharing the `Gpu`. Every result equals the CPU's, and device
/// memory in use ends where it started (after a warm-up that creates the cached workspaces).
fn soak(gpu: &Gpu) -> TestResult {
    let sizes = [1usize, 1000, (1 << 16) + 3, 1 << 20].map(scaled);
    let host_f32: Vec<Vec<f32>> = sizes.iter().map(|&n| exact_sum_input(n, 1)).collect();
    let host_i64: Vec<Vec<i64>> = sizes.iter().map(|&n| random_vec(n, 2)).collect();
    let host_i32: Vec<Vec<i32>> = sizes.iter().map(|&n| random_vec(n, 3)).collect();
    let upload = |v: &Vec<_>| gpu.upload(v, "soak input");
    let inputs_f32: Vec<_> = host_f32.iter().map(upload).collect::<Result<_, _>>()?;
    let inputs_i64: Vec<_> = host_i64
        .iter()
        .map(|v| gpu.upload(v, "i64"))
        .collect::<Result<_, _>>()?;
    let inputs_i32: Vec<_> = host_i32
        .iter()
        .map(|v| gpu.upload(v, "i32"))
        .collect::<Result<_, _>>()?;
    // What every call must return: the CPU's answer, computed once per input.
    let sum_f32: Vec<f32> = host_f32.iter().map(|x| x.iter().sum()).collect();
    let min_f32: Vec<f32> = host_f32
        .iter()
        .map(|x| x.iter().copied().fold(f32::INFINITY, f32::min))
        .collect();
    let max_i64: Vec<i64> = host_i64
        .iter()
        .map(|x| *x.iter().max().expect("non-empty"))
        .collect();
    let sum_i64: Vec<i64> = host_i64
        .iter()
        .map(|x| x.iter().fold(0i64, |a, &b| a.wrapping_add(b)))
        .collect();
    let wide_i32: Vec<i64> = host_i32
        .iter()
        .map(|x| x.iter().map(|&v| i64::from(v)).sum())
        .collect();
    let mut outputs: Vec<_> = sizes
        .iter()
        .map(|&n| gpu.upload(&vec![f32::poison(); n], "out"))
        .collect::<Result<_, _>>()?;
    let taps = Taps::Sum { radius: 3 };
    let call = |i: usize, outputs: Option<&mut Vec<ferrocuda::DeviceBuffer<f32>>>| -> TestResult {
        let k = i % sizes.len();
        let right = match i % 5 {
            0 => reduce::sum(gpu, &inputs_f32[k])? == sum_f32[k],
            1 => reduce::max(gpu, &inputs_i64[k])? == max_i64[k],
            2 => reduce::sum_i32_to_i64(gpu, &inputs_i32[k])? == wide_i32[k],
            3 => reduce::min(gpu, &inputs_f32[k])? == min_f32[k],
            _ => match outputs {
                Some(outputs) => {
                    stencil::apply_into(
                        gpu,
                        &inputs_f32[k],
                        &mut outputs[k],
                        &taps,
                        Boundary::Periodic,
                    )?;
                    true
                }
                None => reduce::sum(gpu, &inputs_i64[k])? == sum_i64[k],
            },
        };
        ensure!(
            right,
            "call {i} (kind {}, size {}) differs from the CPU",
            i % 5,
            sizes[k]
        );
        Ok(())
    };
    for i in 0..40 {
        call(i, Some(&mut outputs))?;
    }
    gpu.synchronize()?;
    let (before, _) = gpu.memory_info()?;
    std::thread::scope(|s| -> TestResult {
        let other = s.spawn(|| -> TestResult {
            for i in 0..50_000 {
                call(i * 7 + 1, None).with_context(|| format!("thread 2, call {i}"))?;
            }
            Ok(())
        });
        for i in 0..50_000 {
            call(i, Some(&mut outputs)).with_context(|| format!("thread 1, call {i}"))?;
        }
        other.join().map_err(|_| anyhow!("thread 2 panicked"))?
    })?;
    gpu.synchronize()?;
    let (after, _) = gpu.memory_info()?;
    ensure!(
        after == before,
        "free device memory moved from {before} to {after} bytes over 100 000 calls"
    );
    for (k, out) in outputs.iter().enumerate() {
        let check = check_stencil(&host_f32[k], &taps, Boundary::Periodic, &gpu.download(out)?);
        ensure!(
            check.passed,
            "stencil of size {}: {}",
            sizes[k],
            check.detail
        );
    }
    Ok(())
}

/// A `#[kernel]` handle names its package; a module of another package's PTX refuses it by
/// name before looking the symbol up (a kernel of the same symbol in two crates would otherwise
/// launch with the wrong parameter list).
fn kernels_are_taken_from_their_own_package(gpu: &Gpu) -> TestResult {
    let library = ferrocuda::kernels::reduce::reduce_reproducible::<f32>().context("f32 entry")?;
    let lesson = smoke_saxpy();
    let refused = |err: Option<Error>, entry: &str| -> TestResult {
        let err = err.with_context(|| format!("`{entry}` was taken from the wrong PTX"))?;
        let text = err.to_string();
        ensure!(
            text.contains("belongs to package") && text.contains(entry),
            "{text}"
        );
        Ok(())
    };
    refused(
        gpu.kernel_in(ferrocuda_lessons::LESSON_PTX, library).err(),
        library.info().symbol,
    )?;
    refused(gpu.kernel(lesson).err(), lesson.info().symbol)?;
    // Each from its own package's PTX.
    gpu.kernel(library)?;
    gpu.kernel_in(ferrocuda_lessons::LESSON_PTX, lesson)?;
    Ok(())
}

/// A plan holds a clone of the `Gpu`: it keeps working after the handle it was made from is
/// dropped, and on a thread that never touched the GPU before.
fn plans_own_their_gpu(gpu: &Gpu) -> TestResult {
    let handle = gpu.clone();
    let mut plan = ReducePlan::<f32>::new(&handle, ReduceOp::Sum)?;
    drop(handle);
    let host = exact_sum_input(100_003, 7);
    let input = gpu.upload(&host, "x")?;
    // Small integers: every partial sum is exact, so the result is too, in any order.
    let expected = host.iter().map(|&x| f64::from(x)).sum::<f64>() as f32;
    ensure!(expected != 0.0, "an input whose sum tells a missing block");
    let got = plan.run(&input)?;
    ensure!(
        got == expected,
        "after the handle was dropped: {got}, expected {expected}"
    );
    let on_thread = std::thread::scope(|scope| {
        scope
            .spawn(|| plan.run(&input).map_err(anyhow::Error::from))
            .join()
            .map_err(|_| anyhow!("the thread panicked"))?
    })?;
    ensure!(
        on_thread == expected,
        "on another thread: {on_thread}, expected {expected}"
    );
    Ok(())
}

/// `copy::copy_bulk` against the source's bits: sizes around a vector, a tile and a stage
/// cycle (more tiles than the resident blocks' stages hold), each at every offset from a
/// 16-byte boundary (the head and tail the threads copy), on the library's grid (a block per
/// tile) and on the resident blocks (each block cycling its stages); a pair at different
/// offsets, a length mismatch, an empty grid and (before sm_90) the GPU refused, naming the
/// kernel.
fn copy_bulk_checks(gpu: &Gpu) -> TestResult {
    use ferrocuda::copy::{CopyRun, copy_bulk};
    use ferrocuda_lessons::kernels::config::{
        COPY_BULK_BLOCK, COPY_BULK_STAGES, COPY_BULK_TILE_BYTES,
    };
    let (probe, mut probe_out) = (gpu.alloc::<u32>(1, "probe")?, gpu.alloc::<u32>(1, "probe")?);
    if !gpu
        .props()
        .reaches_arch(ferrocuda::kernels::copy::copy_bulk().info().min_arch)
    {
        let e = CopyRun::new(gpu, &probe, &mut probe_out)
            .err()
            .context("copy_bulk before sm_90")?;
        ensure!(
            e.to_string().contains("copy_bulk") && e.to_string().contains("sm_90"),
            "{e}"
        );
        return Ok(());
    }
    // The resident blocks: on that grid, past `STAGES * grid` tiles every block refills its
    // stages after their stores have read them.
    let shared = COPY_BULK_STAGES * COPY_BULK_TILE_BYTES;
    let grid = gpu
        .kernel(ferrocuda::kernels::copy::copy_bulk())?
        .resident_blocks(COPY_BULK_BLOCK, shared)? as usize;
    let tile = (COPY_BULK_TILE_BYTES / 4) as usize;
    let cycle = COPY_BULK_STAGES as usize * grid * tile;
    {
        let n = cycle + tile + 5;
        let (a, mut b) = (
            gpu.alloc::<u32>(n, "grid probe")?,
            gpu.alloc::<u32>(n, "grid probe")?,
        );
        let launched = CopyRun::new(gpu, &a, &mut b)?.config().grid[0] as usize;
        // The kernel's tiles: the 16-byte aligned body (the allocation is aligned) in tiles.
        let tiles = (4 * n / 16 * 16).div_ceil(COPY_BULK_TILE_BYTES as usize);
        ensure!(
            launched >= tiles && launched > grid,
            "a copy of {n} elements launches {launched} blocks: not one per tile ({tiles}), or \
             not more than the {grid} resident ones"
        );
        let launched = CopyRun::with_grid(gpu, &a, &mut b, Some(grid as u32))?
            .config()
            .grid[0];
        ensure!(
            launched as usize == grid,
            "with_grid({grid}) launches {launched} blocks"
        );
        match CopyRun::with_grid(gpu, &a, &mut b, Some(0)).map(|run| run.config()) {
            Err(Error::InvalidLaunch { launch, reason })
                if launch.kernel == "copy_bulk" && reason.contains("at least 1") => {}
            other => {
                return Err(anyhow!(
                    "copy_bulk on an empty grid: want an InvalidLaunch naming it, got {other:?}"
                ));
            }
        }
    }
    let sizes = [
        0,
        1,
        3,
        4,
        5,
        31,
        33,
        tile - 1,
        tile,
        tile + 1,
        5 * tile + 3,
        cycle + tile + 5,
        2 * cycle + 1,
    ];
    let longest = sizes.iter().max().unwrap() + 3;
    let host: Vec<u32> = (0..longest as u32)
        .map(|i| i.wrapping_mul(2654435761))
        .collect();
    let src = gpu.upload(&host, "copy source")?;
    let mut dst = gpu.alloc::<u32>(longest, "copy destination")?;
    let mut cases = 0;
    for n in sizes {
        for offset in 0..4 {
            for blocks in [None, Some(grid as u32)] {
                gpu.poison_async(&mut dst)?;
                {
                    let (from, mut to) = (
                        src.index(offset..offset + n),
                        dst.index_mut(offset..offset + n),
                    );
                    CopyRun::with_grid(gpu, &from, &mut to, blocks)?.launch()?;
                }
                let got = gpu.download(&dst)?;
                let wrong = (offset..offset + n).find(|&i| got[i] != host[i]);
                ensure!(
                    wrong.is_none(),
                    "copy_bulk n = {n} at offset {offset}, grid {blocks:?}: element {wrong:?} differs"
                );
                let outside = (0..longest).filter(|i| !(offset..offset + n).contains(i));
                ensure!(
                    outside
                        .clone()
                        .all(|i| got[i] == u32::from_ne_bytes([u32::POISON_BYTE; 4])),
                    "copy_bulk n = {n} at offset {offset}, grid {blocks:?} wrote outside its destination"
                );
                cases += 1;
            }
        }
    }
    let refused = |r: ferrocuda::Result<()>, what: &str, needle: &str| -> TestResult {
        match r {
            Err(Error::InvalidArgument { what: w } | Error::LengthMismatch { what: w, .. })
                if w.contains("copy_bulk") && w.contains(needle) =>
            {
                Ok(())
            }
            other => Err(anyhow!(
                "copy_bulk {what}: want an InvalidArgument naming it, got {other:?}"
            )),
        }
    };
    // The same offset from a 16-byte boundary at different places: bytes 4 and 20.
    let n = 5 * tile + 3;
    gpu.poison_async(&mut dst)?;
    copy_bulk(gpu, &src.index(1..1 + n), &mut dst.index_mut(5..5 + n))?;
    let got = gpu.download(&dst)?;
    ensure!(
        got[5..5 + n] == host[1..1 + n],
        "copy_bulk from byte 4 to byte 20"
    );
    refused(
        copy_bulk(gpu, &src.index(0..64), &mut dst.index_mut(2..66)),
        "at offsets 0 and 8",
        "same offset",
    )?;
    refused(
        copy_bulk(gpu, &src.index(0..64), &mut dst.index_mut(1..65)),
        "at offsets 0 and 4",
        "same offset",
    )?;
    match copy_bulk(gpu, &src.index(0..64), &mut dst.index_mut(0..63)) {
        Err(Error::LengthMismatch {
            ref what,
            expected: 64,
            found: 63,
        }) if what.contains("copy_bulk") && what.contains("64 elements") => {}
        other => anyhow::bail!("copy_bulk of 64 into 63: want a LengthMismatch, got {other:?}"),
    }
    ensure!(cases == sizes.len() * 4 * 2, "every case ran");
    Ok(())
}

/// Shared memory past the 48 KiB default: the bulk-copy kernel declares 64 KiB and launches
/// (the launch opts in); a launch asking for more than the device's opt-in limit is refused
/// before it reaches the driver, naming the limit.
fn shared_opt_in(gpu: &Gpu) -> TestResult {
    let props = gpu.props();
    ensure!(
        props.shared_mem_per_block_optin >= props.shared_mem_per_block,
        "opt-in limit {} below the default {}",
        props.shared_mem_per_block_optin,
        props.shared_mem_per_block
    );
    if !props.reaches_arch(ferrocuda::kernels::copy::copy_bulk().info().min_arch) {
        return Ok(());
    }
    let kernel = gpu.kernel(ferrocuda::kernels::copy::copy_bulk())?;
    let declared = kernel.entry().dynamic_shared_bytes(32);
    ensure!(
        declared > 48 * 1024,
        "copy_bulk declares {declared} B, not past 48 KiB"
    );
    let n = scaled(1 << 20);
    let host: Vec<u32> = (0..n as u32).collect();
    let src = gpu.upload(&host, "opt-in source")?;
    let dst = gpu.alloc::<u32>(n, "opt-in destination")?;
    let args = || {
        (
            src.as_device_ptr().cast::<u8>(),
            dst.as_device_ptr().cast::<u8>(),
            4 * n,
        )
    };
    // SAFETY: both buffers hold `4n` bytes at offset 0 of their allocations.
    unsafe { kernel.launch_and_wait(LaunchConfig::linear(4, 32, declared), args())? };
    ensure!(
        gpu.download(&dst)? == host,
        "the copy with {declared} B of shared memory"
    );
    let limit = props.shared_mem_per_block_optin;
    // SAFETY: refused before the launch.
    let past = unsafe { kernel.launch_and_wait(LaunchConfig::linear(4, 32, limit + 16), args()) };
    match past {
        Err(e)
            if e.to_string().contains(&limit.to_string())
                && e.to_string().contains("copy_bulk") =>
        {
            Ok(())
        }
        other => Err(anyhow!(
            "{} B of dynamic shared memory: want a refusal naming {limit} B, got {other:?}",
            limit + 16
        )),
    }
}

/// IEEE 754 adds `-0.0 + -0.0` to `-0.0`: so must a sum of only negative zeros be, whatever the
/// grid (the padding and empty blocks add the identity, which must be `-0.0` too). The sum of
/// nothing is `+0.0`. NaNs are ignored by min and max; an input of NaNs only gives the identity.
fn signed_zeros_and_nans(gpu: &Gpu) -> TestResult {
    use ferrocuda::reduce as library;
    use ferrocuda::runtime::element::F16;
    for n in [1usize, 31, 33, 1000, (1 << 20) + 1].map(scaled) {
        let f = gpu.upload(&vec![-0.0f32; n], "negative zeros")?;
        let d = gpu.upload(&vec![-0.0f64; n], "negative zeros")?;
        let h = gpu.upload(&vec![F16::from_f64(-0.0); n], "negative zeros")?;
        let (sf, sd, sh) = (
            library::sum(gpu, &f)?,
            library::sum(gpu, &d)?,
            library::sum_to_f32(gpu, &h)?,
        );
        ensure!(
            sf.to_bits() == (-0.0f32).to_bits()
                && sd.to_bits() == (-0.0f64).to_bits()
                && sh.to_bits() == (-0.0f32).to_bits(),
            "n = {n}: the sums of -0.0 are {sf:?}, {sd:?}, {sh:?}"
        );
        let mut nans = vec![f32::NAN; n];
        let (min, max) = (library::min(gpu, &f)?, library::max(gpu, &f)?);
        ensure!(
            min == 0.0 && max == 0.0,
            "n = {n}: min {min}, max {max} of -0.0"
        );
        let only_nans = gpu.upload(&nans, "NaNs")?;
        let (min, max) = (
            library::min(gpu, &only_nans)?,
            library::max(gpu, &only_nans)?,
        );
        ensure!(
            min == f32::INFINITY && max == f32::NEG_INFINITY,
            "n = {n}: min {min}, max {max} of NaNs only"
        );
        nans[n / 2] = -3.0;
        nans[n - 1] = 5.0;
        let some = gpu.upload(&nans, "NaNs and two numbers")?;
        let (min, max) = (library::min(gpu, &some)?, library::max(gpu, &some)?);
        let want = if n == 1 { (5.0, 5.0) } else { (-3.0, 5.0) };
        ensure!(
            (min, max) == want,
            "n = {n}: min {min}, max {max}, want {want:?}"
        );
    }
    let empty = gpu.upload(&Vec::<f32>::new(), "empty")?;
    let nothing = ferrocuda::reduce::sum(gpu, &empty)?;
    ensure!(
        nothing.to_bits() == 0,
        "the sum of nothing is {nothing:?}, want +0.0"
    );
    Ok(())
}
