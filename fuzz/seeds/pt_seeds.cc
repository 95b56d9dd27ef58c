// pt_seeds.cc: seeds of pt_file_diff.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fuzz/common/pt_file_input.h"
#include "fuzz/seeds/seed_writer.h"
#include "generators/generators.h"
#include "harness/registry.h"

namespace qd::fuzz::seeds {

// ---- pt_file_diff: tail-format inputs and whole files ---------------------------------

void PtFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& pt = *qd::harness::FindFormat("pt");
  auto emit = [&](const Bytes& input) {
    const Bytes file = qd::fuzz::PtFileFromInput(input.data(), input.size());
    w.Write("pt_file_diff", Verdict(pt.oracle_read({file.data(), file.size()}, "seed.pt", {})), input);
  };
  using qd::fuzz::PtOp;
  using qd::fuzz::PtOpWriter;
  auto tail = [](int protocol, bool copies, bool big, int items, std::uint32_t seed) {
    qd::fuzz::PtFileTail t;
    t.protocol = protocol;
    t.copies = copies;
    t.allow_big = big;
    t.items = items;
    t.seed = seed;
    return t;
  };
  // Valid files across the parameter space.
  emit(PtOpWriter().Finish(tail(2, false, false, 3, 1)));
  emit(PtOpWriter().Finish(tail(4, true, false, 6, 2)));
  emit(PtOpWriter().Finish(tail(0, true, true, 8, 3)));
  emit(PtOpWriter().Finish(tail(5, false, true, 2, 4)));
  emit(PtOpWriter().Finish(tail(2, true, true, 5, 5)));
  // One op list per part of the page.
  const std::uint8_t hostile = qd::fuzz::PtTokenIndex("cposix\nsystem\n");
  emit(PtOpWriter().InsertToken(hostile, 3).Finish(tail(2, false, false, 2, 10)));
  emit(PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("\x81"), 5).Finish(tail(4, false, false, 2, 11)));
  emit(PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("\x8a\x09"), 4).Finish(tail(2, false, false, 3, 12)));
  emit(PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("0"), 2).Finish(tail(2, false, false, 3, 13)));
  emit(PtOpWriter().Op(PtOp::kPickleDelete, 6).Finish(tail(2, false, false, 3, 14)));
  emit(PtOpWriter().Op(PtOp::kPickleOperand, 20, 0, 1, 0x40).Finish(tail(2, true, false, 4, 15)));
  emit(PtOpWriter().Op(PtOp::kPickleTruncate, 100).Finish(tail(4, false, false, 3, 16)));
  emit(PtOpWriter().Op(PtOp::kRecordRename, 1, qd::fuzz::PtRecordNameIndex("data/7")).Finish(tail(2, false, false, 3, 17)));
  emit(PtOpWriter().Op(PtOp::kRecordAdd, qd::fuzz::PtRecordNameIndex("extra"), 1, 2).Finish(tail(2, false, false, 2, 18)));
  emit(PtOpWriter().Op(PtOp::kRecordAdd, qd::fuzz::PtRecordNameIndex("byteorder"), 10, 1).Finish(tail(2, false, false, 2, 19)));
  emit(PtOpWriter().Op(PtOp::kRecordResize, 1, 0xFF).Finish(tail(2, false, false, 2, 20)));
  emit(PtOpWriter().Op(PtOp::kStyle, 0).Finish(tail(2, false, false, 3, 21)));
  emit(PtOpWriter().Op(PtOp::kStyle, 4 | 1 | 2, 6).Finish(tail(2, false, false, 3, 22)));
  emit(PtOpWriter().Op(PtOp::kLocalField, 1, 2, 0, 9).Finish(tail(2, false, false, 3, 23)));
  emit(PtOpWriter().Op(PtOp::kCentralField, 0, 4, 0, 8).Finish(tail(2, false, false, 3, 24)));
  emit(PtOpWriter().Op(PtOp::kCentralField, 1, 16, 1, 0xF0).Finish(tail(2, false, false, 3, 25)));
  emit(PtOpWriter().Op(PtOp::kEndField, 0, 5, 2).Finish(tail(2, false, false, 3, 26)));
  emit(PtOpWriter().Op(PtOp::kDescriptor, 0, 1, 4, 3).Finish(tail(2, false, false, 3, 27)));
  emit(PtOpWriter().Op(PtOp::kFileByte, 0x40, 0x02, 0, 0xA5).Op(PtOp::kFixCrc, 1).Finish(tail(2, false, false, 3, 28)));
  emit(PtOpWriter().Op(PtOp::kTruncate, 30).Finish(tail(2, false, false, 3, 29)));
  emit(PtOpWriter().Op(PtOp::kAppend, 5, 0, 0, 0x50).Finish(tail(2, false, false, 3, 30)));
  // bitsandbytes layers (docs/pt.md 6.4, 7) from the tail, valid in every
  // layout and spelling, then one layer op per check of docs/pt.md 7.4.
  auto bnb = [&](qd::fuzz::PtBnbKind kind, std::uint32_t seed, int nest = 0, int layout = 0) {
    qd::fuzz::PtFileTail t = tail(2, false, true, 2, seed);
    t.bnb = kind;
    t.nest = nest;
    t.layout = layout;
    return t;
  };
  using qd::fuzz::PtBnbKind;
  using qd::fuzz::PtBnbValue;
  const auto value = [](PtBnbValue v) { return static_cast<std::uint8_t>(v); };
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kListFlat, 40)));
  {
    qd::fuzz::PtFileTail t = bnb(PtBnbKind::kListNested, 41, 2, 1);
    t.list_tuple = true;
    t.shape_as = 1;
    t.offset_float = true;
    t.inner_tuples = true;
    t.storage = 1;
    emit(PtOpWriter().Finish(t));
  }
  {
    qd::fuzz::PtFileTail t = bnb(PtBnbKind::kListNested, 42, 1, 2);
    t.shape_as = 2;
    t.no_table = true;
    t.w_flat = true;
    emit(PtOpWriter().Finish(t));
  }
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kHf4bit, 43, 3, 3)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kGptqModel4bit, 44, 1)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kInt8Hf, 45)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kInt8GptqModel, 46, 2)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kMix, 47)));
  {  // list items: blocksize, quant_type, dtype token, length, nested2, offset, nibbles, absmax, W
    const auto flat = bnb(PtBnbKind::kListFlat, 50);
    const auto nested = bnb(PtBnbKind::kListNested, 51);
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(flat, 1, {3}), value(PtBnbValue::kInt), 100).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(flat, 1, {5}), value(PtBnbValue::kText),
                         qd::fuzz::PtBnbTextIndex("int4")).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(flat, 1, {2}), value(PtBnbValue::kToken),
                         qd::fuzz::PtBnbTokenIndex("float64")).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbDelete, qd::fuzz::PtBnbNode(flat, 1, {5})).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(nested, 1, {4, 1, 3}), value(PtBnbValue::kTrue)).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(nested, 1, {4, 0}), value(PtBnbValue::kFloat),
                         qd::fuzz::PtBnbFloatIndex(std::ldexp(1.0, 128) - std::ldexp(1.0, 103))).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(nested, 1, {4, 1, 2}), value(PtBnbValue::kInt), 100).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbTensorByte, qd::fuzz::PtBnbTensor(flat, 0), 0, 0, 0x0F).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbTensorFloat, qd::fuzz::PtBnbTensor(flat, 1, {0}), 0, 0,
                         qd::fuzz::PtBnbFloatIndex(std::numeric_limits<double>::infinity())).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbTensorFloat, qd::fuzz::PtBnbTensor(nested, 1, {4, 1, 1}), 7, 0,
                         qd::fuzz::PtBnbFloatIndex(std::numeric_limits<double>::quiet_NaN())).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(flat, 0), 0).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(nested, 1, {0}), 2, 1).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(flat, 1, {0}), 3, 2).Finish(flat));
    // An int8 scale for the list's W: two states (BNB-105).
    emit(PtOpWriter().Op(PtOp::kBnbRename, 0, qd::fuzz::PtBnbNameIndex("M.SCB"), 1).Finish(flat));
  }
  {  // tensor layers: the JSON state text, an int8 scale, an int8 weight's dtype
    const auto hf = bnb(PtBnbKind::kHf4bit, 52, 2);
    std::uint8_t state = 0;  // the JSON state tensor is the layer's last
    for (std::size_t e = 0; qd::fuzz::PtBnbTensor(hf, e) != 255; ++e) state = qd::fuzz::PtBnbTensor(hf, e);
    emit(PtOpWriter().Op(PtOp::kBnbTensorByte, state, 1, 0, '[').Finish(hf));
    const auto int8 = bnb(PtBnbKind::kInt8Hf, 53, 1, 1);
    emit(PtOpWriter().Op(PtOp::kBnbTensorFloat, qd::fuzz::PtBnbTensor(int8, 1), 0, 0,
                         qd::fuzz::PtBnbFloatIndex(-std::numeric_limits<double>::infinity())).Finish(int8));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(int8, 0), 4).Finish(int8));
  }
  // Whole files, through the raw flag: random state dicts without layers (the
  // files the registry generator wrote before it added layers, so these seeds
  // keep their bytes), every violation of the registry generator, then its
  // valid files, with layers in one of three.
  std::uint64_t s = 900;
  for (int k = 0; k < 3; ++k) {
    qd::harness::Rng rng(s++);
    emit(qd::fuzz::PtRawInput(qd::gen::PtWriteDraft(qd::gen::PtRandomDraft(rng))));
  }
  for (const std::string& rule : pt.violable_rules()) {
    qd::harness::Rng rng(s++);
    emit(qd::fuzz::PtRawInput(pt.generate_violation(rule, rng).bytes));
  }
  for (int k = 0; k < 3; ++k) {
    qd::harness::Rng rng(s++);
    emit(qd::fuzz::PtRawInput(pt.generate_valid(rng).bytes));
  }
}


}  // namespace qd::fuzz::seeds
