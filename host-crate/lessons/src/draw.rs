//! Pictures of what the kernels do, drawn from runs (`--draw` in the terminal, SVG for the
//! docs, the same data either way):
//!
//! - [`reduce_trees`]: which threads add in each step of `neighbored`, `neighbored_less` and
//!   `interleaved`, for one block, read from the kernels' own probes
//!   (`ferrocuda_lesson_kernels::probe`);
//! - [`divergence_masks`]: which lanes of each warp take the `if` side of the four
//!   `simpleDivergence` kernels, read from what each thread wrote;
//! - [`stencil_tiles`]: which input cell each slot of each block's shared tile holds, halos
//!   included, read from the shared stencil's probe;
//! - [`shuffles`]: which lane each lane's `shfl_up`, `shfl_down` and `shfl_xor` read, from the
//!   warp demo's outputs.
//!
//! Each picture has a CPU model beside it ([`tree_model`], ...), which the tests compare with
//! what the kernels did.
use std::fmt::Write as _;

use ferrocuda::{Error, Gpu, Result};

use crate::kernels::lab::{math_kernel1, math_kernel2, math_kernel3, math_kernel4};
use crate::kernels::stencil::textbook::STAGED_BIAS;
use crate::kernels::traced::{reduce_tree_traced_i32, stencil_1d_shared_traced_f32};
use crate::lab::{WARP_DEMO_COLUMNS, WarpDemo};

/// The three trees of the reduction chapter, in the probe's numbering.
pub const TREES: [&str; 3] = ["neighbored", "neighbored_less", "interleaved"];

/// One block's reduction tree: `steps[s][tid]` is whether thread `tid` adds in step `s`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// `neighbored`, `neighbored_less` or `interleaved`.
    pub kernel: &'static str,
    /// Threads in the block.
    pub block: usize,
    /// The stride of each step.
    pub strides: Vec<usize>,
    /// Which threads add, per step.
    pub steps: Vec<Vec<bool>>,
}

fn log2(block: usize) -> usize {
    block.trailing_zeros() as usize
}

/// The strides of tree `k` for a block of `block` threads.
fn strides(k: usize, block: usize) -> Vec<usize> {
    (0..log2(block))
        .map(|s| if k == 2 { block / 2 >> s } else { 1 << s })
        .collect()
}

/// Runs tree `k` (0 `neighbored`, 1 `neighbored_less`, 2 `interleaved`) on one block of
/// `block` threads (a power of two from 64) and reads which threads added in each step.
pub fn reduce_tree(gpu: &Gpu, k: usize, block: usize) -> Result<Tree> {
    if !block.is_power_of_two() || !(64..=1024).contains(&block) || k >= TREES.len() {
        return Err(Error::InvalidArgument {
            what: format!(
                "`{}`: tree {k} with a block of {block} (a power of two from 64 to 1024)",
                reduce_tree_traced_i32().symbol()
            ),
        });
    }
    let steps = log2(block);
    let data = gpu.upload(&vec![1i32; block], "tree input")?;
    let partial = gpu.alloc::<i32>(1, "tree partial")?;
    let trace = gpu.upload(&vec![0u32; steps * block], "tree trace")?;
    let kernel = crate::kernel(gpu, reduce_tree_traced_i32())?;
    // SAFETY: one block over `block` ints, one partial, a `steps x block` trace table.
    unsafe {
        kernel.launch_and_wait(
            kernel.config(1, block as u32),
            (
                data.as_device_ptr(),
                partial.as_device_ptr(),
                block,
                k as u32,
                trace.as_device_ptr(),
                steps,
            ),
        )?
    };
    let sum = gpu.download(&partial)?[0];
    if sum != block as i32 {
        return Err(Error::InvalidArgument {
            what: format!(
                "`{}` ({}) summed {block} ones to {sum}",
                reduce_tree_traced_i32().symbol(),
                TREES[k]
            ),
        });
    }
    let table = gpu.download(&trace)?;
    Ok(Tree {
        kernel: TREES[k],
        block,
        strides: strides(k, block),
        steps: table
            .chunks(block)
            .map(|row| row.iter().map(|&v| v != 0).collect())
            .collect(),
    })
}

