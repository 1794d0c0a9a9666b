// A small SVG line-chart writer: ember draws its own training curves
// (curves.svg, lr-find) with no plotting library. Charts stack vertically in
// one document so that loss, accuracy and learning rate share the step axis.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ticks.h"

namespace ember::train {

/// One axis of a chart.
struct Axis {
    std::string label;
    Scale scale = Scale::linear;
    /// Fixed limits; unset, the range is the data's widened to nice ticks.
    std::optional<double> min, max;
};

/// A named line. A point that cannot be placed (a NaN or infinite value, or
/// one <= 0 on a log axis) is a gap in the line, not an error.
struct Series {
    std::string name;  ///< in the legend (an empty name is left out)
    std::vector<double> x, y;
    std::string color;     ///< any SVG colour; empty: the chart's palette by position
    bool right = false;    ///< against the chart's right axis (LineChart::y2)
    bool markers = false;  ///< a dot at every point (sparse series: one per epoch)
    double stroke = 1.5;   ///< line width in pixels; 0 draws only the markers
};

/// The plot area inside the margins, in pixels from the chart's top left.
struct PlotArea {
    double left = 0, top = 0, right = 0, bottom = 0;
};

/// A line chart: title, axis labels, linear or log10 axes with nice ticks,
/// any number of series (each optionally against a second y axis on the
/// right), a legend above the plot area.
///
///     LineChart c;
///     c.title = "loss";
///     c.x.label = "step";
///     c.add("train", steps, losses);
///     c.add("lr", steps, lrs).right = true;
///     c.save("curves.svg");
class LineChart {
  public:
    std::string title;
    Axis x, y;
    Axis y2;  ///< the right axis, drawn when a series is on it
    int width = 800, height = 300;

    /// Adds a series and returns it for further settings (colour, right
    /// axis, markers); the reference lasts until the next add. x and y must
    /// have the same length.
    Series& add(std::string name, std::vector<double> x, std::vector<double> y);
    const std::vector<Series>& series() const { return series_; }

    bool has_right_axis() const;
    PlotArea area() const;
    /// The ticks of x, y and y2 as drawn (each from its fixed limits or the
    /// placeable points of the series on it).
    Ticks x_ticks() const;
    Ticks y_ticks(bool right = false) const;

    /// A complete SVG document of this chart alone.
    std::string to_svg() const;
    /// The chart as an SVG group moved down by `dy` pixels; `id` makes its
    /// element ids unique in a document holding several charts.
    std::string to_svg_group(int id, double dy) const;
    /// Writes to_svg() to `path` atomically (save_svg).
    void save(const std::string& path) const;

  private:
    std::vector<Series> series_;
};

/// One SVG document with the charts stacked top to bottom.
std::string stack_charts(const std::vector<LineChart>& charts);

/// Writes `svg` to `path` atomically (write_file_atomic: a temporary file in
/// the same folder, flushed, then renamed over `path`), so readers never see
/// a partial file. An unwritable path is an ember::Error naming it.
void save_svg(const std::string& path, const std::string& svg);

/// `text` with & < > " ' escaped for XML text and attributes, and the
/// control characters XML 1.0 cannot hold at all dropped.
std::string xml_escape(std::string_view text);

}  // namespace ember::train
