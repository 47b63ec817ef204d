// gatedlm quantize: an F32 checkpoint to an inference checkpoint whose weight matrices are
// BF16 or one of GGUF's block types (io/quantized_checkpoint.h; model/quantized_weights.h
// says which tensors stay F32 and which take another type).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/gguf_encode.h"
#include "io/quantized_checkpoint.h"

namespace gatedlm::cli {

namespace fs = std::filesystem;

namespace {

// The tokenizer files beside the checkpoint or its run (tokenizer.model, tokenizer.json),
// copied so that the quantised checkpoint finds them as the F32 one did (io/model_tokenizer.h).
void copy_tokenizer_files(const std::string& checkpoint_dir, const std::string& out) {
  const fs::path ck = fs::absolute(checkpoint_dir);
  for (const char* name : {"tokenizer.model", "tokenizer.json"})
    for (const fs::path& dir : {ck, ck.parent_path().parent_path(), ck.parent_path().parent_path().parent_path().parent_path()})
      if (fs::is_regular_file(dir / name)) {
        fs::copy_file(dir / name, fs::path(out) / name, fs::copy_options::overwrite_existing);
        break;
      }
}

}  // namespace

void register_quantize(CLI::App& app) {
  struct Options {
    std::string checkpoint, type, out;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Write an inference checkpoint whose weight matrices are bf16, or GGUF's blocks: q8_0 / q4_0 / q4_1 / q5_0 / "
      "q5_1 / iq4_nl (32 values and fp16 scales), the K-quants q2_k ... q6_k and iq4_xs (super-blocks of 256), "
      "byte for byte what llama.cpp's quantiser writes for the same values. Quantised: every 2-D weight matrix whose "
      "input width is a multiple of 32 (attention, gate and FFN projections, experts, the token embedding and LM "
      "head); where a K-quant's row is not a multiple of 256, llama.cpp's fallback type (q4_0 for q2_k and q3_k, "
      "iq4_nl for iq4_xs; q5_0 for q4_k, q5_1 for q5_k, q8_0 for q6_k); F32: norms, biases and other 1-D tensors, the MoE "
      "router and shared-expert gate, switch-head routers, and matrices of other widths. The mixes q5_k_m, q4_k_m "
      "and q3_k_m choose a type per tensor as llama-quantize does for the same model (q6_k for the output matrix and "
      "some attn_v / ffn_down layers, ...: docs/quantization.md). generate, serve, score, "
      "eval, analyze, stream-eval and bench generate accept the result; training refuses it.");
  sub->add_option("CKPT", opt->checkpoint, "F32 checkpoint or run directory")->required();
  sub->add_option("--type", opt->type,
                  "bf16 | q8_0 | q6_k | q5_k | q5_1 | q5_0 | q4_k | iq4_xs | iq4_nl | q4_1 | q4_0 | q3_k | q2_k | "
                  "q5_k_m | q4_k_m | q3_k_m")
      ->required();
  sub->add_option("--out", opt->out, "output directory (must not exist or be empty)")->required();
  sub->callback([opt] {
    const model::WeightRecipe& recipe = model::parse_recipe(
        opt->type, "--type", [](kernels::ElementType t) { return kernels::element_traits(t).products; });
    if (fs::exists(opt->out) && !(fs::is_directory(opt->out) && fs::is_empty(opt->out)))
      fail("--out ", opt->out, ": exists and is not an empty directory (nothing written)");
    const std::string dir = io::resolve_checkpoint_dir(opt->checkpoint);
    if (const auto already = io::checkpoint_quant_format(dir))
      fail(dir, ": already quantised (", *already,
           "); quantize reads an F32 checkpoint");
    const io::Checkpoint ck = io::load_checkpoint(dir);
    const io::QuantizeSummary s =
        io::save_quantized_checkpoint(opt->out, ck.config, ck.params, io::recipe_formats(ck.config, recipe));
    copy_tokenizer_files(dir, opt->out);
    for (const std::string& name : s.narrow_matrices)
      std::fprintf(stderr, "note: %s stays F32 (its input width is not a multiple of 32)\n", name.c_str());
    std::fprintf(stderr, "quantized %s to %s into %s: %lld tensors %s, %lld F32; %.1f MB -> %.1f MB\n", dir.c_str(),
                 opt->type.c_str(), opt->out.c_str(), static_cast<long long>(s.quantized_tensors), opt->type.c_str(),
                 static_cast<long long>(s.f32_tensors), s.f32_bytes / 1e6, s.written_bytes / 1e6);
  });
}

}  // namespace gatedlm::cli
