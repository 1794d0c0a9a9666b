// The SVG line chart: well-formed documents, points at the right pixels,
// gaps for NaN, log axes, the right axis, escaping and the atomic save.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "support/svg_support.h"
#include "train/svg.h"

using namespace ember;
using namespace ember::train;
using namespace ember::test;

namespace {

// Requires a well-formed document, printing the checker's complaint if not.
std::string checked(const std::string& svg) {
    INFO(svg);
    REQUIRE(xml_problem(svg) == "");
    return svg;
}

}  // namespace

TEST_CASE("the XML check itself rejects what is not well-formed", "[svg]") {
    CHECK(xml_problem("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/>t &amp; &#60; u</a>\n") == "");
    CHECK(xml_problem("<a><b></a></b>") != "");
    CHECK(xml_problem("<a x=1/>") != "");
    CHECK(xml_problem("<a x=\"1\" x=\"2\"/>") != "");
    CHECK(xml_problem("<a>&</a>") != "");
    CHECK(xml_problem("<a>&nbsp;</a>") != "");
    CHECK(xml_problem("<a>x < y</a>") != "");
    CHECK(xml_problem("<a>&amp;<</a>") != "");
    CHECK(xml_problem("<a>&lt;</b></a>") != "");
    CHECK(xml_problem("<a t=\"<\"/>") != "");
    CHECK(xml_problem("<a>\x01</a>") != "");
    CHECK(xml_problem("<a/><b/>") != "");
    CHECK(xml_problem("<a>") != "");
    CHECK(xml_problem("") != "");
}

TEST_CASE("a point lands on the pixel its value maps to", "[svg]") {
    LineChart c;
    c.width = 600, c.height = 400;
    c.x.min = 0, c.x.max = 10;
    c.y.min = 0, c.y.max = 1;
    c.add("s", {0, 2.5, 10}, {0, 0.25, 1});
    const PlotArea a = c.area();
    CHECK(a.left > 0);
    CHECK(a.top > 0);
    CHECK(a.right < 600);
    CHECK(a.bottom < 400);
    CHECK(a.right - a.left > 400);
    CHECK(a.bottom - a.top > 250);

    const Runs runs = series_runs(checked(c.to_svg()), "s");
    REQUIRE(runs.size() == 1);
    REQUIRE(runs[0].size() == 3);
    // (0, 0) at the lower left corner, (10, 1) at the upper right, y growing upwards.
    CHECK(runs[0][0].x == Approx(a.left).margin(0.01));
    CHECK(runs[0][0].y == Approx(a.bottom).margin(0.01));
    CHECK(runs[0][1].x == Approx(a.left + 0.25 * (a.right - a.left)).margin(0.01));
    CHECK(runs[0][1].y == Approx(a.bottom - 0.25 * (a.bottom - a.top)).margin(0.01));
    CHECK(runs[0][2].x == Approx(a.right).margin(0.01));
    CHECK(runs[0][2].y == Approx(a.top).margin(0.01));
}

TEST_CASE("automatic axes end on nice ticks that cover the data", "[svg]") {
    LineChart c;
    c.add("s", {1, 2, 4}, {0.3, 1.0, 0.62});
    const std::string svg = checked(c.to_svg());
    CHECK(label_texts(svg, "xtick") == std::vector<std::string>{"1", "2", "3", "4"});
    CHECK(label_texts(svg, "ytick") == std::vector<std::string>{"0.2", "0.4", "0.6", "0.8", "1.0"});
    // Tick labels sit at their values: "0.6" halfway between "0.2" and "1.0"...
    const std::vector<Label> y = labels(svg, "ytick");
    CHECK(y[2].y == Approx((y[0].y + y[4].y) / 2).margin(0.01));
    CHECK(y[4].y < y[0].y);
    // ... and the highest point touches the top of the plot area, the last the right edge.
    const Runs runs = series_runs(svg, "s");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0][1].y == Approx(c.area().top).margin(0.01));
    CHECK(runs[0][2].x == Approx(c.area().right).margin(0.01));
}

