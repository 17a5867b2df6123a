//! Streams, events and copies as a program uses them: safe calls on two streams overlap where
//! their buffers allow it and wait for each other where they do not; a buffer's drop waits for
//! no one on the host, yet its memory is not reused under a kernel still reading it; events
//! time and order work; page-locked buffers carry asynchronous copies both ways.
use std::process::ExitCode;

use anyhow::ensure;
use ferrocuda::stencil::{Boundary, StencilGrid, StencilRun, Taps};
use ferrocuda::{Access, Error, Gpu, Stream};
use ferrocuda_lessons::cpu::check_stencil;
use ferrocuda_tests::{
    TestResult, current_context, gpu_test, hardware_test, random_vec, run_gpu_suite, scaled,
};

/// The pipeline of `docs/library.md`, as `examples/pipeline.rs` runs it.
#[path = "../../examples/pipeline.rs"]
mod pipeline;

/// Memory and a stream of another library, used by ferrocuda, as `examples/interop.rs` does.
#[path = "../../examples/interop.rs"]
mod interop;

/// Set in the environment of this binary run as a child by
/// `dropping_the_last_gpu_with_work_in_flight`: it runs that scenario instead of the suite.
const DROP_CHILD: &str = "FERROCUDA_TEST_DROP_IN_FLIGHT";

