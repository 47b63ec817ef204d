#include "chat/jinja_lexer.h"

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The value of a hex or octal escape's digits; false when there are fewer than `count`.
bool read_digits(std::string_view s, size_t at, size_t count, int base, char32_t& value) {
  value = 0;
  for (size_t k = 0; k < count; ++k) {
    if (at + k >= s.size()) return false;
    const char c = s[at + k];
    if (base == 16 ? !is_hex(c) : (c < '0' || c > '7')) return false;
    const int digit = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
    value = value * static_cast<char32_t>(base) + static_cast<char32_t>(digit);
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {
    // keep_trailing_newline is off in transformers' environment: one final "\n" goes.
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      if (in_tag_)
        lex_inside_tag();
      else
        lex_text_and_open();
    }
    if (in_tag_) throw EvalError("this tag is never closed", tag_start_);
    tokens_.push_back({TokenKind::end, "", src_.size()});
    return std::move(tokens_);
  }

 private:
  bool at(std::string_view s) const { return src_.substr(pos_, s.size()) == s; }

  void lex_text_and_open() {
    size_t end = pos_;
    while (end < src_.size()) {
      end = src_.find('{', end);
      if (end == std::string_view::npos) end = src_.size();
      if (end + 1 < src_.size() && (src_[end + 1] == '{' || src_[end + 1] == '%' || src_[end + 1] == '#')) break;
      if (end < src_.size()) ++end;
    }
    if (end > pos_) tokens_.push_back({TokenKind::text, std::string(src_.substr(pos_, end - pos_)), pos_});
    pos_ = end;
    if (pos_ >= src_.size()) return;
    const char kind = src_[pos_ + 1];
    tag_start_ = pos_;
    const char control = pos_ + 2 < src_.size() ? src_[pos_ + 2] : '\0';
    if (control == '-') {
      strip_previous_text(trailing_space_bytes(previous_text()));
    } else if (kind != '{' && control != '+') {
      lstrip_block();
    }
    pos_ += 2 + (control == '-' || control == '+' ? 1 : 0);
    if (kind == '#') return lex_comment();
    tokens_.push_back({kind == '%' ? TokenKind::open_statement : TokenKind::open_expression, kind == '%' ? "{%" : "{{",
                       tag_start_});
    in_tag_ = true;
  }

  std::string_view previous_text() const {
    if (tokens_.empty() || tokens_.back().kind != TokenKind::text) return {};
    return tokens_.back().value;
  }

  void strip_previous_text(size_t bytes) {
    if (bytes == 0) return;
    std::string& text = tokens_.back().value;
    text.resize(text.size() - bytes);
    if (text.empty()) tokens_.pop_back();
  }

  // lstrip_blocks: the white space between the start of the line and this tag goes, if the
  // line holds nothing else before it.
  void lstrip_block() {
    const std::string_view text = previous_text();
    if (text.empty()) return;
    const size_t newline = text.rfind('\n');
    if (newline == std::string_view::npos && !text_starts_line_) return;
    const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
    const std::string_view tail = text.substr(line_start);
    if (leading_space_bytes(tail) == tail.size()) strip_previous_text(tail.size());
  }

  void lex_comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) throw EvalError("this comment is never closed ('#}' missing)", tag_start_);
    const bool strip_after = close > pos_ && src_[close - 1] == '-';
    pos_ = close + 2;
    after_block_end(strip_after, false);
  }

  // What follows the end of a block or comment: white space removed by `-`, else the first
  // newline by trim_blocks (unless `+`).
  void after_block_end(bool strip_after, bool keep_newline) {
    if (strip_after) {
      pos_ += leading_space_bytes(src_.substr(pos_));
    } else if (!keep_newline && at("\n")) {
      ++pos_;
    }
    text_starts_line_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  bool try_close_tag() {
    if (!brackets_.empty()) return false;  // `}}` inside {'a': {}} closes a dict, not the tag
    const bool dash = at("-%}") || at("-}}");
    const bool plus = at("+%}");
    const size_t skip = dash || plus ? 1 : 0;
    const std::string_view close = src_.substr(pos_ + skip, 2);
    if (close != "%}" && close != "}}") return false;
    const bool statement = close == "%}";
    if (statement != (tokens_[open_token_index()].kind == TokenKind::open_statement)) return false;
    tokens_.push_back({statement ? TokenKind::close_statement : TokenKind::close_expression, std::string(close), pos_});
    pos_ += skip + 2;
    in_tag_ = false;
    // trim_blocks concerns blocks only; `-}}` still strips.
    after_block_end(dash, plus || !statement);
    return true;
  }

  size_t open_token_index() const {
    for (size_t i = tokens_.size(); i-- > 0;)
      if (tokens_[i].kind == TokenKind::open_statement || tokens_[i].kind == TokenKind::open_expression) return i;
    return 0;
  }

  void lex_inside_tag() {
    pos_ += leading_space_bytes(src_.substr(pos_));
    if (pos_ >= src_.size() || try_close_tag()) return;
    const char c = src_[pos_];
    if (c == '\'' || c == '"') return lex_string(c);
    if (is_digit(c)) return lex_number();
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < src_.size() && (is_name_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
      tokens_.push_back({TokenKind::name, std::string(src_.substr(start, pos_ - start)), start});
      return;
    }
    lex_operator();
  }

  void lex_operator() {
    static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (at(op)) {
        tokens_.push_back({TokenKind::op, std::string(op), pos_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("()[]{},.:|=<>+-~*/%").find(c) == std::string_view::npos) {
      size_t end = pos_;
      std::string shown;
      append_utf8(shown, next_code_point(src_, end));
      throw EvalError(cat("unexpected character '", shown, "' inside a tag"), pos_);
    }
    track_bracket(c);
    tokens_.push_back({TokenKind::op, std::string(1, c), pos_});
    ++pos_;
  }

  void track_bracket(char c) {
    if (c == '(' || c == '[' || c == '{') {
      brackets_.push_back(pos_);
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets_.empty()) throw EvalError(cat("unexpected '", c, "' (nothing open to close)"), pos_);
      const char open = src_[brackets_.back()];
      if ((open == '(' ? ')' : open == '[' ? ']' : '}') != c)
        throw EvalError(cat("unexpected '", c, "' (the '", open, "' before it is still open)"), pos_);
      brackets_.pop_back();
    }
  }

  void lex_number() {
    const size_t start = pos_;
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    bool floating = false;
    // `x.0.1` is an attribute chain, not the number 0.1.
    const bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::op && tokens_.back().value == ".";
    if (!after_dot && at(".") && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])) {
      floating = true;
      ++pos_;
      while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    }
    size_t e = pos_;
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      ++e;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        floating = true;
        pos_ = e;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    tokens_.push_back(
        {floating ? TokenKind::floating : TokenKind::integer, std::string(src_.substr(start, pos_ - start)), start});
  }

  void lex_string(char quote) {
    const size_t start = pos_++;
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) throw EvalError("this string is never closed", start);
      const char c = src_[pos_];
      if (c == quote) break;
      if (c == '\\') {
        lex_escape(value);
      } else {
        value += c;
        ++pos_;
      }
    }
    ++pos_;
    tokens_.push_back({TokenKind::string, std::move(value), start});
  }

  // Python's string escapes (Jinja reads its literals as Python does); an unknown one, such
  // as \d, stays as written.
  void lex_escape(std::string& value) {
    const size_t start = pos_;
    if (pos_ + 1 >= src_.size()) throw EvalError("this string is never closed", start);
    const char e = src_[pos_ + 1];
    pos_ += 2;
    static constexpr std::string_view kFrom = "ntrbfva\\'\"";
    static constexpr std::string_view kTo = "\n\t\r\b\f\v\a\\'\"";
    if (const size_t k = kFrom.find(e); k != std::string_view::npos) {
      value += kTo[k];
    } else if (e == '\n') {
      // a line continuation: nothing
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const size_t count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      char32_t c = 0;
      if (!read_digits(src_, pos_, count, 16, c)) throw EvalError(cat("truncated \\", e, " escape"), start);
      append_utf8(value, c);
      pos_ += count;
    } else if (e >= '0' && e <= '7') {
      size_t count = 1;
      while (count < 3 && pos_ - 1 + count < src_.size() && src_[pos_ - 1 + count] >= '0' &&
             src_[pos_ - 1 + count] <= '7')
        ++count;
      char32_t c = 0;
      read_digits(src_, pos_ - 1, count, 8, c);
      append_utf8(value, c);
      pos_ += count - 1;
    } else {
      value += '\\';
      value += e;
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  bool in_tag_ = false;
  size_t tag_start_ = 0;
  bool text_starts_line_ = true;  // the next text begins a line (template start, or after a trimmed newline)
  std::vector<size_t> brackets_;  // offsets of the open brackets inside the current tag
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::end: return "the end of the template";
    case TokenKind::text: return "text";
    case TokenKind::string: return "a string";
    default: return "'" + token.value + "'";
  }
}

}  // namespace gatedlm::chat
