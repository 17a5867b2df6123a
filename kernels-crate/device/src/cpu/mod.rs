//! The CPU device (CPU 设备): the CUDA execution model, run on the host, for the same kernel
//! bodies that rustc compiles to PTX.
//!
//! On the host, every `#[kernel]` body is also compiled as a plain Rust function, and the
//! device layer's intrinsics (thread indices, `syncthreads`, shuffles, votes, atomics, shared
//! memory) call into this module instead of into the GPU. A launch runs its blocks here:
//!
//! - **A thread is a fiber** (协程, a stackful coroutine of `corosensei`): it runs on the host
//!   thread that launched the kernel until it reaches a point where it must meet other
//!   threads (a barrier, a warp collective) or where other threads may interleave with it (an
//!   atomic, a spin on global memory); there it suspends and the scheduler runs another.
//!   A switch costs a few nanoseconds, so a block of 1024 threads is 1024 fibers, not 1024 OS
//!   threads. HIP-CPU models threads the same way, and for the same reason.
//! - **Lanes are not lock-step.** CUDA's old device emulation ran the threads one after
//!   another, so warp-synchronous code that the GPUs of its day ran right (their lanes were in
//!   lock-step) failed under it, and samples added `__syncthreads()` for emulation only. Since
//!   Volta's independent thread scheduling (独立线程调度) that code is wrong on the GPU too.
//!   Here each lane runs on its own until it meets the others at a `syncwarp`, a shuffle or a
//!   vote, as the GPU's rules say, so code that assumes lock-step sees values a GPU may give it.
//! - **A block runs alone**, from its first thread to its last, unless its threads must meet
//!   threads of other blocks: the blocks of a thread block cluster run together (distributed
//!   shared memory), and under a cooperative launch the whole grid runs together (grid sync).
//! - **The schedule is deterministic** by default: each round resumes every runnable thread in
//!   order of its index. A seeded random schedule ([`Schedule::Random`]) shuffles each round
//!   and the order of the blocks, to shake out code whose answer depends on the order.
//! - **Checks as `compute-sanitizer` makes them.** A barrier that some threads of the block do
//!   not reach (they returned early, or wait at another barrier) is a `synccheck` finding; a
//!   warp collective whose mask names a lane that has exited is a fault; threads that all wait
//!   on each other is a deadlock fault, not a hang. Shared memory starts filled with `0xFF`
//!   bytes (a NaN for floats, -1 for integers), as uninitialised as on the GPU but visibly so.
//!
//! What it does not model: time (no clock rate, no latency, no bandwidth), coalescing, caches,
//! bank conflicts, and the performance effects of occupancy. Its answers equal a GPU's where the
//! kernel is deterministic; a kernel whose result depends on the order of float atomics or on
//! a race may give another answer, as it may on another GPU run.
use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::Location;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

pub mod intrinsics;
pub mod print;
pub mod racecheck;
mod schedule;

pub use schedule::Schedule;

/// A kernel instance compiled for the host (`#[kernel]` makes one per entry point): runs the
/// launch with the arguments `params` points to, one pointer per parameter, as
/// `cuLaunchKernel` takes them.
pub type CpuKernel =
    unsafe fn(params: *const *const core::ffi::c_void, launch: &Launch) -> Result<Outcome, Fault>;

/// The threads of a warp on the CPU device by default (NVIDIA's warp); [`Launch::warp_size`]
/// may say 64 (a wave of 沐曦 MXMACA's GPUs).
pub const DEFAULT_WARP_SIZE: u32 = 32;

/// The stack of one thread's fiber. Kernels keep their state in registers on a GPU; on the host
/// those are stack slots, a few hundred bytes a thread, plus the frames of the device layer.
const FIBER_STACK_BYTES: usize = 128 * 1024;

/// Alignment of a block's shared memory (the largest a kernel's shared array asks for).
const SHARED_ALIGN: usize = 128;

/// The byte shared memory starts filled with.
pub const SHARED_POISON: u8 = 0xFF;

/// One kernel launch on the CPU device.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The kernel's PTX symbol (named in every finding and fault).
    pub kernel: String,
    /// Blocks in the grid, x, y, z.
    pub grid: [u32; 3],
    /// Threads in a block, x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared: usize,
    /// The most shared memory a block may use, static and dynamic together.
    pub shared_limit: usize,
    /// Whether every block runs at once (a cooperative launch: `grid.sync()`).
    pub cooperative: bool,
    /// Blocks per thread block cluster, x, y, z (`[1, 1, 1]` without clusters).
    pub cluster: [u32; 3],
    /// Threads per warp: 32, or 64 for a device with 64-wide waves.
    pub warp_size: u32,
    /// The order threads and blocks run in.
    pub schedule: Schedule,
    /// Whether [`racecheck`] watches the block's shared memory.
    pub racecheck: bool,
}

impl Launch {
    /// `<<<grid, block, shared>>>` with the rest at its defaults.
    pub fn new(kernel: &str, grid: [u32; 3], block: [u32; 3], dynamic_shared: usize) -> Self {
        Self {
            kernel: kernel.to_owned(),
            grid,
            block,
            dynamic_shared,
            shared_limit: 48 * 1024,
            cooperative: false,
            cluster: [1, 1, 1],
            warp_size: DEFAULT_WARP_SIZE,
            schedule: Schedule::InOrder,
            racecheck: false,
        }
    }