fn main() -> ExitCode {
    if std::env::var_os(DROP_CHILD).is_some() {
        return match drop_in_flight_child() {
            Ok(in_flight) => {
                println!("in flight when dropped: {in_flight}; a new Gpu then summed right: ok");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    run_gpu_suite(vec![
        gpu_test(
            "dropping_the_last_gpu_and_its_buffers_with_work_in_flight_neither_hangs_nor_faults",
            dropping_the_last_gpu_with_work_in_flight,
        ),
        gpu_test(
            "the_pipeline_example_on_two_streams_gives_the_stencil_and_its_sum",
            pipeline_example,
        ),
        gpu_test(
            "another_librarys_buffer_and_stream_are_reduced_by_ferrocuda_and_handed_back",
            interop_example,
        ),
        gpu_test(
            "an_adopted_stream_handed_back_is_never_touched_again_even_by_the_free_of_a_buffer_it_wrote",
            adopted_stream_handed_back,
        ),
        gpu_test(
            "safe_calls_wait_across_streams_exactly_where_their_buffers_conflict",
            waits_where_buffers_conflict,
        ),
        hardware_test(
            "safe_calls_on_two_streams_over_different_buffers_are_in_flight_at_once",
            "a GPU that runs two kernels at once",
            two_streams_overlap,
        ),
        hardware_test(
            "a_dropped_buffer_is_freed_without_a_host_wait_and_not_under_a_kernel_still_reading_it",
            "work that runs while the host goes on",
            drop_waits_for_no_one,
        ),
        hardware_test(
            "work_declared_with_uses_on_is_waited_for_by_later_calls_and_drops",
            "work that runs while the host goes on",
            declared_unsafe_work_is_waited_for,
        ),
        gpu_test(
            "kernels_and_prepared_runs_launch_from_other_threads_and_cooperative_launches_take_callers_streams",
            handles_move_and_cooperate,
        ),
        hardware_test(
            "dropping_a_loaded_module_waits_for_its_kernels_on_a_callers_stream",
            "work that runs while the host goes on",
            module_drop_waits,
        ),
        gpu_test(
            "events_record_wait_query_and_time_and_refuse_to_time_without_timing",
            events_checks,
        ),
        gpu_test(
            "pinned_buffers_carry_asynchronous_copies_both_ways_and_refuse_wrong_lengths",
            pinned_copies,
        ),
        gpu_test(
            "every_call_and_drop_gives_the_thread_back_another_librarys_current_context",
            context_comes_back,
        ),
    ])
}

/// A `Kernel` and a `StencilRun` are `Send`: made on this thread, launched on another. The
/// kernel there runs cooperative launches (a grid-wide barrier) on two caller's streams: they
/// share the `Gpu`'s kept barrier, so each waits for the other stream's last launch on it (and
/// for nothing when the barrier was last used on its own stream), counted by
/// `cross_stream_waits`.
fn handles_move_and_cooperate(gpu: &Gpu) -> TestResult {
    use anyhow::Context;
    use ferrocuda_lessons::kernels::reduce::reduce_grid_sync;
    fn moved<T: Send>(value: T) -> T {
        value
    }
    // A prepared copy is `Send` too (it needs sm_90 to be made, so only its type is checked).
    let _ = moved::<Option<ferrocuda::copy::CopyRun<'_, '_>>>(None);
    let kernel = ferrocuda_lessons::kernel(gpu, reduce_grid_sync::<f32>().context("f32")?)?;
    let blocks = 2u32;
    let n = 1000usize;
    let inputs = [
        gpu.upload(&vec![1.0f32; n], "ones")?,
        gpu.upload(&vec![2.0f32; n], "twos")?,
    ];
    let partials = [
        gpu.alloc::<f32>(blocks as usize, "partials 0")?,
        gpu.alloc::<f32>(blocks as usize, "partials 1")?,
    ];
    let outs = [gpu.alloc::<f32>(1, "out 0")?, gpu.alloc::<f32>(1, "out 1")?];
    let streams = [gpu.new_stream()?, gpu.new_stream()?];
    let taps = Taps::Sum { radius: 1 };
    let x = gpu.upload(&random_vec::<f32>(n, 5), "x")?;
    let mut y = gpu.alloc::<f32>(n, "y")?;
    let run = StencilRun::new(gpu, &taps, Boundary::Zero, &x, &mut y)?;
    let added = std::thread::scope(|scope| {
        let (kernel, mut run) = (moved(&kernel), moved(run));
        let (inputs, partials, outs, streams) = (&inputs, &partials, &outs, &streams);
        scope
            .spawn(move || -> anyhow::Result<Vec<u64>> {
                run.launch_on(&streams[0])?;
                run.finish()?;
                let mut added = Vec::new();
                for i in [0usize, 1, 1, 0] {
                    let before = gpu.cross_stream_waits();
                    // SAFETY: `inputs[i]` holds `n` elements, `partials[i]` one per block,
                    // `outs[i]` one; all live until the streams are synchronized below.
                    unsafe {
                        kernel.launch_cooperative_on(
                            &streams[i],
                            kernel.config(blocks, 256),
                            |barrier| {
                                (
                                    inputs[i].as_device_ptr(),
                                    n,
                                    partials[i].as_device_ptr(),
                                    barrier,
                                    outs[i].as_device_ptr(),
                                )
                            },
                        )?
                    };
                    added.push(gpu.cross_stream_waits() - before);
                }
                streams[0].synchronize()?;
                streams[1].synchronize()?;
                Ok(added)
            })
            .join()
            .expect("the launching thread does not panic")
    })?;
    // Every call on a caller's stream waits for the GPU's stream (one wait); on top of it,
    // stream 1 waits for stream 0's use of the barrier, stream 1 again for nothing more (its
    // own use), stream 0 again for stream 1's.
    ensure!(
        added == [1, 2, 1, 2],
        "cross-stream waits added by the cooperative launches: {added:?}, want [1, 2, 1, 2]"
    );
    let sums = [gpu.download(&outs[0])?[0], gpu.download(&outs[1])?[0]];
    ensure!(
        sums == [n as f32, 2.0 * n as f32],
        "cooperative sums on two streams: {sums:?}"
    );
    let check = check_stencil(
        &gpu.download(&x)?,
        &taps,
        Boundary::Zero,
        &gpu.download(&y)?,
    );
    ensure!(
        check.passed,
        "the stencil run launched on another thread: {}",
        check.detail
    );
    Ok(())
}

fn interop_example(gpu: &Gpu) -> TestResult {
    // The example makes the device's context current for the other library's calls.
    let _keep = ferrocuda_tests::KeepContext::new();
    for n in [0usize, 1, 6, 7, 33, (1 << 20) + 1].map(scaled) {
        let got = interop::interop(gpu, n).map_err(|e| anyhow::anyhow!("n = {n}: {e}"))?;
        let want: u64 = (0..n as u64).map(|i| i % 7).sum();
        ensure!(got == want, "n = {n}: {got}, want {want}");
    }
    Ok(())
}

/// A stream of another library (here cust's) writes a ferrocuda buffer through a safe call, and
/// a prepared stencil run launches on it; it is handed back (its `GpuStream` dropped) and its
/// owner destroys it. The buffer's free (the stream was its last user) and the run's `finish`
/// (the stream was its last launch's) must not name the destroyed stream. The per-thread default
/// stream, another stream on every thread, is refused.
fn adopted_stream_handed_back(gpu: &Gpu) -> TestResult {
    // SAFETY: refused before the handle is used.
    match unsafe { gpu.adopt_stream(2 as *mut std::ffi::c_void) } {
        Err(Error::InvalidArgument { what }) if what.contains("per-thread") => {}
        other => anyhow::bail!("the per-thread default stream was not refused: {other:?}"),
    }
    // The other library's stream, made in the device's primary context.
    let _keep = ferrocuda_tests::KeepContext::new();
    gpu.make_current()?;
    let theirs = cust::stream::Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None)?;
    let n = 4096;
    let x = gpu.upload(&random_vec::<f32>(n, 9), "x")?;
    let mut y = gpu.alloc::<f32>(n, "y")?;
    let mut z = gpu.alloc::<f32>(n, "z")?;
    let taps = Taps::Sum { radius: 2 };
    let mut run = StencilRun::new(gpu, &taps, Boundary::Zero, &x, &mut z)?;
    {
        // SAFETY: a live stream of this device's primary context, alive until after `adopted`
        // is dropped.
        let adopted = unsafe { gpu.adopt_stream(theirs.as_inner().cast())? };
        ensure!(!adopted.is_owned(), "an adopted stream is not ferrocuda's");
        ensure!(
            adopted.as_raw() == theirs.as_inner().cast(),
            "the adopted stream lends the same handle back"
        );
        ferrocuda::stencil::apply_into_on(gpu, &adopted, &x, &mut y, &taps, Boundary::Zero)?;
        run.launch_on(&adopted)?;
    }
    drop(theirs);
    // `y`'s last user is the handed-back stream: its free goes elsewhere; the run's last
    // launch was there: its `finish` finds it done.
    let dead_before = ferrocuda::runtime::driver::cpu::dead_stream_uses();
    drop(y);
    run.finish()?;
    drop(run);
    gpu.synchronize()?;
    gpu.synchronize_device()?;
    // The CPU device counts calls on destroyed streams (the NVIDIA driver may not catch one).
    let dead = ferrocuda::runtime::driver::cpu::dead_stream_uses() - dead_before;
    ensure!(dead == 0, "{dead} driver calls named the destroyed stream");
    let again = gpu.upload(&[1.0f32, 2.0], "after the free")?;
    ensure!(
        gpu.download(&again)? == [1.0, 2.0],
        "the GPU works after the free"
    );
    Ok(())
}

/// A module loaded for a while (`Gpu::load_module`) whose kernel was launched many times on a
/// caller's stream is dropped with that work queued: `cuModuleUnload` must not run under its
/// kernels, so the drop waits for them (the stream is idle when it returns), and their results
/// are whole. (The NVIDIA driver 580's `cuModuleUnload` was seen to wait by itself, with the
/// library's own wait taken out; the library does not count on it.)
fn module_drop_waits(gpu: &Gpu) -> TestResult {
    use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
    let n = 1usize << 26;
    let x = gpu.upload(&vec![1.0f32; n], "x")?;
    let y = gpu.upload(&vec![2.0f32; n], "y")?;
    let mut out = gpu.alloc::<f32>(n, "out")?;
    let stream = gpu.new_stream()?;
    let module = gpu.load_module(ferrocuda_lessons::LESSON_PTX)?;
    let kernel = module.kernel(smoke_saxpy())?;
    let config = kernel.config(n.div_ceil(256) as u32, 256);
    gpu.uses_on(
        &stream,
        &[Access::read(&x), Access::read(&y), Access::write(&mut out)],
    )?;
    let launches = 50;
    for _ in 0..launches {
        // SAFETY: the three buffers hold `n` f32 and live until the stream is idle (below).
        unsafe {
            kernel.launch_on(
                &stream,
                config,
                (
                    n,
                    3.0f32,
                    x.as_device_ptr(),
                    y.as_device_ptr(),
                    out.as_device_ptr(),
                ),
            )?
        };
    }
    let queued = !stream.query()?;
    drop(kernel);
    let start = std::time::Instant::now();
    drop(module);
    let dropped = start.elapsed();
    ensure!(
        stream.query()?,
        "the module was dropped ({dropped:?}) with its kernels still running on the stream"
    );
    let got = gpu.download(&out)?;
    ensure!(
        got.iter().all(|v| *v == 5.0),
        "3 x 1 + 2 is not 5 everywhere"
    );
    println!(
        "{launches} launches of {n} elements, {} when the drop began; the drop took {dropped:?}",
        if queued {
            "still running"
        } else {
            "already done"
        }
    );
    Ok(())
}

fn pipeline_example(gpu: &Gpu) -> TestResult {
    for n in [7usize, 33, (1 << 20) + 1].map(scaled).map(|n| n.max(7)) {
        let (first, total) = pipeline::pipeline(gpu, n)?;
        let want = (7 * n - 12) as f32;
        ensure!(
            first == 4.0 && total == want,
            "n = {n}: output[0] = {first}, sum = {total}, want 4 and {want}"
        );
    }
    Ok(())
}

/// The waits the library adds, counted (`Gpu::cross_stream_waits`), for each kind of conflict.
fn waits_where_buffers_conflict(gpu: &Gpu) -> TestResult {
    let (s1, s2) = (gpu.new_stream()?, gpu.new_stream()?);
    let n = 1000;
    let a = gpu.upload(&random_vec::<f32>(n, 1), "a")?;
    let b = gpu.upload(&random_vec::<f32>(n, 2), "b")?;
    let mut c = gpu.alloc::<f32>(n, "c")?;
    let mut d = gpu.alloc::<f32>(n, "d")?;
    let taps = Taps::Sum { radius: 1 };
    let waits = |what: &str, want: u64, call: &mut dyn FnMut() -> ferrocuda::Result<()>| {
        let before = gpu.cross_stream_waits();
        call()?;
        let added = gpu.cross_stream_waits() - before;
        ensure!(
            added == want,
            "{what}: {added} cross-stream waits, want {want}"
        );
        Ok(())
    };
    let apply =
        |s: &Stream, x: &ferrocuda::DeviceSlice<f32>, y: &mut ferrocuda::DeviceSlice<f32>| {
            ferrocuda::stencil::apply_into_on(gpu, s, x, y, &taps, Boundary::Zero)
        };
    // One stream: no wait at all, however many calls.
    waits("the GPU's stream alone", 0, &mut || {
        apply(gpu.stream(), &a, &mut c)?;
        apply(gpu.stream(), &c, &mut d)?;
        apply(gpu.stream(), &a, &mut c)
    })?;
    // A caller's stream waits for the GPU's stream (where `unsafe` work and copies go), and
    // for the GPU's stream's use of `c`, which the call overwrites: one wait covers both.
    waits("first call on s1", 1, &mut || apply(&s1, &a, &mut c))?;
    // s2 reads `a` too (no conflict with s1's read) and writes `d`, last written on the GPU's
    // stream (already waited for): one wait.
    waits("s2 beside s1", 1, &mut || apply(&s2, &a, &mut d))?;
    // s2 reads `c`, which s1 wrote: the GPU's stream and s1.
    waits("read after write across streams", 2, &mut || {
        apply(&s2, &c, &mut d)
    })?;
    // s1 overwrites `c`, which s2 read: write after read.
    waits("write after read across streams", 2, &mut || {
        apply(&s1, &b, &mut c)
    })?;
    // The GPU's stream reads `d`, which s2 wrote, and overwrites `c`, which s1 wrote.
    waits("the GPU's stream after s1 and s2", 2, &mut || {
        apply(gpu.stream(), &d, &mut c)
    })?;
    // Two readers of `b` on two streams: each waits for the GPU's stream (which last wrote the
    // outputs), never for the other reader.
    waits("reads of one buffer on two streams", 2, &mut || {
        apply(&s1, &b, &mut c)?;
        apply(&s2, &b, &mut d)
    })?;
    // A declared `unsafe` use: `uses_on` waits as a safe call would, and is entered.
    waits("uses_on a buffer s2 wrote, from s1", 2, &mut || {
        gpu.uses_on(&s1, &[Access::read(&d)])
    })?;
    let want = gpu.download(&d)?;
    let check = check_stencil(&gpu.download(&b)?, &taps, Boundary::Zero, &want);
    ensure!(check.passed, "the last stencil: {}", check.detail);
    Ok(())
}

/// Two stencils, each one block looping over 2^24 elements (milliseconds each, on one SM), run
/// on two streams: measured with events, they are in flight at once when the span from the
/// first start to the last end is well under the two run one after the other. The same two on
/// one stream are the control: they must not look overlapped (else the check could not fail).
fn two_streams_overlap(gpu: &Gpu) -> TestResult {
    let n = 1 << 24;
    let taps = Taps::Sum { radius: 3 };
    let x = [
        gpu.upload(&random_vec::<f32>(n, 3), "x0")?,
        gpu.upload(&random_vec::<f32>(n, 4), "x1")?,
    ];
    let mut y = [gpu.alloc::<f32>(n, "y0")?, gpu.alloc::<f32>(n, "y1")?];
    let (s1, s2) = (gpu.new_stream()?, gpu.new_stream()?);
    let events = (0..4)
        .map(|_| gpu.new_event(true))
        .collect::<ferrocuda::Result<Vec<_>>>()?;
    // Span from the first start to the last end, in ms, with the runs on `streams`.
    let mut span = |streams: [&Stream; 2]| -> anyhow::Result<f32> {
        let [y0, y1] = &mut y;
        let mut runs = [
            StencilRun::with_grid(
                gpu,
                &taps,
                Boundary::Zero,
                &x[0],
                y0,
                StencilGrid::Blocks(1),
            )?,
            StencilRun::with_grid(
                gpu,
                &taps,
                Boundary::Zero,
                &x[1],
                y1,
                StencilGrid::Blocks(1),
            )?,
        ];
        gpu.synchronize_device()?;
        for (i, run) in runs.iter_mut().enumerate() {
            events[2 * i].record(streams[i])?;
            run.launch_on(streams[i])?;
            events[2 * i + 1].record(streams[i])?;
        }
        gpu.synchronize_device()?;
        let start = |i: usize| &events[2 * i];
        let (a, b) = (
            start(0).elapsed_ms(start(1))?,
            start(0).elapsed_ms(&events[3])?,
        );
        let first_end = start(0).elapsed_ms(&events[1])?;
        Ok(first_end.max(b) - a.min(0.0))
    };
    span([&s1, &s2])?; // warm-up
    let serial = span([&s1, &s1])?;
    let parallel = span([&s1, &s2])?;
    println!("two one-block stencils: {serial:.3} ms on one stream, {parallel:.3} ms on two");
    ensure!(
        parallel < 0.75 * serial,
        "on two streams the stencils spanned {parallel:.3} ms, on one {serial:.3} ms: they did \
         not run at once"
    );
    for (i, y) in y.iter().enumerate() {
        let check = check_stencil(
            &gpu.download(&x[i])?,
            &taps,
            Boundary::Zero,
            &gpu.download(y)?,
        );
        ensure!(check.passed, "stencil {i}: {}", check.detail);
    }
    Ok(())
}

/// A buffer dropped while a kernel on the GPU's stream still runs returns at once (an event
/// after the kernel is not yet complete), and one dropped while a caller's stream still reads it
/// is not handed to a new allocation until that kernel is done (the new allocation's poison
/// would show in the stencil's output).
fn drop_waits_for_no_one(gpu: &Gpu) -> TestResult {
    let n = 1 << 24;
    let taps = Taps::Sum { radius: 3 };
    let host = random_vec::<f32>(n, 5);
    let x = gpu.upload(&host, "x")?;
    let mut y = gpu.alloc::<f32>(n, "y")?;
    let done = gpu.new_event(false)?;
    let scratch = gpu.alloc::<f32>(n, "scratch")?;
    StencilRun::with_grid(
        gpu,
        &taps,
        Boundary::Zero,
        &x,
        &mut y,
        StencilGrid::Blocks(1),
    )?
    .launch()?;
    done.record(gpu.stream())?;
    drop(scratch);
    ensure!(
        !done.query()?,
        "the kernel finished before the drop returned: the drop waited for it (or the kernel \
         is too short to tell)"
    );
    gpu.synchronize()?;

    let s1 = gpu.new_stream()?;
    let input = gpu.upload(&host, "input read on s1")?;
    let mut out = gpu.alloc::<f32>(n, "out")?;
    StencilRun::with_grid(
        gpu,
        &taps,
        Boundary::Zero,
        &input,
        &mut out,
        StencilGrid::Blocks(1),
    )?
    .launch_on(&s1)?;
    drop(input);
    // The pool may hand the freed memory to this upload: only once s1 is done with it.
    let poison = gpu.upload(&vec![f32::NAN; n], "poison")?;
    // `download` waits for s1, which wrote `out`.
    let check = check_stencil(&host, &taps, Boundary::Zero, &gpu.download(&out)?);
    ensure!(
        check.passed,
        "the input was reused under the kernel: {}",
        check.detail
    );
    drop(poison);
    Ok(())
}

/// `uses_on` before an `unsafe` launch on a caller's stream, with a long stencil in between on
/// the same stream: a download on the GPU's stream must wait for the launch (an event recorded
/// when `uses_on` was called would let it read the poison), and so must the output's drop.
fn declared_unsafe_work_is_waited_for(gpu: &Gpu) -> TestResult {
    let n = 1 << 24;
    let taps = Taps::Sum { radius: 3 };
    let s1 = gpu.new_stream()?;
    let x = gpu.upload(&random_vec::<f32>(n, 7), "x")?;
    let mut z = gpu.alloc::<f32>(n, "z")?;
    let a = gpu.upload(&(0..1024).map(|i| i as f32).collect::<Vec<_>>(), "a")?;
    let b = gpu.upload(&vec![1.0f32; 1024], "b")?;
    let mut y = gpu.upload(&vec![f32::NAN; 1024], "y")?;
    let saxpy = ferrocuda_lessons::kernel(gpu, ferrocuda_lessons::kernels::smoke::smoke_saxpy())?;
    gpu.uses_on(
        &s1,
        &[Access::read(&a), Access::read(&b), Access::write(&mut y)],
    )?;
    // About ten milliseconds of work on s1 before the launch.
    StencilRun::with_grid(
        gpu,
        &taps,
        Boundary::Zero,
        &x,
        &mut z,
        StencilGrid::Blocks(1),
    )?
    .launch_on(&s1)?;
    let config = ferrocuda::LaunchConfig::per_element(1024, 256, 0).expect("a grid");
    // SAFETY: `a`, `b` and `y` hold 1024 elements each; `y` is held mutably by this function
    // and declared written on s1 above; everything stays alive until the download below.
    unsafe {
        saxpy.launch_on(
            &s1,
            config,
            (
                1024usize,
                2.0f32,
                a.as_device_ptr(),
                b.as_device_ptr(),
                y.as_device_ptr(),
            ),
        )?
    };
    let got = gpu.download(&y)?;
    let want: Vec<f32> = (0..1024).map(|i| 2.0 * i as f32 + 1.0).collect();
    ensure!(
        got == want,
        "the download did not wait for the declared launch: y[0..4] = {:?}",
        &got[..4]
    );
    Ok(())
}

fn events_checks(gpu: &Gpu) -> TestResult {
    let (start, stop) = (gpu.new_event(true)?, gpu.new_event(true)?);
    let untimed = gpu.new_event(false)?;
    ensure!(start.query()?, "an event never recorded is complete");
    let s1 = gpu.new_stream()?;
    let n = scaled(1 << 20);
    let x = gpu.upload(&random_vec::<f32>(n, 6), "x")?;
    let mut y = gpu.alloc::<f32>(n, "y")?;
    let taps = Taps::Sum { radius: 2 };
    start.record(&s1)?;
    ferrocuda::stencil::apply_into_on(gpu, &s1, &x, &mut y, &taps, Boundary::Periodic)?;
    stop.record(&s1)?;
    untimed.record(&s1)?;
    gpu.stream().wait_event(&untimed)?;
    stop.synchronize()?;
    ensure!(
        stop.query()? && s1.query()?,
        "after synchronize, the event and stream are done"
    );
    let ms = start.elapsed_ms(&stop)?;
    ensure!(ms >= 0.0, "elapsed {ms} ms");
    match start.elapsed_ms(&untimed) {
        Err(Error::InvalidArgument { what }) if what.contains("timing") => {}
        other => anyhow::bail!("timing an untimed event: {other:?}"),
    }
    s1.synchronize()?;
    gpu.synchronize_device()?;
    let check = check_stencil(
        &gpu.download(&x)?,
        &taps,
        Boundary::Periodic,
        &gpu.download(&y)?,
    );
    ensure!(check.passed, "{}", check.detail);
    Ok(())
}

fn pinned_copies(gpu: &Gpu) -> TestResult {
    let s1 = gpu.new_stream()?;
    for n in [0usize, 1, 31, 33, (1 << 20) + 1].map(scaled) {
        let data = random_vec::<f64>(n, n as u64);
        let pinned = gpu.pin(&data)?;
        ensure!(pinned.as_slice()? == &data[..], "pin copies the data");
        let mut device = gpu.alloc::<f64>(n, "device")?;
        gpu.upload_async_on(&s1, &pinned, &mut device)?;
        let mut back = gpu.alloc_pinned::<f64>(n)?;
        ensure!(
            back.as_slice()?.iter().all(|&v| v == 0.0),
            "alloc_pinned zeroes"
        );
        // Read on another stream than the one that wrote it: ordered by the record of uses.
        gpu.download_async_on(gpu.stream(), &device, &mut back)?;
        ensure!(
            back.as_slice()? == &data[..],
            "n = {n}: the round trip through pinned memory"
        );
        let mut pageable = vec![0.0f64; n];
        gpu.download_into(&device, &mut pageable)?;
        ensure!(pageable == data, "n = {n}: download_into");
        back.as_mut_slice()?.iter_mut().for_each(|v| *v = -1.0);
        gpu.upload_async_on(&s1, &back, &mut device)?;
        ensure!(
            gpu.download(&device)?.iter().all(|&v| v == -1.0),
            "n = {n}: an upload after the host wrote the pinned buffer"
        );
    }
    // A zero-sized element type: nothing to allocate, and nothing read through a null pointer.
    let units = gpu.pin(&[(); 4])?;
    ensure!(
        units.len() == 4 && units.as_slice()?.len() == 4,
        "pinned units"
    );
    // An upload from a pinned buffer that a download on another stream is still writing waits
    // for the download (on the device): the device gets what the download brought. The
    // download waits behind a stencil of milliseconds on its stream (one block), so an upload
    // that did not wait would read the pinned buffer long before the download reaches it.
    let n = scaled(1 << 22);
    let x = gpu.upload(&random_vec::<f32>(n, 9), "x")?;
    let mut src = gpu.alloc::<f32>(n, "src")?;
    let mut staging = gpu.alloc_pinned::<f32>(n)?;
    let mut dst = gpu.alloc::<f32>(n, "dst")?;
    let s2 = gpu.new_stream()?;
    let taps = Taps::Sum { radius: 3 };
    let mut slow = StencilRun::with_grid(
        gpu,
        &taps,
        Boundary::Zero,
        &x,
        &mut src,
        ferrocuda::stencil::StencilGrid::Blocks(1),
    )?;
    slow.launch_on(&s1)?;
    drop(slow);
    gpu.download_async_on(&s1, &src, &mut staging)?;
    gpu.upload_async_on(&s2, &staging, &mut dst)?;
    ensure!(
        gpu.download(&dst)? == gpu.download(&src)?,
        "an upload raced the download into its pinned source"
    );
    let pinned = gpu.pin(&[1u32, 2, 3])?;
    let mut device = gpu.alloc::<u32>(4, "four")?;
    for (what, result) in [
        (
            "upload_async_on",
            gpu.upload_async_on(&s1, &pinned, &mut device),
        ),
        ("download_into", gpu.download_into(&device, &mut [0u32; 3])),
    ] {
        match result {
            Err(Error::LengthMismatch {
                what: message,
                expected: 4,
                found: 3,
            }) if message.contains(what) => {}
            other => anyhow::bail!("{what} with 3 and 4 elements: {other:?}"),
        }
    }
    Ok(())
}

/// In a child process (the suite keeps a `Gpu` of its own alive): a stencil of milliseconds and a
/// reduction on a caller's stream, then every handle dropped, the last buffer last, with the
/// work still running; then a new `Gpu` of the same device sums right.
fn dropping_the_last_gpu_with_work_in_flight(gpu: &Gpu) -> TestResult {
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child.env(DROP_CHILD, "1");
    if gpu.is_cpu() {
        child.env("FERROCUDA_DEVICE", "cpu");
    }
    let out = child.output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success() && text.contains(": ok"),
        "the child: {text}"
    );
    ensure!(
        gpu.is_cpu() || text.contains("in flight when dropped: true"),
        "the work had finished before the drops: the test did not test them ({text})"
    );
    Ok(())
}

/// The child's scenario; returns whether the work was still running when the drops began.
fn drop_in_flight_child() -> anyhow::Result<bool> {
    let ordinal = std::env::var("FERROCUDA_DEVICE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let gpu = Gpu::new(ordinal)?;
    let n = if gpu.is_cpu() { 1 << 12 } else { 1 << 24 };
    let taps = Taps::Sum { radius: 3 };
    let x = gpu.upload(&vec![1.0f32; n], "x")?;
    let mut y = gpu.alloc::<f32>(n, "y")?;
    let mut total = gpu.alloc::<f32>(1, "total")?;
    let s = gpu.new_stream()?;
    let mut plan =
        ferrocuda::reduce::ReducePlan::<f32>::new(&gpu, ferrocuda::reduce::ReduceOp::Sum)?;
    StencilRun::with_grid(
        &gpu,
        &taps,
        Boundary::Zero,
        &x,
        &mut y,
        StencilGrid::Blocks(1),
    )?
    .launch_on(&s)?;
    plan.run_to_device_on(&s, &y, &mut total)?;
    let done = gpu.new_event(false)?;
    done.record(&s)?;
    let in_flight = !done.query()?;
    drop(gpu);
    drop(plan);
    drop(s);
    drop(done);
    drop(x);
    drop(y);
    drop(total); // the last share of the `Gpu`'s state
    let again = Gpu::new(ordinal)?;
    let ones = again.upload(&vec![1.0f32; 1000], "ones")?;
    let sum = ferrocuda::reduce::sum(&again, &ones)?;
    anyhow::ensure!(sum == 1000.0, "a new Gpu summed 1000 ones to {sum}");
    Ok(in_flight)
}

/// Another library's context on the device (`cuCtxCreate`, current while it lives), destroyed
/// on every way out of the test, with the device's primary context made current again.
struct TheirContext<'g>(cust::sys::CUcontext, &'g Gpu);

impl Drop for TheirContext<'_> {
    fn drop(&mut self) {
        // SAFETY: made by `cuCtxCreate`, destroyed once, here; nothing of it is in use.
        let _ = unsafe { cust::sys::cuCtxDestroy_v2(self.0) };
        let _ = self.1.make_current();
    }
}

