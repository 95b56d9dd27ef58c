// gguf.h: a writer of native .gguf files for the generators, the fuzz input
// and the tests (docs/gguf.md section 2). It writes what it is given, so a
// caller can write broken files: any key, value type and value bytes, any
// dimensions, type id and (explicit) offset.
//
//   qd::gen::GgufSpec spec;
//   spec.kvs.push_back(qd::gen::GgufString("general.architecture", "llama"));
//   spec.tensors.push_back({"w", {32, 2}, 2, bytes, std::nullopt});
//   qd::gen::GgufWritten file = qd::gen::WriteGguf(spec);
#ifndef QUANTDIFF_GENERATORS_GGUF_H_
#define QUANTDIFF_GENERATORS_GGUF_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "generators/generated.h"

namespace qd::gen {

struct GgufKv {
  std::string key;
  std::uint32_t type = 0;
  std::vector<std::uint8_t> value;  // the value's bytes, after the type field
};

struct GgufTensorSpec {
  std::string name;
  std::vector<std::uint64_t> ne;  // ne[0] first
  std::uint32_t type = 0;         // ggml type id
  std::vector<std::uint8_t> data;
  std::optional<std::uint64_t> offset;  // packed after the previous one when unset
};

struct GgufSpec {
  std::uint32_t version = 3;
  std::vector<GgufKv> kvs;
  std::vector<GgufTensorSpec> tensors;
  std::uint64_t alignment = 32;  // used for the layout only; write general.alignment yourself
  // Counts written in the header in place of the real ones, when set.
  std::optional<std::uint64_t> tensor_count;
  std::optional<std::uint64_t> kv_count;
};

struct GgufWritten {
  std::vector<std::uint8_t> bytes;
  std::uint64_t infos_end = 0;   // where the tensor infos end
  std::uint64_t data_start = 0;  // align_up(infos_end, alignment)
  std::vector<std::uint64_t> offsets;  // per tensor, as written
};

// Tensors are written at their offsets (packed when unset); the data
// section is padded to the alignment after its last byte, as ggml pads it.
// A tensor whose offset lies more than 16 MiB past the data start is listed
// but its bytes are not written.
GgufWritten WriteGguf(const GgufSpec& spec);

GgufKv GgufString(const std::string& key, const std::string& value);
GgufKv GgufU32(const std::string& key, std::uint32_t value);

// A valid file's parts, drawn from RNG (what GgufValid writes).
GgufSpec RandomGgufSpec(Rng& rng, bool allow_nested_arrays);

// Bytes of a tensor of ggml type TYPE holding COUNT values (a whole number
// of blocks): encoded from random weights where quantdiff has an encoder,
// random bytes with tame scales otherwise.
std::vector<std::uint8_t> GgufTensorBytes(std::uint32_t type, std::uint64_t count, Rng& rng);

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_GGUF_H_
