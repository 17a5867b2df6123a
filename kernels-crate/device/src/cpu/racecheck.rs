//! The CPU device's racecheck (竞争检查): which threads of a block touch the same shared
//! address between two barriers, one of them writing, as `compute-sanitizer --tool racecheck`
//! reports it on a GPU.
//!
//! Kernels reach shared memory through plain pointers, so the accesses cannot be counted in
//! the device layer. Instead, while a thread runs, the shared memory of its group of blocks is
//! mapped without access (`mprotect`): each load or store faults, the fault handler notes the
//! address, whether the instruction writes (the page fault's error code) and whether it is
//! atomic (a `lock` prefix or `xchg`: atomics do not race with each other), opens the memory,
//! and single-steps the instruction (the trap flag); the trap handler closes the memory again.
//! Two signals and two system calls an access: slow, and meant for small launches, as
//! compute-sanitizer is.
//!
//! After each stretch a thread runs, its accesses are checked against what the other threads
//! did since the block's last barrier:
//! - a read of an address another thread wrote is a read-after-write hazard, a write of one it
//!   read a write-after-read hazard, a write of one it wrote a write-after-write hazard;
//! - lanes of one warp are ordered by a warp collective (`syncwarp`, a shuffle, a vote) that
//!   completes between their accesses, threads of a block by its barrier, and the blocks of a
//!   cluster by the cluster barrier;
//! - each address is reported once a launch, with the block, the two threads, the byte offset
//!   in the block's shared memory and the kind of hazard.
//!
//! An access is noted at the address the instruction starts at: a wide load that covers a
//! narrower store made at another address is not seen. Copies the device layer makes for a
//! kernel (bulk copies, the poison of a new static array) are not accesses of the kernel's
//! threads. Racecheck needs x86-64 Linux (the page fault's error code and the trap flag);
//! elsewhere a launch that asks for it is refused by name.
use std::cell::Cell;
use std::collections::HashMap;

/// Whether this host can run racecheck.
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_arch = "x86_64"));

/// One access a thread made to shared memory.
#[derive(Clone, Copy, Debug)]
struct Access {
    address: usize,
    write: bool,
}

/// Accesses noted at most per stretch a thread runs (more are counted, not noted).
const LOG_CAPACITY: usize = 1 << 16;

/// What the fault handlers share with the scheduler: the memory watched, the log of the
/// running thread's accesses, and whether an instruction is being stepped.
struct Watch {
    base: usize,
    len: usize,
    log: *mut Access,
    logged: Cell<usize>,
    lost: Cell<usize>,
    stepping: Cell<bool>,
}

thread_local! {
    /// The watch of the launch running on this host thread, if it runs racecheck.
    static WATCH: Cell<*const Watch> = const { Cell::new(std::ptr::null()) };
}

/// A thread's access as the checker keeps it: the thread (its index in the group), and the
/// completed warp collectives of its warp when it made the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct By {
    thread: u32,
    warp_epoch: u64,
}

/// What the threads did to one address since the last barrier.
#[derive(Clone, Copy, Debug, Default)]
struct Cellstate {
    write: Option<By>,
    /// Up to two readers of distinct threads (enough to find a reader that is not the writer).
    reads: [Option<By>; 2],
}

/// A hazard found: kind, the address, the earlier and the later access.
pub(super) struct Hazard {
    pub kind: &'static str,
    pub address: usize,
    pub first: (u32, bool),
    pub second: (u32, bool),
}

/// Racecheck of one group of blocks: their shared memory (one mapping, a slot per block), the
/// fault handlers' watch, and the state of every address touched since its block's barrier.
pub(super) struct Racecheck {
    map: *mut u8,
    map_len: usize,
    slot: usize,
    watch: Box<Watch>,
    log: Vec<Access>,
    /// Per block: address -> state since the block's last barrier.
    state: Vec<HashMap<usize, Cellstate>>,
    reported: std::collections::HashSet<usize>,
    pub hazards: Vec<Hazard>,
    /// Hazards past those kept (each address once).
    pub more: usize,
}

/// Hazards kept per group; the rest are counted.
const KEEP: usize = super::HAZARDS_SHOWN;

