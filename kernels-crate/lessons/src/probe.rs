//! Probes: what the lessons' pictures are drawn from. A kernel generic over a [`Probe`] calls
//! [`Probe::mark`] where it does what a picture shows (a thread adding in a step of the tree, a
//! thread staging a cell of the stencil's tile). The kernels the lessons time and check take
//! [`NoProbe`], which compiles to nothing; their `_traced` entry points take a [`Trace`], which
//! writes each mark to a table in global memory that the host reads back and draws. The picture
//! is therefore the kernel's own control flow, run on the device, not a drawing of it.
use crate::device::thread::block_idx_x;

/// Where a kernel reports what a picture shows.
pub trait Probe: Copy {
    /// Cell `(row, col)` of the picture holds `value` (non-zero).
    fn mark(self, row: usize, col: usize, value: u32);
}

/// No picture: every mark compiles to nothing.
#[derive(Clone, Copy)]
pub struct NoProbe;

impl Probe for NoProbe {
    #[inline(always)]
    fn mark(self, _: usize, _: usize, _: u32) {}
}

/// A `rows x cols` table of `u32` in global memory, zero where nothing was marked; with
/// `block0_only`, only block 0's marks are kept (one block's tree). Made only by
/// [`Trace::new`], whose caller vouches for the table.
#[derive(Clone, Copy)]
pub struct Trace {
    table: *mut u32,
    rows: usize,
    cols: usize,
    block0_only: bool,
}

impl Trace {
    /// A trace into `table`.
    ///
    /// # Safety
    /// `table` points to `rows * cols` writable `u32` for as long as the trace is used, and no
    /// two threads mark the same cell with different values.
    #[inline(always)]
    pub unsafe fn new(table: *mut u32, rows: usize, cols: usize, block0_only: bool) -> Trace {
        Trace {
            table,
            rows,
            cols,
            block0_only,
        }
    }
}

impl Probe for Trace {
    #[inline(always)]
    fn mark(self, row: usize, col: usize, value: u32) {
        if (self.block0_only && block_idx_x() != 0) || row >= self.rows || col >= self.cols {
            return;
        }
        // SAFETY: `table` holds `rows * cols` words (`Trace::new`'s contract), and `(row, col)`
        // is inside it.
        unsafe { *self.table.add(row * self.cols + col) = value };
    }
}
