// Axis arithmetic for ember's charts (tools/train/svg.h): "nice" tick values
// (1, 2 or 5 times a power of ten on a linear axis, decades on a log10 one),
// their labels, and the map from data values to pixels.
#pragma once

#include <string>
#include <vector>

namespace ember::train {

enum class Scale { linear, log10 };

/// The ticks of one axis and the range they span.
struct Ticks {
    double lo = 0, hi = 1;            ///< the axis range
    double step = 0;                  ///< between major ticks (log10: in decades)
    std::vector<double> major;        ///< labelled, ascending, all inside [lo, hi]
    std::vector<std::string> labels;  ///< one per major tick
    std::vector<double> minor;        ///< unlabelled (log10: 2..9 × a decade, when few decades)
};

/// The smallest of 1, 2 or 5 × 10^k that is >= raw (raw > 0 and finite).
double nice_step(double raw);

/// About `target` ticks at the multiples of a nice step. With widen, the
/// range grows to the multiples around [lo, hi], so the ticks cover the
/// data; without, [lo, hi] stays as given (a fixed axis) and the ticks are
/// the multiples inside it. A range of zero width is widened around its
/// value; a non-finite one becomes [0, 1].
Ticks linear_ticks(double lo, double hi, bool widen = true, int target = 5);

/// Ticks at the decades 10^k (every n-th when there are more than about 8)
/// for 0 < lo <= hi; with widen, the range grows to the decades around it.
/// Ranges not inside (0, inf) become [1, 10].
Ticks log_ticks(double lo, double hi, bool widen = true);

/// The label of `v`, a multiple of `step` on a linear axis: as many decimals
/// as the step needs ("0.5", "1500"), or scientific, as many digits as the
/// step needs, when the step is below 1e-4 or at least 1e5 ("2e-5", "1.5e6").
std::string tick_label(double v, double step);

/// Maps data values on [lo, hi] of `scale` to pixels [p_lo, p_hi] (p_hi <
/// p_lo on a y axis, which grows upwards).
struct AxisMap {
    Scale scale = Scale::linear;
    double lo = 0, hi = 1, p_lo = 0, p_hi = 1;

    /// A value this axis can place: finite, and positive on a log10 axis.
    bool placeable(double v) const;
    double operator()(double v) const;
};

}  // namespace ember::train
