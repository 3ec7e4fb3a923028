//! A hand-written SVG of convergence latency over the churn: one dot per change (written → every
//! client), its per-client median, and the target line.

use std::fmt::Write as _;

use super::report::Report;

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 52.0;

/// The convergence p99 target, ms (drawn as a dashed line).
const TARGET_MS: f64 = 300.0;

/// Renders the report's changes as an SVG document.
pub fn svg(report: &Report) -> String {
    let events = &report.events;
    let x_max = nice(events.iter().map(|e| e.at_s).fold(1.0, f64::max));
    let y_max = nice(
        events
            .iter()
            .filter_map(|e| e.all_clients_ms)
            .fold(TARGET_MS * 1.2, f64::max),
    );
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * w;
    let y = |v: f64| TOP + h - v.min(y_max) / y_max * h;
    let c = &report.config;
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="18" font-size="14" font-weight="bold">Convergence under churn: {} clusters × {} services × {} endpoints, {} {:?} clients, {}/s changes</text>
<text x="{LEFT}" y="34" fill="#555">{}</text>
"##,
        c.shape.clusters,
        c.shape.services,
        c.shape.endpoints,
        c.clients,
        c.flavor,
        c.churn_per_s,
        escape(&report.machine.line()),
    );
    for i in 0..=5 {
        let (xv, yv) = (x_max * i as f64 / 5.0, y_max * i as f64 / 5.0);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{yv:.0}</text>"##,
            LEFT + w,
            y(yv),
            y(yv),
            LEFT - 6.0,
            y(yv) + 4.0
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{xv:.0}</text>"##,
            x(xv),
            TOP + h + 18.0
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#333"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since churn started</text>
<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">ms, change written → received</text>
<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="6 4"/>
<text x="{:.1}" y="{:.1}" fill="#c00" text-anchor="end">target p99 {TARGET_MS:.0} ms</text>"##,
        LEFT + w / 2.0,
        HEIGHT - 12.0,
        TOP + h / 2.0,
        LEFT + w,
        y(TARGET_MS),
        y(TARGET_MS),
        LEFT + w - 4.0,
        y(TARGET_MS) - 4.0
    );
    for e in events {
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="#9ab"/>"##,
            x(e.at_s),
            y(e.median_ms)
        );
        if let Some(all) = e.all_clients_ms {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2" fill="#1f5fa8"/>"##,
                x(e.at_s),
                y(all)
            );
        }
    }
    let v = &report.convergence.all_clients_ms;
    let _ = writeln!(
        s,
        r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#1f5fa8"/><text x="{:.1}" y="{:.1}">every client (p50 {:.0}, p99 {:.0}, max {:.0} ms)</text>
<circle cx="{:.1}" cy="{:.1}" r="3" fill="#9ab"/><text x="{:.1}" y="{:.1}">median client</text>
</svg>"##,
        LEFT + 12.0,
        TOP + 12.0,
        LEFT + 20.0,
        TOP + 16.0,
        v.p50,
        v.p99,
        v.max,
        LEFT + 12.0,
        TOP + 28.0,
        LEFT + 20.0,
        TOP + 32.0
    );
    s
}

/// Size of one panel of [`panels`].
const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 240.0;

/// A grid of small charts, two across, one curve each: `(title, [(x, y)])`. The x axis is logarithmic
/// when it spans a factor of 10 or more (sweeps double or triple their parameter).
pub fn panels(title: &str, x_label: &str, panels: &[(&str, Vec<(f64, f64)>)]) -> String {
    let rows = panels.len().div_ceil(2);
    let (width, height) = (2.0 * PANEL_W, TOP + rows as f64 * PANEL_H);
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{}</text>
"##,
        escape(title)
    );
    for (i, (name, points)) in panels.iter().enumerate() {
        let (ox, oy) = ((i % 2) as f64 * PANEL_W, TOP + (i / 2) as f64 * PANEL_H);
        s.push_str(&panel(ox, oy, name, x_label, points));
    }
    s.push_str("</svg>\n");
    s
}

fn panel(ox: f64, oy: f64, name: &str, x_label: &str, points: &[(f64, f64)]) -> String {
    let (w, h) = (PANEL_W - LEFT - RIGHT, PANEL_H - 30.0 - BOTTOM);
    let (top, left) = (oy + 30.0, ox + LEFT);
    let x_min = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max);
    let log = x_min > 0.0 && x_max / x_min >= 10.0;
    let to_x = |v: f64| match (log, x_max > x_min) {
        (true, _) => left + (v / x_min).ln() / (x_max / x_min).ln() * w,
        (false, true) => left + (v - x_min) / (x_max - x_min) * w,
        (false, false) => left + w / 2.0,
    };
    let y_max = nice(points.iter().map(|p| p.1).fold(1e-9, f64::max));
    let to_y = |v: f64| top + h - v.max(0.0) / y_max * h;
    let mut s = format!(
        r##"<text x="{left}" y="{:.1}" font-weight="bold">{}</text>
<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#333"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle">{}{}</text>
"##,
        top - 8.0,
        escape(name),
        left + w / 2.0,
        top + h + 32.0,
        escape(x_label),
        if log { " (log scale)" } else { "" }
    );
    for i in 0..=4 {
        let v = y_max * f64::from(i) / 4.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + w,
            to_y(v),
            to_y(v),
            left - 4.0,
            to_y(v) + 4.0,
            short(v)
        );
    }
    let line: Vec<String> = points
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", to_x(x), to_y(y)))
        .collect();
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#1f5fa8" stroke-width="2"/>"##,
        line.join(" ")
    );
    for &(x, y) in points {
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#1f5fa8"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            to_x(x),
            to_y(y),
            to_x(x),
            to_y(y) - 7.0,
            short(y),
            to_x(x),
            top + h + 16.0,
            short(x)
        );
    }
    s
}

/// A figure for a label: no decimals from 100 up, one below.
fn short(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The next 1, 2 or 5 × 10ⁿ at or above `v`.
fn nice(v: f64) -> f64 {
    let mag = 10f64.powf(v.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * mag)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds() {
        assert_eq!(nice(0.7), 1.0);
        assert_eq!(nice(3.0), 5.0);
        assert_eq!(nice(360.0), 500.0);
        assert_eq!(nice(1000.0), 1000.0);
    }

    #[test]
    fn panels_draw_one_curve_each_on_a_log_axis_when_wide() {
        let wide = vec![(100.0, 1.0), (1000.0, 2.0), (3000.0, 5.0)];
        let svg = panels(
            "t",
            "clients",
            &[("a", wide), ("b", vec![(1.0, 3.0), (3.0, 4.0)])],
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("(log scale)").count(), 1, "only the first spans ×10");
        // 1,000 on a log axis from 100 to 3,000 sits at ln 10 / ln 30 of the width.
        let x = LEFT + (10f64).ln() / (30f64).ln() * (PANEL_W - LEFT - RIGHT);
        assert!(svg.contains(&format!("<circle cx=\"{x:.1}\"")), "{svg}");
    }
}
