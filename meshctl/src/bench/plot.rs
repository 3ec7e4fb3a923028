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
}
