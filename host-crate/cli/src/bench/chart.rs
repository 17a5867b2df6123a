//! The report's charts, drawn with `plotters` into SVG:
//! - per family and type, effective bandwidth against size: one line per variant, with the
//!   device-to-device copy of the same run (dashed, the ceiling a kernel can reach), the
//!   device's datasheet peak (dotted) and, where it ran, CUB's `DeviceReduce::Sum` (long dashes);
//! - for the `api` family, microseconds per library call against size on log scales, with each
//!   call's kernel alone and the CuPy / PyTorch calls of the same run.
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use super::report::{Report, Row};

const SIZE: (u32, u32) = (900, 540);

/// A palette that stays distinguishable for 16 lines.
const COLORS: [RGBColor; 16] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x39, 0x3b, 0x79),
    RGBColor(0xad, 0x49, 0x4a),
    RGBColor(0x63, 0x79, 0x39),
    RGBColor(0x84, 0x3c, 0x39),
    RGBColor(0x7b, 0x41, 0x73),
    RGBColor(0x00, 0x00, 0x00),
];

/// How a line is drawn.
#[derive(Clone, Copy, PartialEq)]
enum Dash {
    Solid,
    Dashed,
    Dotted,
    Long,
}

/// One line of a chart: its legend label, colour, dash and points.
struct Line {
    label: String,
    color: RGBColor,
    dash: Dash,
    width: u32,
    points: Vec<(f64, f64)>,
}

fn log2(n: u64) -> f64 {
    (n as f64).log2()
}

/// The x range of `lines` (log2 of the size), widened when it is a single point.
fn x_range(lines: &[Line]) -> (f64, f64) {
    let (lo, hi) = lines
        .iter()
        .flat_map(|l| l.points.iter())
        .fold((f64::MAX, f64::MIN), |(a, b), &(x, _)| (a.min(x), b.max(x)));
    if hi > lo {
        (lo, hi)
    } else {
        (lo - 1.0, lo + 1.0)
    }
}

/// Draws `lines` into an SVG string; `log_y` puts y on a log scale.
fn draw(title: &str, y_desc: &str, lines: &[Line], log_y: bool) -> String {
    let mut svg = String::new();
    // Drawing into a String cannot fail for lack of a file; a plotting error leaves the chart
    // partly drawn rather than stopping the report.
    let _ = draw_into(&mut svg, title, y_desc, lines, log_y);
    svg
}

fn draw_into(
    svg: &mut String,
    title: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> Result<(), String> {
    let (xmin, xmax) = x_range(lines);
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|&(_, y)| y));
    let ymax = ys.clone().fold(1.0, f64::max) * 1.12;
    let ymin = ys.fold(f64::MAX, f64::min).max(0.1);
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(text)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64);
    let x_labels = (xmax - xmin).round() as usize + 1;
    if log_y {
        let y_lo = 10f64.powf(ymin.log10().floor());
        let y_hi = 10f64.powf(ymax.log10().ceil());
        let chart = builder
            .build_cartesian_2d(xmin..xmax, (y_lo..y_hi).log_scale())
            .map_err(text)?;
        fill(chart, y_desc, x_labels, lines)?;
    } else {
        let chart = builder
            .build_cartesian_2d(xmin..xmax, 0.0..ymax)
            .map_err(text)?;
        fill(chart, y_desc, x_labels, lines)?;
    }
    root.present().map_err(text)?;
    Ok(())
}

/// The mesh (x as `2^k`), every line and the legend, on a chart whose y axis is linear or log.
fn fill<'a, DB: DrawingBackend + 'a, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    y_desc: &str,
    x_labels: usize,
    lines: &[Line],
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("elements")
        .y_desc(y_desc)
        .x_labels(x_labels)
        .x_label_formatter(&|x: &f64| format!("2^{x:.0}"))
        .draw()
        .map_err(text)?;
    for line in lines {
        series(&mut chart, line)?;
    }
    legend(&mut chart)
}

/// A plotting error as text.
fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Draws one line with its points and legend entry.
fn series<'a, DB: DrawingBackend + 'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    line: &Line,
) -> Result<(), String> {
    let style = line.color.stroke_width(line.width);
    let points = line.points.clone();
    let anno = match line.dash {
        Dash::Solid => chart.draw_series(LineSeries::new(points, style)),
        Dash::Dashed => chart.draw_series(DashedLineSeries::new(points, 8, 5, style)),
        Dash::Dotted => chart.draw_series(DashedLineSeries::new(points, 2, 4, style)),
        Dash::Long => chart.draw_series(DashedLineSeries::new(points, 10, 3, style)),
    }
    .map_err(text)?;

    let color = line.color;
    anno.label(line.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(2)));
    if line.dash == Dash::Solid {
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, line.color.filled())),
            )
            .map_err(text)?;
    }
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(text)?;
    Ok(())
}

