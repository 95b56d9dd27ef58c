// strict_json.h: a small JSON document parsed as strictly as the safetensors
// header (codecs/safetensors.cc, rule ST-004 and its decisions).
//
// nlohmann/json alone is more lenient than JSON text: its lexer skips a UTF-8
// byte order mark, stops at a NUL byte as if the input ended there, and keeps
// the last of two equal keys. ParseStrictJson refuses all of these, nesting
// deeper than 64 containers, numbers that overflow binary64, and anything but
// JSON whitespace after the value. No exception leaves it.
//
//   std::optional<nlohmann::json> state = qd::codec::ParseStrictJson(bytes, size);
//   if (!state || !state->is_object()) Refuse();
#ifndef QUANTDIFF_CODECS_STRICT_JSON_H_
#define QUANTDIFF_CODECS_STRICT_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qd::codec {

// Containers (objects and arrays) may nest this deep; one more is refused.
inline constexpr std::size_t kStrictJsonMaxDepth = 64;

// The parsed value, or nullopt when the bytes are not strict JSON: a BOM, a
// NUL byte anywhere, invalid UTF-8, a duplicate key in any object, nesting
// deeper than kStrictJsonMaxDepth, a number overflowing binary64, comments,
// or trailing bytes other than space, tab, line feed and carriage return.
//
// With KEPT given, a member of the top-level object whose key is not in KEPT
// keeps its key with a null value: its value is checked as strictly (depth,
// duplicate keys, numbers) but not built, so memory follows what the caller
// reads, not the text (issue 9, 3: a quant_state with a 10 MB unknown member
// cost a 200 MB DOM).
std::optional<nlohmann::json> ParseStrictJson(const std::uint8_t* data, std::size_t size,
                                              const std::vector<std::string_view>* kept = nullptr);
std::optional<nlohmann::json> ParseStrictJson(std::string_view text,
                                              const std::vector<std::string_view>* kept = nullptr);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_STRICT_JSON_H_