    fn threads_per_block(&self) -> usize {
        self.block.iter().map(|&d| d as usize).product()
    }

    fn blocks(&self) -> usize {
        self.grid.iter().map(|&d| d as usize).product()
    }

    fn config(&self) -> String {
        format!(
            "{}<<<({}, {}, {}), ({}, {}, {}), {}>>>",
            self.kernel,
            self.grid[0],
            self.grid[1],
            self.grid[2],
            self.block[0],
            self.block[1],
            self.block[2],
            self.dynamic_shared
        )
    }
}

/// What a check found in a launch that ran to its end (`compute-sanitizer`'s kinds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `"synccheck"` or `"racecheck"`.
    pub tool: &'static str,
    /// One line: the kernel, the block, the threads and what they did.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.tool, self.message)
    }
}

/// Why a launch on the CPU device did not run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The launch itself is invalid (a block of 0 or over 1024 threads, too much shared
    /// memory, a grid not divisible into clusters): `CUDA_ERROR_INVALID_VALUE` on a GPU.
    InvalidLaunch(String),
    /// Every live thread waits for threads that will never come.
    Deadlock(String),
    /// A warp collective or barrier used against its contract (a mask naming an exited lane).
    Contract(String),
    /// A thread panicked (a trap on a GPU: `CUDA_ERROR_ILLEGAL_INSTRUCTION`).
    Trap(String),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::InvalidLaunch(m) => write!(f, "invalid launch: {m}"),
            Fault::Deadlock(m) => write!(f, "deadlock: {m}"),
            Fault::Contract(m) => write!(f, "{m}"),
            Fault::Trap(m) => write!(f, "trap: {m}"),
        }
    }
}

impl std::error::Error for Fault {}

/// A launch that ran to its end, with what the checks found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Synccheck and racecheck findings, in the order they were made.
    pub findings: Vec<Finding>,
    /// Racecheck hazards past the first [`HAZARDS_SHOWN`] of the launch (counted, not shown).
    pub more_hazards: usize,
}

/// Racecheck hazards a launch reports one by one; the rest are counted in one line.
pub const HAZARDS_SHOWN: usize = 16;

/// A warp collective (`shfl`, `vote`, `match`, `syncwarp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarpOp {
    /// `__syncwarp(mask)`.
    Sync,
    /// `__shfl_sync`: the value of lane `b` of the segment.
    ShflIdx,
    /// `__shfl_up_sync`: lane `lane - b` of the segment.
    ShflUp,
    /// `__shfl_down_sync`: lane `lane + b` of the segment.
    ShflDown,
    /// `__shfl_xor_sync`: lane `lane ^ b`.
    ShflXor,
    /// `__ballot_sync`.
    Ballot,
    /// `__any_sync`.
    Any,
    /// `__all_sync`.
    All,
}

/// Where a suspended thread waits.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// Runnable again at once (an atomic or a spin: a point where others may interleave).
    Yield,
    /// `__syncthreads` and its counting forms, with the predicate.
    Block {
        site: &'static Location<'static>,
        predicate: bool,
    },
    /// A warp collective.
    Warp {
        op: WarpOp,
        mask: u64,
        value: u64,
        b: u32,
        c: u32,
        site: &'static Location<'static>,
    },
    /// The cluster barrier's wait for phase `phase`.
    Cluster { phase: u64 },
}

/// One thread of the running group.
struct Thread {
    /// `threadIdx`.
    idx: [u32; 3],
    /// Its rank in its block (`x + y * bx + z * bx * by`).
    rank: u32,
    /// Index of its block in the group.
    block: usize,
    /// The cluster barrier phase of this thread's last arrive.
    arrived_phase: Cell<u64>,
}

/// One block of the running group.
struct Block {
    idx: [u32; 3],
    /// Its shared memory (aligned to `SHARED_ALIGN`): dynamic shared memory first, then the
    /// static arrays as they are first reached.
    shared: *mut u8,
    /// Bytes at `shared`.
    shared_len: usize,
    /// `(key, offset)` of each static array reached so far.
    statics: RefCell<Vec<(usize, usize)>>,
    /// Bytes of the arena in use (dynamic plus static so far).
    used: Cell<usize>,
    /// Its threads' indices in the group's thread list.
    first_thread: usize,
    /// Its rank within its cluster.
    cluster_rank: u32,
}

/// The state the device layer reads through [`current`]: the launch, the running group and the
/// running thread.
pub struct Context {
    launch: Launch,
    threads: Vec<Thread>,
    blocks: Vec<Block>,
    /// The index of the thread now running.
    running: Cell<usize>,
    /// The yielder of the thread now running.
    yielder: Cell<*const Yielder<u64, Wait>>,
    /// Cluster barrier: arrivals in the current phase, and the phase.
    cluster_arrived: Cell<u64>,
    cluster_phase: Cell<u64>,
    /// Live threads (for the cluster barrier's count).
    live: Cell<u64>,
    /// The first contract violation a device function found (raised after its thread stops).
    fault: RefCell<Option<Fault>>,
    /// The transaction barriers (`mbarrier`) of the group, by address.
    mbarriers: RefCell<Vec<(usize, Mbarrier)>>,
    /// Warp collectives completed by each warp of the group (racecheck's order within a warp).
    warp_epochs: RefCell<Vec<u64>>,
}

