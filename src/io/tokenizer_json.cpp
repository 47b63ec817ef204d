#include "io/tokenizer_json.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <climits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/json_file.h"
#include "io/text_corpus.h"
#include "io/tokenizer_regex.h"

namespace gatedlm::io {

namespace {

using nlohmann::json;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length in bytes of the UTF-8 sequence that starts with byte c (1 for a stray byte).
size_t utf8_length(unsigned char c) {
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  if (c >= 0xC0) return 2;
  return 1;
}

// The largest token id accepted: twice the tokens the file lists, plus some room. Real
// vocabularies are dense; an id far past the count would only size the id table (one
// string per id) from a number in the file.
int64_t id_limit(const json& j) {
  int64_t listed = 0;
  if (j.contains("model") && j["model"].is_object() && j["model"].contains("vocab") && j["model"]["vocab"].is_object())
    listed += static_cast<int64_t>(j["model"]["vocab"].size());
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    listed += static_cast<int64_t>(j["added_tokens"].size());
  return 2 * listed + 256;
}

// Where the run of White_Space characters that ends at `end` (and starts at or after
// `from`) starts, and where the run that starts at `from` ends. Valid UTF-8, read one
// character (at most 4 bytes) at a time.
size_t white_space_start(std::string_view text, size_t from, size_t end) {
  while (end > from) {
    const int32_t window = static_cast<int32_t>(std::min<size_t>(4, end - from));
    int32_t i = window;
    UChar32 c = 0;
    U8_PREV(reinterpret_cast<const uint8_t*>(text.data() + end - window), 0, i, c);
    if (!u_isUWhiteSpace(c)) break;
    end -= static_cast<size_t>(window - i);
  }
  return end;
}
size_t white_space_end(std::string_view text, size_t from) {
  while (from < text.size()) {
    const int32_t window = static_cast<int32_t>(std::min<size_t>(4, text.size() - from));
    int32_t i = 0;
    UChar32 c = 0;
    U8_NEXT(reinterpret_cast<const uint8_t*>(text.data() + from), i, window, c);
    if (!u_isUWhiteSpace(c)) break;
    from += static_cast<size_t>(i);
  }
  return from;
}

}  // namespace

std::string byte_level_symbol(unsigned char byte) {
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  if (printable(byte)) return utf8(byte);
  int shifted = 0;  // the non-printable bytes below this one
  for (int b = 0; b < byte; ++b) shifted += printable(b) ? 0 : 1;
  return utf8(256 + shifted);
}

namespace {

class HfBpeTokenizer final : public Tokenizer {
 public:
  // `source` names the file (or, for text held in memory, where it came from) in messages.
  HfBpeTokenizer(const json& j, const std::string& source) : path_(source) {
    const std::string& path = source;
    if (!j.is_object()) fail(path, ": a tokenizer.json must be a JSON object");
    id_limit_ = id_limit(j);
    // A key of the wrong type or a missing one surfaces as nlohmann's exception, here
    // turned into a message naming the file.
    try {
      read_normalizer(j);
      read_pre_tokenizer(j);
      if (j.contains("decoder") && !j["decoder"].is_null() && j["decoder"].value("type", "") != "ByteLevel")
        fail(path, ": decoder ", j["decoder"].value("type", "?"), " is not supported (ByteLevel only)");
      read_model(j.at("model"));
      read_added_tokens(j);
    } catch (const json::exception& e) {
      fail(path, ": malformed tokenizer.json (", e.what(), ")");
    }
    build_byte_map();
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    if (const int64_t bad = find_invalid_utf8(text); bad >= 0)
      fail(path_, ": cannot encode text that is not valid UTF-8 (byte ", bad, " of the ", text.size(),
           " given starts no valid UTF-8 character)");
    std::vector<int32_t> ids;
    MatchBudget budget{kMatchStepsBase + kMatchStepsPerByte * text.size()};
    // Where each added token occurs next at or after `at` (npos: nowhere), found again only
    // once `at` has passed it: each token's search moves forward only, so many added tokens
    // in a long text cost one pass per token, not one per occurrence.
    std::vector<size_t> next(added_.size(), 0);
    std::vector<bool> searched(added_.size(), false);
    size_t at = 0;
    while (at < text.size()) {
      // The next added token (earliest; the longest at the same position).
      size_t best = std::string_view::npos;
      const AddedToken* found = nullptr;
      for (size_t k = 0; k < added_.size(); ++k) {
        const std::string& content = added_[k].content;
        if (!searched[k] || (next[k] != std::string_view::npos && next[k] < at)) {
          next[k] = text.find(content, at);
          searched[k] = true;
        }
        const size_t p = next[k];
        if (p < best || (p == best && p != std::string_view::npos && content.size() > found->content.size()))
          best = p, found = &added_[k];
      }
      size_t end = found ? best : text.size();
      if (found && found->lstrip) end = white_space_start(text, at, end);
      if (end > at) encode_plain(text.substr(at, end - at), ids, budget);
      if (!found) break;
      ids.push_back(found->id);
      at = best + found->content.size();
      if (found->rstrip) at = white_space_end(text, at);
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= static_cast<int32_t>(tokens_.size()) || tokens_[id].empty())
        fail(path_, ": cannot decode id ", id, " (not in the vocabulary)");
      if (is_added_[id]) {
        text += tokens_[id];
        continue;
      }
      const std::string& t = tokens_[id];
      for (size_t i = 0; i < t.size();) {
        const size_t n = utf8_length(static_cast<unsigned char>(t[i]));
        auto it = unicode_to_byte_.find(t.substr(i, n));
        if (it == unicode_to_byte_.end()) fail(path_, ": token ", id, " holds a character outside the byte map");
        text += static_cast<char>(it->second);
        i += n;
      }
    }
    return text;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  int32_t bos_id() const override { return document_id_; }
  int32_t eos_id() const override { return document_id_; }
  std::string name() const override { return path_; }

