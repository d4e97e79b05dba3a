//! Line plots for the examples: drawn with plotters (SVG backend, so no font library is needed
//! at build time) and rasterised to PNG with resvg using whatever fonts the system has (labels
//! are simply missing where it has none).

use std::path::Path;

use plotters::prelude::*;

/// One line of a panel.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (x, y) points; points with a non-positive coordinate are skipped on log axes.
    pub points: Vec<(f64, f64)>,
}

/// One chart: title, axis labels, log scales and lines.
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// A horizontal reference line (a target), if any.
    pub target: Option<(f64, String)>,
    /// A vertical reference line (a budget), if any.
    pub v_line: Option<(f64, String)>,
    /// Whether each series' points are joined by lines (else points only).
    pub lines: bool,
    /// One point to mark with a ring and a label (a choice), if any.
    pub mark: Option<((f64, f64), String)>,
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// A short tick label: plain decimals from 0.01 up, powers of ten below.
fn tick(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 0.01 {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0e}")
    }
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        (0.1, 1.0)
    } else {
        (lo / 1.5, hi * 1.5)
    }
}

/// Draws `panels` side by side on log-log axes into `<stem>.svg` and `<stem>.png`.
pub fn log_log_panels(stem: &Path, panels: &[Panel]) -> Result<(), Box<dyn std::error::Error>> {
    let (w, h) = (560 * panels.len() as u32, 460u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((1, panels.len()));
        for (panel, area) in panels.iter().zip(&areas) {
            let (x0, x1) = range(
                panel
                    .series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.0))
                    .chain(panel.v_line.iter().map(|v| v.0)),
            );
            // plotters labels a log axis from the first power of ten inside it: start the
            // scatter panels' x axis on one, so that a range under 1 still gets labels.
            let x0 = if panel.lines {
                x0
            } else {
                0.999 * 10f64.powf(x0.log10().floor())
            };
            let (y0, y1) = range(
                panel
                    .series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.1))
                    .chain(panel.target.iter().map(|t| t.0)),
            );
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 20))
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(64)
                .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
            chart
                .configure_mesh()
                .x_desc(panel.x_label.as_str())
                .y_desc(panel.y_label.as_str())
                .label_style(("sans-serif", 13))
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .draw()?;
            for (k, s) in panel.series.iter().enumerate() {
                let colour = COLOURS[k % COLOURS.len()];
                let points: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| p.0 > 0.0 && p.1 > 0.0)
                    .collect();
                if panel.lines {
                    chart
                        .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
                        .label(s.label.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                        });
                    chart.draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 3, colour.filled())),
                    )?;
                } else {
                    chart
                        .draw_series(
                            points
                                .into_iter()
                                .map(|p| Circle::new(p, 4, colour.filled())),
                        )?
                        .label(s.label.as_str())
                        .legend(move |(x, y)| Circle::new((x + 9, y), 4, colour.filled()));
                }
            }
            if let Some((y, label)) = &panel.target {
                let style = BLACK.mix(0.6).stroke_width(1);
                chart
                    .draw_series(LineSeries::new(vec![(x0, *y), (x1, *y)], style))?
                    .label(label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            }
            if let Some((x, label)) = &panel.v_line {
                let style = RED.mix(0.8).stroke_width(2);
                chart
                    .draw_series(LineSeries::new(vec![(*x, y0), (*x, y1)], style))?
                    .label(label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            }
            if let Some((p, label)) = &panel.mark
                && p.0 > 0.0
                && p.1 > 0.0
            {
                let style = BLACK.stroke_width(2);
                chart
                    .draw_series(std::iter::once(Circle::new(*p, 9, style)))?
                    .label(label.as_str())
                    .legend(move |(x, y)| Circle::new((x + 9, y), 6, style));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerLeft)
                .label_font(("sans-serif", 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
    }
    rasterise(stem, &svg)
}

/// Draws one panel on linear axes (a time series: x from 0) into `<stem>.svg` and
/// `<stem>.png`; `target` is drawn as a horizontal line.
#[allow(dead_code)]
pub fn linear_panel(stem: &Path, panel: &Panel) -> Result<(), Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let points = panel.series.iter().flat_map(|s| s.points.iter());
        let x1 = points.clone().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
        let y1 = points
            .map(|p| p.1)
            .chain(panel.target.iter().map(|t| t.0))
            .fold(0.0, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(&panel.title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x1, 0.0..y1.max(1e-9))?;
        chart
            .configure_mesh()
            .x_desc(panel.x_label.as_str())
            .y_desc(panel.y_label.as_str())
            .label_style(("sans-serif", 13))
            .light_line_style(TRANSPARENT)
            .draw()?;
        for (k, s) in panel.series.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(s.points.clone(), colour.stroke_width(1)))?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
        }
        if let Some((y, label)) = &panel.target {
            let style = BLACK.mix(0.7).stroke_width(2);
            chart
                .draw_series(LineSeries::new(vec![(0.0, *y), (x1, *y)], style))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    rasterise(stem, &svg)
}

/// Writes `svg` to `<stem>.svg` and rasterised to `<stem>.png`.
fn rasterise(stem: &Path, svg: &str) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::write(stem.with_extension("svg"), svg)?;
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    // plotters asks for "sans-serif"; point it at a sans face the system has.
    let family = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"]
        .into_iter()
        .find(|f| {
            options
                .fontdb
                .faces()
                .any(|face| face.families.iter().any(|(name, _)| name == f))
        })
        .map(str::to_string)
        .or_else(|| {
            options
                .fontdb
                .faces()
                .next()
                .and_then(|face| face.families.first().map(|(name, _)| name.clone()))
        });
    if let Some(family) = family {
        options.fontdb_mut().set_sans_serif_family(family);
    }
    let tree = resvg::usvg::Tree::from_str(svg, &options)?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty plot")?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.save_png(stem.with_extension("png"))?;
    Ok(())
}
