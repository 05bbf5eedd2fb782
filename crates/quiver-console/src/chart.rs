//! Small charts drawn on the server as SVG: bars or lines over labelled slots, with a y axis
//! on a "nice" scale, a legend, and every piece of text escaped. Only presentation attributes
//! (`fill`, `stroke`), never a `style` attribute or a script, so the console's CSP holds.

use std::fmt::Write as _;

/// How the values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Side-by-side bars, one group per slot.
    Bars,
    /// One line per series through the slots.
    Lines,
}

/// One named row of values, one per slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its value in each slot.
    pub values: Vec<f64>,
}

/// A chart: a title, the unit of the y axis, the slots' labels and the series.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    /// Shown above the chart, and as the SVG's accessible title.
    pub title: String,
    /// The y axis's unit (`calls`, `tokens`, `ms`).
    pub unit: String,
    /// Bars or lines.
    pub kind: Kind,
    /// The label of each slot on the x axis.
    pub labels: Vec<String>,
    /// The series.
    pub series: Vec<Series>,
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 40.0;
/// The most x labels written (others are left out evenly).
const MAX_LABELS: usize = 8;
/// Series colours, in order (then again).
const COLOURS: [&str; 6] = [
    "#3b6fb6", "#c0392b", "#2e8b57", "#d68910", "#7d3c98", "#5d6d7e",
];

/// The smallest of 1, 2, 5 times a power of ten at or above `max` (1 for nothing to show).
pub(crate) fn nice_max(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|v| *v >= max * (1.0 - 1e-12))
        .unwrap_or(10.0 * power)
}

/// How many steps the y axis of a [`nice_max`] `top` has, so that every tick is a round
/// value: halves of a 2 (0.5, 1, 1.5, 2), fifths of a 1 or a 5.
pub(crate) fn ticks(top: f64) -> u32 {
    let leading = top / 10f64.powf(top.log10().floor());
    if (leading - 2.0).abs() < 1e-9 { 4 } else { 5 }
}

/// A tick's value as text: whole numbers without decimals, others with one.
pub(crate) fn tick_text(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{}", value.round() as i64)
    } else {
        format!("{value:.1}")
    }
}

/// `text` for an SVG text node or attribute: invisible characters as escapes, then the five
/// XML specials.
pub(crate) fn xml(text: &str) -> String {
    let shown = crate::escape_invisible(text);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Which of `n` labels are written: every one when they are few, else evenly spaced ones.
pub(crate) fn shown_labels(n: usize) -> Vec<bool> {
    let step = n.div_ceil(MAX_LABELS).max(1);
    (0..n).map(|i| i % step == 0).collect()
}

/// Whether the chart has anything to draw.
fn is_empty(chart: &Chart) -> bool {
    chart.labels.is_empty() || chart.series.iter().all(|s| s.values.is_empty())
}

/// The chart as an SVG element (to be placed in a page as it is).
pub(crate) fn svg(chart: &Chart) -> String {
    let mut out = String::new();
    let title = xml(&chart.title);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" role=\"img\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"11\"><title>{title}</title>"
    );
    let _ = write!(
        out,
        "<text x=\"{LEFT}\" y=\"16\" font-size=\"13\" font-weight=\"bold\" fill=\"#1d1d1f\">{title}</text>"
    );
    if is_empty(chart) {
        let _ = write!(
            out,
            "<text class=\"empty\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">no data in this window</text></svg>",
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        return out;
    }
    legend(&mut out, chart);
    let max = chart
        .series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let top = nice_max(max);
    let plot_h = HEIGHT - TOP - BOTTOM;
    let plot_w = WIDTH - LEFT - RIGHT;
    let y = |v: f64| TOP + plot_h - (v.max(0.0) / top).min(1.0) * plot_h;
    axes(&mut out, chart, top, &y);
    let slots = chart.labels.len();
    let slot_w = plot_w / slots as f64;
    for (i, (label, shown)) in chart.labels.iter().zip(shown_labels(slots)).enumerate() {
        if shown {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{}</text>",
                LEFT + slot_w * (i as f64 + 0.5),
                HEIGHT - BOTTOM + 16.0,
                xml(label)
            );
        }
    }
    match chart.kind {
        Kind::Bars => bars(&mut out, chart, slot_w, &y),
        Kind::Lines => lines(&mut out, chart, slot_w, &y),
    }
    out.push_str("</svg>");
    out
}

