// The SVG line chart: layout (fixed margins around the plot area), ticks and
// grid, one <path> per series with a fresh "M" after every gap, and a legend
// row under the title.
#include "train/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "data/utf8.h"
#include "train/files.h"

namespace ember::train {

namespace {

// Margins around the plot area: the title and the legend above, tick labels
// and the axis label below and on the sides.
constexpr double kTop = 56, kBottom = 48, kLeft = 72, kRightAxis = 72, kRightBare = 24;
constexpr double kTickLength = 5;
constexpr double kCharWidth = 7;  // rough width of a 12 px sans-serif character, for the legend
// Okabe and Ito's palette, distinguishable with the common colour-vision deficiencies.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000"};

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string text(double x, double y, const char* cls, const std::string& s,
                 const std::string& extra = "") {
    return "<text class=\"" + std::string(cls) + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\"" +
           extra + ">" + xml_escape(s) + "</text>\n";
}

struct Range {
    double lo = INFINITY, hi = -INFINITY;
    void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
    bool any() const { return lo <= hi; }
};

// The ticks of one axis: its fixed limits where set, else the data's range
// widened to nice ticks (a default range when there is no data).
Ticks axis_ticks(const Axis& axis, Range data) {
    const bool log = axis.scale == Scale::log10;
    if (!data.any()) data = log ? Range{1, 10} : Range{0, 1};
    const double lo = axis.min.value_or(data.lo), hi = axis.max.value_or(data.hi);
    const bool fixed = axis.min && axis.max;
    Ticks t = log ? log_ticks(lo, hi, !fixed) : linear_ticks(lo, hi, !fixed);
    if (fixed) return t;
    // One limit fixed: the widened range ends there, and ticks past it go.
    if (axis.min) t.lo = *axis.min;
    if (axis.max) t.hi = *axis.max;
    Ticks kept = t;
    kept.major.clear(), kept.labels.clear(), kept.minor.clear();
    for (size_t i = 0; i < t.major.size(); ++i)
        if (t.major[i] >= t.lo && t.major[i] <= t.hi)
            kept.major.push_back(t.major[i]), kept.labels.push_back(t.labels[i]);
    for (double v : t.minor)
        if (v >= t.lo && v <= t.hi) kept.minor.push_back(v);
    return kept;
}

}  // namespace

std::string xml_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (static_cast<unsigned char>(c) >= 0x80) {  // UTF-8 kept; any other byte is U+FFFD
            size_t at = i;
            char32_t cp = 0;
            if (data::decode_utf8(s, at, cp)) {
                out.append(s.substr(i, at - i));
                i = at - 1;
            } else {
                out += "\xEF\xBF\xBD";
            }
            continue;
        }
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&apos;";
                break;
            default:
                if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r')
                    out += c;
        }
    }
    return out;
}

Series& LineChart::add(std::string name, std::vector<double> xs, std::vector<double> ys) {
    EMBER_CHECK(xs.size() == ys.size(), "LineChart::add: series '", name, "' has ", xs.size(),
                " x values but ", ys.size(), " y values");
    series_.push_back({.name = std::move(name), .x = std::move(xs), .y = std::move(ys)});
    return series_.back();
}

bool LineChart::has_right_axis() const {
    for (const Series& s : series_)
        if (s.right) return true;
    return false;
}

PlotArea LineChart::area() const {
    const double right = has_right_axis() ? kRightAxis : kRightBare;
    return {kLeft, kTop, width - right, height - kBottom};
}

Ticks LineChart::x_ticks() const {
    const AxisMap px{.scale = x.scale}, py{.scale = y.scale}, py2{.scale = y2.scale};
    Range r;
    for (const Series& s : series_)
        for (size_t i = 0; i < s.x.size(); ++i)
            if (px.placeable(s.x[i]) && (s.right ? py2 : py).placeable(s.y[i])) r.add(s.x[i]);
    return axis_ticks(x, r);
}

Ticks LineChart::y_ticks(bool right) const {
    const AxisMap px{.scale = x.scale}, py{.scale = right ? y2.scale : y.scale};
    Range r;
    for (const Series& s : series_)
        if (s.right == right)
            for (size_t i = 0; i < s.x.size(); ++i)
                if (px.placeable(s.x[i]) && py.placeable(s.y[i])) r.add(s.y[i]);
    return axis_ticks(right ? y2 : y, r);
}

namespace {

// What every part of a chart's drawing needs: the plot area, the ticks and
// the maps from data to pixels.
struct Frame {
    PlotArea a;
    bool right_axis;
    Ticks tx, ty, ty2;
    AxisMap mx, my, my2;

