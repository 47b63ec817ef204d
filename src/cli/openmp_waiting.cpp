// How idle OpenMP threads wait, chosen before OpenMP starts. libgomp lets an idle thread
// spin for about 300,000 iterations (milliseconds) before it sleeps: on a quiet machine
// that saves a wake-up between the many short parallel regions of a training step, but
// when another program holds a core, the spinning threads of both programs take turns
// burning it and throughput collapses. Measured (bench/RESULTS.md, "Shared cores"): two
// trainings at once keep 17-24 % of a quiet run each with libgomp's spin, 65-69 % with
// passive waiting, which cost a quiet run 7-30 % on a small model; a bounded spin
// (GOMP_SPINCOUNT=10000) helped neither. So libgomp's default stays, and
// GATEDLM_OPENMP_WAITING=passive chooses passive waiting for machines that are shared.
// libgomp reads its settings when it is loaded, before main, so the process then starts
// itself again once with OMP_WAIT_POLICY set.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cli/commands.h"

namespace gatedlm::cli {

void choose_openmp_waiting(char** argv) {
  const char* want = std::getenv("GATEDLM_OPENMP_WAITING");
  if (!want || std::string(want) != "passive") return;
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;  // the user's own choice wins
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OMP_WAIT_POLICY");  // without /proc (or exec refused) the run goes on as it is
}

}  // namespace gatedlm::cli