/// The three trees, each from a run.
pub fn reduce_trees(gpu: &Gpu, block: usize) -> Result<Vec<Tree>> {
    (0..TREES.len())
        .map(|k| reduce_tree(gpu, k, block))
        .collect()
}

/// What the book says tree `k` does: `neighbored`, thread `tid` adds when `tid % (2 * stride)
/// == 0`; `neighbored_less`, when `2 * stride * tid < block`; `interleaved`, when `tid <
/// stride`.
pub fn tree_model(k: usize, block: usize) -> Tree {
    let strides = strides(k, block);
    let steps = strides
        .iter()
        .map(|&s| {
            (0..block)
                .map(|tid| match k {
                    0 => tid % (2 * s) == 0,
                    1 => 2 * s * tid < block,
                    _ => tid < s,
                })
                .collect()
        })
        .collect();
    Tree {
        kernel: TREES[k],
        block,
        strides,
        steps,
    }
}

/// Active threads and active warps (a warp with at least one active thread) of one step.
pub fn step_counts(step: &[bool]) -> (usize, usize) {
    let threads = step.iter().filter(|&&a| a).count();
    let warps = step.chunks(32).filter(|w| w.iter().any(|&a| a)).count();
    (threads, warps)
}

/// `#.#.` per warp, warps apart.
fn lanes(row: &[bool], on: char, off: char) -> String {
    row.chunks(32)
        .map(|w| {
            w.iter()
                .map(|&a| if a { on } else { off })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The tree as text: one line per step, `#` where a thread adds.
pub fn tree_text(t: &Tree) -> String {
    let warps = t.block.div_ceil(32);
    let mut s = format!(
        "{}: block of {} threads = {warps} warps; # = the thread adds in this step \
         (# = 该线程在这一步做加法)\n",
        t.kernel, t.block
    );
    let _ = writeln!(
        s,
        "{:<5}{:<8}{:<width$}  {:>7} {:>6}",
        "step",
        "stride",
        "threads 0..",
        "threads",
        "warps",
        width = t.block + warps - 1
    );
    for (i, row) in t.steps.iter().enumerate() {
        let (threads, w) = step_counts(row);
        let _ = writeln!(
            s,
            "{:<5}{:<8}{}  {threads:>7} {w:>6}",
            i,
            t.strides[i],
            lanes(row, '#', '.')
        );
    }
    s
}

/// An SVG document of `width x height` around `body`.
fn svg(width: usize, height: usize, title: &str, body: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <title>{title}</title>\n<rect width=\"{width}\" height=\"{height}\" fill=\"white\"/>\n\
         {body}</svg>\n"
    )
}

const CELL: usize = 9;

/// One row of lane cells at height `y`, from `left`, filled where `row` is set, `gap` between
/// warps (the trees' steps and the divergent warps' lanes).
fn lane_cells(b: &mut String, left: usize, gap: usize, y: usize, row: &[bool]) {
    for (tid, &a) in row.iter().enumerate() {
        let x = left + tid * CELL + (tid / 32) * gap;
        let _ = writeln!(
            b,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{CELL}\" fill=\"{}\"/>",
            CELL - 1,
            if a { ON } else { OFF }
        );
    }
}
const ON: &str = "#1f6fb2";
const OFF: &str = "#e4e7eb";

/// The tree as SVG: a row of cells per step, filled where a thread adds, a gap between warps.
pub fn tree_svg(t: &Tree) -> String {
    let left = 130;
    let gap = 6;
    let warps = t.block.div_ceil(32);
    let grid_w = t.block * CELL + (warps - 1) * gap;
    let (width, height) = (left + grid_w + 120, 40 + t.steps.len() * (CELL + 6) + 20);
    let mut b = format!(
        "<text x=\"8\" y=\"18\" font-weight=\"bold\">{}: block of {} threads, {warps} warps \
         (filled: the thread adds in this step)</text>\n",
        t.kernel, t.block
    );
    for w in 0..warps {
        let x = left + w * (32 * CELL + gap);
        let _ = writeln!(b, "<text x=\"{x}\" y=\"34\">warp {w}</text>");
    }
    let _ = writeln!(
        b,
        "<text x=\"{}\" y=\"34\">threads / warps</text>",
        left + grid_w + 10
    );
    for (i, row) in t.steps.iter().enumerate() {
        let y = 40 + i * (CELL + 6);
        let _ = writeln!(
            b,
            "<text x=\"8\" y=\"{}\">step {i}, stride {}</text>",
            y + CELL,
            t.strides[i]
        );
        lane_cells(&mut b, left, gap, y, row);
        let (threads, w) = step_counts(row);
        let _ = writeln!(
            b,
            "<text x=\"{}\" y=\"{}\">{threads} / {w}</text>",
            left + grid_w + 10,
            y + CELL
        );
    }
    svg(width, height, t.kernel, &b)
}

/// One `simpleDivergence` kernel: which threads took the `if` side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The kernel's symbol.
    pub kernel: &'static str,
    /// `if_side[tid]`.
    pub if_side: Vec<bool>,
}

impl Divergence {
    /// Each warp's `if` mask (bit `lane` set when that lane took the `if` side).
    pub fn masks(&self) -> Vec<u32> {
        self.if_side
            .chunks(32)
            .map(|w| {
                w.iter()
                    .enumerate()
                    .fold(0u32, |m, (l, &a)| m | (u32::from(a) << l))
            })
            .collect()
    }

    /// Warps whose lanes took both sides: each runs both sides, one after the other.
    pub fn divergent_warps(&self) -> usize {
        self.masks()
            .iter()
            .zip(self.if_side.chunks(32))
            .filter(|&(&m, w)| m != 0 && m.count_ones() as usize != w.len())
            .count()
    }
}

/// Runs the four `simpleDivergence` kernels on `n` threads (block 64) and reads which side
/// each thread took from what it wrote.
pub fn divergence_masks(gpu: &Gpu, n: usize) -> Result<Vec<Divergence>> {
    let work = 4;
    let if_value = crate::lab::divergence_side(100.0, work).to_bits();
    [
        math_kernel1(),
        math_kernel2(),
        math_kernel3(),
        math_kernel4(),
    ]
    .into_iter()
    .map(|entry| {
        let c = gpu.upload(&vec![f32::NAN; n], "divergence output (poisoned)")?;
        let k = crate::kernel(gpu, entry)?;
        // SAFETY: `c` holds `n` floats.
        unsafe {
            k.launch_and_wait(
                k.config(n.div_ceil(64) as u32, 64),
                (c.as_device_ptr(), n, work),
            )?
        };
        Ok(Divergence {
            kernel: entry.symbol(),
            if_side: gpu
                .download(&c)?
                .iter()
                .map(|v| v.to_bits() == if_value)
                .collect(),
        })
    })
    .collect()
}

/// The warps' lane masks as text.
pub fn divergence_text(d: &[Divergence]) -> String {
    let mut s = String::from(
        "which lanes take the if side (#) and which the else side (.), per warp \
         (每个线程束中走 if 分支的线程为 #，走 else 分支的为 .)\n",
    );
    for k in d {
        let _ = writeln!(
            s,
            "{:<14}{}  if masks {}  divergent warps: {} of {}",
            k.kernel,
            lanes(&k.if_side, '#', '.'),
            k.masks()
                .iter()
                .map(|m| format!("{m:#010x}"))
                .collect::<Vec<_>>()
                .join(" "),
            k.divergent_warps(),
            k.if_side.len().div_ceil(32)
        );
    }
    s
}

/// The warps' lane masks as SVG.
pub fn divergence_svg(d: &[Divergence]) -> String {
    let left = 110;
    let gap = 6;
    let n = d.first().map_or(0, |k| k.if_side.len());
    let warps = n.div_ceil(32);
    let grid_w = n * CELL + warps.saturating_sub(1) * gap;
    let (width, height) = (left + grid_w + 150, 40 + d.len() * (CELL + 8) + 16);
    let mut b = String::from(
        "<text x=\"8\" y=\"18\" font-weight=\"bold\">simpleDivergence: lanes taking the if side \
         (filled) and the else side, per warp</text>\n",
    );
    for w in 0..warps {
        let x = left + w * (32 * CELL + gap);
        let _ = writeln!(b, "<text x=\"{x}\" y=\"34\">warp {w}</text>");
    }
    let _ = writeln!(
        b,
        "<text x=\"{}\" y=\"34\">divergent warps</text>",
        left + grid_w + 10
    );
    for (i, k) in d.iter().enumerate() {
        let y = 40 + i * (CELL + 8);
        let _ = writeln!(b, "<text x=\"8\" y=\"{}\">{}</text>", y + CELL, k.kernel);
        lane_cells(&mut b, left, gap, y, &k.if_side);
        let _ = writeln!(
            b,
            "<text x=\"{}\" y=\"{}\">{} of {warps}</text>",
            left + grid_w + 10,
            y + CELL,
            k.divergent_warps()
        );
    }
    svg(width, height, "simpleDivergence lane masks", &b)
}

/// The shared stencil's tiles (R = 3): `staged[b][slot]` is the input cell block `b`'s slot
/// holds (`None` if no thread staged it; negative or `>= n` for a halo past an end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// Elements of the input.
    pub n: usize,
    /// Threads per block.
    pub block: usize,
    /// The radius (3).
    pub radius: usize,
    /// Per block, per slot.
    pub staged: Vec<Vec<Option<i64>>>,
}