    explicit Frame(const LineChart& c)
        : a(c.area()),
          right_axis(c.has_right_axis()),
          tx(c.x_ticks()),
          ty(c.y_ticks(false)),
          ty2(c.y_ticks(true)),
          mx{c.x.scale, tx.lo, tx.hi, a.left, a.right},
          my{c.y.scale, ty.lo, ty.hi, a.bottom, a.top},
          my2{c.y2.scale, ty2.lo, ty2.hi, a.bottom, a.top} {}
};

// Appends "M<x>,<y><cmd><to>" to a path: a horizontal or vertical segment.
// (Appending piece by piece also keeps GCC 12's false -Wrestrict quiet.)
void segment(std::string& d, double x, double y, char cmd, double to) {
    d += 'M';
    d += num(x);
    d += ',';
    d += num(y);
    d += cmd;
    d += num(to);
}

// Grid (minor lines lighter), frame, tick marks outside it, tick labels and
// axis labels.
std::string axes_svg(const LineChart& c, const Frame& f) {
    const PlotArea& a = f.a;
    std::string minor, grid, marks, s;
    for (double v : f.tx.minor) segment(minor, f.mx(v), a.top, 'V', a.bottom);
    for (double v : f.ty.minor) segment(minor, a.left, f.my(v), 'H', a.right);
    for (double v : f.tx.major) {
        segment(grid, f.mx(v), a.top, 'V', a.bottom);
        segment(marks, f.mx(v), a.bottom, 'v', kTickLength);
    }
    for (double v : f.ty.major) {
        segment(grid, a.left, f.my(v), 'H', a.right);
        segment(marks, a.left, f.my(v), 'h', -kTickLength);
    }
    if (f.right_axis)
        for (double v : f.ty2.major) segment(marks, a.right, f.my2(v), 'h', kTickLength);
    if (!minor.empty())
        s += "<path class=\"minor-grid\" d=\"" + minor + "\" stroke=\"#f0f0f0\"/>\n";
    if (!grid.empty()) s += "<path class=\"grid\" d=\"" + grid + "\" stroke=\"#dddddd\"/>\n";
    s += "<rect class=\"frame\" x=\"" + num(a.left) + "\" y=\"" + num(a.top) + "\" width=\"" +
         num(a.right - a.left) + "\" height=\"" + num(a.bottom - a.top) +
         "\" fill=\"none\" stroke=\"#333333\"/>\n";
    s += "<path class=\"ticks\" d=\"" + marks + "\" stroke=\"#333333\"/>\n";

    for (size_t i = 0; i < f.tx.major.size(); ++i)
        s += text(f.mx(f.tx.major[i]), a.bottom + 18, "xtick", f.tx.labels[i],
                  " text-anchor=\"middle\"");
    for (size_t i = 0; i < f.ty.major.size(); ++i)
        s += text(a.left - 8, f.my(f.ty.major[i]) + 4, "ytick", f.ty.labels[i],
                  " text-anchor=\"end\"");
    if (f.right_axis)
        for (size_t i = 0; i < f.ty2.major.size(); ++i)
            s += text(a.right + 8, f.my2(f.ty2.major[i]) + 4, "y2tick", f.ty2.labels[i]);
    const double mid_x = (a.left + a.right) / 2, mid_y = (a.top + a.bottom) / 2;
    if (!c.x.label.empty())
        s += text(mid_x, c.height - 10, "xlabel", c.x.label, " text-anchor=\"middle\"");
    if (!c.y.label.empty())
        s += text(16, mid_y, "ylabel", c.y.label,
                  " text-anchor=\"middle\" transform=\"rotate(-90 16 " + num(mid_y) + ")\"");
    if (f.right_axis && !c.y2.label.empty()) {
        const std::string rx = num(c.width - 12);
        s += text(c.width - 12, mid_y, "y2label", c.y2.label,
                  " text-anchor=\"middle\" transform=\"rotate(90 " + rx + " " + num(mid_y) + ")\"");
    }
    return s;
}

std::string circle(const std::string& cx, const std::string& cy) {
    return "<circle cx=\"" + cx + "\" cy=\"" + cy + "\" r=\"3\"/>";
}

// One series: a path that starts again ("M") after every gap, and dots at
// its points (markers) or at points with gaps on both sides, which a path
// would not show. Sets `any_point` when something was drawn.
std::string series_svg(const Series& ser, const std::string& color, const Frame& f,
                       bool& any_point) {
    const AxisMap& my = ser.right ? f.my2 : f.my;
    std::string d, dots, px, py;
    int run = 0;  // placeable points since the last gap
    for (size_t i = 0; i <= ser.x.size(); ++i) {
        if (i == ser.x.size() || !f.mx.placeable(ser.x[i]) || !my.placeable(ser.y[i])) {
            if (run == 1 && !ser.markers) dots += circle(px, py);
            run = 0;
            continue;
        }
        px = num(f.mx(ser.x[i])), py = num(my(ser.y[i]));
        d += (run++ == 0 ? "M" : "L") + px + "," + py;
        if (ser.markers) dots += circle(px, py);
        any_point = true;
    }
    std::string s;
    if (!d.empty() && ser.stroke > 0)
        s = "<path class=\"series\" data-series=\"" + xml_escape(ser.name) + "\" d=\"" + d +
            "\" fill=\"none\" stroke=\"" + xml_escape(color) + "\" stroke-width=\"" +
            num(ser.stroke) + "\" stroke-linejoin=\"round\"/>\n";
    if (!dots.empty())
        s += "<g class=\"markers\" fill=\"" + xml_escape(color) + "\">" + dots + "</g>\n";
    return s;
}

// A legend entry at `x` in the row under the title; moves `x` past it.
std::string legend_svg(const Series& ser, const std::string& color, double& x) {
    const std::string name = ser.right ? ser.name + " (right axis)" : ser.name;
    std::string s;
    if (ser.stroke > 0)
        s = "<path d=\"M" + num(x) + ",38h18\" stroke=\"" + xml_escape(color) +
            "\" stroke-width=\"" + num(std::max(ser.stroke, 1.5)) + "\"/>";
    if (ser.markers)
        s += "<circle cx=\"" + num(x + 9) + "\" cy=\"38\" r=\"3\" fill=\"" + xml_escape(color) +
             "\"/>";
    s += text(x + 24, 42, "legend", name);
    x += 24 + kCharWidth * double(name.size()) + 18;
    return s;
}

}  // namespace

