#include "reports/escape.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace qd::reports {
namespace {

// Length of the well-formed UTF-8 sequence at text[i] (RFC 3629 table 3-7)
// with its code point in *cp, or 0 when the bytes there are ill-formed.
std::size_t SequenceAt(std::string_view text, std::size_t i, std::uint32_t* cp) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
  const std::uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  std::size_t length;
  std::uint8_t low = 0x80;
  std::uint8_t high = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    length = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    length = 3;
    if (b0 == 0xe0) low = 0xa0;   // no overlong forms
    if (b0 == 0xed) high = 0x9f;  // no surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    length = 4;
    if (b0 == 0xf0) low = 0x90;
    if (b0 == 0xf4) high = 0x8f;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - i < length) return 0;
  std::uint32_t value = b0 & (length == 2 ? 0x1f : length == 3 ? 0x0f : 0x07);
  for (std::size_t k = 1; k < length; ++k) {
    const std::uint8_t b = byte(i + k);
    const std::uint8_t lo = k == 1 ? low : 0x80;
    const std::uint8_t hi = k == 1 ? high : 0xbf;
    if (b < lo || b > hi) return 0;
    value = (value << 6) | (b & 0x3f);
  }
  *cp = value;
  return length;
}

void AppendHexByte(std::string* out, std::uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", b);
  out->append(buf);
}

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp;
    const std::size_t n = SequenceAt(text, i, &cp);
    if (n == 0) {
      out.append(kReplacement);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string ForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp;
    const std::size_t n = SequenceAt(text, i, &cp);
    if (n == 0) {
      AppendHexByte(&out, static_cast<std::uint8_t>(text[i]));
      ++i;
      continue;
    }
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
      // C1 controls are two bytes in UTF-8; write each.
      for (std::size_t k = 0; k < n; ++k) AppendHexByte(&out, static_cast<std::uint8_t>(text[i + k]));
    } else if (cp == '\\') {
      out.append("\\\\");
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string ForXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp;
    const std::size_t n = SequenceAt(text, i, &cp);
    if (n == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    switch (cp) {
      case '&': out.append("&amp;"); break;
      case '<': out.append("&lt;"); break;
      case '>': out.append("&gt;"); break;
      case '"': out.append("&quot;"); break;
      case '\'': out.append("&apos;"); break;
      case '\t': out.append("&#9;"); break;   // kept through attribute
      case '\n': out.append("&#10;"); break;  // value normalisation
      case '\r': out.append("&#13;"); break;
      default:
        if (cp < 0x20 || cp == 0xfffe || cp == 0xffff) {
          out.append(kReplacement);
        } else {
          out.append(text.substr(i, n));
        }
    }
    i += n;
  }
  return out;
}

std::string PathToUri(std::string_view path) {
  std::string out;
  for (const char c : path) {
    const auto b = static_cast<std::uint8_t>(c);
    const bool keep = (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') ||
                      (b >= '0' && b <= '9') || b == '-' || b == '.' || b == '_' ||
                      b == '~' || b == '/';
    if (keep) {
      out.push_back(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", b);
      out.append(buf);
    }
  }
  return out;
}

std::string ForMarkdown(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const std::string valid = ValidUtf8(text);
  for (const char c : valid) {
    const auto b = static_cast<std::uint8_t>(c);
    if (b == '\n' || b == '\r' || b == '\t') {
      out.push_back(' ');
    } else if (b < 0x20 || b == 0x7f) {
      out.append(kReplacement);
    } else if ((b >= '!' && b <= '/') || (b >= ':' && b <= '@') || (b >= '[' && b <= '`') ||
               (b >= '{' && b <= '~')) {
      out.push_back('\\');
      out.push_back(c);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string MarkdownCodeBlock(std::string_view text, std::string_view info) {
  std::string body;
  std::size_t run = 0;
  std::size_t longest = 0;
  for (const char c : ValidUtf8(text)) {
    const auto b = static_cast<std::uint8_t>(c);
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if ((b < 0x20 && b != '\n') || b == 0x7f) {
      body.append(kReplacement);
    } else {
      body.push_back(c);
    }
  }
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  return fence + std::string(info) + "\n" + body + "\n" + fence + "\n";
}

}  // namespace qd::reports
