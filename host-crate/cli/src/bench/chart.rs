//! SVG line charts of bandwidth against size: one line per variant, the copy bandwidth of the
//! same run as a dashed ceiling. No dependencies: the SVG is written by hand.
use std::fmt::Write as _;

use super::report::Report;

const W: f64 = 860.0;
const H: f64 = 520.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// A palette that stays distinguishable for 16 lines.
const COLORS: [&str; 16] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#843c39", "#7b4173", "#000000",
];

/// The chart of one family (`reduce`, `stencil`) and element type.
pub fn bandwidth_chart(report: &Report, family: &str, ty: &str) -> String {
    let rows: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.family == family && r.ty == ty)
        .collect();
    let copy: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.family == "copy" && r.ty == ty)
        .collect();
    let mut variants: Vec<(String, u32)> = Vec::new();
    for r in &rows {
        if !variants.contains(&(r.variant.clone(), r.block)) {
            variants.push((r.variant.clone(), r.block));
        }
    }
    let log2 = |n: u64| (n as f64).log2();
    let (xmin, xmax) = rows
        .iter()
        .chain(copy.iter())
        .fold((f64::MAX, f64::MIN), |(a, b), r| {
            (a.min(log2(r.n)), b.max(log2(r.n)))
        });
    let (xmin, xmax) = if xmax > xmin {
        (xmin, xmax)
    } else {
        (xmin - 1.0, xmin + 1.0)
    };
    let ymax = rows
        .iter()
        .chain(copy.iter())
        .map(|r| r.gbs)
        .fold(1.0, f64::max)
        * 1.1;
    let tick = nice_step(ymax / 6.0);
    let px = |x: f64| LEFT + (x - xmin) / (xmax - xmin) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y / ymax * (H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">{family} {ty}: effective bandwidth vs size ({}, {})</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        report.device,
        report.date
    );
    let mut y = 0.0;
    while y <= ymax {
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{0}" y1="{1:.1}" y2="{1:.1}" stroke="#ddd"/>"##,
            W - RIGHT,
            py(y)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{y:.0}</text>"#,
            LEFT - 6.0,
            py(y) + 4.0
        );
        y += tick;
    }
    let mut x = xmin.ceil();
    while x <= xmax {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{TOP}" y2="{1}" stroke="#eee"/>"##,
            px(x),
            H - BOTTOM
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">2^{x:.0}</text>"#,
            px(x),
            H - BOTTOM + 18.0
        );
        x += 1.0;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">elements</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {0})">GB/s</text>"#,
        (H - BOTTOM + TOP) / 2.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let polyline = |points: Vec<(f64, f64)>, color: &str, dash: &str, width: f64| {
        let pts: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        format!(
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width}" stroke-dasharray="{dash}"/>"#,
            pts.join(" ")
        )
    };
    let mut legend_y = TOP + 10.0;
    if !copy.is_empty() {
        let _ = writeln!(
            s,
            "{}",
            polyline(
                copy.iter().map(|r| (log2(r.n), r.gbs)).collect(),
                "#000",
                "6,4",
                2.0
            )
        );
        let _ = writeln!(
            s,
            r##"<line x1="{0}" x2="{1}" y1="{legend_y}" y2="{legend_y}" stroke="#000" stroke-width="2" stroke-dasharray="6,4"/><text x="{2}" y="{3}">copy (ceiling)</text>"##,
            W - RIGHT + 12.0,
            W - RIGHT + 40.0,
            W - RIGHT + 46.0,
            legend_y + 4.0
        );
        legend_y += 18.0;
    }
    for (i, (variant, block)) in variants.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| &r.variant == variant && r.block == *block)
            .map(|r| (log2(r.n), r.gbs))
            .collect();
        let width = if variant.starts_with("fast") {
            3.0
        } else {
            1.6
        };
        let _ = writeln!(s, "{}", polyline(pts.clone(), color, "none", width));
        for (x, y) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        let label = if variants.iter().filter(|(v, _)| v == variant).count() > 1 {
            format!("{variant} b{block}")
        } else {
            variant.clone()
        };
        let _ = writeln!(
            s,
            r#"<line x1="{0}" x2="{1}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" stroke-width="{width}"/><text x="{2}" y="{3}">{label}</text>"#,
            W - RIGHT + 12.0,
            W - RIGHT + 40.0,
            W - RIGHT + 46.0,
            legend_y + 4.0
        );
        legend_y += 18.0;
    }
    s.push_str("</svg>\n");
    s
}