  TokenizerJsonVocabulary vocabulary() const {
    using Kind = TokenizerJsonVocabulary::Kind;
    TokenizerJsonVocabulary v;
    v.tokens = tokens_;
    v.kinds.assign(tokens_.size(), Kind::unused);
    for (size_t id = 0; id < tokens_.size(); ++id)
      if (!tokens_[id].empty()) v.kinds[id] = is_added_[id] ? Kind::added : Kind::normal;
    for (int32_t id : special_ids_) v.kinds[id] = Kind::special;
    v.merges = merge_list_;
    v.document_id = document_id_;
    v.split_regex = pattern_;
    v.nfc = nfc_, v.ignore_merges = ignore_merges_;
    return v;
  }

 private:
  void read_normalizer(const json& j) {
    if (!j.contains("normalizer") || j["normalizer"].is_null()) return;
    const std::string type = j["normalizer"].value("type", "");
    if (type != "NFC") fail(path_, ": normalizer ", type, " is not supported (NFC or none)");
    nfc_ = true;
  }

  void read_pre_tokenizer(const json& j) {
    const json& p = j.at("pre_tokenizer");
    std::vector<json> steps;
    if (p.value("type", "") == "Sequence") steps = p.at("pretokenizers").get<std::vector<json>>();
    else steps.push_back(p);
    std::string pattern;
    bool byte_level = false;
    for (const json& s : steps) {
      const std::string type = s.value("type", "");
      if (type == "Split") {
        if (!pattern.empty()) fail(path_, ": more than one Split pre-tokenizer is not supported");
        if (!s.at("pattern").contains("Regex")) fail(path_, ": Split pattern must be a Regex");
        if (s.value("behavior", "") != "Isolated" || s.value("invert", false))
          fail(path_, ": Split behavior ", s.value("behavior", "?"), " is not supported (Isolated, not inverted)");
        pattern = s["pattern"]["Regex"].get<std::string>();
      } else if (type == "ByteLevel") {
        if (s.value("add_prefix_space", false)) fail(path_, ": ByteLevel add_prefix_space is not supported");
        if (s.value("use_regex", true)) {
          if (!pattern.empty()) fail(path_, ": ByteLevel use_regex after a Split is not supported");
          pattern = kGpt2SplitRegex;  // which ByteLevel applies itself when use_regex is true
        }
        byte_level = true;
      } else {
        fail(path_, ": pre-tokenizer ", type, " is not supported (Split and ByteLevel)");
      }
    }
    if (!byte_level || pattern.empty()) fail(path_, ": the pre-tokenizer is not byte-level BPE's (Split + ByteLevel)");
    pattern_ = pattern;
    const std::string translated = pcre2_pattern_from_oniguruma(pattern, path_);
    int code = 0;
    PCRE2_SIZE offset = 0;
    regex_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.c_str()), translated.size(),
                               PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr));
    if (!regex_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(code, message, sizeof(message));
      fail(path_, ": PCRE2 cannot compile the pre-tokenizer regex ", shown_pattern(), " (as PCRE2 spells it: ",
           shown(translated), ") at offset ", offset, " (", reinterpret_cast<const char*>(message), ")");
    }
    pcre2_jit_compile(regex_.get(), PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
  }

