// gatedlm --version names what this binary runs with here: the kernel set, oneDNN's
// instruction set, the bf16 path and how idle OpenMP threads wait (libgomp's spin by
// default, passive with GATEDLM_OPENMP_WAITING=passive, the user's own settings when given).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "kernels/kernel_set.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

// Runs `gatedlm --version` with one variable set (or none) and the OpenMP waiting
// variables cleared; the test process's environment is restored afterwards.
CliResult version_with(const char* name, const char* value) {
  const std::vector<std::string> vars{"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "GATEDLM_OPENMP_WAITING", "GATEDLM_KERNELS",
                                    "GATEDLM_VNNI", "GATEDLM_FAR_REQUEST"};
  std::vector<std::optional<std::string>> saved;
  for (const auto& var : vars) {
    const char* v = std::getenv(var.c_str());
    saved.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    if (var != "GATEDLM_KERNELS") ::unsetenv(var.c_str());
  }
  if (name) ::setenv(name, value, 1);
  const CliResult r = run_gatedlm({"--version"});
  for (size_t i = 0; i < vars.size(); ++i)
    saved[i] ? ::setenv(vars[i].c_str(), saved[i]->c_str(), 1) : ::unsetenv(vars[i].c_str());
  return r;
}

TEST(VersionCliTest, SaysTheKernelSetAndTheOneDnnInstructionSet) {
  const CliResult r = version_with(nullptr, nullptr);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "kernels: " + std::string(kernels::kernel_set_name(kernels::active_kernel_set()))))
      << r.output;
  EXPECT_TRUE(contains(r.output, "matrix products: oneDNN")) << r.output;
  EXPECT_TRUE(contains(r.output, "bf16 products: ")) << r.output;
}

TEST(VersionCliTest, OpenMpWaitingIsLibgompsUnlessPassiveIsAskedFor) {
  EXPECT_TRUE(contains(version_with(nullptr, nullptr).output, "openmp waiting: libgomp's default spin"));
  // GATEDLM_OPENMP_WAITING=passive takes effect through the re-executed process.
  EXPECT_TRUE(contains(version_with("GATEDLM_OPENMP_WAITING", "passive").output, "openmp waiting: OMP_WAIT_POLICY=passive"));
  EXPECT_TRUE(contains(version_with("OMP_WAIT_POLICY", "active").output, "openmp waiting: OMP_WAIT_POLICY=active"));
  EXPECT_TRUE(contains(version_with("GOMP_SPINCOUNT", "123").output, "openmp waiting: GOMP_SPINCOUNT=123"));
}

TEST(VersionCliTest, AnUnrunnableKernelSetIsRefusedByName) {
  const CliResult r = version_with("GATEDLM_KERNELS", "sse9");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "GATEDLM_KERNELS=sse9")) << r.output;
}

// GATEDLM_VNNI=0 keeps the int8 products on vpmaddubsw where the CPU has VNNI (an AVX2-only
// CPU measured on a newer one): --version says which instruction runs and why.
TEST(VersionCliTest, VnniCanBeSwitchedOffAndABadValueIsRefused) {
  const CliResult on = version_with(nullptr, nullptr);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_TRUE(contains(on.output, "int8 products: ")) << on.output;
  const CliResult off = version_with("GATEDLM_VNNI", "0");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  if (kernels::active_kernel_set() != kernels::KernelSet::generic) {
    EXPECT_TRUE(contains(off.output, "int8 products: vpmaddubsw (GATEDLM_VNNI=0)")) << off.output;
  }
  EXPECT_FALSE(contains(off.output, "vpdpbusd")) << off.output;
  const CliResult bad = version_with("GATEDLM_VNNI", "yes");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_TRUE(contains(bad.output, "GATEDLM_VNNI=yes")) << bad.output;
}

// The K-quant tiles' far request at batch 1 is on for Intel CPUs and off elsewhere;
// GATEDLM_FAR_REQUEST=0|1 decides by hand, and --version says which and why.
TEST(VersionCliTest, TheFarTileRequestFollowsTheCpuOrTheEnvironment) {
  const CliResult plain = version_with(nullptr, nullptr);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool intel = __builtin_cpu_is("intel");
#else
  const bool intel = false;
#endif
  EXPECT_TRUE(contains(plain.output, intel ? "far tile requests: on (an Intel CPU)"
                                           : "far tile requests: off (not an Intel CPU)"))
      << plain.output;
  EXPECT_TRUE(contains(version_with("GATEDLM_FAR_REQUEST", "1").output, "far tile requests: on (GATEDLM_FAR_REQUEST=1)"));
  EXPECT_TRUE(contains(version_with("GATEDLM_FAR_REQUEST", "0").output, "far tile requests: off (GATEDLM_FAR_REQUEST=0)"));
  const CliResult bad = version_with("GATEDLM_FAR_REQUEST", "on");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_TRUE(contains(bad.output, "GATEDLM_FAR_REQUEST=on: expected 0 (near requests only) or 1")) << bad.output;
}

}  // namespace
}  // namespace gatedlm::testing
