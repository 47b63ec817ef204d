// Rewrites a GGUF file with llama.cpp's own writer: llama_model_quantize (the library
// function behind the llama-quantize tool, which npm's @node-llama-cpp/linux-x64 ships as a
// library but not as a program) converts every tensor llama.cpp would convert to FTYPE and
// writes the file through ggml's gguf writer. tests/reference/test_gguf_import_llama.py
// imports the result into gatedlm.
//
//   llama_requantize LIBDIR IN.gguf OUT.gguf FTYPE
//
// FTYPE is llama.cpp's LLAMA_FTYPE number: 0 ALL_F32, 1 MOSTLY_F16, 7 MOSTLY_Q8_0, 15 MOSTLY_Q4_K_M, ...,
// 32 MOSTLY_BF16. No llama.h is compiled in: llama_model_quantize_default_params returns its
// struct in memory (larger than 16 bytes), read into an opaque buffer; of its fields only
// `nthread` (int32 at offset 0) and `ftype` (int32 at offset 4) are set, the first two
// fields in every llama.cpp version.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Opaque {
  alignas(64) unsigned char bytes[4096];
};

void* must(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) {
    std::fprintf(stderr, "llama_requantize: %s not found (%s)\n", name, dlerror());
    std::exit(2);
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: llama_requantize LIBDIR IN.gguf OUT.gguf FTYPE\n");
    return 2;
  }
  const std::string dir = argv[1];
  void* ggml = dlopen((dir + "/libggml.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* llama = dlopen((dir + "/libllama.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!ggml || !llama) {
    std::fprintf(stderr, "llama_requantize: cannot load the libraries in %s (%s)\n", dir.c_str(), dlerror());
    return 2;
  }
  reinterpret_cast<void (*)(const char*)>(must(ggml, "ggml_backend_load_all_from_path"))(dir.c_str());
  reinterpret_cast<void (*)()>(must(llama, "llama_backend_init"))();
  const auto defaults = reinterpret_cast<Opaque (*)()>(must(llama, "llama_model_quantize_default_params"));
  const auto quantize =
      reinterpret_cast<uint32_t (*)(const char*, const char*, const void*)>(must(llama, "llama_model_quantize"));
  Opaque params = defaults();
  const int32_t nthread = 2, ftype = std::atoi(argv[4]);
  std::memcpy(params.bytes, &nthread, 4);
  std::memcpy(params.bytes + 4, &ftype, 4);
  const uint32_t rc = quantize(argv[2], argv[3], params.bytes);
  if (rc != 0) std::fprintf(stderr, "llama_requantize: llama_model_quantize failed (%u)\n", rc);
  return rc == 0 ? 0 : 1;
}