impl Racecheck {
    /// Shared memory for `blocks` blocks of `slot_bytes` each (rounded up to pages), all
    /// watched.
    pub fn new(blocks: usize, slot_bytes: usize) -> Result<Self, String> {
        if !SUPPORTED {
            return Err("racecheck on the CPU device needs x86-64 Linux".to_owned());
        }
        install_handlers();
        let page = page_size();
        let slot = slot_bytes.next_multiple_of(page);
        let map_len = slot * blocks;
        // SAFETY: an anonymous private mapping; checked for failure.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(format!(
                "racecheck could not map {map_len} bytes of shared memory"
            ));
        }
        let mut log = Vec::with_capacity(LOG_CAPACITY);
        let watch = Box::new(Watch {
            base: map as usize,
            len: map_len,
            log: log.as_mut_ptr(),
            logged: Cell::new(0),
            lost: Cell::new(0),
            stepping: Cell::new(false),
        });
        Ok(Self {
            map: map.cast(),
            map_len,
            slot,
            watch,
            log,
            state: (0..blocks).map(|_| HashMap::new()).collect(),
            reported: Default::default(),
            hazards: Vec::new(),
            more: 0,
        })
    }

    /// The shared memory of block `b` (page-aligned, `slot` bytes).
    pub fn slot(&self, b: usize) -> (*mut u8, usize) {
        (self.map.wrapping_add(b * self.slot), self.slot)
    }

    /// Watches the shared memory while a thread runs (`f`); returns the accesses it made.
    pub fn watch<R>(&mut self, f: impl FnOnce() -> R) -> (R, Vec<(usize, bool)>) {
        self.watch.logged.set(0);
        let w: *const Watch = &*self.watch;
        WATCH.with(|c| c.set(w));
        protect(self.map, self.map_len, false);
        let r = f();
        protect(self.map, self.map_len, true);
        WATCH.with(|c| c.set(std::ptr::null()));
        let n = self.watch.logged.get();
        // SAFETY: the handler wrote `n` accesses into the log's capacity.
        unsafe { self.log.set_len(n) };
        let out = self.log.iter().map(|a| (a.address, a.write)).collect();
        // SAFETY: `Access` is `Copy`; the length goes back to 0 before the next stretch.
        unsafe { self.log.set_len(0) };
        (r, out)
    }

    /// Accesses noted that did not fit in the log (reported, as they may hide hazards).
    pub fn lost(&self) -> usize {
        self.watch.lost.get()
    }

    /// Checks one access of `thread` (index in the group; `warp` its block and warp number;
    /// `same_warp` says whether another thread is in its warp) against the state.
    pub fn check(
        &mut self,
        address: usize,
        write: bool,
        thread: u32,
        warp_epoch: u64,
        same_warp: impl Fn(u32) -> bool,
    ) {
        let Some(block) = self.block_of(address) else {
            return;
        };
        let me = By { thread, warp_epoch };
        let ordered = |other: By| {
            other.thread == thread || (same_warp(other.thread) && other.warp_epoch != warp_epoch)
        };
        let state = self.state[block].entry(address).or_default();
        let mut found = None;
        if let Some(w) = state.write
            && !ordered(w)
        {
            found = Some((
                if write {
                    "write-after-write"
                } else {
                    "read-after-write"
                },
                (w.thread, true),
            ));
        }
        if write
            && found.is_none()
            && let Some(r) = state.reads.iter().flatten().find(|r| !ordered(**r))
        {
            found = Some(("write-after-read", (r.thread, false)));
        }
        if write {
            state.write = Some(me);
        } else if let Some(slot) = state
            .reads
            .iter_mut()
            .find(|r| r.is_none_or(|r| r.thread == thread))
        {
            *slot = Some(me);
        } else {
            state.reads[1] = Some(me);
        }
        if let Some((kind, first)) = found
            && self.reported.insert(address)
        {
            if self.hazards.len() < KEEP {
                self.hazards.push(Hazard {
                    kind,
                    address,
                    first,
                    second: (thread, write),
                });
            } else {
                self.more += 1;
            }
        }
    }

    /// The block whose slot holds `address`, and the byte offset in it.
    pub fn block_of(&self, address: usize) -> Option<usize> {
        let off = address.checked_sub(self.map as usize)?;
        (off < self.map_len).then(|| off / self.slot)
    }

    /// A barrier of block `b`: its threads' accesses before it are ordered before those after.
    pub fn barrier(&mut self, b: usize) {
        self.state[b].clear();
    }

    /// The cluster barrier: every block's accesses before it are ordered before those after.
    pub fn cluster_barrier(&mut self) {
        self.state.iter_mut().for_each(HashMap::clear);
    }
}

