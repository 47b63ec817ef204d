// gatedlm --version: the version and what this build runs with on this machine.
#include <dnnl.hpp>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "core/thread_governor.h"
#include "dist/communicator.h"
#include "kernels/bf16_support.h"
#include "kernels/kernel_set.h"

namespace gatedlm::cli {

std::string version_text() {
  const dnnl_version_t* v = dnnl::version();
  const kernels::Bf16Support& bf16 = kernels::bf16_support();
  std::string text = std::string("gatedlm ") + GATEDLM_VERSION + "\n";
  text += "kernels: " + kernels::kernel_set_summary() + "\n";
  text += "matrix products: oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
          std::to_string(v->patch) + ", instruction set " + bf16.isa + "\n";
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  text += std::string("openmp waiting: ") +
          (policy ? std::string("OMP_WAIT_POLICY=") + policy
                  : spin ? std::string("GOMP_SPINCOUNT=") + spin : std::string("libgomp's default spin")) +
          "\n";
  text += "openmp threads: " + openmp_threads_description() + "\n";
  text += bf16.native ? "bf16 products: native (--precision bf16 runs on the bf16 units)"
                      : "bf16 products: emulated (" + bf16.reason +
                            "; --precision bf16 keeps its numerics but is slower than fp32)";
  text += "\nMPI: " + dist::mpi_build_info();
  return text;
}

}  // namespace gatedlm::cli