/// A program that works in another library's context on this thread (its own `cuCtxCreate`)
/// calls ferrocuda in between: every call, and every drop, runs in the device's primary
/// context (the CPU device fails a call made in the other one) and gives the thread its
/// context back, so the other library's next call finds it. A thread with no context current
/// keeps the primary context afterwards, as after a CUDA runtime call.
fn context_comes_back(gpu: &Gpu) -> TestResult {
    use ferrocuda::reduce::{ReduceOp, ReducePlan};
    let _keep = ferrocuda_tests::KeepContext::new();
    let mut device = 0;
    // SAFETY: a writable handle.
    let status = unsafe { cust::sys::cuDeviceGet(&mut device, gpu.props().ordinal as i32) };
    ensure!(
        status == cust::sys::CUresult::CUDA_SUCCESS,
        "cuDeviceGet: {status:?}"
    );
    let mut raw = std::ptr::null_mut();
    // SAFETY: a writable handle and a device of the driver.
    let status = unsafe { cust::sys::cuCtxCreate_v2(&mut raw, 0, device) };
    ensure!(
        status == cust::sys::CUresult::CUDA_SUCCESS,
        "cuCtxCreate: {status:?}"
    );
    let theirs = TheirContext(raw, gpu);
    ensure!(
        current_context()? == theirs.0,
        "cuCtxCreate makes its context current"
    );
    let restored = |what: &str| -> TestResult {
        ensure!(
            current_context()? == theirs.0,
            "{what} left another context current than the thread's own"
        );
        Ok(())
    };
    let n = 1000;
    let data = random_vec::<f32>(n, 3);
    let taps = Taps::Sum { radius: 1 };
    let x = gpu.upload(&data, "x")?;
    restored("upload")?;
    let mut y = gpu.alloc::<f32>(n, "y")?;
    restored("alloc")?;
    ferrocuda::stencil::apply_into(gpu, &x, &mut y, &taps, Boundary::Periodic)?;
    restored("stencil::apply_into")?;
    let stream = gpu.new_stream()?;
    restored("new_stream")?;
    let mut z = gpu.alloc::<f32>(n, "z")?;
    ferrocuda::stencil::apply_into_on(gpu, &stream, &x, &mut z, &taps, Boundary::Periodic)?;
    restored("stencil::apply_into_on")?;
    let event = gpu.new_event(true)?;
    event.record(&stream)?;
    gpu.stream().wait_event(&event)?;
    stream.synchronize()?;
    restored("events and stream waits")?;
    let sum = ferrocuda::reduce::sum(gpu, &y)?;
    restored("reduce::sum")?;
    let exact = ferrocuda::reduce::sum_reproducible(gpu, &y)?;
    restored("reduce::sum_reproducible")?;
    let mut w = gpu.alloc::<f32>(n, "w")?;
    gpu.upload_into(&mut w, &data)?;
    restored("upload_into")?;
    ensure!(gpu.download(&w)? == data, "upload_into");
    let mut plan = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
    let planned = plan.run(&z)?;
    restored("a reduction plan")?;
    let mut pinned = gpu.alloc_pinned::<f32>(n)?;
    gpu.download_async_on(&stream, &z, &mut pinned)?;
    let through_pinned = pinned.as_slice()?.to_vec();
    restored("pinned memory and asynchronous copies")?;
    let host = gpu.download(&y)?;
    restored("download")?;
    drop((plan, pinned, event, stream, x, y, z, w));
    restored("the drops of a plan, a pinned buffer, an event, a stream and buffers")?;
    gpu.synchronize_device()?;
    restored("synchronize_device")?;
    let check = check_stencil(&data, &taps, Boundary::Periodic, &host);
    ensure!(check.passed, "the stencil: {}", check.detail);
    ensure!(
        through_pinned == host,
        "the stencil on the other stream, through pinned memory"
    );
    let expected: f64 = host.iter().map(|&v| f64::from(v)).sum();
    for (what, got) in [
        ("reduce::sum", sum),
        ("the plan", planned),
        ("sum_reproducible", exact),
    ] {
        ensure!(
            (f64::from(got) - expected).abs() <= 1e-3 * expected.abs().max(1.0),
            "{what}: {got} against {expected}"
        );
    }
    drop(theirs);
    // No context current: the call leaves the primary one, as the CUDA runtime would.
    // SAFETY: unbinds the thread's context.
    let status = unsafe { cust::sys::cuCtxSetCurrent(std::ptr::null_mut()) };
    ensure!(
        status == cust::sys::CUresult::CUDA_SUCCESS,
        "cuCtxSetCurrent: {status:?}"
    );
    gpu.synchronize()?;
    let left = current_context()?;
    gpu.make_current()?;
    ensure!(
        left == current_context()?,
        "a call on a thread without a context leaves the device's context current: {left:?}"
    );
    Ok(())
}
