#pragma once
// The load-balancing loss of a mixture-of-experts model over the whole optimizer step
// (moe.lb_scope global, Qiu et al. 2025 "Demons in the Detail"): the loads f_i count the
// tokens of every micro-batch of the step on every rank, not one micro-batch's.
//
// The loss of micro-batch m is LB_m = E * sum_i f_i P_i(m), with f_i the step's loads
// (a constant) and P_i(m) its own mean router probabilities; the step's loss is the mean
// over micro-batches, as for the cross-entropy. Its gradient needs f before any
// micro-batch's backward, but gradient accumulation runs micro-batch 1's backward before
// micro-batch 2's forward. So the step runs in two passes when a rank has more than one
// micro-batch: first a counting pass (Model::route_counts: the blocks up to the last MoE
// layer, no head, no backward) over all its micro-batches, an allreduce of the counts over
// the ranks, then the usual forward/backward with those counts. With one micro-batch per
// rank there is no first pass: the counts of the forward are summed over the ranks between
// forward and backward. The counting pass costs about one forward of the MoE part of the
// model per micro-batch (measured in bench/RESULTS.md); lb_scope micro needs none.
//
// Exactness: the result equals one forward/backward over the concatenated step with
// LB = E * sum_i f_i P_i (tests/cli/test_mpi_training_cli.cpp), for any split into
// micro-batches and ranks.
#include <cstdint>
#include <functional>
#include <vector>

#include "dist/communicator.h"
#include "model/model.h"

namespace gatedlm::train {

class StepBalance {
 public:
  StepBalance(model::Model<float>& model, dist::Communicator& comm, int64_t micro_batches_here);
  // Whether the step's loads are global (an MoE model with lb_scope global).
  bool global() const { return global_; }
  // Before the step's micro-batches: the counting pass when this rank has several.
  // route(i) runs Model::route_counts on micro-batch i and returns its counts.
  void begin_step(const std::function<std::vector<int64_t>(int64_t)>& route);
  // After each micro-batch's forward, before its backward.
  void after_forward();
  // Seconds of the last step's counting pass and count allreduce.
  double last_seconds() const { return seconds_; }

 private:
  void set_summed(std::vector<double> counts);
  model::Model<float>& model_;
  dist::Communicator& comm_;
  int64_t micro_batches_;
  bool global_;
  double seconds_ = 0;
};

}  // namespace gatedlm::train
