// Runs a GGUF model through llama.cpp's own library, loaded at run time from a directory
// of prebuilt binaries (npm's @node-llama-cpp/linux-x64 ships them), to check gatedlm's
// GGUF export against llama.cpp itself (tests/reference/test_gguf_llama.py) and to time
// llama.cpp's generation beside gatedlm's (bench/compare_generate.py).
//
//   llama_probe LIBDIR MODEL.gguf N_GENERATE TOKEN...
//
// Feeds the prompt one token at a time and prints, per position, "logits" and the values of
// that position's next-token logits; then greedily generates N_GENERATE tokens and prints
// "greedy" and their ids. LLAMA_PROBE_THREADS sets llama.cpp's thread count.
//
//   llama_probe --bench LIBDIR MODEL.gguf THREADS PROMPT_TOKENS NEW_TOKENS REPS
//
// Times batch-1 generation as llama-bench does (npm's package has no llama-bench binary):
// one context sized for the run (n_ctx = PROMPT_TOKENS + NEW_TOKENS, n_batch = PROMPT_TOKENS,
// n_ubatch llama.cpp's default); per rep, its memory cleared (KV cache and, for the hybrid
// architectures, the recurrent states), the prompt (token ids 1..PROMPT_TOKENS modulo the
// vocabulary) prefilled in one llama_decode call, then NEW_TOKENS single-token decode calls,
// so every rep decodes the same tokens at the same positions. Rep 0 warms up. Prints one
// JSON line with the medians: prefill_tokens_per_s, decode_tokens_per_s.
//
//   llama_probe --tokenize LIBDIR MODEL.gguf TEXT_FILE
//
// Prints, on one line, the ids llama.cpp's tokenizer gives the file's text (special tokens
// parsed, no BOS/EOS added): tests/reference/test_tokenizer_llama.py.
//
// No llama.h is compiled in: the few functions are looked up with dlsym. The structs they
// take and return by value (model/context params, batch) are all larger than 16 bytes, so
// the x86-64 System V ABI passes and returns them in memory; a larger opaque buffer in their
// place is read and written only as far as the real struct goes, which keeps this program
// independent of the structs' layouts. It uses llama.cpp's defaults throughout, except that
// --bench sizes its context: llama_context_params begins with uint32 n_ctx, n_batch (as it
// has since llama.h introduced the struct), and the context's llama_n_ctx / llama_n_batch
// are checked afterwards, so a changed layout is an error rather than a wrong benchmark.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
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

// llama.cpp's entry points, looked up once.
struct Llama {
  Opaque (*model_params)();
  void* (*load)(const char*, Opaque);
  Opaque (*context_params)();
  void* (*init)(void*, Opaque);
  void (*free_context)(void*);
  void (*free_model)(void*);
  void (*set_threads)(void*, int32_t, int32_t);
  Opaque (*batch_one)(int32_t*, int32_t);
  int32_t (*decode)(void*, Opaque);
  float* (*logits_ith)(void*, int32_t);
  const void* (*get_vocab)(const void*);
  int32_t (*n_tokens)(const void*);
  int32_t (*tokenize)(const void*, const char*, int32_t, int32_t*, int32_t, bool, bool);
  uint32_t (*n_ctx)(const void*);
  uint32_t (*n_batch)(const void*);
  void* (*get_memory)(const void*);
  void (*memory_clear)(void*, bool);
  void (*synchronize)(void*);
};