  // An id in [0, id_limit_), or an error naming `what` and the value.
  int64_t token_id(const json& v, const std::string& what) const {
    if (!v.is_number_integer()) fail(path_, ": ", what, " is ", v.dump(), ", not an integer");
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(id_limit_)
                                                 : v.get<int64_t>() >= 0 && v.get<int64_t>() < id_limit_;
    if (!in_range)
      fail(path_, ": ", what, " is ", v.dump(), ", out of range [0, ", id_limit_,
           ") (vocabularies are dense: ids below twice the tokens listed, plus 256)");
    return v.get<int64_t>();
  }

  void read_model(const json& m) {
    if (m.value("type", "") != "BPE") fail(path_, ": model type ", m.value("type", "?"), " is not supported (BPE)");
    if (m.value("byte_fallback", false)) fail(path_, ": BPE byte_fallback is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty())
        fail(path_, ": BPE ", key, " is not supported");
    if (m.contains("dropout") && !m["dropout"].is_null()) fail(path_, ": BPE dropout is not supported");
    ignore_merges_ = m.value("ignore_merges", false);
    if (!m.at("vocab").is_object()) fail(path_, ": model.vocab must be an object of token: id");
    for (const auto& [token, id] : m.at("vocab").items()) {
      const int64_t i = token_id(id, "vocab id of \"" + token + "\"");
      if (token.empty()) fail(path_, ": the vocabulary holds an empty token (id ", i, ")");
      if (static_cast<int64_t>(tokens_.size()) <= i) tokens_.resize(i + 1);
      tokens_[i] = token;
      vocab_[token] = static_cast<int32_t>(i);
    }
    int32_t rank = 0;
    for (const json& mg : m.at("merges")) {
      std::string left, right;
      if (mg.is_string()) {
        const std::string s = mg.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos) fail(path_, ": merge \"", s, "\" is not \"left right\"");
        left = s.substr(0, space), right = s.substr(space + 1);
      } else {
        if (!mg.is_array() || mg.size() != 2) fail(path_, ": merge ", mg.dump(), " is not [\"left\", \"right\"]");
        left = mg.at(0).get<std::string>(), right = mg.at(1).get<std::string>();
      }
      if (merges_.emplace(left + '\0' + right, rank++).second) merge_list_.push_back(left + ' ' + right);
    }
  }

  void read_added_tokens(const json& j) {
    for (const json& a : j.value("added_tokens", json::array())) {
      const int64_t id = token_id(a.at("id"), "added token id");
      const std::string content = a.at("content").get<std::string>();
      if (a.value("single_word", false)) fail(path_, ": added token ", content, ": single_word is not supported");
      // An empty added token would match everywhere and never advance the encoder.
      if (content.empty()) fail(path_, ": added token ", id, " is empty");
      if (static_cast<int64_t>(tokens_.size()) <= id) tokens_.resize(id + 1);
      tokens_[id] = content;
      added_.push_back({content, static_cast<int32_t>(id), a.value("lstrip", false), a.value("rstrip", false)});
      if (a.value("special", false)) special_ids_.push_back(static_cast<int32_t>(id));
      if (content == "<|endoftext|>") document_id_ = static_cast<int32_t>(id);
    }
    is_added_.assign(tokens_.size(), false);
    for (const AddedToken& a : added_) is_added_[a.id] = true;
    if (document_id_ < 0) fail(path_, ": no <|endoftext|> token to separate documents");
  }

  void build_byte_map() {
    for (int b = 0; b < 256; ++b) {
      byte_to_unicode_[b] = byte_level_symbol(static_cast<unsigned char>(b));
      unicode_to_byte_[byte_to_unicode_[b]] = static_cast<unsigned char>(b);
    }
  }

