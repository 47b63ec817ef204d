#pragma once
// What one render may spend. A chat template comes with a model from anywhere; these bound
// what a hostile or broken one can do to the server that renders it: a macro calling
// itself, a loop that multiplies, a string that doubles. Each limit, when reached, is an
// error naming it, never a crash or a hang.
#include <cstddef>
#include <cstdint>

namespace gatedlm::chat {

struct RenderLimits {
  // The rendered prompt, and every string made on the way. Real prompts, tool schemas
  // included, are well under 1 MiB; a context window of 256k tokens is about 1 MiB of text.
  size_t max_output_bytes = size_t{16} << 20;
  // Macro calls inside macro calls. Python's recursion limit stops transformers' Jinja at
  // about 150 levels; no chat template nests more than a few.
  int max_call_depth = 100;
  // Blocks and expressions inside each other, counted across macro calls: what bounds the
  // stack (about 100 bytes a level; 100 macros deep, each 190 blocks deep, took 2 MB).
  // The parser allows 200 levels in one place; chat templates use a few dozen in all.
  int max_nesting = 3000;
  // Loop iterations and macro calls in all, and the length of a list made by range() or +:
  // a conversation of 10 000 messages takes a few times 10 000.
  int64_t max_steps = 1'000'000;
};

}  // namespace gatedlm::chat
