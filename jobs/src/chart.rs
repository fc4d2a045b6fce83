//! PNG charts for `skein compare`, drawn with plotters and the DejaVu Sans font
//! embedded in the binary (no system fonts needed).

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context};
use plotters::prelude::*;

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is a known-good TTF compiled into the binary: registering cannot fail
        // for a bad file, and a failure would only show as missing text.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The image formats a chart can be written in, by file extension (what the bitmap
/// encoder supports).
const CHART_EXTENSIONS: [&str; 4] = ["png", "jpg", "jpeg", "bmp"];

/// Checks, before anything runs, that a chart can be written to `path`: an image
/// extension the encoder supports, and a folder where a file can be created (made if
/// missing). Writes nothing at `path` itself.
pub(crate) fn check_path(path: &Path) -> anyhow::Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    anyhow::ensure!(
        ext.as_deref().is_some_and(|e| CHART_EXTENSIONS.contains(&e)),
        "--chart {}: a chart is an image; give the file one of the extensions {}",
        path.display(),
        CHART_EXTENSIONS.map(|e| format!(".{e}")).join(", ")
    );
    crate::output::check_writable(path).with_context(|| format!("--chart {}", path.display()))
}

/// Draws one bar per `(label, rate)` into `path` (PNG, written atomically: see
/// [`crate::output`]), values in millions above the bars, the y axis named `y_desc` (e.g.
/// `harmonic-mean MTEPS`).
pub(crate) fn rate_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    bars: &[(String, f64)],
) -> anyhow::Result<()> {
    crate::output::create_parent(path)?;
    let out = crate::output::AtomicFile::create(path)
        .with_context(|| format!("cannot draw the chart {}", path.display()))?;
    draw(out.write_path(), title, y_desc, bars)
        .map_err(|e| anyhow!("cannot draw the chart {}: {e}", path.display()))?;
    out.commit().with_context(|| format!("cannot draw the chart {}", path.display()))
}

/// Renders the chart of [`rate_bars`] to `path` (which plotters opens itself).
fn draw(path: &Path, title: &str, y_desc: &str, bars: &[(String, f64)]) -> anyhow::Result<()> {
    register_font();
    let err = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max = bars.iter().map(|b| b.1 / 1e6).fold(0.0, f64::max).max(1e-3);
    // A segmented 0..k axis has k + 1 slots: one per bar.
    let n = bars.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n.saturating_sub(1).max(1)).into_segmented(), 0.0..max * 1.15)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => bars.get(*i).map_or(String::new(), |b| b.0.clone()),
            _ => String::new(),
        })
        .label_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [
        RGBColor(90, 110, 140),
        RGBColor(70, 140, 90),
        RGBColor(200, 90, 40),
        RGBColor(140, 80, 160),
        RGBColor(190, 160, 40),
    ];
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, teps))| {
            let color = colors[i % colors.len()];
            let mut bar = Rectangle::new(
                [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), teps / 1e6)],
                color.filled(),
            );
            bar.set_margin(0, 0, 30, 30);
            bar
        }))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, teps))| {
            Text::new(
                format!("{:.1}", teps / 1e6),
                (SegmentValue::CenterOf(i), teps / 1e6 + max * 0.03),
                ("sans-serif", 18).into_font(),
            )
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
