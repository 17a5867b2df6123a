//! NCCL, loaded when first used: the transport between GPUs, as NVIDIA's multi-GPU samples and
//! every training framework use it.
//!
//! `libnccl.so.2` (the name NCCL's packages install: Debian's `libnccl2`, PyTorch's
//! `nvidia-nccl` wheel) is opened with `dlopen` on the first multi-GPU call, so a program that
//! never uses several GPUs neither links nor needs it, and a machine without it gets one line
//! ([`NcclMissing`]) saying what is missing and how to get it. `FERROCUDA_LIBNCCL` names
//! another file (the wheel's, for example).
//!
//! Why not cudarc's `nccl` binding, the kept one: its loader looks for `libnccl.so` and the
//! CUDA major version's names, not `libnccl.so.2`, and panics when it finds none; a library
//! must answer with an error. The dozen entry points used here are declared below from
//! `nccl.h` (2.18 and later, checked when NCCL is loaded); the communicator's configuration is
//! the 2.18 layout, which every later NCCL accepts.
//!
//! Every communicator is **non-blocking** (`blocking = 0`): no NCCL call waits for a peer on
//! the host. Completion is polled (`ncclCommGetAsyncError`, `cuStreamQuery`) against a
//! deadline; past it, or on an asynchronous error, the communicator is aborted
//! (`ncclCommAbort`) and the error names the operation, the rank and the limit.
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::runtime::driver::dl_error;
use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::stream::Stream;

/// The file opened, unless [`NCCL_LIBRARY_ENV`] names another.
pub const NCCL_LIBRARY: &str = "libnccl.so.2";

/// Names the NCCL library file to load instead of [`NCCL_LIBRARY`].
pub const NCCL_LIBRARY_ENV: &str = "FERROCUDA_LIBNCCL";

pub use crate::runtime::error::NcclMissing;

/// `ncclResult_t`.
pub(crate) type NcclResult = c_int;
const SUCCESS: NcclResult = 0;
const IN_PROGRESS: NcclResult = 7;

/// The name of an `ncclResult_t`.
pub(crate) fn result_name(result: NcclResult) -> &'static str {
    match result {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        8 => "ncclTimeout",
        _ => "an unknown ncclResult_t",
    }
}

/// `ncclDataType_t`: the bytes of a halo travel as `ncclUint8`.
pub(crate) const UINT8: c_int = 1;

/// `ncclComm_t`.
type RawComm = *mut c_void;

/// `ncclUniqueId`: what every rank of one communicator must be given, made by one of them.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct UniqueId(pub [u8; 128]);

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId({}…)", &self.to_hex()[..16])
    }
}

impl UniqueId {
    /// A new id (`ncclGetUniqueId`): the rank that makes it shares it with the others.
    pub fn new() -> Result<Self> {
        load_nccl()?;
        let api = api()?;
        let mut id = UniqueId([0; 128]);
        // SAFETY: a writable 128-byte ncclUniqueId.
        let status = unsafe { (api.get_unique_id)(&mut id) };
        check("ncclGetUniqueId", 0, 1, None, status)?;
        Ok(id)
    }

    /// The id as 256 hexadecimal digits (what the rendezvous file holds).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The id from [`to_hex`](Self::to_hex)'s digits; `None` unless exactly 256 of them.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let hex = hex.trim();
        if hex.len() != 256 || !hex.is_ascii() {
            return None;
        }
        let mut id = [0u8; 128];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(UniqueId(id))
    }
}

