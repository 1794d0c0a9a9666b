// A small XML well-formedness check for the SVG tests: one root element,
// balanced and properly nested tags, quoted attributes without duplicates,
// only the five predefined entities (and character references), no raw '<'
// or '&' and no control characters in text or attribute values. Not a
// validating parser.
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace ember::test {

/// "" when `doc` is well-formed, else what is wrong and at which byte.
inline std::string xml_problem(const std::string& doc) {
    size_t i = 0;
    const auto at = [&](const std::string& what) { return what + " at byte " + std::to_string(i); };
    const auto starts = [&](const char* s) {
        return doc.compare(i, std::char_traits<char>::length(s), s) == 0;
    };
    const auto name = [&]() {
        const size_t b = i;
        while (i < doc.size() && (std::isalnum(static_cast<unsigned char>(doc[i])) ||
                                  std::string("_:.-").find(doc[i]) != std::string::npos))
            ++i;
        return doc.substr(b, i - b);
    };
    const auto skip_space = [&]() {
        while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i]))) ++i;
    };
    // An entity or character reference starting at doc[i] == '&'.
    const auto reference = [&]() {
        const size_t end = doc.find(';', i);
        if (end == std::string::npos) return false;
        const std::string ref = doc.substr(i + 1, end - i - 1);
        static const std::set<std::string> known = {"amp", "lt", "gt", "quot", "apos"};
        const bool ok =
            known.count(ref) ||
            (ref.size() > 1 && ref[0] == '#' &&
             ref.find_first_not_of(ref[1] == 'x' ? "0123456789abcdefABCDEF" : "0123456789",
                                   ref[1] == 'x' ? 2 : 1) == std::string::npos);
        i = end + 1;
        return ok;
    };
    std::vector<std::string> open;
    int roots = 0;
    while (i < doc.size()) {
        if (doc[i] != '<') {
            if (open.empty() && !std::isspace(static_cast<unsigned char>(doc[i])))
                return at("text outside the root element");
            if (static_cast<unsigned char>(doc[i]) < 0x20 &&
                !std::isspace(static_cast<unsigned char>(doc[i])))
                return at("a control character");
            if (doc[i] != '&')
                ++i;
            else if (!reference())
                return at("a bad entity reference");
            continue;
        }
        if (starts("<?") || starts("<!--")) {
            const char* close = starts("<?") ? "?>" : "-->";
            const size_t end = doc.find(close, i);
            if (end == std::string::npos) return at("an unclosed declaration or comment");
            i = end + std::char_traits<char>::length(close);
            continue;
        }
        if (starts("</")) {
            i += 2;
            const std::string n = name();
            skip_space();
            if (open.empty() || open.back() != n) return at("</" + n + "> closes nothing open");
            if (i >= doc.size() || doc[i] != '>') return at("an unterminated end tag");
            ++i;
            open.pop_back();
            continue;
        }
        ++i;
        const std::string n = name();
        if (n.empty()) return at("a '<' that starts no tag");
        if (open.empty() && ++roots > 1) return at("a second root element <" + n + ">");
        std::set<std::string> attributes;
        for (;;) {
            const size_t before = i;
            skip_space();
            if (i >= doc.size()) return at("an unterminated tag <" + n + ">");
            if (starts("/>")) {
                i += 2;
                break;
            }
            if (doc[i] == '>') {
                ++i;
                open.push_back(n);
                break;
            }
            if (i == before) return at("attributes not separated by space in <" + n + ">");
            const std::string a = name();
            if (a.empty() || !attributes.insert(a).second)
                return at("a bad or repeated attribute in <" + n + ">");
            skip_space();
            if (i >= doc.size() || doc[i] != '=') return at("attribute " + a + " without '='");
            ++i;
            skip_space();
            if (i >= doc.size() || (doc[i] != '"' && doc[i] != '\''))
                return at("an unquoted value");
            const char quote = doc[i++];
            while (i < doc.size() && doc[i] != quote) {
                if (doc[i] == '<') return at("'<' in an attribute value");
                if (static_cast<unsigned char>(doc[i]) < 0x20 &&
                    !std::isspace(static_cast<unsigned char>(doc[i])))
                    return at("a control character in an attribute value");
                if (doc[i] == '&') {
                    if (!reference()) return at("a bad entity reference in an attribute");
                } else {
                    ++i;
                }
            }
            if (i >= doc.size()) return at("an unterminated attribute value");
            ++i;
        }
    }
    if (!open.empty()) return "<" + open.back() + "> is never closed";
    if (roots != 1) return "no root element";
    return "";
}

}  // namespace ember::test