/// Runs `stencil_1d_shared_traced_f32` on `n` elements with blocks of `block` and reads which
/// cell each slot of each tile holds.
pub fn stencil_tiles(gpu: &Gpu, n: usize, block: usize) -> Result<Tiles> {
    let radius = 3;
    // A picture: small enough that every cell's index (biased by `STAGED_BIAS`) fits the
    // probe's `u32` and the table stays small.
    if n == 0 || block < radius || block > 1024 || n > 1 << 20 {
        return Err(Error::InvalidArgument {
            what: format!(
                "`{}`: n = {n} with blocks of {block} (a picture: n from 1 to 2^20, blocks from R = 3 to 1024)",
                stencil_1d_shared_traced_f32().symbol()
            ),
        });
    }
    let grid = n.div_ceil(block);
    let cols = block + 2 * radius;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let input = gpu.upload(&x, "stencil input")?;
    let out = gpu.alloc::<f32>(n, "stencil output")?;
    let trace = gpu.upload(&vec![0u32; grid * cols], "stencil trace")?;
    let k = crate::kernel(gpu, stencil_1d_shared_traced_f32())?;
    // SAFETY: `n` floats each way; a `grid x (block + 6)` trace table; boundary 0 (zero).
    unsafe {
        k.launch_and_wait(
            k.config(grid as u32, block as u32),
            (
                input.as_device_ptr(),
                out.as_device_ptr(),
                n,
                0u32,
                trace.as_device_ptr(),
            ),
        )?
    };
    let table = gpu.download(&trace)?;
    Ok(Tiles {
        n,
        block,
        radius,
        staged: table
            .chunks(cols)
            .map(|row| {
                row.iter()
                    .map(|&v| (v != 0).then(|| i64::from(v as i32) - STAGED_BIAS as i64))
                    .collect()
            })
            .collect(),
    })
}

