#include "thirdparty/impl_module/module_loader.h"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include "reports/escape.h"

namespace qd::impl {
namespace {

// Limits on what a module may hand back, so that nothing it claims sizes an
// allocation here beyond them (impl_module.h, "Trust").
constexpr std::size_t kMaxName = 1 << 16;  // a tensor name
constexpr std::size_t kMaxRule = 64;
constexpr std::size_t kMaxMessage = 1 << 12;
constexpr std::size_t kMaxRank = 8;
constexpr std::size_t kMaxTensors = 1 << 20;

// SIZE bytes at SOURCE (module memory) into DEST, or false when any of it is
// not mapped readable: process_vm_readv on this very process reports EFAULT
// where a plain read would fault.
bool CopyIn(const void* source, void* dest, std::size_t size) {
  auto* out = static_cast<char*>(dest);
  auto* in = static_cast<const char*>(source);
  while (size > 0) {
    iovec local{out, size};
    iovec remote{const_cast<char*>(in), size};
    const ssize_t got = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
    if (got <= 0) return false;
    out += got;
    in += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

template <typename T>
bool CopyArray(const T* source, std::size_t count, std::vector<T>* out) {
  out->resize(count);
  return count == 0 || (source != nullptr && CopyIn(source, out->data(), count * sizeof(T)));
}

// A NUL-terminated string at SOURCE of at most LIMIT bytes; read a chunk at
// a time, since the bytes past its end may be unmapped.
enum class TextCheck { kOk, kNull, kUnreadable, kTooLong, kNotUtf8 };
TextCheck CopyText(const char* source, std::size_t limit, std::string* out) {
  out->clear();
  if (source == nullptr) return TextCheck::kNull;
  char chunk[256];
  for (;;) {
    // Up to the end of the current 256-byte-aligned piece: never a page
    // beyond what the string needs.
    const auto address = reinterpret_cast<std::uintptr_t>(source) + out->size();
    const std::size_t piece = sizeof chunk - address % sizeof chunk;
    if (!CopyIn(reinterpret_cast<const char*>(address), chunk, piece)) return TextCheck::kUnreadable;
    const char* end = static_cast<const char*>(std::memchr(chunk, '\0', piece));
    out->append(chunk, end != nullptr ? static_cast<std::size_t>(end - chunk) : piece);
    if (out->size() > limit) return TextCheck::kTooLong;
    if (end != nullptr) break;
  }
  return qd::reports::ValidUtf8(*out) == *out ? TextCheck::kOk : TextCheck::kNotUtf8;
}

std::string_view TextProblem(TextCheck check) {
  switch (check) {
    case TextCheck::kOk: return "";
    case TextCheck::kNull: return "is NULL";
    case TextCheck::kUnreadable: return "points at unmapped memory";
    case TextCheck::kTooLong: return "has no terminator within its limit";
    case TextCheck::kNotUtf8: return "is not UTF-8";
  }
  return "?";
}

ModuleAnswer Garbage(std::string why) {
  ModuleAnswer answer;
  answer.end = ModuleEnd::kGarbage;
  answer.problem = std::move(why);
  return answer;
}

// The module's result, checked and copied (impl_module.h, the decode contract).
ModuleAnswer ReadResult(const qd_impl_result& result, const std::string& file_name, std::uint64_t max_values) {
  std::string message;
  if (result.message != nullptr) {
    const TextCheck check = CopyText(result.message, kMaxMessage, &message);
    if (check != TextCheck::kOk) return Garbage("its message " + std::string(TextProblem(check)));
  }
  ModuleAnswer answer;
  answer.end = ModuleEnd::kAnswered;
  answer.problem = message;
  switch (result.status) {
    case QD_IMPL_FAILED:
      answer.end = ModuleEnd::kFailed;
      return answer;
    case QD_IMPL_REFUSED: {
      qd::Finding refusal;
      refusal.file = file_name;
      refusal.message = message;
      if (result.rule != nullptr) {
        const TextCheck check = CopyText(result.rule, kMaxRule, &refusal.rule);
        if (check != TextCheck::kOk) return Garbage("its rule ID " + std::string(TextProblem(check)));
        if (!LooksLikeRuleId(refusal.rule)) return Garbage("its rule ID '" + refusal.rule + "' is not PREFIX-NNN");
      }
      answer.outcome.refused = true;
      answer.outcome.findings.push_back(std::move(refusal));
      return answer;
    }
    case QD_IMPL_ACCEPTED: break;
    default: return Garbage("status " + std::to_string(result.status) + " is none of accepted, refused, failed");
  }
  if (result.tensor_count > kMaxTensors) {
    return Garbage("it claims " + std::to_string(result.tensor_count) + " tensors");
  }
  std::vector<qd_impl_tensor> tensors;
  if (!CopyArray(result.tensors, result.tensor_count, &tensors)) {
    return Garbage("its tensor table is NULL or points at unmapped memory");
  }
  std::uint64_t values_left = max_values;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const qd_impl_tensor& t = tensors[i];
    const std::string which = "tensor " + std::to_string(i);
    qd::DecodedTensor decoded;
    if (t.name_size == 0 || t.name_size > kMaxName) {
      return Garbage(which + ": its name_size " + std::to_string(t.name_size) + " is 0 or over " +
                     std::to_string(kMaxName));
    }
    decoded.name.resize(t.name_size);
    if (t.name == nullptr || !CopyIn(t.name, decoded.name.data(), t.name_size)) {
      return Garbage(which + ": its name is NULL or points at unmapped memory");
    }
    if (qd::reports::ValidUtf8(decoded.name) != decoded.name) return Garbage(which + ": its name is not UTF-8");
    if (t.rank > kMaxRank) return Garbage(which + " (" + decoded.name + "): rank " + std::to_string(t.rank));
    if (!CopyArray(t.shape, t.rank, &decoded.shape)) {
      return Garbage(which + " (" + decoded.name + "): its shape is NULL or points at unmapped memory");
    }
    // The shape's product, stopped at the bound so that it cannot wrap; a
    // dimension 0 makes it 0 whatever the others are ([2^40, 0] is empty).
    const bool empty = std::find(decoded.shape.begin(), decoded.shape.end(), 0u) != decoded.shape.end();
    std::uint64_t count = empty ? 0 : 1;
    for (const std::uint64_t d : decoded.shape) {
      if (!empty && count > values_left / d) {
        return Garbage(which + " (" + decoded.name + "): its shape holds more values than any decode of the input");
      }
      count *= d;
    }
    if (t.value_count != count) {
      return Garbage(which + " (" + decoded.name + "): value_count " + std::to_string(t.value_count) +
                     " is not its shape's product " + std::to_string(count));
    }
    values_left -= count;
    if (!CopyArray(t.values, t.value_count, &decoded.values)) {
      return Garbage(which + " (" + decoded.name + "): its values are NULL or point at unmapped memory");
    }
    answer.outcome.tensors.push_back(std::move(decoded));
  }
  return answer;
}

}  // namespace

bool LooksLikeRuleId(std::string_view word) {
  const std::size_t dash = word.find('-');
  if (dash == 0 || dash == std::string_view::npos || word.size() != dash + 4) return false;
  const auto upper_or_digit = [](char c) {
    return std::isupper(static_cast<unsigned char>(c)) != 0 || std::isdigit(static_cast<unsigned char>(c)) != 0;
  };
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  return std::all_of(word.begin(), word.begin() + dash, upper_or_digit) &&
         std::all_of(word.begin() + dash + 1, word.end(), digit);
}

std::optional<Module> Module::Open(const std::string& path, std::string* error) {
  // RTLD_LOCAL: the module's symbols cannot stand in for quantdiff's own. A
  // path without a slash would be searched for by the loader: anchor it.
  const std::string where = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = ::dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    *error = "cannot load " + path + ": " + (why != nullptr ? why : "dlopen failed");
    return std::nullopt;
  }
  Module module;
  module.handle_ = handle;
  module.path_ = path;
  auto entry = reinterpret_cast<qd_impl_module_get_fn>(::dlsym(handle, QD_IMPL_MODULE_ENTRY));
  if (entry == nullptr) return *error = path + " exports no " QD_IMPL_MODULE_ENTRY, std::nullopt;
  const qd_impl_module* table = entry();
  // The version and size first, read alone: a module of another ABI may
  // have a shorter table.
  std::uint32_t head[2] = {0, 0};
  if (table == nullptr || !CopyIn(table, head, sizeof head)) {
    return *error = path + ": " QD_IMPL_MODULE_ENTRY "() returned no readable table", std::nullopt;
  }
  if (head[0] != QD_IMPL_MODULE_ABI_VERSION) {
    return *error = path + " is built for module ABI version " + std::to_string(head[0]) + ", this quantdiff reads " +
                    std::to_string(QD_IMPL_MODULE_ABI_VERSION),
           std::nullopt;
  }
  if (head[1] < sizeof(qd_impl_module) || !CopyIn(table, &module.table_, sizeof module.table_)) {
    return *error = path + ": its table's struct_size " + std::to_string(head[1]) + " is smaller than " +
                    std::to_string(sizeof(qd_impl_module)),
           std::nullopt;
  }
  if (module.table_.decode == nullptr || module.table_.free_result == nullptr) {
    return *error = path + ": decode or free_result is NULL", std::nullopt;
  }
  const TextCheck name = CopyText(module.table_.name, kMaxMessage, &module.name_);
  const TextCheck version = CopyText(module.table_.version, kMaxMessage, &module.version_);
  if (name != TextCheck::kOk || module.name_.empty()) {
    return *error = path + ": its name " + std::string(name == TextCheck::kOk ? "is empty" : TextProblem(name)),
           std::nullopt;
  }
  if (version != TextCheck::kOk) return *error = path + ": its version " + std::string(TextProblem(version)), std::nullopt;
  if ((module.table_.flags & QD_IMPL_THREAD_SAFE) == 0) module.serial_ = std::make_unique<std::mutex>();
  return module;
}

Module::Module(Module&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      name_(std::move(other.name_)),
      version_(std::move(other.version_)),
      table_(other.table_),
      serial_(std::move(other.serial_)) {}

Module::~Module() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

ModuleAnswer Module::Decode(qd::ByteView file, const std::string& file_name,
                            const std::vector<qd::SideFile>& side_files, std::uint64_t max_values) const {
  std::vector<qd_impl_side_file> sides;
  for (const qd::SideFile& side : side_files) sides.push_back({side.name.c_str(), side.bytes.data(), side.bytes.size()});
  std::unique_lock<std::mutex> serial;
  if (serial_) serial = std::unique_lock<std::mutex>(*serial_);
  qd_impl_result result{};
  // A non-null pointer even for an empty file: modules may test it.
  static const std::uint8_t kNoBytes = 0;
  table_.decode(file.size > 0 ? file.data : &kNoBytes, file.size, file_name.c_str(), sides.data(), sides.size(),
                &result);
  ModuleAnswer answer = ReadResult(result, file_name, max_values);
  table_.free_result(&result);
  return answer;
}

bool OpenModules(std::string_view list, std::vector<Module>* out, std::string* error) {
  while (!list.empty()) {
    const std::size_t colon = list.find(':');
    const std::string path(list.substr(0, colon));
    list = colon == std::string_view::npos ? std::string_view{} : list.substr(colon + 1);
    if (path.empty()) continue;
    std::optional<Module> module = Module::Open(path, error);
    if (!module) return false;
    out->push_back(std::move(*module));
  }
  return true;
}

}  // namespace qd::impl