/// An `mbarrier`'s state: its phase completes when `pending` arrivals and `tx` bytes are in.
#[derive(Clone, Copy, Debug)]
struct Mbarrier {
    count: u32,
    pending: u32,
    tx: i64,
    phase: u32,
}

thread_local! {
    static CURRENT: Cell<*const Context> = const { Cell::new(std::ptr::null()) };
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
    static ARENAS: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// The running kernel's context.
///
/// # Panics
/// Outside a kernel running on the CPU device: a device function called from host code.
#[inline]
pub fn current() -> &'static Context {
    let p = CURRENT.with(Cell::get);
    assert!(
        !p.is_null(),
        "a device function was called outside a kernel running on the CPU device"
    );
    // SAFETY: set by `run_group` to a context that outlives every fiber it resumes, and reset
    // to null before that context is dropped.
    unsafe { &*p }
}

/// Whether a kernel is running on this host thread (the device layer's functions are callable).
pub fn in_kernel() -> bool {
    !CURRENT.with(Cell::get).is_null()
}

impl Context {
    fn thread(&self) -> &Thread {
        &self.threads[self.running.get()]
    }

    fn block(&self) -> &Block {
        &self.blocks[self.thread().block]
    }

    /// `threadIdx`.
    pub fn thread_idx(&self) -> [u32; 3] {
        self.thread().idx
    }

    /// `blockIdx`.
    pub fn block_idx(&self) -> [u32; 3] {
        self.block().idx
    }

    /// `blockDim`.
    pub fn block_dim(&self) -> [u32; 3] {
        self.launch.block
    }

    /// `gridDim`.
    pub fn grid_dim(&self) -> [u32; 3] {
        self.launch.grid
    }

    /// `warpSize` of this launch.
    pub fn warp_size(&self) -> u32 {
        self.launch.warp_size
    }

    /// `%laneid`.
    pub fn lane_id(&self) -> u32 {
        self.thread().rank % self.launch.warp_size
    }

    /// Base of this block's dynamic shared memory.
    pub fn dynamic_shared(&self) -> *mut u8 {
        self.block().shared
    }