std::string LineChart::to_svg_group(int id, double dy) const {
    const Frame f(*this);
    const PlotArea& a = f.a;
    std::string s = "<g class=\"chart\" transform=\"translate(0," + num(dy) + ")\">\n";
    if (!title.empty())
        s += text(width / 2.0, 22, "title", title,
                  " text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
    s += axes_svg(*this, f);
    // The series, clipped to the plot area (fixed limits may cut them).
    const std::string clip = "ember-plot-area-" + std::to_string(id);
    s += "<clipPath id=\"" + clip + "\"><rect x=\"" + num(a.left) + "\" y=\"" + num(a.top) +
         "\" width=\"" + num(a.right - a.left) + "\" height=\"" + num(a.bottom - a.top) +
         "\"/></clipPath>\n<g clip-path=\"url(#" + clip + ")\">\n";
    std::string legend;
    double legend_x = a.left;
    bool any_point = false;
    for (size_t k = 0; k < series_.size(); ++k) {
        const Series& ser = series_[k];
        const std::string color = ser.color.empty() ? kPalette[k % std::size(kPalette)] : ser.color;
        s += series_svg(ser, color, f, any_point);
        if (!ser.name.empty()) legend += legend_svg(ser, color, legend_x);
    }
    s += "</g>\n";
    if (!legend.empty()) s += legend + "\n";
    if (!any_point)
        s += text((a.left + a.right) / 2, (a.top + a.bottom) / 2, "empty", "no data",
                  " text-anchor=\"middle\" fill=\"#888888\"");
    return s + "</g>\n";
}

std::string LineChart::to_svg() const { return stack_charts({*this}); }

void LineChart::save(const std::string& path) const { save_svg(path, to_svg()); }

std::string stack_charts(const std::vector<LineChart>& charts) {
    int width = 0, height = 0;
    for (const LineChart& c : charts) width = std::max(width, c.width), height += c.height;
    const std::string w = std::to_string(width), h = std::to_string(height);
    std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h;
    s += "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s += "<rect width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
    double dy = 0;
    for (size_t i = 0; i < charts.size(); ++i) {
        s += charts[i].to_svg_group(int(i), dy);
        dy += charts[i].height;
    }
    return s + "</svg>\n";
}

void save_svg(const std::string& path, const std::string& svg) {
    EMBER_CHECK(!path.empty(), "save_svg: the path is empty");
    write_file_atomic(path, svg);
}

}  // namespace ember::train
