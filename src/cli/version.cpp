// gatedlm --version: the version and what this build runs with on this machine.
#include <dnnl.hpp>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "core/thread_governor.h"
#include "dist/communicator.h"
#include "kernels/bf16_support.h"
#include "kernels/kernel_set.h"
#include "kernels/quant_matmul.h"

namespace gatedlm::cli {

namespace {

// Which instruction the quantised weights' int8 dot products run on here, and why.
std::string int8_products_description() {
  using kernels::ElementType;
  using kernels::QuantPath;
  const bool allowed = kernels::vnni_allowed();  // refuses a GATEDLM_VNNI other than 0 or 1 first
  if (kernels::quant_path_runnable(QuantPath::int8_vnni, ElementType::q8_0))
    return "vpdpbusd (VNNI)";
  if (!kernels::quant_path_runnable(QuantPath::int8_madd, ElementType::q8_0))
    return "none (this kernel set has no int8 kernels: the weights are expanded to fp32)";
  return std::string("vpmaddubsw (") +
         (allowed ? "no VNNI for this kernel set on this CPU" : "GATEDLM_VNNI=0") + ")";
}

// Whether the K-quant tile kernels add the far request at batch 1 here, and why.
std::string far_requests_description() {
  const bool far = kernels::far_tile_requests();  // refuses a GATEDLM_FAR_REQUEST other than 0 or 1 first
  switch (kernels::far_tile_requests_reason()) {
    case kernels::FarTileRequests::environment: return far ? "on (GATEDLM_FAR_REQUEST=1)" : "off (GATEDLM_FAR_REQUEST=0)";
    case kernels::FarTileRequests::intel: return "on (an Intel CPU)";
    case kernels::FarTileRequests::not_intel: return "off (not an Intel CPU)";
  }
  return far ? "on" : "off";
}

}  // namespace

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
  text += "int8 products: " + int8_products_description() + "\n";
  text += "far tile requests: " + far_requests_description() + "\n";
  text += bf16.native ? "bf16 products: native (--precision bf16 runs on the bf16 units)"
                      : "bf16 products: emulated (" + bf16.reason +
                            "; --precision bf16 keeps its numerics but is slower than fp32)";
  text += "\nMPI: " + dist::mpi_build_info();
  return text;
}

}  // namespace gatedlm::cli
