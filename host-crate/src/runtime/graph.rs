//! CUDA graphs (CUDA 图): a stretch of stream work recorded once (stream capture) and launched
//! again as one unit (`cuGraphLaunch`), so that the host pays one launch for many kernels,
//! copies and event waits. What pays off where launches, not the GPU, take the time: a short
//! array stepped many times.
use crate::runtime::error::{Result, check_raw};
use crate::runtime::stream::Stream;

/// Starts recording `stream`'s work instead of running it (this thread's captures only:
/// `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`). Work on other streams joins the recording when they
/// wait for an event recorded on a recording stream.
///
/// # Safety
/// The stream's context is current. Until [`end_capture`], nothing may wait on the host for
/// the recording streams (a synchronize, a query of an event recorded during the capture).
pub(crate) unsafe fn begin_capture(stream: &Stream) -> Result<()> {
    // SAFETY: a live stream of the current context (the caller's contract).
    check_raw("cuStreamBeginCapture", unsafe {
        cust::sys::cuStreamBeginCapture_v2(
            stream.raw(),
            cust::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
    })
}

/// Ends the recording begun by [`begin_capture`] and makes it launchable. Every stream that
/// joined must have been joined back into `stream` (it waits for an event recorded on them).
/// Called after a failure too: the stream leaves capture either way.
///
/// # Safety
/// The stream's context is current.
pub(crate) unsafe fn end_capture(stream: &Stream) -> Result<GraphExec> {
    let mut graph = std::ptr::null_mut();
    // SAFETY: a live stream of the current context; a writable handle.
    let ended = check_raw("cuStreamEndCapture", unsafe {
        cust::sys::cuStreamEndCapture(stream.raw(), &mut graph)
    });
    ended?;
    let mut exec = std::ptr::null_mut();
    // SAFETY: the graph just captured; a writable handle.
    let made = check_raw("cuGraphInstantiateWithFlags", unsafe {
        cust::sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
    });
    // SAFETY: the graph is not needed once instantiated (or if that failed).
    unsafe { cust::sys::cuGraphDestroy(graph) };
    made?;
    Ok(GraphExec { raw: exec })
}

/// A captured and instantiated graph (`CUgraphExec`), destroyed on drop.
pub(crate) struct GraphExec {
    raw: cust::sys::CUgraphExec,
}

// SAFETY: a graph's handle may be used from any thread with its context current.
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Launches the whole graph on `stream`, after what it holds.
    ///
    /// # Safety
    /// The graph's context is current, `stream` is of it, and the buffers the graph touches
    /// are alive and ordered with every other use (the graph's launches run as one stream
    /// operation).
    pub(crate) unsafe fn launch(&self, stream: &Stream) -> Result<()> {
        // SAFETY: the caller's contract.
        check_raw("cuGraphLaunch", unsafe {
            cust::sys::cuGraphLaunch(self.raw, stream.raw())
        })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: a live handle, destroyed once; its launches were waited for by the owner.
        unsafe { cust::sys::cuGraphExecDestroy(self.raw) };
    }
}
