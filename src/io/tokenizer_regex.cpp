#include "io/tokenizer_regex.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace gatedlm::io {

namespace {

bool is_ascii_letter(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
char other_case(int c) { return static_cast<char>(c ^ 0x20); }

// The other case of the letters in the ASCII range lo-hi ("a-f" -> "A-F"), as class items.
std::string other_case_items(int lo, int hi) {
  std::string items;
  for (const auto& [from, to] : {std::pair{'a', 'z'}, std::pair{'A', 'Z'}}) {
    const int a = std::max<int>(lo, from), b = std::min<int>(hi, to);
    if (a > b) continue;
    items += other_case(a);
    if (b > a) items += std::string("-") + other_case(b);
  }
  return items;
}

// One left-to-right pass over the pattern; `fold_` is true inside a (?i:...) group.
class OnigurumaToPcre2 {
 public:
  OnigurumaToPcre2(const std::string& pattern, const std::string& source) : in_(pattern), source_(source) {}

  std::string run() {
    while (i_ < in_.size()) step();
    return out_;
  }

 private:
  void step() {
    const char c = in_[i_];
    if (c == '\\') {
      out_ += escape(false);
    } else if (c == '[') {
      character_class();
    } else if (c == '(') {
      open_group();
    } else if (c == ')') {
      if (!folds_.empty()) fold_ = folds_.back(), folds_.pop_back();
      out_ += c, ++i_;
    } else if (c == '^' || c == '$') {
      out_ += std::string("(?m:") + c + ")", ++i_;
    } else if (fold_ && is_ascii_letter(c)) {
      out_ += std::string("[") + c + other_case(c) + "]", ++i_;
    } else {
      out_ += c, ++i_;  // UTF-8 continuation bytes are copied one by one, unchanged
    }
  }

  [[noreturn]] void refuse(const std::string& what) const {
    constexpr size_t kShown = 200;
    fail(source_, ": the pre-tokenizer regex /", in_.size() > kShown ? in_.substr(0, kShown) + "..." : in_, "/ has ",
         what, " at offset ", i_, ", which gatedlm cannot translate from Oniguruma's syntax to PCRE2's");
  }

  // Copies in_ from i_ through the first `close` (or to the end).
  std::string copy_through(char close) {
    const size_t end = std::min(in_.find(close, i_), in_.size() - 1);
    std::string s = in_.substr(i_, end + 1 - i_);
    i_ = end + 1;
    return s;
  }

  // The escape at i_ (a backslash), rewritten; `in_class`: inside [...].
  std::string escape(bool in_class) {
    if (i_ + 1 >= in_.size()) return ++i_, "\\";  // PCRE2 reports the trailing backslash
    const char c = in_[i_ + 1];
    i_ += 2;
    switch (c) {
      case 's': return "\\p{White_Space}";
      case 'S': return "\\P{White_Space}";
      case 'h': return in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]";
      case 'H':
        if (in_class) refuse("\\H (not a hexadecimal digit) inside a character class");
        return "[^0-9A-Fa-f]";
      case 'u':
        if (i_ + 4 <= in_.size() && std::all_of(in_.begin() + i_, in_.begin() + i_ + 4, is_hex_digit)) {
          i_ += 4;
          return "\\x{" + in_.substr(i_ - 4, 4) + "}";
        }
        refuse("\\u without four hexadecimal digits");
      default: break;
    }
    // The escape's own argument is copied as it is: its letters are no pattern letters to fold.
    std::string s = std::string("\\") + c;
    const bool more = i_ < in_.size();
    if (more && (c == 'p' || c == 'P' || c == 'x' || c == 'o') && in_[i_] == '{') {
      s += copy_through('}');
    } else if (more && (c == 'p' || c == 'P' || c == 'c')) {
      s += in_[i_++];
    } else if (c == 'x') {
      for (int k = 0; k < 2 && i_ < in_.size() && is_hex_digit(in_[i_]); ++k) s += in_[i_++];
    } else if (more && (c == 'k' || c == 'g') && (in_[i_] == '<' || in_[i_] == '\'')) {
      s += copy_through(in_[i_] == '<' ? '>' : '\'');
    }
    return s;
  }

  void open_group() {
    folds_.push_back(fold_);
    if (in_.compare(i_, 4, "(?i:") == 0) {
      out_ += "(?:", i_ += 4, fold_ = true;
      return;
    }
    const char after = i_ + 2 < in_.size() && in_[i_ + 1] == '?' ? in_[i_ + 2] : '\0';
    if ((after == '<' && i_ + 3 < in_.size() && in_[i_ + 3] != '=' && in_[i_ + 3] != '!') || after == '\'') {
      out_ += copy_through(after == '<' ? '>' : '\'');  // a named group: the name is copied as it is
      return;
    }
    if (is_ascii_letter(after) || after == '-') refuse("an inline option group other than (?i:...)");
    out_ += '(', ++i_;
  }

  // [...] : items copied (escapes rewritten); under (?i:...) the other case of each literal
  // ASCII letter or letter range is added before the closing bracket.
  void character_class() {
    out_ += '[', ++i_;
    if (i_ < in_.size() && in_[i_] == '^') out_ += '^', ++i_;
    if (i_ < in_.size() && in_[i_] == ']') out_ += "\\]", ++i_;  // a leading ] is a literal
    std::string folded;
    while (i_ < in_.size()) {
      const char c = in_[i_];
      if (c == ']') {
        out_ += folded + "]", ++i_;
        return;
      }
      if (c == '[') {
        if (in_.compare(i_, 2, "[:") != 0) refuse("a character class nested in another (a union)");
        out_ += copy_through(']');  // a POSIX class, [:alpha:]
        continue;
      }
      if (in_.compare(i_, 2, "&&") == 0) refuse("a character class intersection (&&)");
      if (c == '\\') {
        out_ += escape(true);
        continue;
      }
      out_ += c, ++i_;
      const int lo = static_cast<unsigned char>(c);
      if (lo >= 0x80) continue;  // a byte of a multi-byte character: copied, never folded
      const bool range = i_ + 1 < in_.size() && in_[i_] == '-' && in_[i_ + 1] != ']' && in_[i_ + 1] != '\\' &&
                         in_[i_ + 1] != '[' && static_cast<unsigned char>(in_[i_ + 1]) < 0x80;
      const int hi = range ? in_[i_ + 1] : lo;
      if (range) out_ += in_.substr(i_, 2), i_ += 2;
      if (fold_) folded += other_case_items(lo, hi);
    }
    // Unterminated: PCRE2 reports the missing ].
  }

  const std::string& in_;
  const std::string& source_;
  size_t i_ = 0;
  std::string out_;
  bool fold_ = false;
  std::vector<bool> folds_;  // fold_ outside each open group
};

}  // namespace

std::string pcre2_pattern_from_oniguruma(const std::string& pattern, const std::string& source) {
  return OnigurumaToPcre2(pattern, source).run();
}

}  // namespace gatedlm::io