impl Drop for Racecheck {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used (the fibers have ended).
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// Runs `f` (the device layer writing shared memory for a kernel: a bulk copy, a poison) with
/// the watched memory open, its accesses not the thread's.
pub fn unwatched<R>(f: impl FnOnce() -> R) -> R {
    let w = WATCH.with(Cell::get);
    if w.is_null() {
        return f();
    }
    // SAFETY: set by `Racecheck::watch` to its live watch for the stretch this runs in.
    let (base, len) = unsafe { ((*w).base, (*w).len) };
    protect(base as *mut u8, len, true);
    let r = f();
    protect(base as *mut u8, len, false);
    r
}

fn page_size() -> usize {
    // SAFETY: `sysconf` has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// Opens or closes the watched memory. Called from the signal handlers too: no panic, no
/// allocation (`mprotect` of a mapping of this module's cannot fail but for lack of memory,
/// and then the access faults again and the process ends as it would without racecheck).
fn protect(p: *mut u8, len: usize, open: bool) {
    let prot = if open {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_NONE
    };
    // SAFETY: `p..p + len` is a mapping of this module's (page-aligned).
    unsafe { libc::mprotect(p.cast(), len, prot) };
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod handlers {
    use super::{Access, LOG_CAPACITY, WATCH, protect};
    use std::sync::Once;

    static mut OLD_SEGV: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();
    static mut OLD_TRAP: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();

    /// The trap flag of `RFLAGS`: one instruction, then a debug trap.
    const TRAP_FLAG: i64 = 0x100;

    pub fn install() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            // SAFETY: installs handlers with SA_SIGINFO, keeping the old ones to chain to;
            // runs once, before any watch is set.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
                libc::sigemptyset(&raw mut sa.sa_mask);
                sa.sa_sigaction = on_segv as *const () as usize;
                libc::sigaction(libc::SIGSEGV, &sa, (&raw mut OLD_SEGV).cast());
                sa.sa_sigaction = on_trap as *const () as usize;
                libc::sigaction(libc::SIGTRAP, &sa, (&raw mut OLD_TRAP).cast());
            }
        });
    }

    /// Passes the signal to the handler installed before ours (or its default action: the
    /// handler returns, the instruction faults again and the default action ends the process).
    unsafe fn chain(
        old: *const libc::sigaction,
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        ctx: *mut libc::c_void,
    ) {
        // SAFETY: `old` was filled by `sigaction` in `install`.
        unsafe {
            let h = (*old).sa_sigaction;
            if h == libc::SIG_DFL || h == libc::SIG_IGN {
                libc::sigaction(sig, old, std::ptr::null_mut());
            } else if (*old).sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(h);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                f(sig);
            }
        }
    }

    /// Whether the instruction at `rip` is atomic: a `lock` prefix, or `xchg` with memory.
    unsafe fn is_atomic(rip: *const u8) -> bool {
        for i in 0..15 {
            // SAFETY: the faulting instruction's bytes, mapped executable (readable).
            let b = unsafe { *rip.add(i) };
            match b {
                0xF0 => return true,
                // Other legacy prefixes, and REX.
                0x66 | 0x67 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65 | 0xF2 | 0xF3 => {}
                0x40..=0x4F => {}
                0x86 | 0x87 => return true,
                _ => return false,
            }
        }
        false
    }

    extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let w = WATCH.with(|c| c.get());
        // SAFETY: the kernel passes a valid siginfo and ucontext; the watch is live while set.
        unsafe {
            let address = (*info).si_addr() as usize;
            if w.is_null() || address < (*w).base || address >= (*w).base + (*w).len {
                chain((&raw const OLD_SEGV).cast(), sig, info, ctx);
                return;
            }
            let uc = ctx.cast::<libc::ucontext_t>();
            let gregs = &mut (*uc).uc_mcontext.gregs;
            let write = gregs[libc::REG_ERR as usize] & 2 != 0;
            let rip = gregs[libc::REG_RIP as usize] as *const u8;
            if !is_atomic(rip) {
                let n = (*w).logged.get();
                if n < LOG_CAPACITY {
                    (*w).log.add(n).write(Access { address, write });
                    (*w).logged.set(n + 1);
                } else {
                    (*w).lost.set((*w).lost.get() + 1);
                }
            }
            protect((*w).base as *mut u8, (*w).len, true);
            (*w).stepping.set(true);
            gregs[libc::REG_EFL as usize] |= TRAP_FLAG;
        }
    }

    extern "C" fn on_trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let w = WATCH.with(|c| c.get());
        // SAFETY: as in `on_segv`.
        unsafe {
            if w.is_null() || !(*w).stepping.get() {
                chain((&raw const OLD_TRAP).cast(), sig, info, ctx);
                return;
            }
            (*w).stepping.set(false);
            let uc = ctx.cast::<libc::ucontext_t>();
            (*uc).uc_mcontext.gregs[libc::REG_EFL as usize] &= !TRAP_FLAG;
            protect((*w).base as *mut u8, (*w).len, false);
        }
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn install_handlers() {
    handlers::install();
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn install_handlers() {}
