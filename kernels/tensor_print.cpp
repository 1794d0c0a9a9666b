// Printing a tensor as PyTorch does: the values nested by dimension, aligned
// in columns, summarized around "..." past 1000 elements. Only the printed
// elements leave the device: the summarized tensor is cut down to its edges
// (at most 6 per dimension) before one copy to the host.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/shape_ops.h"

namespace ember {

namespace {

constexpr int64_t kThreshold = 1000;  // more elements than this: summarized
constexpr int64_t kEdge = 3;          // elements kept at each end of a summarized dim
constexpr size_t kLineWidth = 80;

// How the elements are written: integers, floats in fixed point with 4
// decimals, in scientific notation, or floats that are all whole numbers
// ("2.", as PyTorch).
enum class Style { integer, fixed, scientific, whole };

Style style_of(DType dtype, const std::vector<double>& v) {
    if (!is_floating(dtype)) return Style::integer;
    double max_abs = 0, min_abs = INFINITY;
    bool whole = true;
    for (double x : v) {
        if (!std::isfinite(x)) continue;
        const double a = std::fabs(x);
        max_abs = std::max(max_abs, a);
        if (a > 0) min_abs = std::min(min_abs, a);
        whole = whole && x == std::nearbyint(x);
    }
    if (whole && max_abs < 1e8) return Style::whole;
    // Too wide a range for 4 decimals to show every value.
    if (max_abs >= 1e8 || min_abs < 1e-4 || max_abs / min_abs > 1000) return Style::scientific;
    return Style::fixed;
}

std::string format(double x, Style style) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[64];
    switch (style) {
        case Style::integer: std::snprintf(buf, sizeof buf, "%.0f", x); break;
        case Style::whole: std::snprintf(buf, sizeof buf, "%.0f.", x); break;
        case Style::fixed: std::snprintf(buf, sizeof buf, "%.4f", x); break;
        case Style::scientific: std::snprintf(buf, sizeof buf, "%.4e", x); break;
    }
    return buf;
}

// The printed part of `t`: the first and last kEdge elements of each dim
// longer than 2·kEdge when summarizing, else all of it.
Tensor edges(const Tensor& t, bool summarize) {
    Tensor out = t;
    if (!summarize) return out;
    for (int64_t d = 0; d < t.dim(); ++d) {
        const int64_t n = out.size(d);
        if (n > 2 * kEdge)
            out = kernels::cat({out.narrow(d, 0, kEdge), out.narrow(d, n - kEdge, kEdge)}, d);
    }
    return out;
}

struct Printer {
    std::ostream& os;
    const std::vector<std::string>& cells;  // the printed elements, row-major over `shown`
    Shape shown;                            // the printed part's shape
    Shape full;                             // the tensor's
    bool summarize;
    size_t width;

    // Whether dim `d` of the printed part has a "..." after kEdge entries.
    bool cut(size_t d) const { return summarize && full[d] > 2 * kEdge; }

    // Prints the sub-tensor of dims [d, ndim) starting at cell `first`,
    // after `indent` columns.
    void print(size_t d, int64_t first, size_t indent) const {
        os << "[";
        int64_t stride = 1;
        for (size_t k = d + 1; k < shown.size(); ++k) stride *= shown[k];
        const bool last = d + 1 == shown.size();
        size_t column = indent + 1;
        for (int64_t i = 0; i < shown[d]; ++i) {
            const bool dots = cut(d) && i == kEdge;
            if (last) {
                // Elements on a line up to kLineWidth, then a new line.
                std::vector<std::string> items;
                if (dots) items.push_back("...");
                std::string cell = cells[size_t(first + i)];
                items.push_back(std::string(width - std::min(width, cell.size()), ' ') + cell);
                for (const std::string& item : items) {
                    if (column != indent + 1) {
                        os << ",";
                        ++column;
                        // The item, and the comma that may follow it, within the line.
                        if (column + 1 + item.size() + 1 > kLineWidth) {
                            os << "\n" << std::string(indent + 1, ' ');
                            column = indent + 1;
                        } else {
                            os << " ";
                            ++column;
                        }
                    }
                    os << item;
                    column += item.size();
                }
            } else {
                // Sub-tensors one per line, a blank line between those of 3+ dims.
                const std::string sep = "," + std::string(shown.size() - d - 1, '\n') +
                                        std::string(indent + 1, ' ');
                if (i > 0) os << sep;
                if (dots) os << "..." << sep;
                print(d + 1, first + i * stride, indent + 1);
            }
        }
        os << "]";
    }
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "Tensor(undefined)";
    os << "Tensor(" << dtype_name(t.dtype()) << ", " << t.device() << ", "
       << shape_str(t.shape()) << ")";
    if (t.numel() == 0) return os << " []";
    const bool summarize = t.numel() > kThreshold;
    const Tensor part = edges(t, summarize);
    const std::vector<double> v = is_floating(t.dtype()) ? part.to_vector<double>()
                                                         : std::vector<double>();
    const std::vector<int64_t> n = is_floating(t.dtype()) ? std::vector<int64_t>()
                                                          : part.to_vector<int64_t>();
    const Style style = style_of(t.dtype(), v);
    std::vector<std::string> cells;
    size_t width = 0;
    for (int64_t i = 0; i < part.numel(); ++i) {
        if (t.dtype() == DType::boolean)
            cells.push_back(n[size_t(i)] ? "true" : "false");
        else if (style == Style::integer)
            cells.push_back(std::to_string(n[size_t(i)]));
        else
            cells.push_back(format(v[size_t(i)], style));
        width = std::max(width, cells.back().size());
    }
    if (t.dim() == 0) return os << " " << cells[0];
    os << "\n";
    Printer{os, cells, part.shape(), t.shape(), summarize, width}.print(0, 0, 0);
    return os;
}

}  // namespace ember
