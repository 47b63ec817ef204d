// How OpenMP threads wait, chosen before OpenMP starts. libgomp's default lets an idle
// thread spin for about 300,000 iterations (milliseconds) before it sleeps: on a quiet
// machine that saves a wake-up between the many short parallel regions of a training
// step, but when another program holds a core, the spinning threads of both programs
// take turns burning it, and throughput collapses (issue 14 measured two trainings at once
// at 27 % of a quiet run each). A bounded spin keeps the quick hand-over between
// back-to-back regions and yields the core soon after. libgomp reads its settings when it
// is loaded, before main, so the process starts itself again once with them in place.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"

namespace gatedlm::cli {

// Iterations an idle OpenMP thread spins before it sleeps, by default (libgomp: 300,000;
// OMP_WAIT_POLICY=passive: 0). bench/shared_cores.sh measures the choice.
constexpr const char* kDefaultSpinCount = "10000";

void choose_openmp_waiting(char** argv) {
  // The user's own choice wins; GATEDLM_OPENMP_WAITING=libgomp keeps libgomp's default.
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (const char* w = std::getenv("GATEDLM_OPENMP_WAITING"); w && std::string(w) == "libgomp") return;
  ::setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 1);
  ::execv("/proc/self/exe", argv);
  // Without /proc (or exec refused) the run goes on with libgomp's default.
  ::unsetenv("GOMP_SPINCOUNT");
}

}  // namespace gatedlm::cli