/// The chart of one family (`reduce`, `stencil`) and element type.
pub fn bandwidth_chart(report: &Report, family: &str, ty: &str) -> String {
    let rows: Vec<&Row> = report
        .rows
        .iter()
        .filter(|r| r.family == family && r.ty == ty)
        .collect();
    let copy: Vec<(f64, f64)> = report
        .rows
        .iter()
        .filter(|r| r.family == "copy" && r.variant == "cuMemcpyDtoD" && r.ty == ty)
        .map(|r| (log2(r.n), r.gbs))
        .collect();
    let mut lines = Vec::new();
    if !copy.is_empty() {
        lines.push(Line {
            label: "copy (ceiling)".into(),
            color: BLACK,
            dash: Dash::Dashed,
            width: 2,
            points: copy,
        });
    }
    let sizes: Vec<f64> = rows.iter().map(|r| log2(r.n)).collect();
    if report.peak_gbs > 0.0 && !sizes.is_empty() {
        let (lo, hi) = sizes
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        lines.push(Line {
            label: format!("device peak ({:.0} GB/s)", report.peak_gbs),
            color: RGBColor(0x99, 0x99, 0x99),
            dash: Dash::Dotted,
            width: 2,
            points: vec![(lo, report.peak_gbs), (hi, report.peak_gbs)],
        });
    }
    // CUB, from the rows that ran it (one per size: the fast path's).
    let mut cub: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| {
            // A CUB run whose result failed the check has no place beside ours.
            let b = r.baseline("cub").filter(|b| !b.check.is_failure())?;
            Some((log2(r.n), r.bytes as f64 / (b.median_us? * 1e3)))
        })
        .collect();
    cub.sort_by(|a, b| a.0.total_cmp(&b.0));
    cub.dedup_by(|a, b| a.0 == b.0);
    if !cub.is_empty() {
        lines.push(Line {
            label: "CUB DeviceReduce::Sum".into(),
            color: RGBColor(0x80, 0x00, 0x00),
            dash: Dash::Long,
            width: 2,
            points: cub,
        });
    }
    let mut variants: Vec<(String, u32)> = Vec::new();
    for r in &rows {
        if !variants.contains(&(r.variant.clone(), r.block)) {
            variants.push((r.variant.clone(), r.block));
        }
    }
    for (i, (variant, block)) in variants.iter().enumerate() {
        let label = if variants.iter().filter(|(v, _)| v == variant).count() > 1 {
            format!("{variant} b{block}")
        } else {
            variant.clone()
        };
        lines.push(Line {
            label,
            color: COLORS[i % COLORS.len()],
            dash: Dash::Solid,
            width: if variant.starts_with("fast") { 3 } else { 1 },
            points: rows
                .iter()
                .filter(|r| &r.variant == variant && r.block == *block)
                .map(|r| (log2(r.n), r.gbs))
                .collect(),
        });
    }
    draw(
        &format!(
            "{family} {ty}: effective bandwidth vs size ({}, {})",
            report.device, report.date
        ),
        "GB/s",
        &lines,
        false,
    )
}

/// The `api` family: microseconds per call against size, both on log scales, one line per
/// call and per comparison (its kernel alone dashed, CuPy and PyTorch dotted).
pub fn per_call_chart(report: &Report) -> String {
    let mut lines: Vec<Line> = Vec::new();
    let mut add = |label: String, dash: Dash, x: f64, us: f64| {
        if us.is_nan() || us <= 0.0 {
            return;
        }
        match lines.iter_mut().find(|l| l.label == label) {
            Some(line) => line.points.push((x, us)),
            None => {
                let color = COLORS[lines.len() % COLORS.len()];
                lines.push(Line {
                    label,
                    color,
                    dash,
                    width: if dash == Dash::Solid { 3 } else { 2 },
                    points: vec![(x, us)],
                })
            }
        }
    };
    for r in report
        .rows
        .iter()
        .filter(|r| r.family == "api" && r.ty == "f32")
    {
        let x = log2(r.n);
        add(r.variant.clone(), Dash::Solid, x, r.median_us);
        for b in &r.baselines {
            let call = if r.variant.contains("stencil") {
                "stencil"
            } else {
                "sum"
            };
            let (label, dash) = match b.name.as_str() {
                "kernel" => (format!("{}: kernel alone", r.variant), Dash::Dashed),
                "cupy" => (format!("CuPy {call}"), Dash::Dotted),
                "torch" => (format!("PyTorch {call}"), Dash::Dotted),
                _ => continue,
            };
            if r.variant == super::api::API_SUM_DEVICE && b.name != "kernel" {
                continue; // the same Python numbers as reduce::sum's
            }
            if let Some(us) = b.median_us {
                add(label, dash, x, us);
            }
        }
    }
    draw(
        &format!(
            "api f32: microseconds per library call ({}, {})",
            report.device, report.date
        ),
        "us per call (log)",
        &lines,
        true,
    )
}