    /// The static shared array `key` (the address of its declaration) of `bytes` bytes aligned
    /// to `align`, placed after the dynamic shared memory the first time a thread of the block
    /// reaches it.
    pub fn static_shared(&self, key: usize, bytes: usize, align: usize) -> *mut u8 {
        let b = self.block();
        let found = b
            .statics
            .borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(_, o)| o);
        let offset = match found {
            Some(o) => o,
            None => {
                let o = b.used.get().next_multiple_of(align.max(1));
                if o + bytes > self.launch.shared_limit {
                    self.raise(Fault::InvalidLaunch(format!(
                        "{}: its static shared arrays and {} bytes of dynamic shared memory \
                         exceed the {} bytes a block may use",
                        self.launch.config(),
                        self.launch.dynamic_shared,
                        self.launch.shared_limit
                    )));
                }
                b.used.set(o + bytes);
                b.statics.borrow_mut().push((key, o));
                // As uninitialised as the GPU's, but visibly so (a write of the device's,
                // not of the thread that reached the array first).
                let start = b.shared.wrapping_add(o);
                // SAFETY: inside the arena (checked against the limit above, which the arena
                // holds).
                racecheck::unwatched(|| unsafe {
                    std::ptr::write_bytes(start, SHARED_POISON, bytes)
                });
                o
            }
        };
        b.shared.wrapping_add(offset)
    }

    /// This block's rank in its cluster (`%cluster_ctarank`).
    pub fn cluster_rank(&self) -> u32 {
        self.block().cluster_rank
    }

    /// Blocks in a cluster (`%cluster_nctarank`).
    pub fn cluster_blocks(&self) -> u32 {
        self.launch.cluster.iter().product()
    }

    /// The address in block `rank` of this cluster of the shared address `p` of this block
    /// (`mapa.shared::cluster`).
    pub fn map_shared_rank(&self, p: *mut u8, rank: u32) -> *mut u8 {
        let me = self.block();
        let offset = (p as usize).wrapping_sub(me.shared as usize);
        if offset >= me.shared_len || rank >= self.cluster_blocks() {
            self.raise(Fault::Contract(format!(
                "{}: map_shared_rank of {p:p}, rank {rank}: not a shared address of this block, \
                 or no such block in a cluster of {}",
                self.launch.config(),
                self.cluster_blocks()
            )));
        }
        let first = self.thread().block - me.cluster_rank as usize;
        self.blocks[first + rank as usize]
            .shared
            .wrapping_add(offset)
    }

    /// Refuses `what`, a 32-lane warp function (32-bit masks), on a device whose waves are
    /// wider: the kernel was written for NVIDIA's warps.
    #[track_caller]
    pub fn require_32_lanes(&self, what: &str) {
        if self.launch.warp_size != 32 {
            let b = self.block().idx;
            self.raise(Fault::Contract(format!(
                "{}: block ({}, {}, {}) thread {}: {what} at {} is a warp function of 32 lanes \
                 (32-bit masks) and this device's waves are {} lanes wide; the kernel is written \
                 for NVIDIA's warps (the `wave` functions work for both)",
                self.launch.config(),
                b[0],
                b[1],
                b[2],
                self.thread().rank,
                Location::caller(),
                self.launch.warp_size
            )));
        }
    }

    /// Stops the running thread with `fault`, which fails the launch.
    pub fn raise(&self, fault: Fault) -> ! {
        self.fault.borrow_mut().get_or_insert(fault);
        // Unwinds without the panic hook: the fault is reported once, by the launch.
        std::panic::resume_unwind(Box::new(FaultRaised))
    }

    fn suspend(&self, request: Wait) -> u64 {
        let y = self.yielder.get();
        // SAFETY: the yielder of the running fiber, set before it was resumed; a device function
        // only runs on a fiber.
        unsafe { (*y).suspend(request) }
    }

    /// A point where other threads may run (after an atomic, in a spin loop).
    pub fn interleave(&self) {
        self.suspend(Wait::Yield);
    }

    /// `__syncthreads()` and its counting forms: returns how many threads of the block passed
    /// `true`.
    #[track_caller]
    pub fn syncthreads(&self, predicate: bool) -> u32 {
        self.suspend(Wait::Block {
            site: Location::caller(),
            predicate,
        }) as u32
    }

    /// A warp collective of this lane: `value` its operand; for a shuffle `b` is the lane,
    /// delta or lane mask and `c` PTX's segment and clamp operand. Returns the lane's result.
    #[track_caller]
    pub fn warp(&self, op: WarpOp, mask: u64, value: u64, b: u32, c: u32) -> u64 {
        let lane = self.lane_id();
        if mask >> lane & 1 == 0 {
            self.raise(Fault::Contract(format!(
                "{}: block ({}, {}, {}) thread {}: a warp collective at {} with mask {mask:#x} \
                 that does not name the calling lane {lane}",
                self.launch.config(),
                self.block().idx[0],
                self.block().idx[1],
                self.block().idx[2],
                self.thread().rank,
                Location::caller()
            )));
        }
        self.suspend(Wait::Warp {
            op,
            mask,
            value,
            b,
            c,
            site: Location::caller(),
        })
    }

    /// Blocks of a cluster along x, y and z.
    pub fn cluster_dim(&self) -> [u32; 3] {
        self.launch.cluster
    }

    /// `barrier.cluster.arrive`.
    pub fn cluster_arrive(&self) {
        let phase = self.cluster_phase.get();
        self.thread().arrived_phase.set(phase);
        let arrived = self.cluster_arrived.get() + 1;
        if arrived == self.live.get() {
            self.cluster_arrived.set(0);
            self.cluster_phase.set(phase + 1);
        } else {
            self.cluster_arrived.set(arrived);
        }
    }

    /// `barrier.cluster.wait` for the phase of this thread's last arrive.
    pub fn cluster_wait(&self) {
        let phase = self.thread().arrived_phase.get();
        // Under racecheck every thread stops here, so that what it does after the barrier is
        // checked after the barrier.
        if self.cluster_phase.get() <= phase || self.launch.racecheck {
            self.suspend(Wait::Cluster { phase });
        }
    }

    /// `mbarrier.init` of the barrier at `address`: phases of `count` arrivals.
    pub fn mbarrier_init(&self, address: usize, count: u32) {
        let state = Mbarrier {
            count,
            pending: count,
            tx: 0,
            phase: 0,
        };
        let mut all = self.mbarriers.borrow_mut();
        match all.iter_mut().find(|(a, _)| *a == address) {
            Some((_, m)) => *m = state,
            None => all.push((address, state)),
        }
    }

    /// One arrival at the barrier at `address` (`arrivals` 1) announcing `bytes`, or bulk
    /// copies that delivered `-bytes` (`arrivals` 0); the phase completes when both are in.
    pub fn mbarrier_update(&self, address: usize, arrivals: u32, bytes: i64) {
        let mut all = self.mbarriers.borrow_mut();
        let Some((_, m)) = all.iter_mut().find(|(a, _)| *a == address) else {
            drop(all);
            self.raise(Fault::Contract(format!(
                "{}: an mbarrier at {address:#x} used before mbarrier.init",
                self.launch.config()
            )));
        };
        m.pending = m.pending.saturating_sub(arrivals);
        m.tx += bytes;
        if m.pending == 0 && m.tx == 0 {
            m.phase += 1;
            m.pending = m.count;
        }
    }

    /// The number of completed phases of the barrier at `address`.
    pub fn mbarrier_phase(&self, address: usize) -> u32 {
        let all = self.mbarriers.borrow();
        all.iter()
            .find(|(a, _)| *a == address)
            .map_or(0, |(_, m)| m.phase)
    }
}

/// The panic payload of [`Context::raise`].
struct FaultRaised;

/// Runs `body` as the kernel of `launch`, every thread of every block, and returns what the
/// checks found, or why it could not run to its end.
pub fn run(launch: &Launch, body: &dyn Fn()) -> Result<Outcome, Fault> {
    validate(launch)?;
    let mut outcome = Outcome::default();
    if launch.blocks() == 0 {
        return Ok(outcome);
    }
    let per_group = if launch.cooperative {
        launch.blocks()
    } else {
        launch.cluster.iter().map(|&d| d as usize).product()
    };
    let mut groups = group_blocks(launch);
    launch.schedule.order_groups(&mut groups);
    debug_assert!(groups.iter().all(|g| g.len() == per_group));
    for group in groups {
        run_group(launch, &group, body, &mut outcome)?;
    }
    if outcome.more_hazards > 0 {
        outcome.findings.push(Finding {
            tool: "racecheck",
            message: format!(
                "{}: {} more shared addresses with hazards",
                launch.config(),
                outcome.more_hazards
            ),
        });
    }
    Ok(outcome)
}

