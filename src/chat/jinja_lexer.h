#pragma once
// A chat template's source cut into tokens: text, the tags' delimiters and what is inside
// them. Whitespace is handled here, as transformers configures Jinja for chat templates
// (trim_blocks and lstrip_blocks on, one trailing newline dropped), which @huggingface/jinja
// follows too:
//   - `{%-`, `{{-`, `{#-` remove the white space before the tag, `-%}`, `-}}`, `-#}` the
//     white space after it;
//   - trim_blocks: the first newline after a block or comment tag (`%}`, `#}`) is removed;
//   - lstrip_blocks: spaces and tabs from the start of a line to a block or comment tag are
//     removed (not before `{{`);
//   - `{%+` keeps the white space before a block tag; a final "\n" of the source is dropped.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gatedlm::chat {

enum class TokenKind {
  text,              // literal text between tags
  open_statement,    // {%
  close_statement,   // %}
  open_expression,   // {{
  close_expression,  // }}
  name,              // identifiers and keywords (if, for, in, and, not, ...)
  string,            // a string literal, escapes resolved
  integer,
  floating,
  op,                // ( ) [ ] { } , . : | = == != < > <= >= + - ~ * / // % **
  end,               // after the last token
};

struct Token {
  TokenKind kind;
  std::string value;  // the text, the name, the literal's value or the operator
  size_t offset;      // byte offset of the token in the source, for messages
};

// Throws EvalError (with the offset) for an unterminated comment, string or tag, and for a
// character that starts no token.
std::vector<Token> tokenize(std::string_view source);

// How a token reads in messages: "'endfor'", "'%}'", "the end of the template".
std::string describe(const Token& token);

}  // namespace gatedlm::chat
