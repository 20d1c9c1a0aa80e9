//! The latency-by-percentile chart (`--svg FILE`) as the HdrHistogram plotter draws it: x = 1/(1-p) on a log
//! axis labelled 0%, 90%, 99%, 99.9%..., y = latency in milliseconds; drawn with plotters' SVG backend.

use super::hgrm::{MICROS_PER_MILLI, TICKS_PER_HALF_DISTANCE};
use super::LoadgenError;
use hdrhistogram::Histogram;
use plotters::prelude::*;

const SIZE: (u32, u32) = (960, 540);

/// `(1/(1-p), latency in ms)` points of `h`, the 100% point left out (it sits at infinity).
pub fn percentile_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    h.iter_quantiles(TICKS_PER_HALF_DISTANCE)
        .filter(|v| v.quantile_iterated_to() < 1.0)
        .map(|v| {
            (
                1.0 / (1.0 - v.quantile_iterated_to()),
                v.value_iterated_to() as f64 / MICROS_PER_MILLI,
            )
        })
        .collect()
}

/// The axis label of `x = 1/(1-p)`: `90%` for 10, `99.9%` for 1000.
pub fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x.max(1.0));
    let text = format!("{p:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

/// Draws the chart of the named histograms (e.g. corrected and uncorrected) as an SVG document.
pub fn chart(title: &str, series: &[(&str, &Histogram<u64>)]) -> Result<String, LoadgenError> {
    let plot_err = |e: &dyn std::fmt::Debug| LoadgenError::Plot(format!("{e:?}"));
    let lines: Vec<(&str, Vec<(f64, f64)>)> = series.iter().map(|(n, h)| (*n, percentile_points(h))).collect();
    let x_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .fold(10.0f64, f64::max);
    let decades = x_max.log10().ceil().clamp(1.0, 9.0) as i32;
    let x_end = 10f64.powi(decades);
    let y_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.001f64, f64::max)
        * 1.1;
    let keys: Vec<f64> = (0..=decades).map(|d| 10f64.powi(d)).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(20)
            .margin_right(60)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d((1f64..x_end).log_scale().with_key_points(keys), 0f64..y_max)
            .map_err(|e| plot_err(&e))?;
        chart
            .configure_mesh()
            .x_desc("Percentile")
            .y_desc("Latency (milliseconds)")
            .x_label_formatter(&|x| percentile_label(*x))
            .draw()
            .map_err(|e| plot_err(&e))?;
        let colors = [BLUE, RED, GREEN, MAGENTA];
        for (i, (name, points)) in lines.into_iter().enumerate() {
            let color = colors[i % colors.len()];
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| plot_err(&e))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| plot_err(&e))?;
        root.present().map_err(|e| plot_err(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_percentiles() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(100_000.0), "99.999%");
    }

    #[test]
    fn draws_an_svg_with_the_percentile_axis() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 10).unwrap();
        }
        let points = percentile_points(&h);
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let svg = chart("test", &[("corrected", &h)]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        for label in ["90%", "99%", "99.9%", "corrected", "Latency (milliseconds)"] {
            assert!(svg.contains(label), "missing {label}");
        }
        assert!(svg.contains("<polyline") || svg.contains("<path"));
    }
}