/// What the notes' tile holds: block `b`'s slot `s` is cell `b * block + s - R`.
pub fn tiles_model(n: usize, block: usize) -> Tiles {
    let radius = 3;
    Tiles {
        n,
        block,
        radius,
        staged: (0..n.div_ceil(block))
            .map(|b| {
                (0..block + 2 * radius)
                    .map(|s| Some((b * block + s) as i64 - radius as i64))
                    .collect()
            })
            .collect(),
    }
}

/// The tiles as text: one line per block, each slot the cell it holds, halos in brackets.
pub fn tiles_text(t: &Tiles) -> String {
    let mut s = format!(
        "stencil_1d_shared, R = {}: the cells of the input each block's shared tile holds; \
         [ ] = halo, read by this block and owned by its neighbour or past an end \
         (方括号内是光环 halo)\n",
        t.radius,
    );
    for (b, row) in t.staged.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(slot, c)| {
                let v = c.map_or("?".to_string(), |c| c.to_string());
                if slot < t.radius || slot >= t.radius + t.block {
                    format!("[{v}]")
                } else {
                    v
                }
            })
            .collect();
        let _ = writeln!(s, "block {b}: {}", cells.join(" "));
    }
    s
}

/// The tiles as SVG: the input on top, each block's tile below it, halos shaded.
pub fn tiles_svg(t: &Tiles) -> String {
    let w = 24;
    let left = 70;
    let r = t.radius as i64;
    let x_of = |cell: i64| (left as i64 + (cell + r) * w as i64) as usize;
    let width = x_of(t.n as i64 + r) + 20;
    let height = 60 + t.staged.len() * 34 + 10;
    let mut b = format!(
        "<text x=\"8\" y=\"16\" font-weight=\"bold\">stencil_1d_shared, R = {}: the input \
         cells each block's shared tile holds (halos shaded)</text>\n<text x=\"8\" y=\"44\">input</text>\n",
        t.radius
    );
    for cell in -r..t.n as i64 + r {
        let inside = (0..t.n as i64).contains(&cell);
        let _ = writeln!(
            b,
            "<rect x=\"{}\" y=\"30\" width=\"{}\" height=\"20\" fill=\"{}\" stroke=\"#888\"/>\
             <text x=\"{}\" y=\"44\" font-size=\"9\" text-anchor=\"middle\">{cell}</text>",
            x_of(cell),
            w - 2,
            if inside { "#ffffff" } else { "#f3f3f3" },
            x_of(cell) + (w - 2) / 2
        );
    }
    for (bi, row) in t.staged.iter().enumerate() {
        let y = 60 + bi * 34;
        let _ = writeln!(b, "<text x=\"8\" y=\"{}\">block {bi}</text>", y + 14);
        for (slot, c) in row.iter().enumerate() {
            let Some(cell) = c else { continue };
            let halo = slot < t.radius || slot >= t.radius + t.block;
            let _ = writeln!(
                b,
                "<rect x=\"{}\" y=\"{y}\" width=\"{}\" height=\"20\" fill=\"{}\" stroke=\"#555\"/>\
                 <text x=\"{}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{cell}</text>",
                x_of(*cell),
                w - 2,
                if halo { "#f4b942" } else { "#8fc1e8" },
                x_of(*cell) + (w - 2) / 2,
                y + 14
            );
        }
    }
    svg(width, height, "stencil tiles and halos", &b)
}

