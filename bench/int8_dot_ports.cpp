// What bounds the int8 dots of the AVX2 kernel set on this core: the throughput of the
// instructions they are made of, alone, in pairs (do they share execution ports?), and in the
// inner patterns of the quantised products' kernels (quant_kint8.cpp, quant_int8_kernels.inc),
// per vpmaddubsw (32 multiply-adds). One thread, registers and L1 only: no memory traffic, no
// other work. The instruction streams are inline assembly, so that the compiler neither
// reorders nor spills them.
//
// Cycles come from a chain of dependent 64-bit adds (one cycle each on every x86-64 core),
// timed just before and after each pattern: the clock of a shared or boosting core moves, the
// ratio within a few milliseconds does not. Hardware counters are not needed (the VMs these
// benchmarks run on have none).
//
//   build-x/int8_dot_ports [--reps 9]   (rounds over every pattern; each pattern's best is printed)
// Prints a markdown table; bench/RESULTS.md ("Zen 3's multiply ports") has the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#if defined(__x86_64__)

namespace {

alignas(64) int8_t g_activations[8 * 256];  // 8 rows of 256, in L1

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr long kIterations = 2000000;

// Seconds per cycle: 64 dependent adds an iteration.
double seconds_per_cycle() {
  long x = 0;
  const double start = now_seconds();
  for (long i = 0; i < kIterations; ++i) {
#define ADD4 "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
#define ADD16 ADD4 ADD4 ADD4 ADD4
    __asm__ volatile(ADD16 ADD16 ADD16 ADD16 : "+r"(x));
#undef ADD16
#undef ADD4
  }
  return (now_seconds() - start) / (64.0 * kIterations);
}

// The registers every pattern may write: accumulators ymm1-ymm8, temporaries ymm9-ymm13,
// operands ymm0, ymm14, ymm15.
#define CLOBBERS                                                                                                     \
  "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15"
#define EACH8(P) P(1, 9, 0) P(2, 10, 256) P(3, 11, 512) P(4, 12, 768) P(5, 9, 1024) P(6, 10, 1280) P(7, 11, 1536) P(8, 12, 1792)

// Single instructions, 8 independent chains.
#define MADDUBS(a, t, o) "vpmaddubsw %%ymm0, %%ymm14, %%ymm" #a "\n\t"
#define MADDWD(a, t, o) "vpmaddwd %%ymm0, %%ymm14, %%ymm" #a "\n\t"
#define ADDW(a, t, o) "vpaddw %%ymm0, %%ymm" #a ", %%ymm" #a "\n\t"
#define BROADCAST(a, t, o) "vpbroadcastd " #o "(%1), %%ymm" #a "\n\t"
#define SHUFFLE(a, t, o) "vpshufb %%ymm0, %%ymm14, %%ymm" #a "\n\t"
#define FMA(a, t, o) "vfmadd231ps %%ymm0, %%ymm14, %%ymm" #a "\n\t"
// The kernels' inner steps for 8 activation rows (row r's bytes at 256 r), weights in ymm0
// (and ymm13): a 32-bit lane's 4 bytes broadcast, as the tile kernels do (K4Tiles::dots)...
#define TILE_STEP(a, t, o) "vpbroadcastd " #o "(%1), %%ymm" #t "\n\tvpmaddubsw %%ymm" #t ", %%ymm0, %%ymm" #t "\n\tvpaddw %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
// ... one broadcast for both 8-row halves of a tile (weights ymm0 and ymm13; accumulators of 4
// activation rows x 2 halves) ...
#define EACH4(P) P(1, 2, 9, 0) P(3, 4, 10, 256) P(5, 6, 11, 512) P(7, 8, 12, 768)
#define TILE_BOTH_STEP(a, b, t, o) "vpbroadcastd " #o "(%1), %%ymm" #t "\n\tvpmaddubsw %%ymm" #t ", %%ymm13, %%ymm14\n\tvpmaddubsw %%ymm" #t ", %%ymm0, %%ymm" #t "\n\tvpaddw %%ymm14, %%ymm" #b ", %%ymm" #b "\n\tvpaddw %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
// ... 32 bytes of a row as the rows kernels read them, each product scaled into int32 by
// vpmaddwd (Q6KDot::quarter_dots, scaled_dot) ...
#define ROWS_STEP(a, t, o) "vpmaddubsw " #o "(%1), %%ymm0, %%ymm" #t "\n\tvpmaddwd %%ymm15, %%ymm" #t ", %%ymm" #t "\n\tvpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
// ... two products of the same scales summed in int16 first (one vpmaddwd for two) ...
#define PAIRED_STEP(a, t, o) "vpmaddubsw " #o "(%1), %%ymm0, %%ymm" #t "\n\tvpmaddubsw 32+" #o "(%1), %%ymm13, %%ymm14\n\tvpaddw %%ymm14, %%ymm" #t ", %%ymm" #t "\n\tvpmaddwd %%ymm15, %%ymm" #t ", %%ymm" #t "\n\tvpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
// ... or of two sub-blocks' halves folded by vphaddw before the one vpmaddwd.
#define HADD_STEP(a, t, o) "vpmaddubsw " #o "(%1), %%ymm0, %%ymm" #t "\n\tvpmaddubsw 32+" #o "(%1), %%ymm13, %%ymm14\n\tvphaddw %%ymm14, %%ymm" #t ", %%ymm" #t "\n\tvpmaddwd %%ymm15, %%ymm" #t ", %%ymm" #t "\n\tvpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"

// ... and the rows step with Q6_K's unpacking of a quarter (32 values of a weight row: its low
// or high nibbles, 2 bits of qh above them, the scales spread: Q6KDot::quarter_dots) shared by
// 8 activation rows, as its 8-row kernel runs it.
#define Q6K_QUARTER(q)                                                                                          \
  "vmovdqu (%0), %%ymm0\n\tvpsrlw $4, %%ymm0, %%ymm0\n\tvpand %%ymm13, %%ymm0, %%ymm0\n\t"                   \
  "vmovdqu 64(%0), %%ymm10\n\tvpsrlw $2, %%ymm10, %%ymm10\n\tvpand %%ymm14, %%ymm10, %%ymm10\n\t"              \
  "vpsllw $4, %%ymm10, %%ymm10\n\tvpor %%ymm10, %%ymm0, %%ymm0\n\tvpshufb %%ymm12, %%ymm11, %%ymm15\n\t"       \
  Q6K_ROW(q, 0, 1) Q6K_ROW(q, 256, 2) Q6K_ROW(q, 512, 3) Q6K_ROW(q, 768, 4) Q6K_ROW(q, 1024, 5) Q6K_ROW(q, 1280, 6) \
  Q6K_ROW(q, 1536, 7) Q6K_ROW(q, 1792, 8)
#define Q6K_ROW(q, o, a) "vpmaddubsw " #q "*32+" #o "(%1), %%ymm0, %%ymm9\n\tvpmaddwd %%ymm15, %%ymm9, %%ymm9\n\tvpaddd %%ymm9, %%ymm" #a ", %%ymm" #a "\n\t"

#define PATTERN(body)                                                                           \
  [](long n) {                                                                                        \
    const int8_t* a = g_activations;                                                                  \
    for (long i = 0; i < n; ++i)                                                                      \
      __asm__ volatile("vmovdqa (%0), %%ymm0\n\tvmovdqa 32(%0), %%ymm13\n\t" body body ::"r"(a + 64), \
                       "r"(a)                                                                         \
                       : CLOBBERS);                                                                   \
  }

struct Pattern {
  const char* name;
  const char* counted;  // what one unit of the per-unit column is
  int units;            // units in one pass of the body (the body runs twice an iteration)
  int maddubs;          // vpmaddubsw in one pass of the body
  void (*run)(long);
};

const Pattern kPatterns[] = {
    {"vpmaddubsw", "instruction", 8, 8, PATTERN(EACH8(MADDUBS))},
    {"vpmaddwd", "instruction", 8, 0, PATTERN(EACH8(MADDWD))},
    {"vpaddw", "instruction", 8, 0, PATTERN(EACH8(ADDW))},
    {"vpbroadcastd from L1", "instruction", 8, 0, PATTERN(EACH8(BROADCAST))},
    {"vpshufb", "instruction", 8, 0, PATTERN(EACH8(SHUFFLE))},
    {"vfmadd231ps", "instruction", 8, 0, PATTERN(EACH8(FMA))},
    {"vpmaddubsw + vpmaddwd", "pair", 8, 8, PATTERN(EACH8(MADDUBS) EACH8(MADDWD))},
    {"vpmaddubsw + vpaddw", "pair", 8, 8, PATTERN(EACH8(MADDUBS) EACH8(ADDW))},
    {"tile step: vpbroadcastd + vpmaddubsw + vpaddw", "vpmaddubsw", 8, 8, PATTERN(EACH8(TILE_STEP))},
    {"tile step, both halves: vpbroadcastd + 2 (vpmaddubsw + vpaddw)", "vpmaddubsw", 16, 16,
     PATTERN(EACH4(TILE_BOTH_STEP) EACH4(TILE_BOTH_STEP))},
    {"rows step: vpmaddubsw (memory) + vpmaddwd + vpaddd", "vpmaddubsw", 8, 8, PATTERN(EACH8(ROWS_STEP))},
    {"paired: 2 vpmaddubsw + vpaddw + vpmaddwd + vpaddd", "vpmaddubsw", 16, 16, PATTERN(EACH8(PAIRED_STEP))},
    {"rows step with Q6_K's unpacking, 8 rows a quarter", "vpmaddubsw", 64, 64,
     PATTERN(Q6K_QUARTER(0) Q6K_QUARTER(1) Q6K_QUARTER(2) Q6K_QUARTER(3) Q6K_QUARTER(4) Q6K_QUARTER(5) Q6K_QUARTER(6)
                 Q6K_QUARTER(7))},
    {"folded: 2 vpmaddubsw + vphaddw + vpmaddwd + vpaddd", "vpmaddubsw", 16, 16, PATTERN(EACH8(HADD_STEP))},
};

// Cycles per unit of one timing: against the mean of the add chain's cycle time measured just
// before and just after it.
double cycles_per_unit(const Pattern& p) {
  const double before = seconds_per_cycle();
  const double start = now_seconds();
  p.run(kIterations);
  const double seconds = now_seconds() - start;
  const double cycle = 0.5 * (before + seconds_per_cycle());
  return seconds / cycle / (2.0 * p.units * kIterations);
}

// The fastest of `rounds` timings of each pattern, the patterns taken in turn round by round
// (a shared host's slow spells then fall on every pattern alike, not on one).
std::vector<double> best_cycles(int rounds) {
  std::vector<double> best(std::size(kPatterns), 1e30);
  for (const Pattern& p : kPatterns) p.run(kIterations / 10);  // warm-up
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < best.size(); ++i) best[i] = std::min(best[i], cycles_per_unit(kPatterns[i]));
  return best;
}