fn validate(launch: &Launch) -> Result<(), Fault> {
    let threads = launch.threads_per_block();
    let bad = |why: String| Err(Fault::InvalidLaunch(format!("{}: {why}", launch.config())));
    if launch.grid.contains(&0) && launch.blocks() != 0 {
        return bad("a grid dimension is 0".into());
    }
    if threads == 0 || threads > 1024 {
        return bad(format!("{threads} threads a block; the limit is 1 to 1024"));
    }
    if launch.block[2] > 64 {
        return bad("blockDim.z is over 64".into());
    }
    if launch.dynamic_shared > launch.shared_limit {
        return bad(format!(
            "{} bytes of dynamic shared memory; a block may use {}",
            launch.dynamic_shared, launch.shared_limit
        ));
    }
    if launch.warp_size != 32 && launch.warp_size != 64 {
        return bad(format!("a warp of {} threads", launch.warp_size));
    }
    for d in 0..3 {
        if launch.cluster[d] == 0 || launch.grid[d] % launch.cluster[d] != 0 {
            return bad(format!(
                "gridDim ({}, {}, {}) is not a whole number of clusters of ({}, {}, {})",
                launch.grid[0],
                launch.grid[1],
                launch.grid[2],
                launch.cluster[0],
                launch.cluster[1],
                launch.cluster[2]
            ));
        }
    }
    Ok(())
}

/// The blocks that run together: one each, the blocks of each cluster, or the whole grid under
/// a cooperative launch. Blocks are numbered `x + y * gx + z * gx * gy`.
fn group_blocks(launch: &Launch) -> Vec<Vec<[u32; 3]>> {
    let [gx, gy, gz] = launch.grid;
    if launch.cooperative {
        let mut all = Vec::new();
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    all.push([x, y, z]);
                }
            }
        }
        return vec![all];
    }
    let [cx, cy, cz] = launch.cluster;
    let mut groups = Vec::new();
    for z0 in (0..gz).step_by(cz as usize) {
        for y0 in (0..gy).step_by(cy as usize) {
            for x0 in (0..gx).step_by(cx as usize) {
                let mut g = Vec::new();
                for z in z0..z0 + cz {
                    for y in y0..y0 + cy {
                        for x in x0..x0 + cx {
                            g.push([x, y, z]);
                        }
                    }
                }
                groups.push(g);
            }
        }
    }
    groups
}

/// State of one fiber between resumes.
#[derive(Clone, Copy, Debug)]
enum State {
    Runnable(u64),
    Waiting(Wait),
    Done,
}

/// A block's shared memory arena of at least `bytes` bytes, reused across blocks (its contents
/// are poisoned where the block uses it).
fn take_arena(bytes: usize) -> Box<[u8]> {
    ARENAS
        .with(|a| {
            let mut a = a.borrow_mut();
            let at = a.iter().position(|b| b.len() >= bytes)?;
            Some(a.swap_remove(at))
        })
        .unwrap_or_else(|| vec![SHARED_POISON; bytes].into_boxed_slice())
}

fn take_stack() -> DefaultStack {
    STACKS
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| DefaultStack::new(FIBER_STACK_BYTES).expect("a fiber stack"))
}

fn give_stack(stack: DefaultStack) {
    STACKS.with(|s| s.borrow_mut().push(stack));
}

/// Resets `CURRENT` when the group ends, however it ends.
struct ClearCurrent;

impl Drop for ClearCurrent {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(std::ptr::null()));
    }
}