/// 1, 2 or 5 times a power of ten, at least `x`.
fn nice_step(x: f64) -> f64 {
    let p = 10f64.powf(x.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= x)
        .unwrap_or(10.0 * p)
}

/// The `api` family: microseconds per call against size, both on log scales, one line per
/// call and per comparison (its kernel alone dashed, CuPy and PyTorch dotted).
pub fn per_call_chart(report: &Report) -> String {
    let rows: Vec<_> = report.rows.iter().filter(|r| r.family == "api").collect();
    // (label, dash pattern, points (log2 n, us)), in legend order.
    type Line = (String, &'static str, Vec<(f64, f64)>);
    let mut lines: Vec<Line> = Vec::new();
    let mut add = |label: String, dash: &'static str, x: f64, us: f64| {
        if us.is_nan() || us <= 0.0 {
            return;
        }
        match lines.iter_mut().find(|(l, _, _)| *l == label) {
            Some((_, _, points)) => points.push((x, us)),
            None => lines.push((label, dash, vec![(x, us)])),
        }
    };
    for r in &rows {
        let x = (r.n as f64).log2();
        add(r.variant.clone(), "", x, r.median_us);
        for b in &r.baselines {
            let (label, dash) = match b.name.as_str() {
                "kernel" => (format!("{}: kernel alone", r.variant), "6 4"),
                "cupy" => (format!("CuPy ({})", short_call(&r.variant)), "2 3"),
                "torch" => (format!("PyTorch ({})", short_call(&r.variant)), "2 3"),
                _ => continue,
            };
            if r.variant == super::api::API_SUM_DEVICE && b.name != "kernel" {
                continue; // the same Python numbers as reduce::sum's
            }
            add(label, dash, x, b.median_us);
        }
    }
    let points = lines.iter().flat_map(|(_, _, p)| p.iter());
    let (xmin, xmax) = points
        .clone()
        .fold((f64::MAX, f64::MIN), |(a, b), &(x, _)| (a.min(x), b.max(x)));
    let (xmin, xmax) = if xmax > xmin {
        (xmin, xmax)
    } else {
        (xmin - 1.0, xmin + 1.0)
    };
    let (ymin, ymax) = points.fold((f64::MAX, f64::MIN), |(a, b), &(_, y)| (a.min(y), b.max(y)));
    let (ymin, ymax) = (ymin.max(0.1).log10().floor(), ymax.max(1.0).log10().ceil());
    let ymax = if ymax > ymin { ymax } else { ymin + 1.0 };
    let px = |x: f64| LEFT + (x - xmin) / (xmax - xmin) * (W - LEFT - RIGHT);
    let py = |us: f64| H - BOTTOM - (us.log10() - ymin) / (ymax - ymin) * (H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">api f32: microseconds per library call ({}, {})</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        report.device,
        report.date
    );
    let mut decade = ymin;
    while decade <= ymax {
        let y = py(10f64.powf(decade));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{0}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            W - RIGHT
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            10f64.powf(decade)
        );
        decade += 1.0;
    }
    let mut x = xmin.ceil();
    while x <= xmax {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{TOP}" y2="{1}" stroke="#eee"/>"##,
            px(x),
            H - BOTTOM
        );
        if x as i64 % 2 == 0 {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">2^{x:.0}</text>"#,
                px(x),
                H - BOTTOM + 18.0
            );
        }
        x += 1.0;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">elements</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {0})">us per call (log)</text>"#,
        (H - BOTTOM + TOP) / 2.0
    );
    for (i, (label, dash, points)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
            path.join(" ")
        );
        let ly = TOP + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{0}" x2="{1}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{2}" y="{3}">{label}</text>"#,
            W - RIGHT + 10.0,
            W - RIGHT + 34.0,
            W - RIGHT + 40.0,
            ly + 4.0
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}

/// `sum` or `stencil`, for the legend of a Python comparison.
fn short_call(variant: &str) -> &'static str {
    if variant.contains("stencil") {
        "stencil"
    } else {
        "sum"
    }
}
