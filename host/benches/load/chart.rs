//! The chart of a load run, as SVG: task starts per second and agent memory per running
//! task, against the number of tasks running.

use plotters::prelude::*;

/// One step of the run.
pub struct Point {
    /// Tasks running after the step.
    pub running: f64,
    /// Starts per second while the step was added.
    pub starts_per_s: f64,
    /// Agent RSS per running task, KiB.
    pub kib_per_task: f64,
}

/// Draw `points` into an SVG file at `path`.
pub fn draw(path: &std::path::Path, points: &[Point]) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(480);
    let x_max = points.iter().map(|p| p.running).fold(1.0, f64::max) * 1.05;
    let panels: [(&DrawingArea<_, _>, &str, &str, fn(&Point) -> f64, RGBColor); 2] = [
        (
            &left,
            "Task starts per second (jobs of 100 mock tasks)",
            "starts/s",
            |p| p.starts_per_s,
            BLUE,
        ),
        (
            &right,
            "Agent RSS per running task",
            "KiB per task",
            |p| p.kib_per_task,
            RED,
        ),
    ];
    for (area, title, y_desc, y, color) in panels {
        let y_max = points.iter().map(y).fold(1.0, f64::max) * 1.2;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("tasks running")
            .y_desc(y_desc)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        chart.draw_series(LineSeries::new(
            points.iter().map(|p| (p.running, y(p))),
            color,
        ))?;
        chart.draw_series(
            points
                .iter()
                .map(|p| Circle::new((p.running, y(p)), 4, color.filled())),
        )?;
    }
    root.present()?;
    Ok(())
}