fn run_group(
    launch: &Launch,
    group: &[[u32; 3]],
    body: &dyn Fn(),
    outcome: &mut Outcome,
) -> Result<(), Fault> {
    let per_block = launch.threads_per_block();
    let [bx, by, _] = launch.block;
    let usable = launch.dynamic_shared.max(launch.shared_limit);
    // Under racecheck, the blocks' shared memory is one watched mapping; otherwise arenas
    // reused from earlier groups.
    let mut race = if launch.racecheck {
        Some(
            racecheck::Racecheck::new(group.len(), usable)
                .map_err(|why| Fault::InvalidLaunch(format!("{}: {why}", launch.config())))?,
        )
    } else {
        None
    };
    let mut arenas = Vec::new();
    let mut blocks = Vec::with_capacity(group.len());
    let mut threads = Vec::with_capacity(group.len() * per_block);
    for (i, &idx) in group.iter().enumerate() {
        let (shared, shared_len) = match &race {
            Some(r) => r.slot(i),
            None => {
                let mut arena = take_arena(usable + SHARED_ALIGN);
                let base = arena.as_ptr().align_offset(SHARED_ALIGN);
                let p = arena.as_mut_ptr().wrapping_add(base);
                arenas.push(arena);
                (p, usable)
            }
        };
        // The dynamic part now; each static array when it is placed.
        // SAFETY: `shared_len >= dynamic_shared` bytes at `shared`, owned by this group.
        unsafe { std::ptr::write_bytes(shared, SHARED_POISON, launch.dynamic_shared) };
        blocks.push(Block {
            idx,
            shared,
            shared_len,
            statics: RefCell::new(Vec::new()),
            used: Cell::new(launch.dynamic_shared),
            first_thread: threads.len(),
            cluster_rank: i as u32 % launch.cluster.iter().product::<u32>(),
        });
        for rank in 0..per_block as u32 {
            threads.push(Thread {
                idx: [rank % bx, rank / bx % by, rank / (bx * by)],
                rank,
                block: i,
                arrived_phase: Cell::new(0),
            });
        }
    }
    let context = Context {
        launch: launch.clone(),
        threads,
        blocks,
        running: Cell::new(0),
        yielder: Cell::new(std::ptr::null()),
        cluster_arrived: Cell::new(0),
        cluster_phase: Cell::new(0),
        live: Cell::new((group.len() * per_block) as u64),
        fault: RefCell::new(None),
        mbarriers: RefCell::new(Vec::new()),
        warp_epochs: RefCell::new(vec![
            0;
            group.len()
                * per_block.div_ceil(launch.warp_size as usize)
        ]),
    };
    let n = context.threads.len();
    let ctx: *const Context = &context;
    // SAFETY: every fiber ends or is dropped before this function returns, so `body` outlives
    // each use of it.
    let body: &'static dyn Fn() =
        unsafe { std::mem::transmute::<&dyn Fn(), &'static dyn Fn()>(body) };
    CURRENT.with(|c| c.set(ctx));
    let _clear = ClearCurrent;

    let mut fibers: Vec<Option<Coroutine<u64, Wait, (), DefaultStack>>> = (0..n)
        .map(|_| {
            Some(Coroutine::with_stack(
                take_stack(),
                move |y: &Yielder<u64, Wait>, _: u64| {
                    // SAFETY: the context outlives the fibers (they end or are dropped in this
                    // function, before `context`).
                    unsafe { (*ctx).yielder.set(y) };
                    body();
                },
            ))
        })
        .collect();
    let mut states = vec![State::Runnable(0); n];
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = launch.schedule.rng(group[0]);
    let mut result = Ok(());
    let mut cluster_seen = context.cluster_phase.get();

    'rounds: loop {
        if let Some(rng) = rng.as_mut() {
            rng.shuffle(&mut order);
        }
        let mut ran = false;
        for &t in &order {
            let State::Runnable(input) = states[t] else {
                continue;
            };
            ran = true;
            context.running.set(t);
            let fiber = fibers[t].as_mut().expect("a live fiber");
            // The yielder pointer is re-read by the fiber itself on its first resume.
            let mut run =
                || std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fiber.resume(input)));
            let resumed = match race.as_mut() {
                None => run(),
                Some(r) => {
                    let (resumed, accesses) = r.watch(run);
                    check_accesses(&context, r, t, &accesses, &mut cluster_seen);
                    resumed
                }
            };
            match resumed {
                Ok(CoroutineResult::Yield(w)) => {
                    states[t] = match w {
                        Wait::Yield => State::Runnable(0),
                        w => State::Waiting(w),
                    }
                }
                Ok(CoroutineResult::Return(())) => {
                    states[t] = State::Done;
                    context.live.set(context.live.get() - 1);
                    if let Some(f) = fibers[t].take() {
                        give_stack(f.into_stack());
                    }
                }
                Err(payload) => {
                    let fault = context.fault.borrow_mut().take().unwrap_or_else(|| {
                        Fault::Trap(format!(
                            "{}: block ({}, {}, {}) thread {}: {}",
                            launch.config(),
                            context.blocks[context.threads[t].block].idx[0],
                            context.blocks[context.threads[t].block].idx[1],
                            context.blocks[context.threads[t].block].idx[2],
                            context.threads[t].rank,
                            panic_text(&*payload)
                        ))
                    });
                    fibers[t] = None;
                    result = Err(fault);
                    break 'rounds;
                }
            }
        }
        if states.iter().all(|s| matches!(s, State::Done)) {
            break;
        }
        if ran && states.iter().any(|s| matches!(s, State::Runnable(_))) {
            continue;
        }
        match release(&context, &mut states, outcome, race.as_mut()) {
            Ok(true) => {}
            Ok(false) => {
                result = Err(Fault::Deadlock(describe_waits(&context, &states)));
                break;
            }
            Err(fault) => {
                result = Err(fault);
                break;
            }
        }
    }

    // Unfinished fibers (a fault) unwind their stacks as they are dropped; `CURRENT` still
    // points at the context for that.
    for f in fibers.iter_mut() {
        if let Some(f) = f.take() {
            if f.done() {
                give_stack(f.into_stack());
            } else {
                drop(f);
            }
        }
    }
    drop(_clear);
    ARENAS.with(|a| {
        a.borrow_mut().extend(arenas);
        // A grid run at once (a cooperative launch) needs many; keep only a few.
        a.borrow_mut().truncate(64);
    });
    if let Some(r) = race {
        report_hazards(&context, &r, outcome);
    }
    result
}

/// Checks the shared memory accesses thread `t` made in the stretch it just ran, after the
/// cluster barrier's phase moved on if it did.
fn check_accesses(
    ctx: &Context,
    race: &mut racecheck::Racecheck,
    t: usize,
    accesses: &[(usize, bool)],
    cluster_seen: &mut u64,
) {
    let ws = ctx.launch.warp_size;
    let per_block = ctx.launch.threads_per_block() as u32;
    let warps_per_block = per_block.div_ceil(ws);
    let warp_of = |t: u32| {
        let th = &ctx.threads[t as usize];
        th.block as u32 * warps_per_block + th.rank / ws
    };
    let my_warp = warp_of(t as u32);
    let epoch = ctx.warp_epochs.borrow()[my_warp as usize];
    for &(address, write) in accesses {
        race.check(address, write, t as u32, epoch, |other| {
            warp_of(other) == my_warp
        });
    }
    let phase = ctx.cluster_phase.get();
    if phase != *cluster_seen {
        *cluster_seen = phase;
        race.cluster_barrier();
    }
}

