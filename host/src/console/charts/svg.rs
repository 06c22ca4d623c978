//! Charts drawn by the server: each figure as HTML with inline SVG, accessible without sight
//! (the SVG is `role="img"` named by its `<title>`, and the figures are written out, in a legend
//! or a visually hidden table) and without colour alone (every colour is named by a legend
//! entry). Colours are CSS classes (`s0`…`s7`): the strict CSP allows no `style` attribute.
//! Coordinates are in a fixed `viewBox`; the SVG scales to its card's width.

use std::fmt::Write as _;

use crate::ops::dashboard::Figure;

/// The number of colour classes (`s0`…`s7`); more series or slices reuse them, in order.
const COLOURS: usize = 8;

/// Text escaped for HTML and SVG, content and attribute values alike.
pub use crate::auth::login::page::escape as esc;

/// A figure as people read it: thousands grouped, two decimals when it has some.
pub fn number(n: f64) -> String {
    if !n.is_finite() {
        return n.to_string();
    }
    let negative = n < 0.0;
    let rounded = (n.abs() * 100.0).round() / 100.0;
    let text = if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.2}")
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if negative && rounded != 0.0 { "-" } else { "" };
    if fraction.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{fraction}")
    }
}

/// A figure with its unit (`1,234.50 €`).
fn with_unit(n: f64, unit: &str) -> String {
    if unit.is_empty() {
        number(n)
    } else {
        format!("{} {unit}", number(n))
    }
}

/// The opening of a chart's SVG: scaled to its box, named by its title.
fn svg_open(out: &mut String, id: &str, width: u32, height: u32, title: &str) {
    let _ = write!(
        out,
        r#"<svg class="chart-svg" viewBox="0 0 {width} {height}" role="img" aria-labelledby="{id}-t" focusable="false"><title id="{id}-t">{}</title>"#,
        esc(title)
    );
}

/// What the chart `id` titled `title` draws of `figure`; `unit` follows each figure.
pub fn draw(id: &str, title: &str, figure: &Figure, unit: &str, bars: bool) -> String {
    match figure {
        Figure::Value { current, previous } => value(*current, *previous, unit),
        Figure::Objective { value, objective } => {
            objective_bar(id, title, *value, *objective, unit)
        }
        Figure::Percentage(share) => percentage(id, title, share.unwrap_or(0.0)),
        Figure::Distribution(rows) => donut(id, title, rows, unit),
        Figure::Leaderboard(rows) => leaderboard(id, title, rows, unit),
        Figure::TimeBased { labels, series } => time_based(id, title, labels, series, unit, bars),
        Figure::Smart(value) => format!(
            "<pre class=\"chart-smart\">{}</pre>",
            esc(&serde_json::to_string_pretty(value).unwrap_or_default())
        ),
    }
}

/// One big figure, and how it changed since the previous period.
fn value(current: f64, previous: Option<f64>, unit: &str) -> String {
    let mut out = format!(
        r#"<p class="chart-figure" data-value="{current}">{}</p>"#,
        esc(&with_unit(current, unit))
    );
    if let Some(previous) = previous {
        let (class, arrow, change) = if previous == 0.0 {
            ("flat", "", "no figure to compare with".to_owned())
        } else {
            let change = (current - previous) / previous.abs() * 100.0;
            let (class, arrow) = if change > 0.0 {
                ("up", "▲ ")
            } else if change < 0.0 {
                ("down", "▼ ")
            } else {
                ("flat", "")
            };
            let sign = if change > 0.0 { "+" } else { "" };
            (class, arrow, format!("{sign}{}%", number(change)))
        };
        let _ = write!(
            out,
            r#"<p class="chart-change {class}" data-previous="{previous}"><span aria-hidden="true">{arrow}</span>{} <span class="chart-muted">vs {} in the previous period</span></p>"#,
            esc(&change),
            esc(&with_unit(previous, unit))
        );
    }
    out
}