/// A shuffle of the warp demo: `source[lane]`, the lane whose value each lane received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shuffle {
    /// `shfl_up`, `shfl_down` or `shfl_xor`.
    pub name: &'static str,
    /// The demo's segment width.
    pub width: u32,
    /// The delta (up, down) or lane mask (xor).
    pub offset: u32,
    /// The lane each lane read.
    pub source: Vec<u32>,
}

/// Runs the warp demo with `demo` and reads, from each lane's outputs, which lane each shuffle
/// read (each lane's value is its lane within its segment, so the source is its segment's
/// lane of that number).
pub fn shuffles(gpu: &Gpu, demo: WarpDemo) -> Result<Vec<Shuffle>> {
    let rows = demo.run(gpu)?;
    let col = |name: &str| {
        WARP_DEMO_COLUMNS
            .iter()
            .position(|c| *c == name)
            .expect("a column of the demo")
    };
    Ok(["shfl_up", "shfl_down", "shfl_xor"]
        .into_iter()
        .map(|name| Shuffle {
            name,
            width: demo.width,
            offset: demo.offset,
            source: rows
                .iter()
                .enumerate()
                .map(|(lane, r)| (lane as u32 / demo.width) * demo.width + r[col(name)])
                .collect(),
        })
        .collect())
}