TEST_CASE("an axis with one fixed limit ends there and widens the other", "[svg]") {
    LineChart c;
    c.add("s", {0, 1}, {0.3, 0.9});
    c.y.min = 0.05;
    Ticks t = c.y_ticks();
    CHECK(t.lo == 0.05);
    CHECK(t.hi == Approx(1.0));
    CHECK(t.labels == std::vector<std::string>{"0.2", "0.4", "0.6", "0.8", "1.0"});
    c.y.min.reset();
    c.y.max = 0.95;
    t = c.y_ticks();
    CHECK(t.lo == Approx(0.2));
    CHECK(t.hi == 0.95);
    CHECK(t.labels == std::vector<std::string>{"0.2", "0.4", "0.6", "0.8"});
    CHECK(xml_problem(c.to_svg()) == "");
}

TEST_CASE("a log10 axis places the decades evenly", "[svg]") {
    LineChart c;
    c.x.scale = Scale::log10;
    c.x.label = "learning rate";
    c.add("loss", {1, 10, 100, 1000}, {4, 3, 2, 1});
    const std::string svg = checked(c.to_svg());
    const std::vector<Label> x = labels(svg, "xtick");
    REQUIRE(label_texts(svg, "xtick") == std::vector<std::string>{"1", "10", "100", "1000"});
    const PlotArea a = c.area();
    const double third = (a.right - a.left) / 3;
    for (int k = 0; k < 4; ++k) CHECK(x[k].x == Approx(a.left + k * third).margin(0.01));
    const Runs runs = series_runs(svg, "loss");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0][2].x == Approx(a.left + 2 * third).margin(0.01));
    CHECK(count(svg, "class=\"minor-grid\"") == 1);
}

TEST_CASE("NaN, infinite and (on log axes) non-positive points are gaps", "[svg]") {
    LineChart c;
    c.add("s", {0, 1, 2, 3, 4, 5, 6}, {1, NAN, 2, 3, INFINITY, 4, 5});
    c.add("t", {0, NAN, 2}, {1, 2, 3});
    std::string svg = checked(c.to_svg());
    Runs runs = series_runs(svg, "s");
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].size() == 1);
    CHECK(runs[1].size() == 2);
    CHECK(runs[2].size() == 2);
    // The lone first point, with gaps on both sides, gets a dot; the others a line.
    CHECK(count(svg, "<circle") == 3);  // and t's two lone points
    CHECK(series_runs(svg, "t").size() == 2);
    // The non-finite values do not stretch the axis.
    CHECK(label_texts(svg, "ytick").back() == "5");

    LineChart log;
    log.y.scale = Scale::log10;
    log.add("s", {0, 1, 2, 3}, {0.1, 0, -1, 10});
    svg = checked(log.to_svg());
    runs = series_runs(svg, "s");
    REQUIRE(runs.size() == 2);
    CHECK(label_texts(svg, "ytick") == std::vector<std::string>{"0.1", "1", "10"});
}

TEST_CASE("empty series and all-NaN series draw an empty, valid chart", "[svg]") {
    LineChart c;
    c.title = "nothing yet";
    c.add("empty", {}, {});
    c.add("nan", {1, 2}, {NAN, NAN});
    const std::string svg = checked(c.to_svg());
    CHECK(count(svg, "class=\"series\"") == 0);
    CHECK(label_texts(svg, "empty") == std::vector<std::string>{"no data"});
    CHECK(label_texts(svg, "legend") == std::vector<std::string>{"empty", "nan"});
    CHECK(!label_texts(svg, "xtick").empty());

    LineChart none;
    CHECK(xml_problem(none.to_svg()) == "");
    REQUIRE_THROWS_WITH(c.add("bad", {1, 2, 3}, {1, 2}),
                        Catch::Contains("series 'bad' has 3 x values but 2 y values"));
}