/// A progress bar toward the objective, and the figures in words.
fn objective_bar(id: &str, title: &str, value: f64, objective: f64, unit: &str) -> String {
    let share = if objective > 0.0 {
        value / objective * 100.0
    } else {
        100.0
    };
    let words = format!(
        "{} of {} ({}%)",
        with_unit(value, unit),
        with_unit(objective, unit),
        number(share)
    );
    let mut out = String::new();
    svg_open(&mut out, id, 300, 28, &format!("{title}: {words}"));
    let width = (share.clamp(0.0, 100.0) * 3.0).round();
    let _ = write!(
        out,
        r#"<rect class="track" x="0" y="4" width="300" height="20" rx="4"/><rect class="fill s0" x="0" y="4" width="{width}" height="20" rx="4"/></svg><p class="chart-caption" data-value="{value}" data-objective="{objective}">{}</p>"#,
        esc(&words)
    );
    out
}

/// A ring filled to the share, the share in its middle.
fn percentage(id: &str, title: &str, share: f64) -> String {
    let words = format!("{}%", number(share));
    let mut out = String::new();
    svg_open(&mut out, id, 120, 120, &format!("{title}: {words}"));
    let _ = write!(
        out,
        r#"<circle class="track-ring" cx="60" cy="60" r="48"/>{}<text class="ring-figure" x="60" y="66" text-anchor="middle">{}</text></svg><p class="chart-caption" data-value="{share}">{}</p>"#,
        arc(
            60.0,
            60.0,
            48.0,
            0.0,
            share.clamp(0.0, 100.0) / 100.0,
            "ring s0"
        ),
        esc(&words),
        esc(&words)
    );
    out
}