// --reps N (rounds, default 9) or --help: false with *exit_code set where main should stop.
bool parse_arguments(int argc, char** argv, int* rounds, int* exit_code) {
  *rounds = 9;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) {
      if (i + 1 == argc) {
        std::fprintf(stderr, "--reps needs a count\n");
        return *exit_code = 2, false;
      }
      *rounds = std::atoi(argv[++i]);
      if (*rounds < 1) {
        std::fprintf(stderr, "--reps %s: expected a positive count\n", argv[i]);
        return *exit_code = 2, false;
      }
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: %s [--reps N]\nThe throughput of the AVX2 int8 dots' instructions and of the quantised products'\n"
                  "inner steps on this core, one thread, in cycles (a dependent add chain's); each pattern's best\n"
                  "of N rounds (default 9). bench/RESULTS.md, \"Zen 3's multiply ports\", reads the table.\n",
                  argv[0]);
      return *exit_code = 0, false;
    } else {
      std::fprintf(stderr, "%s: unknown argument %s (usage: %s [--reps N])\n", argv[0], argv[i], argv[0]);
      return *exit_code = 2, false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 0, exit_code = 0;
  if (!parse_arguments(argc, argv, &reps, &exit_code)) return exit_code;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "int8_dot_ports: this CPU has no AVX2 and FMA; nothing to measure\n");
    return 1;
  }
  for (int i = 0; i < 8 * 256; ++i) g_activations[i] = static_cast<int8_t>(i * 7 % 255 - 127);
  const double ghz = 1e-9 / seconds_per_cycle();
  std::printf("one thread, %.2f GHz by the add chain, best of %d rounds\n\n", ghz, reps);
  std::printf("| pattern | cycles per | cycles | multiply-adds a cycle |\n| --- | --- | ---: | ---: |\n");
  const std::vector<double> cycles_of = best_cycles(reps);
  for (size_t i = 0; i < cycles_of.size(); ++i) {
    const Pattern& p = kPatterns[i];
    const double cycles = cycles_of[i];
    if (p.maddubs > 0)
      std::printf("| %s | %s | %.2f | %.1f |\n", p.name, p.counted, cycles,
                  32.0 * p.maddubs / p.units / cycles);
    else
      std::printf("| %s | %s | %.2f | |\n", p.name, p.counted, cycles);
  }
  return 0;
}

#else

int main() {
  std::fprintf(stderr, "int8_dot_ports: x86-64 only (it times AVX2 instructions)\n");
  return 1;
}

#endif
