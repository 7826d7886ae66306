//! Drawing a chart into bytes: PNG (encoded in memory) and SVG, in the embedded font.

use super::kit::{Chart, Drawn};
use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use std::sync::OnceLock;

/// `chart` (called `name` in errors) drawn as PNG bytes and as SVG text.
pub(crate) fn render(
    name: &str,
    size: (u32, u32),
    chart: &impl Chart,
) -> Result<(Vec<u8>, String)> {
    register_font()?;
    let (width, height) = size;
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        chart
            .draw(&root)
            .with_context(|| format!("drawing chart {name} (PNG)"))?;
        root.present().drawn()?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        chart
            .draw(&root)
            .with_context(|| format!("drawing chart {name} (SVG)"))?;
        root.present().drawn()?;
    }
    Ok((encode_png(&rgb, size)?, svg))
}

fn encode_png(rgb: &[u8], (width, height): (u32, u32)) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().context("encoding PNG header")?;
    writer.write_image_data(rgb).context("encoding PNG data")?;
    writer.finish().context("finishing PNG")?;
    Ok(out)
}

static FONT: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

/// Registers the embedded font as plotters' `sans-serif`, once per process; every text
/// style in the charts uses that family.
pub(super) fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
                .map_err(|_| "the embedded DejaVuSans.ttf is not a valid font".to_string())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}