/// The stroke of a circle's arc from the fraction `from` to `to` of a turn (clockwise from
/// noon); a whole turn is a circle.
fn arc(cx: f64, cy: f64, r: f64, from: f64, to: f64, class: &str) -> String {
    if to - from >= 0.9999 {
        return format!(r#"<circle class="{class}" cx="{cx}" cy="{cy}" r="{r}"/>"#);
    }
    if to <= from {
        return String::new();
    }
    let point = |f: f64| {
        let angle = f * std::f64::consts::TAU - std::f64::consts::FRAC_PI_2;
        (cx + r * angle.cos(), cy + r * angle.sin())
    };
    let (x0, y0) = point(from);
    let (x1, y1) = point(to);
    let large = i32::from(to - from > 0.5);
    format!(r#"<path class="{class}" d="M{x0:.2} {y0:.2} A{r} {r} 0 {large} 1 {x1:.2} {y1:.2}"/>"#)
}

/// A donut of the groups' shares, with a legend of every group's figure and share.
fn donut(id: &str, title: &str, rows: &[(String, f64)], unit: &str) -> String {
    let total: f64 = rows.iter().map(|(_, v)| v.max(0.0)).sum();
    let mut out = String::from(r#"<div class="chart-split">"#);
    svg_open(&mut out, id, 160, 160, title);
    let mut at = 0.0;
    for (index, (_, value)) in rows.iter().enumerate() {
        if total <= 0.0 {
            break;
        }
        let share = value.max(0.0) / total;
        out.push_str(&arc(
            80.0,
            80.0,
            56.0,
            at,
            at + share,
            &format!("slice s{}", index % COLOURS),
        ));
        at += share;
    }
    out.push_str("</svg>");
    legend(&mut out, rows, total, unit);
    out.push_str("</div>");
    out
}

/// Each row's colour, name, figure and share, in a list read by everyone.
fn legend(out: &mut String, rows: &[(String, f64)], total: f64, unit: &str) {
    out.push_str(r#"<ul class="legend">"#);
    for (index, (key, value)) in rows.iter().enumerate() {
        let share = if total > 0.0 {
            value / total * 100.0
        } else {
            0.0
        };
        let _ = write!(
            out,
            r#"<li data-key="{}" data-value="{value}"><span class="swatch s{}" aria-hidden="true"></span><span class="legend-key">{}</span> <span class="legend-value">{}</span> <span class="chart-muted">({}%)</span></li>"#,
            esc(key),
            index % COLOURS,
            esc(key),
            esc(&with_unit(*value, unit)),
            number(share)
        );
    }
    out.push_str("</ul>");
}

/// Horizontal bars, largest first, each with its name and figure.
fn leaderboard(id: &str, title: &str, rows: &[(String, f64)], unit: &str) -> String {
    let max = rows.iter().map(|(_, v)| *v).fold(0.0_f64, f64::max);
    let row_height = 26;
    let height = u32::try_from(rows.len()).unwrap_or(0) * row_height + 4;
    let mut out = String::new();
    svg_open(&mut out, id, 600, height, title);
    for (index, (key, value)) in rows.iter().enumerate() {
        let y = u32::try_from(index).unwrap_or(0) * row_height + 2;
        let width = if max > 0.0 {
            (value.max(0.0) / max * 300.0).round()
        } else {
            0.0
        };
        let name: String = if key.chars().count() > 28 {
            key.chars().take(27).chain(['…']).collect()
        } else {
            key.clone()
        };
        let _ = write!(
            out,
            r#"<text x="0" y="{}">{}</text><rect class="bar s0" x="200" y="{}" width="{width}" height="18" rx="3"/><text x="{}" y="{}">{}</text>"#,
            y + 14,
            esc(&name),
            y + 1,
            200.0 + width + 6.0,
            y + 14,
            esc(&with_unit(*value, unit))
        );
    }
    out.push_str("</svg>");
    figures_table(
        &mut out,
        title,
        &["Name", "Figure"],
        rows.iter()
            .map(|(k, v)| vec![k.clone(), with_unit(*v, unit)])
            .collect(),
    );
    out
}

/// A table of the figures for screen readers (visually hidden: the chart shows them).
fn figures_table(out: &mut String, title: &str, headers: &[&str], rows: Vec<Vec<String>>) {
    let _ = write!(
        out,
        r#"<table class="sr-only chart-figures"><caption>{}</caption><thead><tr>"#,
        esc(title)
    );
    for header in headers {
        let _ = write!(out, r#"<th scope="col">{}</th>"#, esc(header));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for (index, cell) in row.iter().enumerate() {
            if index == 0 {
                let _ = write!(out, r#"<th scope="row">{}</th>"#, esc(cell));
            } else {
                let _ = write!(out, "<td>{}</td>", esc(cell));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// A round step for `max` split in about four: 1, 2 or 5 times a power of ten.
fn step(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let rough = max / 4.0;
    let power = 10_f64.powf(rough.log10().floor());
    let unit = rough / power;
    let nice = if unit <= 1.0 {
        1.0
    } else if unit <= 2.0 {
        2.0
    } else if unit <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Lines (or bars) over time, one per series, on a shared axis; a legend when there are
/// several series, and the table of figures.
fn time_based(
    id: &str,
    title: &str,
    labels: &[String],
    series: &[(String, Vec<f64>)],
    unit: &str,
    bars: bool,
) -> String {
    const W: f64 = 640.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 56.0;
    const BOTTOM: f64 = 24.0;
    const TOP: f64 = 8.0;
    let plot_w = W - LEFT - 8.0;
    let plot_h = H - BOTTOM - TOP;
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0_f64, f64::max);
    let step = step(max);
    let top = (max / step).ceil().max(1.0) * step;
    let n = labels.len().max(1);
    let slot = plot_w / n as f64;
    let x = |i: usize| LEFT + slot * (i as f64 + 0.5);
    let y = |v: f64| TOP + plot_h - (v.max(0.0) / top * plot_h);
    let mut out = String::new();
    svg_open(&mut out, id, W as u32, H as u32, title);
    // Grid lines and their figures.
    let mut tick = 0.0;
    while tick <= top + step / 2.0 {
        let _ = write!(
            out,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}"/><text class="axis" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            W - 8.0,
            y(tick),
            y(tick),
            LEFT - 6.0,
            y(tick) + 4.0,
            esc(&number(tick))
        );
        tick += step;
    }
    // About eight period labels, evenly spaced.
    let every = n.div_ceil(8).max(1);
    for (i, label) in labels.iter().enumerate() {
        if i % every == 0 {
            let _ = write!(
                out,
                r#"<text class="axis" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                x(i),
                H - 6.0,
                esc(label)
            );
        }
    }
    let lines = series.len().max(1);
    for (index, (_, values)) in series.iter().enumerate() {
        let colour = index % COLOURS;
        if bars {
            let width = (slot * 0.8 / lines as f64).max(1.0);
            for (i, v) in values.iter().enumerate() {
                let left = x(i) - slot * 0.4 + width * index as f64;
                let _ = write!(
                    out,
                    r#"<rect class="bar s{colour}" x="{left:.1}" y="{:.1}" width="{width:.1}" height="{:.1}"/>"#,
                    y(*v),
                    (TOP + plot_h - y(*v)).max(0.0)
                );
            }
        } else {
            let mut d = String::new();
            for (i, v) in values.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if i == 0 { "M" } else { " L" },
                    x(i),
                    y(*v)
                );
            }
            let _ = write!(out, r#"<path class="line s{colour}" d="{d}"/>"#);
        }
    }
    out.push_str("</svg>");
    if series.len() > 1 {
        out.push_str(r#"<ul class="legend legend-row">"#);
        for (index, (name, values)) in series.iter().enumerate() {
            let total: f64 = values.iter().sum();
            let _ = write!(
                out,
                r#"<li data-key="{}" data-value="{total}"><span class="swatch s{}" aria-hidden="true"></span>{} <span class="chart-muted">({} in all)</span></li>"#,
                esc(name),
                index % COLOURS,
                esc(name),
                esc(&with_unit(total, unit))
            );
        }
        out.push_str("</ul>");
    }
    let mut headers = vec!["Period"];
    headers.extend(series.iter().map(|(name, _)| {
        if name.is_empty() {
            "Figure"
        } else {
            name.as_str()
        }
    }));
    let rows = labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let mut row = vec![label.clone()];
            row.extend(
                series
                    .iter()
                    .map(|(_, v)| with_unit(v.get(i).copied().unwrap_or(0.0), unit)),
            );
            row
        })
        .collect();
    figures_table(&mut out, title, &headers, rows);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_grouped_by_thousands_with_two_decimals_when_they_have_some() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(1234567.0), "1,234,567");
        assert_eq!(number(-1234.5), "-1,234.50");
        assert_eq!(number(999.999), "1,000");
        assert_eq!(number(12.345), "12.35");
    }

    #[test]
    fn drawings_escape_names_and_carry_no_style_attribute() {
        let figure = Figure::Distribution(vec![("<b>\"x\"</b>".into(), 2.0), ("y".into(), 1.0)]);
        let html = draw("c1", "A & B", &figure, "", false);
        assert!(html.contains("&lt;b&gt;&quot;x&quot;&lt;/b&gt;"), "{html}");
        assert!(
            html.contains("<title id=\"c1-t\">A &amp; B</title>"),
            "{html}"
        );
        assert!(!html.contains("style="), "{html}");
        let lines = Figure::TimeBased {
            labels: vec!["W1-2024".into(), "W2-2024".into()],
            series: vec![("a".into(), vec![1.0, 3.0]), ("b".into(), vec![2.0, 0.0])],
        };
        let html = draw("c2", "Lines", &lines, "", false);
        assert_eq!(html.matches("class=\"line ").count(), 2, "{html}");
        assert!(
            html.contains("<th scope=\"row\">W2-2024</th><td>3</td><td>0</td>"),
            "{html}"
        );
    }

    #[test]
    fn a_value_says_how_it_changed_since_the_previous_period() {
        let html = value(150.0, Some(100.0), "€");
        assert!(
            html.contains("150 €") && html.contains("+50%") && html.contains("up"),
            "{html}"
        );
        let html = value(50.0, Some(100.0), "");
        assert!(html.contains("-50%") && html.contains("down"), "{html}");
    }
}
