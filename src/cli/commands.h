#pragma once
// One function per subcommand, each in its own file: it declares its options on the
// subcommand and runs when that subcommand is chosen.
#include <string>

namespace CLI {
class App;
}

namespace gatedlm::cli {

// The text of `gatedlm --version`: version, oneDNN and its instruction set, bf16 path.
std::string version_text();

// GATEDLM_OPENMP_WAITING=passive: passive OpenMP waiting for shared machines
// (openmp_waiting.cpp; re-executes the process once). Call first thing in main.
void choose_openmp_waiting(char** argv);

void register_params(CLI::App& app);
void register_init(CLI::App& app);
void register_score(CLI::App& app);
void register_debug(CLI::App& app);
void register_train(CLI::App& app);
void register_eval(CLI::App& app);
void register_bench(CLI::App& app);
void register_tokenizer(CLI::App& app);
void register_data(CLI::App& app);
void register_analyze(CLI::App& app);
void register_report(CLI::App& app);
void register_demo(CLI::App& app);
void register_longctx(CLI::App& app);
void register_data_synth(CLI::App& app);  // after register_data: adds `data synth`
void register_import(CLI::App& app);
void register_export(CLI::App& app);
void register_debug_decode(CLI::App& app);  // after register_debug: adds `debug decode`
void register_generate(CLI::App& app);
void register_stream_eval(CLI::App& app);
void register_serve(CLI::App& app);
void register_sweep(CLI::App& app);
void register_quantize(CLI::App& app);

}  // namespace gatedlm::cli
