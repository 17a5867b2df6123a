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
/// `block0_only`, only block 0's marks are kept (one block's tree).
#[derive(Clone, Copy)]
pub struct Trace {
    /// The table, row-major.
    pub table: *mut u32,
    /// Rows of the table.
    pub rows: usize,
    /// Columns of the table.
    pub cols: usize,
    /// Keep only block 0's marks.
    pub block0_only: bool,
}

impl Probe for Trace {
    #[inline(always)]
    fn mark(self, row: usize, col: usize, value: u32) {
        if (self.block0_only && block_idx_x() != 0) || row >= self.rows || col >= self.cols {
            return;
        }
        // SAFETY: `table` holds `rows * cols` words (the traced entry points' contract), and
        // `(row, col)` is inside it; each cell is written by one thread.
        unsafe { *self.table.add(row * self.cols + col) = value };
    }
}