TEST_CASE("a series on the right axis has its own scale and ticks", "[svg]") {
    LineChart c;
    c.y.label = "loss";
    c.y2.label = "lr";
    c.add("loss", {0, 100}, {2.3, 0.4});
    Series& lr = c.add("lr", {0, 50, 100}, {0, 1e-3, 0});
    lr.right = true;
    const std::string svg = checked(c.to_svg());
    CHECK(label_texts(svg, "ytick") ==
          std::vector<std::string>{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5"});
    CHECK(label_texts(svg, "y2tick") ==
          std::vector<std::string>{"0.0000", "0.0002", "0.0004", "0.0006", "0.0008", "0.0010"});
    CHECK(label_texts(svg, "y2label") == std::vector<std::string>{"lr"});
    CHECK(label_texts(svg, "legend") == std::vector<std::string>{"loss", "lr (right axis)"});
    const Runs runs = series_runs(svg, "lr");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0][1].y == Approx(c.area().top).margin(0.01));  // 1e-3: the top of the right axis
    CHECK(runs[0][0].y == Approx(c.area().bottom).margin(0.01));
    // Without a right-axis series the right margin is narrower and no y2 ticks are drawn.
    LineChart left;
    left.add("loss", {0, 1}, {1, 2});
    CHECK(left.area().right > c.area().right);
    CHECK(label_texts(left.to_svg(), "y2tick").empty());
}

TEST_CASE("text is escaped for XML", "[svg]") {
    CHECK(xml_escape("<&>\"'") == "&lt;&amp;&gt;&quot;&apos;");
    CHECK(xml_escape("a\x01"
                     "b\tc\x1f") == "ab\tc");  // XML 1.0 cannot hold control characters
    CHECK(xml_escape("accuracy \xc3\xa9t\xc3\xa9") == "accuracy \xc3\xa9t\xc3\xa9");
    LineChart c;
    c.title = "<&> run";
    c.x.label = "a \"quoted\" step";
    c.add("loss <train> & 'test'", {0, 1}, {0, 1}).color = "#123456";
    const std::string svg = checked(c.to_svg());
    CHECK(label_texts(svg, "title") == std::vector<std::string>{"&lt;&amp;&gt; run"});
    CHECK(label_texts(svg, "xlabel") == std::vector<std::string>{"a &quot;quoted&quot; step"});
    CHECK(series_runs(svg, "loss &lt;train&gt; &amp; &apos;test&apos;").size() == 1);
    CHECK(count(svg, "stroke=\"#123456\"") == 2);  // the line and its legend swatch
}

TEST_CASE("stacked charts share one document, each in its own band", "[svg]") {
    LineChart a, b;
    a.title = "first";
    b.title = "second";
    b.height = 200;
    a.add("s", {0, 1}, {0, 1});
    b.add("s", {0, 1}, {0, 1});
    const std::string svg = checked(stack_charts({a, b}));
    CHECK(count(svg, "<svg ") == 1);
    CHECK(count(svg, "height=\"500\" viewBox=\"0 0 800 500\"") == 1);
    CHECK(count(svg, "<g class=\"chart\" transform=\"translate(0,0.00)\">") == 1);
    CHECK(count(svg, "<g class=\"chart\" transform=\"translate(0,300.00)\">") == 1);
    CHECK(count(svg, "id=\"ember-plot-area-0\"") == 1);
    CHECK(count(svg, "id=\"ember-plot-area-1\"") == 1);
}

TEST_CASE("save writes atomically and names an unwritable path", "[svg]") {
    ScratchDir dir;
    LineChart c;
    c.title = "first";
    c.add("s", {0, 1}, {0, 1});
    const std::string path = dir.file("chart.svg");
    c.save(path);
    CHECK(read_text(path) == c.to_svg());
    c.title = "second";  // replaces the file, and leaves no temporary file behind
    c.save(path);
    CHECK(read_text(path) == c.to_svg());
    CHECK(dir.entries() == std::vector<std::string>{"chart.svg"});

    const std::string missing = dir.file("no-such-folder/chart.svg");
    REQUIRE_THROWS_WITH(c.save(missing), Catch::Contains("cannot write " + missing));
    const std::string under_file = path + "/x.svg";
    REQUIRE_THROWS_WITH(c.save(under_file), Catch::Contains("cannot write " + under_file));
    // A folder in the way: the rename fails, and the temporary file goes.
    std::filesystem::create_directory(dir.file("taken.svg"));
    REQUIRE_THROWS_WITH(c.save(dir.file("taken.svg")), Catch::Contains("taken.svg"));
    CHECK(dir.entries().size() == 2);
    REQUIRE_THROWS_WITH(save_svg("", "<svg/>"), Catch::Contains("empty"));
    CHECK(read_text(path) == c.to_svg());
}
