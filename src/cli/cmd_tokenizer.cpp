// gatedlm tokenizer: train a SentencePiece BPE tokenizer; encode and decode text with one.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "io/tokenizer.h"

namespace gatedlm::cli {

// Every kind io::Tokenizer::load accepts.
constexpr const char* kTokenizerKinds =
    "\"byte\" (ids 0..255 are the bytes, 256 BOS, 257 EOS), a SentencePiece .model file, or a Hugging Face "
    "tokenizer.json (byte-level BPE, as Qwen2/Qwen3 use; any path ending in .json)";

namespace {

void register_tokenizer_train(CLI::App& parent) {
  struct Options {
    io::TokenizerTrainOptions train;
    int threads = 0;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "train",
      "Train a SentencePiece BPE tokenizer (byte fallback, so any UTF-8 text encodes and decodes losslessly; "
      "unk 0, BOS 1, EOS 2).");
  sub->add_option("--input", opt->train.inputs, "text files or directories (read recursively, in sorted order)")
      ->required()
      ->expected(1, -1);
  sub->add_option("--vocab-size", opt->train.vocab_size, "vocabulary size, special and byte pieces included")
      ->capture_default_str();
  sub->add_option("--out", opt->train.out, "the .model file to write")->required();
  sub->add_option("--threads", opt->threads, "training threads (default: all cores)");
  sub->callback([opt] {
    const auto start = std::chrono::steady_clock::now();
    opt->train.threads = opt->threads;
    io::train_tokenizer(opt->train);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto tokenizer = io::Tokenizer::load(opt->train.out);
    std::printf("wrote %s: vocabulary %lld (BOS %d, EOS %d) in %.1f s\n", opt->train.out.c_str(),
                static_cast<long long>(tokenizer->vocab_size()), tokenizer->bos_id(), tokenizer->eos_id(), seconds);
  });
}

void register_encode(CLI::App& parent) {
  struct Options {
    std::string tokenizer, text;
    bool bos_eos = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand("encode", "Print the token ids of a text, space-separated, on one line (tokenizers: byte, SentencePiece .model, "
                                        "tokenizer.json).");
  sub->add_option("--tokenizer", opt->tokenizer, kTokenizerKinds)->required();
  auto* text = sub->add_option("--text", opt->text, "the text (default: read standard input)");
  sub->add_flag("--bos-eos", opt->bos_eos, "wrap the ids in BOS and EOS, as documents are stored");
  sub->callback([opt, text] {
    const auto tokenizer = io::Tokenizer::load(opt->tokenizer);
    std::string input = opt->text;
    if (text->count() == 0) input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    std::vector<int32_t> ids = tokenizer->encode(input);
    if (opt->bos_eos) {
      ids.insert(ids.begin(), tokenizer->bos_id());
      ids.push_back(tokenizer->eos_id());
    }
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  });
}

void register_decode(CLI::App& parent) {
  struct Options {
    std::string tokenizer, ids;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand("decode", "Print the text of whitespace-separated token ids (tokenizers: byte, SentencePiece .model, "
                                        "tokenizer.json).");
  sub->add_option("--tokenizer", opt->tokenizer, kTokenizerKinds)->required();
  auto* ids_option = sub->add_option("--ids", opt->ids, "the ids, e.g. \"72 105\" (default: read standard input)");
  sub->callback([opt, ids_option] {
    const auto tokenizer = io::Tokenizer::load(opt->tokenizer);
    std::string input = opt->ids;
    if (ids_option->count() == 0) input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    std::istringstream in(input);
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word) {
      try {
        size_t used = 0;
        const long long id = std::stoll(word, &used);
        if (used != word.size() || id < INT32_MIN || id > INT32_MAX) throw std::invalid_argument(word);
        ids.push_back(static_cast<int32_t>(id));
      } catch (const std::logic_error&) {
        fail("decode: \"", word, "\" is not a token id");
      }
    }
    const std::string text = tokenizer->decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
  });
}

}  // namespace

void register_tokenizer(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("tokenizer", "Train SentencePiece BPE tokenizers; encode and decode text.");
  sub->require_subcommand(1);
  register_tokenizer_train(*sub);
  register_encode(*sub);
  register_decode(*sub);
}

}  // namespace gatedlm::cli