/// Racecheck's hazards as findings, one line each, naming the block, the threads and the
/// shared address.
fn report_hazards(ctx: &Context, race: &racecheck::Racecheck, outcome: &mut Outcome) {
    let what = |write: bool| if write { "wrote" } else { "read" };
    let shown = outcome
        .findings
        .iter()
        .filter(|f| f.tool == "racecheck")
        .count();
    outcome.more_hazards += race.more
        + race
            .hazards
            .len()
            .saturating_sub(HAZARDS_SHOWN - shown.min(HAZARDS_SHOWN));
    for h in race
        .hazards
        .iter()
        .take(HAZARDS_SHOWN - shown.min(HAZARDS_SHOWN))
    {
        let Some(b) = race.block_of(h.address) else {
            continue;
        };
        let block = &ctx.blocks[b];
        let rank = |t: u32| {
            let th = &ctx.threads[t as usize];
            let bi = ctx.blocks[th.block].idx;
            if th.block == b {
                format!("thread {}", th.rank)
            } else {
                format!(
                    "thread {} of block ({}, {}, {})",
                    th.rank, bi[0], bi[1], bi[2]
                )
            }
        };
        outcome.findings.push(Finding {
            tool: "racecheck",
            message: format!(
                "{}: block ({}, {}, {}): {} hazard at shared memory offset {:#x}: {} {} it and \
                 {} {} it with no barrier between",
                ctx.launch.config(),
                block.idx[0],
                block.idx[1],
                block.idx[2],
                h.kind,
                h.address - block.shared as usize,
                rank(h.first.0),
                what(h.first.1),
                rank(h.second.0),
                what(h.second.1),
            ),
        });
    }
    if race.lost() > 0 {
        outcome.findings.push(Finding {
            tool: "racecheck",
            message: format!(
                "{}: {} shared memory accesses were not checked (a thread made too many \
                 between two switches)",
                ctx.launch.config(),
                race.lost()
            ),
        });
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}

/// Releases every barrier and collective whose threads have all arrived. Returns whether any
/// thread became runnable.
fn release(
    ctx: &Context,
    states: &mut [State],
    outcome: &mut Outcome,
    mut race: Option<&mut racecheck::Racecheck>,
) -> Result<bool, Fault> {
    let mut released = false;
    let per_block = ctx.launch.threads_per_block();
    let ws = ctx.launch.warp_size as usize;

    // Warp collectives: for each warp, the lowest waiting lane's mask decides.
    for (bi, block) in ctx.blocks.iter().enumerate() {
        let base = block.first_thread;
        for w0 in (0..per_block).step_by(ws) {
            let lanes = ws.min(per_block - w0);
            // Each distinct mask the waiting lanes name: complete those whose lanes are all
            // there (lanes of disjoint or nested masks may wait at once, in divergent code).
            let mut masks: Vec<u64> = Vec::new();
            for l in 0..lanes {
                if let State::Waiting(Wait::Warp { mask, .. }) = states[base + w0 + l]
                    && !masks.contains(&mask)
                {
                    masks.push(mask);
                }
            }
            'masks: for mask in masks {
                for l in 0..ws {
                    if mask >> l & 1 == 0 {
                        continue;
                    }
                    if l >= lanes {
                        return Err(contract(
                            ctx,
                            bi,
                            w0 + l,
                            &format!(
                                "a warp collective with mask {mask:#x} names lane {l}, which this \
                             block of {per_block} threads does not have"
                            ),
                        ));
                    }
                    match states[base + w0 + l] {
                        State::Waiting(Wait::Warp { mask: m, .. }) if m == mask => {}
                        State::Done => {
                            return Err(contract(
                                ctx,
                                bi,
                                w0 + l,
                                &format!(
                                    "a warp collective with mask {mask:#x} names lane {l}, which \
                                 has exited"
                                ),
                            ));
                        }
                        _ => continue 'masks,
                    }
                }
                complete_warp(ctx, states, base + w0, mask);
                ctx.warp_epochs.borrow_mut()[bi * per_block.div_ceil(ws) + w0 / ws] += 1;
                released = true;
            }
        }
    }
    if released {
        return Ok(true);
    }

    // Block barriers: released when every live thread of the block waits at one.
    for (bi, block) in ctx.blocks.iter().enumerate() {
        let range = block.first_thread..block.first_thread + per_block;
        let waiting: Vec<usize> = range
            .clone()
            .filter(|&t| matches!(states[t], State::Waiting(Wait::Block { .. })))
            .collect();
        if waiting.is_empty() {
            continue;
        }
        let live = range
            .clone()
            .filter(|&t| !matches!(states[t], State::Done))
            .count();
        if waiting.len() != live {
            continue;
        }
        let mut count = 0u64;
        let mut sites: Vec<&'static Location<'static>> = Vec::new();
        for &t in &waiting {
            if let State::Waiting(Wait::Block { site, predicate }) = states[t] {
                count += u64::from(predicate);
                if !sites.contains(&site) {
                    sites.push(site);
                }
            }
        }
        let exited = per_block - live;
        if exited > 0 {
            let first_exited = range
                .clone()
                .find(|&t| matches!(states[t], State::Done))
                .map_or(0, |t| t - block.first_thread);
            outcome.findings.push(Finding {
                tool: "synccheck",
                message: format!(
                    "{}: block ({}, {}, {}): the barrier at {} was not reached by {exited} of \
                     its {per_block} threads (thread {first_exited} and others exited before it)",
                    ctx.launch.config(),
                    block.idx[0],
                    block.idx[1],
                    block.idx[2],
                    sites[0]
                ),
            });
        }
        if sites.len() > 1 {
            outcome.findings.push(Finding {
                tool: "synccheck",
                message: format!(
                    "{}: block ({}, {}, {}): divergent barrier: threads wait at {} different \
                     barriers ({})",
                    ctx.launch.config(),
                    block.idx[0],
                    block.idx[1],
                    block.idx[2],
                    sites.len(),
                    sites
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        for t in waiting {
            states[t] = State::Runnable(count);
        }
        if let Some(r) = race.as_deref_mut() {
            r.barrier(bi);
        }
        released = true;
    }
    if released {
        return Ok(true);
    }

    // The cluster barrier: every live thread has arrived (the phase moved on).
    for s in states.iter_mut() {
        if let State::Waiting(Wait::Cluster { phase }) = *s
            && ctx.cluster_phase.get() > phase
        {
            *s = State::Runnable(0);
            released = true;
        }
    }
    Ok(released)
}

fn contract(ctx: &Context, block: usize, thread: usize, what: &str) -> Fault {
    let b = &ctx.blocks[block];
    Fault::Contract(format!(
        "{}: block ({}, {}, {}) thread {thread}: {what}",
        ctx.launch.config(),
        b.idx[0],
        b.idx[1],
        b.idx[2]
    ))
}

/// Computes the results of the warp collective that the lanes of `mask` in the warp starting at
/// thread `warp_base` wait at, and makes them runnable.
fn complete_warp(ctx: &Context, states: &mut [State], warp_base: usize, mask: u64) {
    let ws = ctx.launch.warp_size as usize;
    let mut values = vec![0u64; ws];
    let mut ops = vec![None; ws];
    for l in 0..ws {
        if mask >> l & 1 == 1
            && let State::Waiting(Wait::Warp {
                op, value, b, c, ..
            }) = states[warp_base + l]
        {
            values[l] = value;
            ops[l] = Some((op, b, c));
        }
    }
    let ballot = (0..ws)
        .filter(|&l| ops[l].is_some() && values[l] != 0)
        .fold(0u64, |m, l| m | 1 << l);
    for l in 0..ws {
        let Some((op, b, c)) = ops[l] else { continue };
        // PTX's `shfl.sync` (ISA, "Data Movement: shfl.sync"): `c` packs the segment mask in
        // bits 8.. and the clamp lane in its low bits; a source outside the bounds, or not in
        // the mask, gives the lane its own value.
        let lane_mask = ws as u32 - 1;
        let lane = l as u32;
        let (bval, cval, segmask) = (b & lane_mask, c & lane_mask, (c >> 8) & lane_mask);
        let max_lane = (lane & segmask) | (cval & !segmask);
        let min_lane = lane & segmask;
        let shuffled = |j: i64, ok: bool| -> u64 {
            let j = if ok { j as usize } else { l };
            if mask >> j & 1 == 1 {
                values[j]
            } else {
                values[l]
            }
        };
        let result = match op {
            WarpOp::Sync => 0,
            WarpOp::ShflIdx => {
                let j = min_lane | (bval & !segmask);
                shuffled(i64::from(j), j <= max_lane)
            }
            WarpOp::ShflUp => {
                let j = i64::from(lane) - i64::from(bval);
                shuffled(j, j >= i64::from(max_lane))
            }
            WarpOp::ShflDown => {
                let j = lane + bval;
                shuffled(i64::from(j), j <= max_lane)
            }
            WarpOp::ShflXor => {
                let j = lane ^ bval;
                shuffled(i64::from(j), j <= max_lane)
            }
            WarpOp::Ballot => ballot,
            WarpOp::Any => u64::from(ballot != 0),
            WarpOp::All => u64::from(ballot == mask),
        };
        states[warp_base + l] = State::Runnable(result);
    }
}

fn describe_waits(ctx: &Context, states: &[State]) -> String {
    let mut parts = Vec::new();
    for (t, s) in states.iter().enumerate() {
        if let State::Waiting(w) = s {
            let th = &ctx.threads[t];
            let b = &ctx.blocks[th.block];
            let what = match w {
                Wait::Block { site, .. } => format!("__syncthreads at {site}"),
                Wait::Warp { op, mask, site, .. } => {
                    format!("{op:?} with mask {mask:#x} at {site}")
                }
                Wait::Cluster { .. } => "the cluster barrier".to_owned(),
                Wait::Yield => "nothing".to_owned(),
            };
            parts.push(format!(
                "block ({}, {}, {}) thread {} waits at {what}",
                b.idx[0], b.idx[1], b.idx[2], th.rank
            ));
            if parts.len() == 4 {
                break;
            }
        }
    }
    format!(
        "{}: no thread can go on; {}",
        ctx.launch.config(),
        parts.join("; ")
    )
}
