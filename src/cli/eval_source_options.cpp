#include "cli/eval_source_options.h"

#include <CLI/CLI.hpp>

namespace gatedlm::cli {

void add_eval_source_options(CLI::App* sub, io::EvalSource& src, const std::string& command,
                             const std::string& purpose) {
  src.command = command;
  auto* data = sub->add_option("--data", src.data, "a prepared dataset directory: its --split " + purpose);
  sub->add_option("--split", src.split, "with --data: val or train")->capture_default_str();
  auto* text = sub->add_option("--text", src.text, "a text file " + purpose)->check(CLI::ExistingFile);
  sub->add_option("--tokenizer", src.tokenizer, "with --text: `byte` or a SentencePiece .model file");
  data->excludes(text);
}

}  // namespace gatedlm::cli
