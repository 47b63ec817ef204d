#pragma once
// Tokens to the statements of a template, with Jinja's grammar and operator precedence
// (loosest first): `x if c else y`; or; and; not; comparisons, `in`, `not in` (chained as
// in Python); + -; ~; * / // %; ** (left to right, as Jinja); unary - +; then postfix
// .attr [index] [a:b:c] (call) |filter `is test`.
// Throws EvalError with the offset of the token at fault.
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace gatedlm::chat {

// Nesting deeper than this (brackets, blocks, chains of operators) is refused at parse time:
// rendering recurses along the tree, and a hostile template must not exhaust the stack.
constexpr int kMaxNesting = 200;

// `source` is what the tokens were cut from: messages about a block left open name its line.
Body parse_template(const std::vector<Token>& tokens, std::string_view source);

}  // namespace gatedlm::chat