  std::string normalize(std::string_view text) const {
    if (!nfc_ || std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      return std::string(text);
    // ICU counts in int32_t; the output buffer holds 3 UTF-16 units per input unit.
    if (text.size() > static_cast<size_t>(INT32_MAX / 4))
      fail(path_, ": cannot normalize ", text.size(), " bytes at once (at most ", INT32_MAX / 4, ")");
    UErrorCode status = U_ZERO_ERROR;
    const UNormalizer2* nfc = unorm2_getNFCInstance(&status);
    int32_t n16 = 0;
    u_strFromUTF8(nullptr, 0, &n16, text.data(), static_cast<int32_t>(text.size()), &status);
    status = U_ZERO_ERROR;
    std::u16string in(static_cast<size_t>(n16), u'\0');
    u_strFromUTF8(reinterpret_cast<UChar*>(in.data()), n16, nullptr, text.data(), static_cast<int32_t>(text.size()),
                  &status);
    std::u16string out(static_cast<size_t>(n16) * 3 + 16, u'\0');
    const int32_t len = unorm2_normalize(nfc, reinterpret_cast<const UChar*>(in.data()), n16,
                                         reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &status);
    if (U_FAILURE(status)) fail(path_, ": NFC normalization failed (", u_errorName(status), ")");
    int32_t n8 = 0;
    u_strToUTF8(nullptr, 0, &n8, reinterpret_cast<const UChar*>(out.data()), len, &status);
    status = U_ZERO_ERROR;
    std::string result(static_cast<size_t>(n8), '\0');
    u_strToUTF8(result.data(), n8, nullptr, reinterpret_cast<const UChar*>(out.data()), len, &status);
    if (U_FAILURE(status)) fail(path_, ": NFC normalization failed (", u_errorName(status), ")");
    return result;
  }

  // PCRE2's match limit counts the steps of one pcre2_match call; a regex that backtracks
  // catastrophically (`(?:a+)+b|.` on runs of "a") may stay under it on every call while
  // the calls add up to minutes. So one encode has a budget of steps per input byte, and
  // each call runs under a limit that starts small and grows 8-fold while it is hit, every
  // try charged at its limit (an upper bound on what it used).
  struct MatchBudget {
    uint64_t left;
  };
  static constexpr uint64_t kMatchStepsBase = 1'000'000, kMatchStepsPerByte = 10'000, kFirstMatchLimit = 1'000;

  // pcre2_match at `at` within the budget; the PCRE2 result (a match count or NOMATCH).
  int match_within_budget(const std::string& text, size_t at, pcre2_match_data* md, pcre2_match_context* ctx,
                          MatchBudget& budget) const {
    for (uint64_t limit = kFirstMatchLimit;; limit *= 8) {
      const uint64_t tried = std::min<uint64_t>({limit, budget.left, UINT32_MAX});
      pcre2_set_match_limit(ctx, static_cast<uint32_t>(tried));
      const int rc = pcre2_match(regex_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                                 PCRE2_NO_UTF_CHECK, md, ctx);
      budget.left -= tried;
      if (rc != PCRE2_ERROR_MATCHLIMIT) {
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof(message));
          fail(path_, ": the pre-tokenizer regex ", shown_pattern(), " failed at byte ", at, " (PCRE2: ",
               reinterpret_cast<const char*>(message), ")");
        }
        return rc;
      }
      if (budget.left == 0)
        fail(path_, ": the pre-tokenizer regex ", shown_pattern(), " ran out of its matching budget (",
             kMatchStepsPerByte, " steps per byte of text) at byte ", at,
             ": it backtracks catastrophically on this text; fix the regex");
    }
  }

  std::string shown_pattern() const { return shown(pattern_); }
  static std::string shown(const std::string& pattern) {
    constexpr size_t kShown = 200;
    return "/" + (pattern.size() > kShown ? pattern.substr(0, kShown) + "..." : pattern) + "/";
  }

  // Normalise, split with the regex (matches and the gaps between them are pieces), BPE
  // each piece.
  void encode_plain(std::string_view raw, std::vector<int32_t>& ids, MatchBudget& budget) const {
    const std::string text = normalize(raw);
    const std::unique_ptr<pcre2_match_data, FreeMatchData> owned(
        pcre2_match_data_create_from_pattern(regex_.get(), nullptr));
    const std::unique_ptr<pcre2_match_context, FreeMatchContext> context(pcre2_match_context_create(nullptr));
    pcre2_match_data* md = owned.get();
    if (!md || !context) throw std::bad_alloc();
    size_t at = 0, gap = 0;
    while (at < text.size()) {
      const int rc = match_within_budget(text, at, md, context.get(), budget);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] == ov[0]) {  // an empty match: step over one character
        at = ov[0] + utf8_length(static_cast<unsigned char>(text[ov[0]]));
        continue;
      }
      if (ov[0] > gap) bpe(text.substr(gap, ov[0] - gap), ids);
      bpe(text.substr(ov[0], ov[1] - ov[0]), ids);
      at = gap = ov[1];
    }
    if (gap < text.size()) bpe(text.substr(gap), ids);
  }

  void bpe(const std::string& piece, std::vector<int32_t>& ids) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(piece);
      if (it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<std::string> symbols;
    std::string mapped;
    for (unsigned char b : piece) {
      symbols.push_back(byte_to_unicode_[b]);
      mapped += byte_to_unicode_[b];
    }
    std::vector<int32_t> out;
    auto whole = vocab_.find(mapped);
    if (ignore_merges_ && whole != vocab_.end()) {
      out.push_back(whole->second);
    } else {
      // Merge the adjacent pair of lowest rank, everywhere it occurs, until none is left.
      while (symbols.size() > 1) {
        int32_t best = INT32_MAX;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
          auto it = merges_.find(symbols[i] + '\0' + symbols[i + 1]);
          if (it != merges_.end()) best = std::min(best, it->second);
        }
        if (best == INT32_MAX) break;
        std::vector<std::string> next;
        for (size_t i = 0; i < symbols.size(); ++i) {
          if (i + 1 < symbols.size()) {
            auto it = merges_.find(symbols[i] + '\0' + symbols[i + 1]);
            if (it != merges_.end() && it->second == best) {
              next.push_back(symbols[i] + symbols[i + 1]);
              ++i;
              continue;
            }
          }
          next.push_back(symbols[i]);
        }
        symbols.swap(next);
      }
      for (const std::string& s : symbols) {
        auto it = vocab_.find(s);
        if (it == vocab_.end()) fail(path_, ": BPE produced \"", s, "\", which is not in the vocabulary");
        out.push_back(it->second);
      }
    }
    ids.insert(ids.end(), out.begin(), out.end());
    // Short pieces only, within a byte budget: a server's cache lives as long as the
    // process, and long pieces (one per hostile request) would only fill it.
    if (piece.size() > kMaxCachedPiece) return;
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const size_t cost = piece.size() + out.size() * sizeof(int32_t) + 64;
    if (cache_bytes_ + cost <= kCacheBytes && cache_.emplace(piece, std::move(out)).second) cache_bytes_ += cost;
  }

  std::string path_, pattern_;
  bool nfc_ = false, ignore_merges_ = false;
  // Owned here, so that a constructor that fails after compiling it (a bad model section,
  // say) frees it too: a destructor would not run then (LeakSanitizer found it, fuzz corpus).
  struct FreeRegex {
    void operator()(pcre2_code* r) const { pcre2_code_free(r); }
  };
  struct FreeMatchData {
    void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
  };
  struct FreeMatchContext {
    void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
  };
  std::unique_ptr<pcre2_code, FreeRegex> regex_;
  std::vector<std::string> tokens_;  // by id
  std::vector<bool> is_added_;
  std::unordered_map<std::string, int32_t> vocab_, merges_;  // merges: "left\0right" -> rank
  // lstrip / rstrip: the token takes the white space (Unicode White_Space) before / after it
  // with it, as Hugging Face's tokenizers do (that text is encoded by no other token).
  struct AddedToken {
    std::string content;
    int32_t id;
    bool lstrip, rstrip;
  };
  std::vector<AddedToken> added_;
  std::vector<int32_t> special_ids_;
  std::vector<std::string> merge_list_;  // "left right", by rank (for vocabulary())
  std::array<std::string, 256> byte_to_unicode_;
  std::unordered_map<std::string, unsigned char> unicode_to_byte_;
  int32_t document_id_ = -1;
  int64_t id_limit_ = 0;
  static constexpr size_t kMaxCachedPiece = 256, kCacheBytes = size_t{64} << 20;
  mutable size_t cache_bytes_ = 0;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

bool is_tokenizer_json(const std::string& spec) {
  return spec.size() >= 5 && spec.compare(spec.size() - 5, 5, ".json") == 0;
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  return std::make_unique<HfBpeTokenizer>(read_json_file(path, "tokenizer.json"), path);
}

std::unique_ptr<Tokenizer> tokenizer_json_from_text(std::string_view text, const std::string& source) {
  return std::make_unique<HfBpeTokenizer>(parse_json_strict(text, source), source);
}

TokenizerJsonVocabulary read_tokenizer_json_vocabulary(const std::string& path) {
  return HfBpeTokenizer(read_json_file(path, "tokenizer.json"), path).vocabulary();
}

}  // namespace gatedlm::io
