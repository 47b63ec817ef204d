#pragma once
// Expert load of a mixture-of-experts model (model/moe.h): per MoE layer, the share of
// the token->expert assignments each expert received over the analysed sequences, the
// largest share over the mean (1 = perfectly balanced, E/k... = one expert takes all),
// the entropy of the shares (nats, and over its maximum ln E) and the experts no token
// reached. JSON key "experts" of the analysis (null for a dense model; docs/analysis.md).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"

namespace gatedlm::analysis {

class ExpertLoadProbe {
 public:
  explicit ExpertLoadProbe(const model::ModelConfig& c);
  void observe(const model::Model<float>& m);  // after a forward
  nlohmann::json result() const;

 private:
  model::ModelConfig c_;
  std::vector<int64_t> layers_;  // the MoE layers
  std::vector<double> counts_;   // [layers, E]
};

// The "Expert load" table of the report for (escaped label, analysis JSON) pairs; writes
// nothing when no analysis has an "experts" object.
void expert_load_table(std::ostream& html, const std::vector<std::pair<std::string, nlohmann::json>>& runs);

}  // namespace gatedlm::analysis
