#include "analysis/expert_load.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gatedlm::analysis {

using nlohmann::json;

ExpertLoadProbe::ExpertLoadProbe(const model::ModelConfig& c) : c_(c) {
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (c.moe.is_moe_layer(l)) layers_.push_back(l);
  counts_.assign(layers_.size() * static_cast<size_t>(c.moe.n_experts), 0.0);
}

void ExpertLoadProbe::observe(const model::Model<float>& m) {
  const std::vector<int64_t> counts = m.expert_counts();
  for (size_t i = 0; i < counts.size() && i < counts_.size(); ++i) counts_[i] += static_cast<double>(counts[i]);
}

json ExpertLoadProbe::result() const {
  if (!c_.has_moe()) return nullptr;
  const int64_t E = c_.moe.n_experts;
  json layers = json::array();
  double max_over_mean_sum = 0, entropy_sum = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const double* c = counts_.data() + i * E;
    double total = 0;
    for (int64_t e = 0; e < E; ++e) total += c[e];
    std::vector<double> share(E, 0.0);
    double entropy = 0, largest = 0;
    int64_t empty = 0;
    for (int64_t e = 0; e < E; ++e) {
      share[e] = total > 0 ? c[e] / total : 0.0;
      if (share[e] > 0) entropy -= share[e] * std::log(share[e]);
      largest = std::max(largest, share[e]);
      empty += c[e] == 0;
    }
    const double max_over_mean = largest * static_cast<double>(E);  // the mean share is 1/E
    const double max_entropy = std::log(static_cast<double>(E));
    layers.push_back({{"layer", layers_[i]},
                      {"share", share},
                      {"max_over_mean", max_over_mean},
                      {"entropy", entropy},
                      {"entropy_ratio", max_entropy > 0 ? entropy / max_entropy : 1.0},
                      {"empty_experts", empty},
                      {"assignments", total}});
    max_over_mean_sum += max_over_mean;
    entropy_sum += max_entropy > 0 ? entropy / max_entropy : 1.0;
  }
  const double n = static_cast<double>(layers_.size());
  return json{{"n_experts", E},
              {"top_k", c_.moe.top_k},
              {"per_layer", layers},
              {"max_over_mean", max_over_mean_sum / n},
              {"entropy_ratio", entropy_sum / n}};
}

void expert_load_table(std::ostream& h, const std::vector<std::pair<std::string, json>>& runs) {
  bool any = false;
  for (const auto& [label, a] : runs) any = any || (a.is_object() && a.contains("experts") && a["experts"].is_object());
  if (!any) return;
  h << "<h2>Expert load</h2>\n<p>Mixture-of-experts layers: the share of token&rarr;expert assignments per expert "
       "over the analysed sequences. Max/mean 1 and entropy ratio 1 are a perfect balance; empty: experts no "
       "token reached.</p>\n<table>\n<tr><th class=\"l\">Method</th><th>Layer</th><th>Experts (top-k)</th>"
       "<th>Max/mean</th><th>Entropy (nats)</th><th>Entropy ratio</th><th>Empty</th><th class=\"l\">Shares</th>"
       "</tr>\n";
  char buf[64];
  auto f = [&](const json& v, const char* format) {
    if (!v.is_number()) return std::string("—");
    std::snprintf(buf, sizeof buf, format, v.get<double>());
    return std::string(buf);
  };
  for (const auto& [label, a] : runs) {
    if (!a.is_object() || !a.contains("experts") || !a["experts"].is_object()) continue;
    const json& x = a["experts"];
    for (const json& l : x.value("per_layer", json::array())) {
      if (!l.is_object()) continue;
      std::string shares;
      for (const json& s : l.value("share", json::array())) shares += (shares.empty() ? "" : " ") + f(s, "%.3f");
      h << "<tr><td class=\"l\">" << label << "</td><td>" << f(l.value("layer", json()), "%.0f") << "</td><td>"
        << f(x.value("n_experts", json()), "%.0f") << " (" << f(x.value("top_k", json()), "%.0f") << ")</td><td>"
        << f(l.value("max_over_mean", json()), "%.3f") << "</td><td>" << f(l.value("entropy", json()), "%.3f")
        << "</td><td>" << f(l.value("entropy_ratio", json()), "%.3f") << "</td><td>"
        << f(l.value("empty_experts", json()), "%.0f") << "</td><td class=\"l\">" << shares << "</td></tr>\n";
    }
  }
  h << "</table>\n";
}

}  // namespace gatedlm::analysis
