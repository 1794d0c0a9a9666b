// safetensors header validation. The JSON is read with a streaming (SAX)
// handler rather than into a document: it sees every key, so duplicate keys
// are caught (a document keeps only one of them), and it stops at the first
// value outside the format, so hostile nesting or huge arrays cost nothing.
// The entries are then checked against the data buffer's size.
#include "nn/safetensors_header.h"

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace ember::nn::detail {

namespace {

constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
    DType dtype;
    const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::f64, "F64"}, {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::u8, "U8"},   {DType::boolean, "BOOL"}};

// The fields of a tensor entry, as bits of RawEntry::fields.
enum Field : unsigned { kDType = 1, kShape = 2, kOffsets = 4 };
constexpr std::pair<Field, const char*> kFields[] = {
    {kDType, "dtype"}, {kShape, "shape"}, {kOffsets, "data_offsets"}};

const char* field_name(Field f) {
    for (auto [bit, name] : kFields)
        if (bit == f) return name;
    return "?";
}

// At most `max` bytes of `s` with control bytes (and, unless `keep_utf8`,
// all non-ASCII bytes) written as \xNN.
std::string printable(const std::string& s, size_t max, bool keep_utf8) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < max; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && !keep_utf8)) {
            const char* hex = "0123456789abcdef";
            out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
        } else {
            out += char(c);
        }
    }
    return s.size() > max ? out + "..." : out;
}

// A tensor entry as written in the JSON, before its values are checked.
struct RawEntry {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    std::vector<uint64_t> offsets;
    unsigned fields = 0;
};

// SAX handler for the header. Depth 1 is inside the root object, 2 inside a
// tensor entry or __metadata__, 3 inside shape or data_offsets; nothing may
// nest deeper. The first problem is kept in `error` and stops the parse.
class HeaderHandler {
public:
    std::vector<RawEntry> entries;
    std::map<std::string, std::string> metadata;
    std::string error;