/// `ncclConfig_t` as NCCL 2.18 declares it (`splitShare` is 2.18's; later versions accept
/// it: `size` and `version` say which fields it has).
#[repr(C)]
struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
}

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` with `blocking = 0`.
    fn non_blocking() -> Self {
        const UNDEF: c_int = c_int::MIN;
        Self {
            size: size_of::<Self>(),
            magic: 0xcafe_beef,
            version: 2 * 10000 + 18 * 100,
            blocking: 0,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
        }
    }
}

type Stream_ = cust::sys::CUstream;

/// The entry points ferrocuda calls, resolved once.
struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    comm_init_rank_config:
        unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int, *mut Config) -> NcclResult,
    comm_get_async_error: unsafe extern "C" fn(RawComm, *mut NcclResult) -> NcclResult,
    comm_abort: unsafe extern "C" fn(RawComm) -> NcclResult,
    comm_finalize: unsafe extern "C" fn(RawComm) -> NcclResult,
    comm_destroy: unsafe extern "C" fn(RawComm) -> NcclResult,
    get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    get_last_error: unsafe extern "C" fn(RawComm) -> *const c_char,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        RawComm,
        Stream_,
    ) -> NcclResult,
    send: unsafe extern "C" fn(*const c_void, usize, c_int, c_int, RawComm, Stream_) -> NcclResult,
    recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, Stream_) -> NcclResult,
}

// SAFETY: function pointers into a library that stays loaded; NCCL's calls are thread-safe as
// its documentation states for distinct communicators (ferrocuda drives each from one thread).
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

static API: OnceLock<std::result::Result<Api, NcclMissing>> = OnceLock::new();

// Each transmute's target is the `Api` field it initialises, declared there.
#[allow(clippy::missing_transmute_annotations)]
fn load() -> std::result::Result<Api, NcclMissing> {
    let library = std::env::var(NCCL_LIBRARY_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| NCCL_LIBRARY.to_owned());
    let missing = |reason: String| NcclMissing {
        library: library.clone(),
        reason,
    };
    let name = CString::new(library.clone()).map_err(|_| missing("the name holds a NUL".into()))?;
    // SAFETY: a valid C string. The handle is never closed: the entry points stay valid.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(missing(dl_error()));
    }
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: a live handle and a NUL-terminated name.
            let found = unsafe { libc::dlsym(handle, concat!($name, "\0").as_ptr().cast()) };
            if found.is_null() {
                return Err(missing(format!("it has no {}", $name)));
            }
            // SAFETY: the symbol is the NCCL function of that name, whose C signature the
            // field declares (nccl.h, 2.18 and later).
            unsafe { std::mem::transmute::<*mut c_void, _>(found) }
        }};
    }
    Ok(Api {
        get_version: sym!("ncclGetVersion"),
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank_config: sym!("ncclCommInitRankConfig"),
        comm_get_async_error: sym!("ncclCommGetAsyncError"),
        comm_abort: sym!("ncclCommAbort"),
        comm_finalize: sym!("ncclCommFinalize"),
        comm_destroy: sym!("ncclCommDestroy"),
        get_error_string: sym!("ncclGetErrorString"),
        get_last_error: sym!("ncclGetLastError"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
        broadcast: sym!("ncclBroadcast"),
        send: sym!("ncclSend"),
        recv: sym!("ncclRecv"),
    })
}

fn api() -> std::result::Result<&'static Api, NcclMissing> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// NCCL's version as (major, minor, patch), loading it if needed.
pub fn version() -> Result<(u32, u32, u32)> {
    let api = api()?;
    let mut code = 0;
    // SAFETY: a writable int.
    check("ncclGetVersion", 0, 1, None, unsafe {
        (api.get_version)(&mut code)
    })?;
    let code = code as u32;
    Ok((code / 10000, code / 100 % 100, code % 100))
}

/// The oldest NCCL ferrocuda runs on: its communicator configuration (`splitShare`) and
/// non-blocking communicators that can be aborted while they form.
pub const OLDEST_NCCL: (u32, u32) = (2, 18);

/// Opens NCCL (once), or says in one line why it cannot be (missing, or older than
/// [`OLDEST_NCCL`]).
pub fn load_nccl() -> Result<()> {
    let (major, minor, patch) = version()?;
    if (major, minor) < OLDEST_NCCL {
        return Err(NcclMissing {
            library: std::env::var(NCCL_LIBRARY_ENV).unwrap_or_else(|_| NCCL_LIBRARY.into()),
            reason: format!(
                "it is NCCL {major}.{minor}.{patch}, older than {}.{}",
                OLDEST_NCCL.0, OLDEST_NCCL.1
            ),
        }
        .into());
    }
    Ok(())
}

/// `Err` naming `call` unless `status` is success or in progress (a non-blocking call's
/// answer: the poll that follows sees it through).
fn check(
    call: &'static str,
    rank: usize,
    ranks: usize,
    comm: Option<RawComm>,
    status: NcclResult,
) -> Result<()> {
    if status == SUCCESS || status == IN_PROGRESS {
        return Ok(());
    }
    Err(Error::Nccl {
        call,
        rank,
        ranks,
        status: result_name(status),
        message: message(comm, status),
    })
}

/// NCCL's words for a failure: the communicator's last error, else the status's text.
fn message(comm: Option<RawComm>, status: NcclResult) -> String {
    let Ok(api) = api() else {
        return String::new();
    };
    let text = |p: *const c_char| {
        // SAFETY: NCCL returns null or a NUL-terminated string it owns.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    // SAFETY: any status value.
    let what = text(unsafe { (api.get_error_string)(status) }).unwrap_or_default();
    // SAFETY: a live communicator (or null, which NCCL accepts for the last error). The last
    // error is NCCL's latest words in this process: a hint beside the status, not instead of it.
    let last = text(unsafe { (api.get_last_error)(comm.unwrap_or(std::ptr::null_mut())) })
        .filter(|s| !s.is_empty());
    match last {
        Some(last) => format!("{what}; NCCL's last error: {last}"),
        None => what,
    }
}

/// Whether a stream or event query says the work has passed: `Ok(false)` while it runs, the
/// work's error if it failed.
fn passed(call: &'static str, status: cust::sys::CUresult) -> Result<bool> {
    match status {
        cust::sys::CUresult::CUDA_SUCCESS => Ok(true),
        cust::sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        status => Err(Error::Driver {
            call,
            launch: None,
            error: crate::runtime::error::DriverError::from_status(status),
        }),
    }
}

/// `e`, met by rank `rank` of `ranks` doing `what`: an NCCL error gets `what` before its words,
/// a CUDA error becomes that rank's error naming `what`.
pub(crate) fn in_context(e: Error, what: &str, rank: usize, ranks: usize) -> Error {
    match e {
        Error::Nccl {
            call,
            rank,
            ranks,
            status,
            message,
        } => Error::Nccl {
            call,
            rank,
            ranks,
            status,
            message: format!("{what}: {message}"),
        },
        Error::Driver { call, error, .. } => Error::Nccl {
            call,
            rank,
            ranks,
            status: "a CUDA error",
            message: format!("{what}: {error}"),
        },
        other => other,
    }
}

/// The time limit of every wait of a communicator: `FERROCUDA_NCCL_TIMEOUT` seconds, else 60.
pub fn default_timeout() -> Duration {
    std::env::var("FERROCUDA_NCCL_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(60), |s| {
            Duration::try_from_secs_f64(s.min(86_400.0)).unwrap_or(Duration::from_secs(60))
        })
}

/// One rank's NCCL communicator, on one GPU, non-blocking.
pub(crate) struct Communicator {
    raw: RawComm,
    rank: usize,
    ranks: usize,
    gpu: Gpu,
    timeout: Duration,
    aborted: std::sync::atomic::AtomicBool,
}

// SAFETY: an ncclComm_t may move between threads. Shared between threads, a communicator is
// only aborted (`abort_all`, one thread each: NCCL allows calls on distinct communicators from
// distinct threads, and `ncclCommAbort` from any thread); everything else is driven from one
// thread at a time by the `Team` that holds it.
unsafe impl Send for Communicator {}
unsafe impl Sync for Communicator {}

impl Communicator {
    /// Makes the communicators of `ranks` of `world` ranks (`(rank, gpu)` pairs, distinct GPUs)
    /// sharing `id`, in one group, and waits (within `timeout`) until every one is ready, or
    /// aborts them all.
    pub(crate) fn init(
        id: UniqueId,
        world: usize,
        ranks: &[(usize, Gpu)],
        timeout: Duration,
    ) -> Result<Vec<Communicator>> {
        load_nccl()?;
        let api = api()?;
        let world_c = c_int::try_from(world).map_err(|_| Error::InvalidArgument {
            what: format!("NCCL: {world} ranks is more than an int holds"),
        })?;
        let mut comms = Vec::with_capacity(ranks.len());
        let first = ranks.first().map_or(0, |(r, _)| *r);
        // SAFETY: group calls bracket the inits (several GPUs from one thread).
        check("ncclGroupStart", first, world, None, unsafe {
            (api.group_start)()
        })?;
        let mut failed = None;
        for (rank, gpu) in ranks {
            let _current = match gpu.enter() {
                Ok(current) => current,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            let mut raw = std::ptr::null_mut();
            let mut config = Config::non_blocking();
            // SAFETY: writable handle and config; `rank < world` (the caller's check).
            let status = unsafe {
                (api.comm_init_rank_config)(&mut raw, world_c, id, *rank as c_int, &mut config)
            };
            if !raw.is_null() {
                comms.push(Communicator {
                    raw,
                    rank: *rank,
                    ranks: world,
                    gpu: gpu.clone(),
                    timeout,
                    aborted: std::sync::atomic::AtomicBool::new(false),
                });
            }
            if let Err(e) = check("ncclCommInitRankConfig", *rank, world, None, status) {
                failed = Some(e);
                break;
            }
        }
        // NCCL may make its devices' contexts current: the thread's own comes back.
        let kept = crate::runtime::current::Current::preserve();
        // SAFETY: closes the group opened above.
        let ended = check("ncclGroupEnd", first, world, None, unsafe {
            (api.group_end)()
        });
        drop(kept);
        let ready = match (failed, ended) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => comms.iter().try_for_each(|c| {
                c.settle("NCCL communicator initialisation (ncclCommInitRankConfig)")
            }),
        };
        match ready {
            Ok(()) => Ok(comms),
            Err(e) => {
                abort_all(&comms.iter().collect::<Vec<_>>());
                Err(e)
            }
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    fn api(&self) -> Result<&'static Api> {
        if self.aborted.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Nccl {
                call: "a call on an aborted communicator",
                rank: self.rank,
                ranks: self.ranks,
                status: "ncclInvalidUsage",
                message: "an earlier error or time-out aborted it; make a new Team".into(),
            });
        }
        Ok(api()?)
    }

    /// The communicator's asynchronous state: `Ok(true)` while an operation is in progress.
    fn async_state(&self, api: &Api) -> Result<bool> {
        let mut state = SUCCESS;
        // SAFETY: a live communicator, a writable result.
        let status = unsafe { (api.comm_get_async_error)(self.raw, &mut state) };
        check(
            "ncclCommGetAsyncError",
            self.rank,
            self.ranks,
            Some(self.raw),
            status,
        )?;
        match state {
            IN_PROGRESS => Ok(true),
            SUCCESS => Ok(false),
            other => Err(Error::Nccl {
                call: "an operation (ncclCommGetAsyncError)",
                rank: self.rank,
                ranks: self.ranks,
                status: result_name(other),
                message: message(Some(self.raw), other),
            }),
        }
    }

    /// Polls until `done` says so and the communicator has no operation in progress, failing on
    /// an asynchronous error; past the time limit aborts and fails with [`Error::Timeout`].
    fn poll(&self, what: &str, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
        let api = self.api()?;
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let outcome = self
                .async_state(api)
                .and_then(|busy| Ok(!busy && done()?))
                .map_err(|e| in_context(e, what, self.rank, self.ranks));
            match outcome {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    self.abort();
                    return Err(e);
                }
            }
            if start.elapsed() > self.timeout {
                self.abort();
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    rank: self.rank,
                    ranks: self.ranks,
                    timeout: self.timeout,
                });
            }
            spins += 1;
            if spins > 2000 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Waits until an enqueue or group end in progress has been taken by NCCL.
    pub(crate) fn settle(&self, what: &str) -> Result<()> {
        self.poll(what, || Ok(true))
    }

    /// Waits for everything on `stream` (of this rank's GPU) within the time limit.
    pub(crate) fn wait_stream(&self, stream: &Stream, what: &str) -> Result<()> {
        let _current = self.gpu.enter()?;
        self.poll(what, || {
            // SAFETY: a live stream of the current context.
            passed("cuStreamQuery", unsafe {
                cust::sys::cuStreamQuery(stream.raw())
            })
        })
    }

    /// Waits for `marker`'s last record (on a stream of this rank's GPU) within the time limit.
    pub(crate) fn wait_marker(
        &self,
        marker: &crate::runtime::event::Marker,
        what: &str,
    ) -> Result<()> {
        let _current = self.gpu.enter()?;
        self.poll(what, || passed("cuEventQuery", marker.query()))
    }

    /// Aborts the communicator (idempotent): its kernels stop, its peers see an error.
    pub(crate) fn abort(&self) {
        if self.aborted.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        if let Ok(api) = api() {
            let _current = self.gpu.enter();
            // SAFETY: a live communicator, aborted once.
            let _ = unsafe { (api.comm_abort)(self.raw) };
        }
    }

    /// Calls NCCL's `call` (`f`, given the entry points and this communicator) and checks
    /// what it returns.
    fn call(&self, call: &'static str, f: impl FnOnce(&Api, RawComm) -> NcclResult) -> Result<()> {
        let api = self.api()?;
        check(
            call,
            self.rank,
            self.ranks,
            Some(self.raw),
            f(api, self.raw),
        )
    }

    /// `ncclSend` of `bytes` bytes at `ptr` to `peer`, on `stream`.
    ///
    /// # Safety
    /// `ptr` holds `bytes` readable device bytes of this GPU until the stream passes the send.
    pub(crate) unsafe fn send(
        &self,
        ptr: u64,
        bytes: usize,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        let (p, s) = (ptr as *const c_void, stream.raw());
        // SAFETY: the caller's contract; a live communicator and stream.
        self.call("ncclSend", |api, comm| unsafe {
            (api.send)(p, bytes, UINT8, peer as c_int, comm, s)
        })
    }

    /// `ncclRecv` of `bytes` bytes into `ptr` from `peer`, on `stream`.
    ///
    /// # Safety
    /// `ptr` holds `bytes` writable device bytes of this GPU, touched by nothing else until the
    /// stream passes the receive.
    pub(crate) unsafe fn recv(
        &self,
        ptr: u64,
        bytes: usize,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        let (p, s) = (ptr as *mut c_void, stream.raw());
        // SAFETY: the caller's contract; a live communicator and stream.
        self.call("ncclRecv", |api, comm| unsafe {
            (api.recv)(p, bytes, UINT8, peer as c_int, comm, s)
        })
    }

    /// `ncclBroadcast` of `bytes` bytes, in place at `ptr`, from `root`, on `stream`.
    ///
    /// # Safety
    /// `ptr` holds `bytes` device bytes of this GPU (read on the root, written elsewhere),
    /// touched by nothing else until the stream passes the broadcast.
    pub(crate) unsafe fn broadcast(
        &self,
        ptr: u64,
        bytes: usize,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        let (p, s) = (ptr as *mut c_void, stream.raw());
        // SAFETY: the caller's contract; in place (send = receive buffer).
        self.call("ncclBroadcast", |api, comm| unsafe {
            (api.broadcast)(p, p, bytes, UINT8, root as c_int, comm, s)
        })
    }
}

/// Aborts `comms` (those not aborted yet), each from its own thread when there are several:
/// communicators of one process's GPUs may wait for each other while they abort, which one
/// thread aborting them in turn would never let happen.
pub(crate) fn abort_all(comms: &[&Communicator]) {
    if comms.len() <= 1 {
        comms.iter().for_each(|c| c.abort());
        return;
    }
    std::thread::scope(|s| {
        for c in comms {
            s.spawn(move || c.abort());
        }
    });
}

/// Drops `comms` (finalise, then destroy; abort on failure), each on its own thread when there
/// are several, for the same reason as [`abort_all`].
pub(crate) fn drop_all(comms: Vec<Communicator>) {
    if comms.len() <= 1 {
        drop(comms);
        return;
    }
    std::thread::scope(|s| {
        for c in comms {
            s.spawn(move || drop(c));
        }
    });
}

/// Brackets NCCL calls of several communicators made from one thread (`ncclGroupStart` /
/// `ncclGroupEnd`), then waits until each communicator has taken them.
pub(crate) fn group(
    comms: &[&Communicator],
    what: &str,
    calls: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let api = api()?;
    let (rank, ranks) = comms.first().map_or((0, 1), |c| (c.rank, c.ranks));
    // SAFETY: opens a group closed below on every path.
    check("ncclGroupStart", rank, ranks, None, unsafe {
        (api.group_start)()
    })?;
    let inside = calls();
    // NCCL may make its devices' contexts current: the thread's own comes back.
    let kept = crate::runtime::current::Current::preserve();
    // SAFETY: closes the group.
    let ended = check("ncclGroupEnd", rank, ranks, None, unsafe {
        (api.group_end)()
    });
    drop(kept);
    let result = inside
        .and(ended)
        .and_then(|()| comms.iter().try_for_each(|c| c.settle(what)));
    if result.is_err() {
        abort_all(comms);
    }
    result
}

impl Drop for Communicator {
    /// Finalises (flushing what is in flight, within the time limit) and destroys the
    /// communicator; an aborted one is already gone.
    fn drop(&mut self) {
        if self.aborted.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let Ok(api) = api() else { return };
        let _current = self.gpu.enter();
        // SAFETY: a live communicator, finalised and destroyed once.
        let finalised = check(
            "ncclCommFinalize",
            self.rank,
            self.ranks,
            Some(self.raw),
            unsafe { (api.comm_finalize)(self.raw) },
        )
        .and_then(|()| self.settle("ncclCommFinalize"));
        if finalised.is_ok() {
            // SAFETY: finalised above; destroyed once.
            let _ = unsafe { (api.comm_destroy)(self.raw) };
        } else {
            // Aborting frees it (a failed `settle` has aborted it already: `abort` is idempotent).
            self.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_id_survives_its_hex_form_and_bad_digits_are_refused() {
        let mut bytes = [0u8; 128];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 37 % 256) as u8;
        }
        let id = UniqueId(bytes);
        assert_eq!(UniqueId::from_hex(&id.to_hex()), Some(id));
        assert_eq!(UniqueId::from_hex(&id.to_hex()[2..]), None);
        assert_eq!(UniqueId::from_hex(&"zz".repeat(128)), None);
        assert_eq!(UniqueId::from_hex(""), None);
    }

    #[test]
    fn the_configuration_is_the_layout_nccl_2_18_declares() {
        // size_t, 2 x unsigned, 4 x int, a pointer, an int (padded): 48 bytes on 64-bit Linux.
        assert_eq!(size_of::<Config>(), 48);
        let c = Config::non_blocking();
        assert_eq!(
            (c.size, c.magic, c.version, c.blocking),
            (48, 0xcafe_beef, 21800, 0)
        );
    }

    #[test]
    fn every_result_code_has_its_name() {
        assert_eq!(result_name(0), "ncclSuccess");
        assert_eq!(result_name(6), "ncclRemoteError");
        assert_eq!(result_name(7), "ncclInProgress");
        assert_eq!(result_name(99), "an unknown ncclResult_t");
    }
}