Llama open_llama(const std::string& dir) {
  void* ggml = dlopen((dir + "/libggml.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* llama = dlopen((dir + "/libllama.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!ggml || !llama) {
    std::fprintf(stderr, "llama_probe: cannot load the libraries in %s (%s)\n", dir.c_str(), dlerror());
    std::exit(2);
  }
  reinterpret_cast<void (*)(const char*)>(must(ggml, "ggml_backend_load_all_from_path"))(dir.c_str());
  reinterpret_cast<void (*)()>(must(llama, "llama_backend_init"))();
  Llama l;
  l.model_params = reinterpret_cast<Opaque (*)()>(must(llama, "llama_model_default_params"));
  l.load = reinterpret_cast<void* (*)(const char*, Opaque)>(must(llama, "llama_model_load_from_file"));
  l.context_params = reinterpret_cast<Opaque (*)()>(must(llama, "llama_context_default_params"));
  l.init = reinterpret_cast<void* (*)(void*, Opaque)>(must(llama, "llama_init_from_model"));
  l.free_context = reinterpret_cast<void (*)(void*)>(must(llama, "llama_free"));
  l.free_model = reinterpret_cast<void (*)(void*)>(must(llama, "llama_model_free"));
  l.set_threads = reinterpret_cast<void (*)(void*, int32_t, int32_t)>(must(llama, "llama_set_n_threads"));
  l.batch_one = reinterpret_cast<Opaque (*)(int32_t*, int32_t)>(must(llama, "llama_batch_get_one"));
  l.decode = reinterpret_cast<int32_t (*)(void*, Opaque)>(must(llama, "llama_decode"));
  l.logits_ith = reinterpret_cast<float* (*)(void*, int32_t)>(must(llama, "llama_get_logits_ith"));
  l.get_vocab = reinterpret_cast<const void* (*)(const void*)>(must(llama, "llama_model_get_vocab"));
  l.n_tokens = reinterpret_cast<int32_t (*)(const void*)>(must(llama, "llama_vocab_n_tokens"));
  l.tokenize = reinterpret_cast<int32_t (*)(const void*, const char*, int32_t, int32_t*, int32_t, bool, bool)>(
      must(llama, "llama_tokenize"));
  l.n_ctx = reinterpret_cast<uint32_t (*)(const void*)>(must(llama, "llama_n_ctx"));
  l.n_batch = reinterpret_cast<uint32_t (*)(const void*)>(must(llama, "llama_n_batch"));
  l.get_memory = reinterpret_cast<void* (*)(const void*)>(must(llama, "llama_get_memory"));
  l.memory_clear = reinterpret_cast<void (*)(void*, bool)>(must(llama, "llama_memory_clear"));
  l.synchronize = reinterpret_cast<void (*)(void*)>(must(llama, "llama_synchronize"));
  return l;
}

void* load_model(const Llama& l, const char* path) {
  void* model = l.load(path, l.model_params());
  if (!model) {
    std::fprintf(stderr, "llama_probe: llama.cpp could not load %s\n", path);
    std::exit(1);
  }
  return model;
}

// A context whose memory holds n_ctx positions and whose llama_decode takes n_batch tokens
// at once. llama.cpp's default n_ctx (512) has no room left for decoding after a 512-token
// prompt: a plain KV cache and a hybrid's attention layers alike then find no slot.
void* new_sized_context(const Llama& l, void* model, uint32_t n_ctx, uint32_t n_batch) {
  Opaque params = l.context_params();
  std::memcpy(params.bytes, &n_ctx, sizeof n_ctx);  // llama_context_params::n_ctx
  std::memcpy(params.bytes + sizeof n_ctx, &n_batch, sizeof n_batch);  // ::n_batch
  void* ctx = l.init(model, params);
  if (!ctx) {
    std::fprintf(stderr, "llama_probe: no context for n_ctx %u, n_batch %u\n", n_ctx, n_batch);
    std::exit(1);
  }
  if (l.n_ctx(ctx) < n_ctx || l.n_batch(ctx) < n_batch) {
    std::fprintf(stderr,
                 "llama_probe: asked llama.cpp for n_ctx %u, n_batch %u but got %u, %u "
                 "(has llama_context_params' layout changed?)\n",
                 n_ctx, n_batch, l.n_ctx(ctx), l.n_batch(ctx));
    std::exit(1);
  }
  return ctx;
}

void decode_or_die(const Llama& l, void* ctx, int32_t* tokens, int32_t n) {
  if (l.decode(ctx, l.batch_one(tokens, n)) != 0) {
    std::fprintf(stderr, "llama_probe: llama_decode failed\n");
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: llama_probe --bench LIBDIR MODEL.gguf THREADS PROMPT_TOKENS NEW_TOKENS REPS\n");
    return 2;
  }
  const Llama l = open_llama(argv[2]);
  void* model = load_model(l, argv[3]);
  const int threads = std::atoi(argv[4]), prompt = std::atoi(argv[5]), generate = std::atoi(argv[6]),
            reps = std::atoi(argv[7]);
  if (threads < 1 || prompt < 1 || generate < 1 || reps < 1) {
    std::fprintf(stderr, "llama_probe: THREADS, PROMPT_TOKENS, NEW_TOKENS and REPS must be >= 1\n");
    return 2;
  }
  const int32_t vocab = std::max<int32_t>(l.n_tokens(l.get_vocab(model)), 2);
  void* ctx = new_sized_context(l, model, static_cast<uint32_t>(prompt + generate), static_cast<uint32_t>(prompt));
  l.set_threads(ctx, threads, threads);
  std::vector<int32_t> ids(prompt);
  for (int i = 0; i < prompt; ++i) ids[i] = 1 + i % (vocab - 1);
  using clock = std::chrono::steady_clock;
  std::vector<double> prefill_s, decode_s;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    // Empty memory, outside the timing: the KV cells and, for a hybrid, the recurrent
    // states, their buffers zeroed too (data=true) so each rep starts from the same bytes.
    l.memory_clear(l.get_memory(ctx), true);
    const auto t0 = clock::now();
    decode_or_die(l, ctx, ids.data(), prompt);
    l.synchronize(ctx);
    const auto t1 = clock::now();
    for (int i = 0; i < generate; ++i) {
      int32_t next = 1 + (prompt + i) % (vocab - 1);
      decode_or_die(l, ctx, &next, 1);
      l.synchronize(ctx);
    }
    const auto t2 = clock::now();
    if (rep == 0) continue;
    prefill_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    decode_s.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  l.free_context(ctx);
  std::printf("{\"threads\": %d, \"prompt_tokens\": %d, \"new_tokens\": %d, \"reps\": %d, "
              "\"prefill_tokens_per_s\": %.3f, \"decode_tokens_per_s\": %.3f}\n",
              threads, prompt, generate, reps, prompt / median(prefill_s), generate / median(decode_s));
  l.free_model(model);
  return 0;
}

int tokenize(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: llama_probe --tokenize LIBDIR MODEL.gguf TEXT_FILE\n");
    return 2;
  }
  const Llama l = open_llama(argv[2]);
  void* model = load_model(l, argv[3]);
  std::ifstream in(argv[4], std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int32_t> ids(text.size() + 16);  // byte-level BPE: at most one id per byte
  const int32_t n = l.tokenize(l.get_vocab(model), text.data(), static_cast<int32_t>(text.size()), ids.data(),
                               static_cast<int32_t>(ids.size()), false, true);
  if (n < 0) {
    std::fprintf(stderr, "llama_probe: llama_tokenize failed (%d)\n", n);
    return 1;
  }
  for (int32_t i = 0; i < n; ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  l.free_model(model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--bench") return bench(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--tokenize") return tokenize(argc, argv);
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: llama_probe LIBDIR MODEL.gguf N_GENERATE TOKEN...\n"
                 "       llama_probe --bench LIBDIR MODEL.gguf THREADS PROMPT_TOKENS NEW_TOKENS REPS\n"
                 "       llama_probe --tokenize LIBDIR MODEL.gguf TEXT_FILE\n");
    return 2;
  }
  const Llama l = open_llama(argv[1]);
  void* model = load_model(l, argv[2]);
  const int generate = std::atoi(argv[3]);
  std::vector<int32_t> tokens;
  for (int i = 4; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));
  // Room for every token fed (llama.cpp's default 512 would stop a longer reference run).
  const auto positions = static_cast<uint32_t>(std::max<size_t>(512, tokens.size() + std::max(generate, 0)));
  void* ctx = new_sized_context(l, model, positions, 512);
  // LLAMA_PROBE_THREADS: llama.cpp's thread count (default 1, not llama.cpp's own 4). Its
  // threads spin while they wait, so more threads than free cores stall it: its default
  // took 63 s on a 2-core machine for a run that one thread does in 0.1 s.
  const char* threads_set = std::getenv("LLAMA_PROBE_THREADS");
  const int threads = threads_set ? std::max(1, std::atoi(threads_set)) : 1;
  l.set_threads(ctx, threads, threads);
  const int32_t vocab = l.n_tokens(l.get_vocab(model));
  auto step = [&](int32_t token) {
    decode_or_die(l, ctx, &token, 1);
    return l.logits_ith(ctx, -1);
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
  l.free_context(ctx);  // (a sanitized build checks for leaks at exit)
  l.free_model(model);
  return 0;
}