    bool null() { return unexpected("null"); }
    bool boolean(bool) { return unexpected("a boolean"); }
    bool number_integer(int64_t v) {
        if (depth_ == 3 && v < 0) return fail(str(where(), " has a negative entry ", v));
        return depth_ == 3 ? array_entry(uint64_t(v)) : unexpected("a number");
    }
    bool number_unsigned(uint64_t v) {
        return depth_ == 3 ? array_entry(v) : unexpected("a number");
    }
    bool number_float(double, const std::string& text) {
        if (depth_ == 3) return fail(str(where(), " has a non-integer entry ", text));
        return unexpected("a number");
    }
    bool string(std::string& s) {
        if (depth_ == 2 && in_metadata_) {
            metadata[meta_key_] = s;
            return true;
        }
        if (depth_ == 2 && field_ == kDType) {
            entries.back().dtype = s;
            return true;
        }
        return unexpected("a string");
    }
    template <class Binary>
    bool binary(Binary&) {  // only binary formats (CBOR, ...) produce these
        return unexpected("binary data");
    }
    bool start_object(std::size_t) {
        if (depth_ == 0) {
            depth_ = 1;
            return true;
        }
        if (depth_ != 1) return unexpected("an object");
        depth_ = 2;
        in_metadata_ = key_ == kMetadataKey;
        if (!in_metadata_) {
            entries.emplace_back();
            entries.back().name = key_;
        }
        return true;
    }
    bool end_object() {
        if (depth_ == 2 && !in_metadata_) {
            const RawEntry& e = entries.back();
            for (auto [bit, name] : kFields)
                if (!(e.fields & bit))
                    return fail(str("tensor ", quote(e.name), ": missing '", name, "'"));
        }
        in_metadata_ = false;
        --depth_;
        return true;
    }
    bool start_array(std::size_t) {
        if (depth_ != 2 || in_metadata_ || field_ == kDType) return unexpected("an array");
        depth_ = 3;
        return true;
    }
    bool end_array() {
        RawEntry& e = entries.back();
        if (field_ == kOffsets && e.offsets.size() != 2)
            return fail(str(where(), " must be [begin, end], got ", e.offsets.size(), " entries"));
        depth_ = 2;
        return true;
    }
    bool key(std::string& k) {
        if (depth_ == 1) {
            if (k.empty()) return fail("a tensor has an empty name");
            if (!keys_.insert(k).second) return fail(str("duplicate key ", quote(k)));
            key_ = k;
            return true;
        }
        if (in_metadata_) {
            if (metadata.count(k)) return fail(str("__metadata__: duplicate key ", quote(k)));
            meta_key_ = k;
            return true;
        }
        RawEntry& e = entries.back();
        const auto* f = std::find_if(std::begin(kFields), std::end(kFields),
                                     [&](const auto& field) { return k == field.second; });
        if (f == std::end(kFields))
            return fail(str("tensor ", quote(e.name), ": unknown field ", quote(k),
                            " (an entry has exactly dtype, shape and data_offsets)"));
        field_ = f->first;
        if (e.fields & field_)
            return fail(str("tensor ", quote(e.name), ": duplicate field ", quote(k)));
        e.fields |= field_;
        return true;
    }
    template <class Exception>
    bool parse_error(std::size_t, const std::string&, const Exception& ex) {
        // The message quotes the bytes read last, which may be anything.
        return fail("the header is not valid JSON: " + printable(ex.what(), 300, false));
    }

private:
    // "tensor 'x': shape", the field being read, for messages.
    std::string where() const {
        return str("tensor ", quote(entries.back().name), ": ", field_name(field_));
    }
    bool array_entry(uint64_t v) {
        RawEntry& e = entries.back();
        std::vector<uint64_t>& a = field_ == kShape ? e.shape : e.offsets;
        if (field_ == kOffsets && a.size() == 2)
            return fail(str(where(), " must be [begin, end], got more than 2 entries"));
        a.push_back(v);
        return true;
    }
    // A value of the wrong kind (`what`) where the current position wants another.
    bool unexpected(const char* what) {
        if (depth_ == 0) return fail(str("the header is not a JSON object (got ", what, ")"));
        if (depth_ == 1 && key_ == kMetadataKey)
            return fail(str("__metadata__ must be an object of strings, got ", what));
        if (depth_ == 1)
            return fail(str("tensor ", quote(key_), ": entry must be an object, got ", what));
        if (in_metadata_)
            return fail(str("__metadata__: the value of ", quote(meta_key_),
                            " must be a string, got ", what));
        if (depth_ == 3)
            return fail(str(where(), " entries must be non-negative integers, got ", what));
        const char* want = field_ == kDType ? "a string" : "an array";
        return fail(str(where(), " must be ", want, ", got ", what));
    }
    bool fail(std::string message) {
        error = std::move(message);
        return false;
    }

    int depth_ = 0;
    bool in_metadata_ = false;
    Field field_ = kDType;
    std::string key_;       // current key of the root object
    std::string meta_key_;  // current key of __metadata__
    std::set<std::string> keys_;
};

// Element count and byte size of a shape, or an error message.
std::string sized(const RawEntry& raw, DType dtype, SafetensorsEntry* out) {
    const std::string who = str("tensor ", quote(raw.name), ": ");
    bool empty = false;
    for (uint64_t d : raw.shape) {
        if (d > uint64_t(INT64_MAX)) return str(who, "shape entry ", d, " is too large");
        out->shape.push_back(int64_t(d));
        empty = empty || d == 0;
    }
    int64_t nbytes = empty ? 0 : dtype_size(dtype);
    if (!empty)
        for (int64_t d : out->shape)
            if (__builtin_mul_overflow(nbytes, d, &nbytes))
                return str(who, "shape ", shape_str(out->shape), " of ",
                           safetensors_dtype_name(dtype),
                           " has too many elements (its byte size overflows)");
    const uint64_t begin = raw.offsets[0], end = raw.offsets[1];
    if (begin > end) return str(who, "data_offsets [", begin, ", ", end, "] end before they begin");
    if (end - begin != uint64_t(nbytes))
        return str(who, "data_offsets [", begin, ", ", end, "] span ", end - begin,
                   " bytes but shape ", shape_str(out->shape), " of ",
                   safetensors_dtype_name(dtype), " needs ", nbytes);
    out->begin = begin;
    out->end = end;
    return "";
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
    for (const DTypeName& d : kDTypeNames)
        if (d.dtype == t) return d.name;
    EMBER_FAIL("internal error: no safetensors name for dtype ", dtype_name(t));
}

