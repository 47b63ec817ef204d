// Runs a GGUF model through llama.cpp's own library, loaded at run time from a directory
// of prebuilt binaries (npm's @node-llama-cpp/linux-x64 ships them), to check gatedlm's
// GGUF export against llama.cpp itself (tests/reference/test_gguf_llama.py).
//
//   llama_probe LIBDIR MODEL.gguf N_GENERATE TOKEN...
//
// Feeds the prompt one token at a time and prints, per position, "logits" and the values of
// that position's next-token logits; then greedily generates N_GENERATE tokens and prints
// "greedy" and their ids.
//
// No llama.h is compiled in: the few functions are looked up with dlsym. The structs they
// take and return by value (model/context params, batch) are all larger than 16 bytes, so
// the x86-64 System V ABI passes and returns them in memory; a larger opaque buffer in their
// place is read and written only as far as the real struct goes, which keeps this program
// independent of the structs' layouts (it uses llama.cpp's defaults throughout).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Opaque {
  alignas(64) unsigned char bytes[4096];
};

void* must(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) {
    std::fprintf(stderr, "llama_probe: %s not found (%s)\n", name, dlerror());
    std::exit(2);
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: llama_probe LIBDIR MODEL.gguf N_GENERATE TOKEN...\n");
    return 2;
  }
  const std::string dir = argv[1];
  void* ggml = dlopen((dir + "/libggml.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* llama = dlopen((dir + "/libllama.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!ggml || !llama) {
    std::fprintf(stderr, "llama_probe: cannot load the libraries in %s (%s)\n", dir.c_str(), dlerror());
    return 2;
  }
  reinterpret_cast<void (*)(const char*)>(must(ggml, "ggml_backend_load_all_from_path"))(dir.c_str());
  reinterpret_cast<void (*)()>(must(llama, "llama_backend_init"))();
  auto model_params = reinterpret_cast<Opaque (*)()>(must(llama, "llama_model_default_params"));
  auto load = reinterpret_cast<void* (*)(const char*, Opaque)>(must(llama, "llama_model_load_from_file"));
  auto context_params = reinterpret_cast<Opaque (*)()>(must(llama, "llama_context_default_params"));
  auto init = reinterpret_cast<void* (*)(void*, Opaque)>(must(llama, "llama_init_from_model"));
  auto batch_one = reinterpret_cast<Opaque (*)(int32_t*, int32_t)>(must(llama, "llama_batch_get_one"));
  auto decode = reinterpret_cast<int32_t (*)(void*, Opaque)>(must(llama, "llama_decode"));
  auto logits_ith = reinterpret_cast<float* (*)(void*, int32_t)>(must(llama, "llama_get_logits_ith"));
  auto get_vocab = reinterpret_cast<const void* (*)(const void*)>(must(llama, "llama_model_get_vocab"));
  auto n_tokens = reinterpret_cast<int32_t (*)(const void*)>(must(llama, "llama_vocab_n_tokens"));

  void* model = load(argv[2], model_params());
  if (!model) {
    std::fprintf(stderr, "llama_probe: llama.cpp could not load %s\n", argv[2]);
    return 1;
  }
  void* ctx = init(model, context_params());
  if (!ctx) {
    std::fprintf(stderr, "llama_probe: no context\n");
    return 1;
  }
  const int32_t vocab = n_tokens(get_vocab(model));
  const int generate = std::atoi(argv[3]);
  std::vector<int32_t> tokens;
  for (int i = 4; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));
  auto step = [&](int32_t token) {
    int32_t t = token;
    if (decode(ctx, batch_one(&t, 1)) != 0) {
      std::fprintf(stderr, "llama_probe: llama_decode failed\n");
      std::exit(1);
    }
    return logits_ith(ctx, -1);
  };
  auto argmax = [&](const float* l) {
    int32_t best = 0;
    for (int32_t v = 1; v < vocab; ++v)
      if (l[v] > l[best]) best = v;
    return best;
  };
  const float* last = nullptr;
  for (int32_t t : tokens) {
    last = step(t);
    std::printf("logits");
    for (int32_t v = 0; v < vocab; ++v) std::printf(" %.9g", last[v]);
    std::printf("\n");
  }
  std::printf("greedy");
  for (int i = 0; i < generate; ++i) {
    const int32_t next = argmax(last);
    std::printf(" %d", next);
    last = step(next);
  }
  std::printf("\n");
  return 0;
}
