//! How the host thread waits for the GPU: a choice of each [`Gpu`](crate::Gpu).

/// How ferrocuda's own waits for the GPU spend the host thread: [`Gpu::synchronize`](crate::Gpu::synchronize),
/// [`Gpu::download`](crate::Gpu::download), [`Gpu::alloc`](crate::Gpu::alloc), [`Gpu::upload`](crate::Gpu::upload), `launch_and_wait`, the `finish` of the
/// runs, and a reduction waiting for its result. A choice of one [`Gpu`](crate::Gpu)
/// ([`Gpu::set_wait`](crate::Gpu::set_wait)): the context's own scheduling flags, which every user of the device's
/// primary context in the process shares, are left as the driver or another library set them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wait {
    /// Polls (`cuStreamQuery`, `cuEventQuery`, or a reduction's result slot) with
    /// [`std::hint::spin_loop`] between polls: the wait ends within about a microsecond of the
    /// GPU finishing, which is most of what a small call costs, and keeps one core busy
    /// meanwhile. The default.
    #[default]
    Spin,
    /// Polls as [`Spin`](Self::Spin) does, with [`std::thread::yield_now`] between polls:
    /// other threads get the core, at the cost of a few microseconds per wait on a busy
    /// machine.
    Yield,
    /// Blocks in the driver (`cuStreamSynchronize`, `cuEventSynchronize`), which spins,
    /// yields or sleeps as the context's scheduling flags say (with the driver's default, it
    /// sleeps when the process has more active contexts than cores).
    Block,
}

impl Wait {
    pub(crate) fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Yield,
            2 => Self::Block,
            _ => Self::Spin,
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Spin => 0,
            Self::Yield => 1,
            Self::Block => 2,
        }
    }

    /// What a polling wait does between two polls.
    pub(crate) fn pause(self) {
        match self {
            Self::Yield => std::thread::yield_now(),
            _ => std::hint::spin_loop(),
        }
    }

    /// Polls `query` until it stops answering `CUDA_ERROR_NOT_READY`, or calls `block` for
    /// [`Block`](Self::Block); returns the driver call that answered and its status.
    pub(crate) fn until(
        self,
        query: (&'static str, &mut dyn FnMut() -> cust::sys::CUresult),
        block: (&'static str, &mut dyn FnMut() -> cust::sys::CUresult),
    ) -> (&'static str, cust::sys::CUresult) {
        if self == Self::Block {
            return (block.0, (block.1)());
        }
        let (call, query) = query;
        loop {
            match query() {
                cust::sys::CUresult::CUDA_ERROR_NOT_READY => self.pause(),
                status => return (call, status),
            }
        }
    }
}
