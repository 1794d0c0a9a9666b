// What the chart tests read back from an SVG: labels by class, each series'
// path as runs of pixel points, and a scratch folder.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "xml_check.h"

namespace ember::test {

struct Label {
    double x, y;
    std::string text;
};

/// The <text class="cls"> elements, in document order.
inline std::vector<Label> labels(const std::string& svg, const std::string& cls) {
    const std::regex re("<text class=\"" + cls +
                        "\" x=\"([-0-9.]+)\" y=\"([-0-9.]+)\"[^>]*>([^<]*)</text>");
    std::vector<Label> out;
    for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it)
        out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), (*it)[3]});
    return out;
}

inline std::vector<std::string> label_texts(const std::string& svg, const std::string& cls) {
    std::vector<std::string> out;
    for (const Label& l : labels(svg, cls)) out.push_back(l.text);
    return out;
}

struct Point {
    double x, y;
};
using Runs = std::vector<std::vector<Point>>;  // a path's pieces between gaps

/// The path of the series named `name` (as escaped in the document) as runs
/// of points; empty when the series drew no path.
inline Runs series_runs(const std::string& svg, const std::string& name) {
    const std::string start = "<path class=\"series\" data-series=\"" + name + "\" d=\"";
    const size_t b = svg.find(start);
    if (b == std::string::npos) return {};
    const size_t e = svg.find('"', b + start.size());
    Runs runs;
    std::istringstream d(svg.substr(b + start.size(), e - b - start.size()));
    char op, comma;
    Point p;
    while (d >> op >> p.x >> comma >> p.y) {
        if (op == 'M') runs.emplace_back();
        REQUIRE(!runs.empty());
        runs.back().push_back(p);
    }
    return runs;
}

inline size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
    return n;
}

inline std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    REQUIRE(out.good());
}

/// A fresh folder under the system's temporary directory, removed at the end.
struct ScratchDir {
    std::string path;
    ScratchDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "ember-plot-XXXXXX").string();
        REQUIRE(mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return path + "/" + name; }
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(path))
            out.push_back(e.path().filename().string());
        return out;
    }
};

}  // namespace ember::test
