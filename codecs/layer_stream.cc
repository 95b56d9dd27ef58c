#include "codecs/layer_stream.h"

#include <utility>

#include "codecs/gptq.h"

namespace qd::codec {

void StreamLayersAndFloats(const TensorTable& t, const std::vector<LayerOutput>& layers,
                           const std::vector<bool>& consumed, TensorSink& sink,
                           const LayerRowDecoder& decode_rows) {
  constexpr std::size_t kPlain = static_cast<std::size_t>(-1);
  std::vector<std::size_t> layer_at(t.size(), kPlain);
  for (std::size_t l = 0; l < layers.size(); ++l) layer_at[layers[l].source] = l;
  std::vector<std::pair<std::size_t, std::size_t>> items;  // (tensor, layer or kPlain)
  std::vector<TensorInfo> plan;
  for (std::size_t i : StorageOrder(t)) {
    if (layer_at[i] != kPlain) {
      const LayerOutput& layer = layers[layer_at[i]];
      items.emplace_back(i, layer_at[i]);
      plan.push_back({layer.name, {layer.rows, layer.cols}});
    } else if (!(i < consumed.size() && consumed[i]) && IsFloatDtype(t[i].dtype)) {
      items.emplace_back(i, kPlain);
      plan.push_back({std::string(t[i].name), t[i].shape});
    }
  }
  if (!sink.Plan(plan)) return;
  for (std::size_t j = 0; j < items.size(); ++j) {
    const std::size_t l = items[j].second;
    const bool more = l == kPlain ? t.StreamFloat(items[j].first, j, sink)
                                  : StreamRows(sink, j, layers[l].rows, layers[l].cols,
                                               [&](std::uint64_t row, std::uint64_t count, float* out) {
                                                 decode_rows(l, row, count, out);
                                               });
    if (!more) break;
  }
}

}  // namespace qd::codec
