// tensor_fields.h: the dtype and shape of an oracle tensor record, kept small.
//
// A header of many tiny entries is held as one record per entry, so the
// record's size is what a hostile header multiplies (issue 9, section 3).
// As std::string and std::vector the two fields were 56 bytes plus a heap
// block for every shape; these are 8 and 16 bytes, with a heap block only
// for a shape of two or more dimensions. Both read like the types they
// replace, so the readers' code does not change.
//
//   DtypeName dtype("F16");            // one of the safetensors dtype names
//   Dims shape = std::vector<std::uint64_t>{4, 8};
//   std::string text = "is " + dtype;  // "is F16"
#ifndef QUANTDIFF_ORACLES_TENSOR_FIELDS_H_
#define QUANTDIFF_ORACLES_TENSOR_FIELDS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace qd::oracle {

// The safetensors dtypes (ST-007's list, the block dtypes Q4B32 and Q8B32
// included) with their element widths in bits (0 for the block dtypes,
// whose byte length is their format's to check), in one static table: a
// DtypeName points at an entry's name, and the reader's ST-008 and ST-010
// take the widths from here.
struct SafetensorsDtype {
  const char* name;
  int bits;
};
inline constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    {"BOOL", 8},     {"U8", 8},       {"I8", 8},     {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8},
    {"F4", 4},       {"F6_E2M3", 6},  {"F6_E3M2", 6}, {"I16", 16},   {"U16", 16},    {"F16", 16},
    {"BF16", 16},    {"I32", 32},     {"U32", 32},   {"F32", 32},    {"C64", 64},    {"F64", 64},
    {"I64", 64},     {"U64", 64},     {"Q4B32", 0},  {"Q8B32", 0}};

// A dtype name: one pointer to its text in kSafetensorsDtypes, "" when none was
// given. Text that is not a name in the table reads as "" too: a record
// holds only dtypes its reader has checked (ST-007, docs/pt.md 3.2).
class DtypeName {
 public:
  DtypeName() = default;
  DtypeName(std::string_view text) {  // NOLINT: implicit, as std::string was
    for (const SafetensorsDtype& dtype : kSafetensorsDtypes) {
      if (text == dtype.name) {
        text_ = dtype.name;
        return;
      }
    }
  }
  DtypeName(const char* text) : DtypeName(std::string_view(text)) {}  // NOLINT
  DtypeName(const std::string& text) : DtypeName(std::string_view(text)) {}  // NOLINT

  std::string_view view() const { return text_; }
  operator std::string_view() const { return text_; }  // NOLINT
  operator std::string() const { return text_; }       // NOLINT
  bool empty() const { return *text_ == '\0'; }

  friend bool operator==(DtypeName a, DtypeName b) { return a.text_ == b.text_; }
  friend bool operator==(DtypeName a, std::string_view b) { return a.view() == b; }
  friend bool operator==(DtypeName a, const char* b) { return a.view() == b; }
  friend bool operator==(DtypeName a, const std::string& b) { return a.view() == b; }
  friend std::string operator+(const std::string& a, DtypeName b) { return a + b.text_; }
  friend std::string operator+(std::string&& a, DtypeName b) { return std::move(a) + b.text_; }
  friend std::string operator+(const char* a, DtypeName b) { return std::string(a) + b.text_; }
  friend std::string operator+(DtypeName a, const std::string& b) { return a.text_ + b; }
  friend std::string operator+(DtypeName a, const char* b) { return std::string(a.text_) + b; }

 private:
  const char* text_ = "";
};

// A shape: up to 64 dimensions (ST-007's decision), read like the
// std::vector<std::uint64_t> it replaces and converting to one. Rank 0 and 1
// are held inline; a longer shape owns one heap array of exactly its items.
class Dims {
 public:
  Dims() = default;
  Dims(const std::vector<std::uint64_t>& items) { Assign(items.data(), items.size()); }  // NOLINT
  Dims(std::initializer_list<std::uint64_t> items) { Assign(items.begin(), items.size()); }
  Dims(const Dims& other) { Assign(other.begin(), other.size_); }
  Dims(Dims&& other) noexcept : size_(other.size_), store_(other.store_) { other.size_ = 0; }
  Dims& operator=(const Dims& other) {
    if (this != &other) {
      Dims copy(other);
      Swap(copy);
    }
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    Dims taken(std::move(other));
    Swap(taken);
    return *this;
  }
  ~Dims() { Free(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint64_t* begin() const { return size_ > 1 ? store_.many : &store_.one; }
  const std::uint64_t* end() const { return begin() + size_; }
  const std::uint64_t* data() const { return begin(); }
  std::uint64_t operator[](std::size_t i) const { return begin()[i]; }
  std::uint64_t front() const { return begin()[0]; }
  std::uint64_t back() const { return begin()[size_ - 1]; }
  operator std::vector<std::uint64_t>() const { return {begin(), end()}; }  // NOLINT

  friend bool operator==(const Dims& a, const Dims& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Dims& a, const std::vector<std::uint64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void Assign(const std::uint64_t* items, std::size_t count) {
    Free();
    if (count > 1) {
      store_.many = new std::uint64_t[count];
      std::copy(items, items + count, store_.many);
    } else if (count == 1) {
      store_.one = items[0];
    }
    size_ = count;
  }
  void Free() {
    if (size_ > 1) delete[] store_.many;
    size_ = 0;
  }
  void Swap(Dims& other) {
    std::swap(size_, other.size_);
    std::swap(store_, other.store_);
  }

  std::size_t size_ = 0;
  union Store {
    std::uint64_t one;
    std::uint64_t* many;
  } store_{0};
};

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_TENSOR_FIELDS_H_