/// The CPU's warp model of each shuffle (`cpu::warp`, the one the warp lesson checks against):
/// the lane each of `lanes` lanes reads, its own where CUDA's rule gives it its own value.
pub fn shuffle_model(name: &str, lanes: u32, width: u32, offset: u32) -> Vec<u32> {
    use crate::cpu::warp::{self as model, ShflMode};
    let ids: Vec<u32> = (0..lanes).collect();
    let mask = if lanes >= 32 {
        u32::MAX
    } else {
        (1 << lanes) - 1
    };
    let mode = match name {
        "shfl_up" => ShflMode::Up,
        "shfl_down" => ShflMode::Down,
        _ => ShflMode::Xor,
    };
    model::shfl(mode, &ids, mask, offset, width)
        .into_iter()
        .enumerate()
        .map(|(t, s)| s.unwrap_or(t as u32))
        .collect()
}

/// The shuffles as text: each lane and the lane it read.
pub fn shuffles_text(s: &[Shuffle]) -> String {
    let mut out = String::new();
    for sh in s {
        let _ = writeln!(
            out,
            "{}(v, {}) with width {}: lane <- the lane it read (每个线程 <- 它读取的线程)",
            sh.name, sh.offset, sh.width
        );
        let lanes: Vec<String> = (0..sh.source.len()).map(|l| format!("{l:>3}")).collect();
        let from: Vec<String> = sh.source.iter().map(|l| format!("{l:>3}")).collect();
        let _ = writeln!(out, "  lane {}", lanes.join(""));
        let _ = writeln!(out, "  from {}", from.join(""));
    }
    out
}

/// The shuffles as SVG: two rows of lanes, an arrow from each source to its reader.
pub fn shuffles_svg(s: &[Shuffle]) -> String {
    let w = 30;
    let left = 150;
    let lanes = s.first().map_or(0, |sh| sh.source.len());
    let width = left + lanes * w + 20;
    let band = 90;
    let height = 10 + s.len() * band;
    let mut b = String::from(
        "<defs><marker id=\"a\" markerWidth=\"6\" markerHeight=\"6\" refX=\"5\" refY=\"3\" \
         orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#1f6fb2\"/></marker></defs>\n",
    );
    for (i, sh) in s.iter().enumerate() {
        let top = 10 + i * band;
        let _ = writeln!(
            b,
            "<text x=\"8\" y=\"{}\" font-weight=\"bold\">{}(v, {})</text>\
             <text x=\"8\" y=\"{}\">width {}</text>",
            top + 30,
            sh.name,
            sh.offset,
            top + 46,
            sh.width
        );
        for lane in 0..lanes {
            let x = left + lane * w;
            for (y, label) in [(top, "src"), (top + 55, "dst")] {
                let _ = label;
                let _ = writeln!(
                    b,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"16\" fill=\"#e4e7eb\" stroke=\"#888\"/>\
                     <text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{lane}</text>",
                    w - 4,
                    x + (w - 4) / 2,
                    y + 12
                );
            }
            let from = left + sh.source[lane] as usize * w + (w - 4) / 2;
            let _ = writeln!(
                b,
                "<line x1=\"{from}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#1f6fb2\" marker-end=\"url(#a)\"/>",
                top + 16,
                x + (w - 4) / 2,
                top + 53
            );
        }
    }
    svg(width, height, "warp shuffles", &b)
}