fn legend(out: &mut String, chart: &Chart) {
    let mut x = LEFT;
    for (i, s) in chart.series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"24\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"33\" fill=\"#333\">{}</text>",
            x + 14.0,
            xml(&s.name)
        );
        x += 24.0 + 7.0 * s.name.chars().count() as f64;
    }
}

fn axes(out: &mut String, chart: &Chart, top: f64, y: &dyn Fn(f64) -> f64) {
    let base = y(0.0);
    let _ = write!(
        out,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{base:.1}\" stroke=\"#888\"/><line x1=\"{LEFT}\" y1=\"{base:.1}\" x2=\"{:.1}\" y2=\"{base:.1}\" stroke=\"#888\"/>",
        WIDTH - RIGHT
    );
    let steps = ticks(top);
    for t in 0..=steps {
        let value = top * f64::from(t) / f64::from(steps);
        let at = y(value);
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333\">{}</text>",
            LEFT - 6.0,
            at + 4.0,
            tick_text(value)
        );
        if t > 0 {
            let _ = write!(
                out,
                "<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\" stroke=\"#e4e4e4\"/>",
                WIDTH - RIGHT
            );
        }
    }
    let _ = write!(
        out,
        "<text x=\"12\" y=\"{:.1}\" fill=\"#555\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        xml(&chart.unit)
    );
}

fn bars(out: &mut String, chart: &Chart, slot_w: f64, y: &dyn Fn(f64) -> f64) {
    let n = chart.series.len().max(1) as f64;
    let bar_w = (slot_w * 0.8 / n).max(1.0);
    let base = y(0.0);
    for (si, s) in chart.series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        for (i, value) in s.values.iter().enumerate().take(chart.labels.len()) {
            if !value.is_finite() || *value <= 0.0 {
                continue;
            }
            let x = LEFT + slot_w * i as f64 + slot_w * 0.1 + bar_w * si as f64;
            let top = y(*value);
            let _ = write!(
                out,
                "<rect class=\"bar\" x=\"{x:.1}\" y=\"{top:.1}\" width=\"{bar_w:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{} · {}: {}</title></rect>",
                base - top,
                xml(&s.name),
                xml(&chart.labels[i]),
                tick_text(*value)
            );
        }
    }
}

