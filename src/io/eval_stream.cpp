#include "io/eval_stream.h"

#include <algorithm>

#include "core/error.h"
#include "io/text_corpus.h"
#include "io/token_dataset.h"

namespace gatedlm::io {

void check_eval_source(const EvalSource& src) {
  if (src.data.empty() == src.text.empty()) fail(src.command, ": give --data DIR or --text FILE --tokenizer T");
  if (!src.text.empty() && src.tokenizer.empty()) fail(src.command, ": --text needs --tokenizer FILE|byte");
  if (!src.data.empty() && src.split != "val" && src.split != "train")
    fail("--split: unknown split \"", src.split, "\" (val or train)");
}

namespace {

// `who` is what the user named: the dataset directory or the --tokenizer file.
void check_vocab(const std::string& who, int64_t vocab, int64_t model_vocab) {
  if (vocab > model_vocab)
    fail(who, ": the tokenizer has ", vocab, " ids, more than the model's vocab_size ", model_vocab);
}

double ratio(int64_t bytes, int64_t tokens) {
  return static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(tokens, 1));
}

}  // namespace

EvalStream load_eval_stream(const EvalSource& src, int64_t model_vocab) {
  check_eval_source(src);
  EvalStream s;
  if (!src.data.empty()) {
    const TokenDataset ds = TokenDataset::open(src.data);
    const DatasetManifest& m = ds.manifest();
    check_vocab(src.data, m.vocab_size, model_vocab);
    s.tokenizer = ds.tokenizer();
    s.tokens = ds.load_split(src.split);
    s.bos = m.bos_id;
    const SplitInfo& info = src.split == "train" ? m.train : m.val;
    s.bytes_per_token = ratio(info.bytes, info.tokens);
    s.origin = src.data;
    s.record = {{"kind", "data"}, {"dir", src.data}, {"split", src.split}, {"tokenizer", m.tokenizer}};
  } else {
    s.tokenizer = Tokenizer::load(src.tokenizer);
    check_vocab(src.tokenizer, s.tokenizer->vocab_size(), model_vocab);
    const std::string text = read_text_file(src.text);
    s.tokens = s.tokenizer->encode(text);
    s.bos = s.tokenizer->bos_id();
    s.bytes_per_token = ratio(static_cast<int64_t>(text.size()), static_cast<int64_t>(s.tokens.size()));
    s.origin = src.text;
    s.record = {{"kind", "text"}, {"file", src.text}, {"tokenizer", s.tokenizer->name()}};
  }
  s.record["stream_tokens"] = s.tokens.size();
  return s;
}

}  // namespace gatedlm::io
