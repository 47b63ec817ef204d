#pragma once
// The options that name a held-out token stream, shared by `eval`, `analyze` and
// `longctx`: --data DIR [--split val|train] or --text FILE --tokenizer T. What must go
// with what is checked by io::check_eval_source, with one set of messages.
#include <string>

#include "io/eval_stream.h"

namespace CLI {
class App;
}

namespace gatedlm::cli {

// Declares the four options on sub, writing into src; src.command is set to `command`.
// `purpose` ends the --data/--text help ("to evaluate on", "to take windows from", ...).
void add_eval_source_options(CLI::App* sub, io::EvalSource& src, const std::string& command,
                             const std::string& purpose);

}  // namespace gatedlm::cli
