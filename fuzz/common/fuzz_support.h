// fuzz_support.h: small helpers shared by quantdiff's fuzz targets.
//
// A target reads its parameters with InputReader (which yields zeros once the
// input is used up, so every input is a complete program) and reports a
// divergence with Diverge(), which prints a one-line signature that groups
// duplicates, then the human detail, then aborts:
//
//   qd::fuzz::InputReader in(data, size);
//   const int bits = (in.U8() & 1) ? 8 : 4;
//   if (codec != oracle) qd::fuzz::Diverge("DIFF:rbq_matvec:bound:row", detail);
#ifndef QUANTDIFF_FUZZ_COMMON_FUZZ_SUPPORT_H_
#define QUANTDIFF_FUZZ_COMMON_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace qd::fuzz {

// Reads little-endian integers from a byte range; past the end every read
// returns zero, so a short input is a valid (zero-padded) input.
class InputReader {
 public:
  InputReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::size_t remaining() const { return pos_ < size_ ? size_ - pos_ : 0; }
  bool empty() const { return remaining() == 0; }

  std::uint8_t U8() { return pos_ < size_ ? data_[pos_++] : (++pos_, 0); }
  std::uint16_t U16() {
    const std::uint16_t lo = U8();
    return static_cast<std::uint16_t>(lo | (U8() << 8));
  }
  std::uint32_t U32() {
    const std::uint32_t lo = U16();
    return lo | (static_cast<std::uint32_t>(U16()) << 16);
  }
  std::uint64_t U64() {
    const std::uint64_t lo = U32();
    return lo | (static_cast<std::uint64_t>(U32()) << 32);
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Prints "signature\ndetail" to stderr and aborts, so libFuzzer (or the
// replay driver) records a crash whose first stderr line is the signature.
[[noreturn]] inline void Diverge(std::string_view signature, std::string_view detail) {
  std::fprintf(stderr, "%.*s\n%.*s\n", static_cast<int>(signature.size()), signature.data(),
               static_cast<int>(detail.size()), detail.data());
  std::fflush(stderr);
  std::abort();
}

// The index of S in LIST, for the seed writers that name a list entry by
// its text (the lists are the input formats' token tables). An S the list
// does not hold is a bug of that writer: WHO says so on stderr, then abort.
inline std::uint8_t EntryIndex(const std::vector<std::string_view>& list, std::string_view s, const char* who) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i] == s) return static_cast<std::uint8_t>(i);
  }
  std::fprintf(stderr, "%s: no such entry: %.*s\n", who, static_cast<int>(s.size()), s.data());
  std::abort();
}

// "0x3c00"-style hex of an integer, for details.
inline std::string Hex(std::uint64_t value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return buf;
}

// The safetensors length prefix (first 8 bytes, little endian) of a file
// being mutated; a file shorter than 8 bytes keeps what it has.
inline void WritePrefix(std::vector<std::uint8_t>* file, std::uint64_t n) {
  for (int i = 0; i < 8 && i < static_cast<int>(file->size()); ++i) {
    (*file)[i] = static_cast<std::uint8_t>(n >> (8 * i));
  }
}

inline std::uint64_t ReadPrefix(const std::vector<std::uint8_t>& file) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8 && i < static_cast<int>(file.size()); ++i) {
    n |= static_cast<std::uint64_t>(file[i]) << (8 * i);
  }
  return n;
}

// Lowercase hex of a byte range, two digits a byte, for details.
inline std::string BytesHex(const std::uint8_t* p, std::size_t n) {
  std::string s;
  char buf[4];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return s;
}

// Little-endian byte writer for the op lists structure-aware inputs carry
// (the mirror of InputReader); Finish appends the encoded tail.
class OpBytes {
 public:
  void U8(std::uint8_t v) { bytes_.push_back(v); }
  void U16(std::uint16_t v) {
    U8(static_cast<std::uint8_t>(v & 0xff));
    U8(static_cast<std::uint8_t>(v >> 8));
  }
  void U32(std::uint32_t v) {
    U16(static_cast<std::uint16_t>(v & 0xffff));
    U16(static_cast<std::uint16_t>(v >> 16));
  }
  // One five-byte op record: the op and its four operand bytes.
  void Record(std::uint8_t op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    for (std::uint8_t v : {op, a, b, c, d}) U8(v);
  }
  template <typename Tail>
  std::vector<std::uint8_t> Finish(const Tail& tail_bytes) const {
    std::vector<std::uint8_t> out = bytes_;
    out.insert(out.end(), tail_bytes.begin(), tail_bytes.end());
    return out;
  }

 private:
  std::vector<std::uint8_t> bytes_;
};

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_FUZZ_SUPPORT_H_