std::string quote(const std::string& s) {
    std::string q = "'";
    q += printable(s, 200, true);
    q += "'";
    return q;
}

SafetensorsHeader parse_safetensors_header(const std::string& text, uint64_t buffer_size,
                                           const std::string& context) {
    // The format requires an object at byte 0 (no leading whitespace).
    EMBER_CHECK(!text.empty() && text[0] == '{', context,
                ": the header does not start with '{' (not a safetensors file?)");
    // JSON text never holds a raw NUL, and nlohmann's reader would take one
    // for the end of the input, silently ignoring whatever follows it.
    const size_t nul = text.find('\0');
    EMBER_CHECK(nul == std::string::npos, context, ": the header holds a NUL byte at offset ",
                nul, " (not valid JSON)");
    HeaderHandler h;
    bool ok = false;
    try {
        ok = nlohmann::json::sax_parse(text, &h);
    } catch (const nlohmann::json::exception& e) {  // not expected: errors go to parse_error
        EMBER_FAIL(context, ": the header is not valid JSON: ", e.what());
    }
    EMBER_CHECK(ok && h.error.empty(), context, ": ",
                h.error.empty() ? std::string("the header is not valid JSON") : h.error);

    SafetensorsHeader out;
    out.metadata = std::move(h.metadata);
    for (const RawEntry& raw : h.entries) {
        SafetensorsEntry e;
        e.name = raw.name;
        const DTypeName* d = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                                          [&](const DTypeName& n) { return raw.dtype == n.name; });
        EMBER_CHECK(d != std::end(kDTypeNames), context, ": tensor ", quote(raw.name),
                    ": unsupported dtype ", quote(raw.dtype),
                    " (ember reads F64, F32, F16, BF16, I64, I32, U8, BOOL)");
        e.dtype = d->dtype;
        const std::string problem = sized(raw, e.dtype, &e);
        EMBER_CHECK(problem.empty(), context, ": ", problem);
        out.entries.push_back(std::move(e));
    }

    // Sorted by begin (an empty span before a full one at the same offset),
    // the spans must follow each other from 0 to the end of the buffer.
    std::stable_sort(out.entries.begin(), out.entries.end(),
                     [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                         return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                     });
    uint64_t pos = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const SafetensorsEntry& e : out.entries) {
        const std::string span = str("tensor ", quote(e.name), " (data_offsets [", e.begin, ", ",
                                     e.end, "])");
        EMBER_CHECK(e.begin >= pos, context, ": ", span, " overlaps tensor ", quote(prev->name),
                    ", which ends at ", pos);
        EMBER_CHECK(e.begin == pos, context, ": a gap of ", e.begin - pos, " bytes before ", span,
                    "; the previous data ends at ", pos);
        EMBER_CHECK(e.end <= buffer_size, context, ": ", span, " extends past the end of the ",
                    buffer_size, "-byte data buffer (is the file truncated?)");
        pos = e.end;
        prev = &e;
    }
    EMBER_CHECK(pos == buffer_size, context, ": ", buffer_size - pos,
                " trailing bytes after the last tensor's data (the tensors cover ", pos, " of ",
                buffer_size, " data bytes)");
    return out;
}

}  // namespace ember::nn::detail