fn lines(out: &mut String, chart: &Chart, slot_w: f64, y: &dyn Fn(f64) -> f64) {
    for (si, s) in chart.series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        let points: Vec<(f64, f64, f64)> = s
            .values
            .iter()
            .enumerate()
            .take(chart.labels.len())
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| (LEFT + slot_w * (i as f64 + 0.5), y(*v), *v))
            .collect();
        let path: Vec<String> = points
            .iter()
            .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = write!(
            out,
            "<polyline class=\"line\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for (x, cy, v) in points {
            let _ = write!(
                out,
                "<circle cx=\"{x:.1}\" cy=\"{cy:.1}\" r=\"2.5\" fill=\"{colour}\"><title>{}: {}</title></circle>",
                xml(&s.name),
                tick_text(v)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(kind: Kind, labels: &[&str], series: &[(&str, &[f64])]) -> Chart {
        Chart {
            title: "t".into(),
            unit: "calls".into(),
            kind,
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            series: series
                .iter()
                .map(|(name, values)| Series {
                    name: (*name).to_owned(),
                    values: values.to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn nice_scales() {
        let cases = [
            (0.0, 1.0),
            (-3.0, 1.0),
            (f64::NAN, 1.0),
            (f64::INFINITY, 1.0),
            (1.0, 1.0),
            (1.2, 2.0),
            (3.0, 5.0),
            (7.0, 10.0),
            (10.0, 10.0),
            (11.0, 20.0),
            (0.03, 0.05),
            (480.0, 500.0),
            (501.0, 1000.0),
        ];
        for (max, want) in cases {
            let got = nice_max(max);
            assert!((got - want).abs() < 1e-9, "{max}: {got} != {want}");
        }
        let texts = [(0.0, "0"), (2.5, "2.5"), (250.0, "250"), (0.05, "0.1")];
        for (v, want) in texts {
            assert_eq!(tick_text(v), want);
        }
        // Every tick of a nice scale is round.
        let steps = [
            (1.0, 5),
            (2.0, 4),
            (5.0, 5),
            (10.0, 5),
            (20.0, 4),
            (500.0, 5),
            (0.2, 4),
        ];
        for (top, want) in steps {
            assert_eq!(ticks(top), want, "{top}");
        }
    }

    #[test]
    fn labels_are_thinned() {
        let cases: [(usize, usize); 5] = [(0, 0), (1, 1), (8, 8), (9, 5), (30, 8)];
        for (n, want) in cases {
            let shown = shown_labels(n);
            assert_eq!(shown.len(), n);
            assert_eq!(shown.iter().filter(|s| **s).count(), want, "{n}");
        }
    }

    #[test]
    fn text_is_escaped() {
        let cases = [
            ("a<b>&\"'", "a&lt;b&gt;&amp;&quot;&#39;"),
            ("天气", "天气"),
            ("x\u{202e}y", "x\\u202ey"),
            ("</svg><script>", "&lt;/svg&gt;&lt;script&gt;"),
        ];
        for (text, want) in cases {
            assert_eq!(xml(text), want);
        }
        let svg = svg(&chart(Kind::Bars, &["<b>"], &[("天气 & <script>", &[1.0])]));
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(svg.contains("天气 &amp; &lt;script&gt;"), "{svg}");
        assert!(!svg.contains("style="), "{svg}");
    }

    #[test]
    fn empty_data_says_so() {
        let cases = [
            chart(Kind::Bars, &[], &[]),
            chart(Kind::Lines, &["a"], &[]),
            chart(Kind::Bars, &["a"], &[("s", &[])]),
        ];
        for c in cases {
            let svg = svg(&c);
            assert!(svg.contains("no data in this window"), "{svg}");
            assert!(!svg.contains("<rect class=\"bar\""), "{svg}");
            assert!(svg.ends_with("</svg>"));
        }
    }

    #[test]
    fn bars_and_lines_follow_the_scale() {
        // Values 0..=4 on a scale of 5: the bar of 4 is 4/5 of the plot's height.
        let svg = svg(&chart(
            Kind::Bars,
            &["a", "b", "c"],
            &[("calls", &[4.0, 0.0, 2.0]), ("refused", &[1.0, 0.0, 0.0])],
        ));
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 3, "{svg}");
        let plot_h = HEIGHT - TOP - BOTTOM;
        let want = format!("height=\"{:.1}\"", plot_h * 4.0 / 5.0);
        assert!(svg.contains(&want), "{want} in {svg}");
        assert!(svg.contains(">5</text>"), "the top tick is 5: {svg}");
        assert!(svg.contains("<title>calls · a: 4</title>"), "{svg}");
        let svg = super::svg(&chart(
            Kind::Lines,
            &["1", "2"],
            &[("prompt", &[100.0, 300.0]), ("eager", &[900.0, 900.0])],
        ));
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
        assert!(svg.contains(">1000</text>"), "{svg}");
        // The eager line sits at 900/1000 of the height: y = TOP + plot_h * 0.1.
        assert!(
            svg.contains(&format!(",{:.1}", TOP + plot_h * 0.1)),
            "{svg}"
        );
    }
}
