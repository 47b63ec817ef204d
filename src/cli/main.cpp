// The `gatedlm` binary: parses the command line and hands over to one subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "cli/commands.h"
#include "cli/number_checks.h"
#include "core/error.h"
#include "kernels/bf16_support.h"

int main(int argc, char** argv) {
  gatedlm::cli::choose_openmp_waiting(argv);
  CLI::App app{
      "gatedlm: train, analyse and run decoder LMs with the gated attention of Qiu et al. (NeurIPS 2025).\n"
      "Run `gatedlm COMMAND --help` for the options of a command."};
  app.set_version_flag("--version", [] { return gatedlm::cli::version_text(); });
  app.require_subcommand(1);
  gatedlm::cli::register_params(app);
  gatedlm::cli::register_init(app);
  gatedlm::cli::register_score(app);
  gatedlm::cli::register_train(app);
  gatedlm::cli::register_eval(app);
  gatedlm::cli::register_bench(app);
  gatedlm::cli::register_debug(app);
  gatedlm::cli::register_tokenizer(app);
  gatedlm::cli::register_data(app);
  gatedlm::cli::register_analyze(app);
  gatedlm::cli::register_report(app);
  gatedlm::cli::register_demo(app);
  gatedlm::cli::register_longctx(app);
  gatedlm::cli::register_data_synth(app);
  gatedlm::cli::register_import(app);
  gatedlm::cli::register_export(app);
  gatedlm::cli::register_debug_decode(app);
  gatedlm::cli::register_generate(app);
  gatedlm::cli::register_stream_eval(app);
  gatedlm::cli::register_serve(app);
  gatedlm::cli::register_sweep(app);
  gatedlm::cli::register_quantize(app);
  gatedlm::cli::add_strict_number_checks(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const gatedlm::Error& e) {
    std::fprintf(stderr, "gatedlm: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A file-system failure not caught nearer (it names the path): the user's to fix.
    std::fprintf(stderr, "gatedlm: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gatedlm: error: out of memory (lower the sizes given: batch, sequence length, model)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gatedlm: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
