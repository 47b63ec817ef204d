// Chat templates' whitespace as transformers renders them (trim_blocks and lstrip_blocks on,
// a final newline dropped), the tags' `-` and `+` controls, comments, and string literals.
#include <gtest/gtest.h>

#include <string>

#include "chat/jinja_lexer.h"
#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::render;

TEST(JinjaWhitespace, OneFinalNewlineOfTheSourceIsDropped) {
  EXPECT_EQ(render("hello\n"), "hello");
  EXPECT_EQ(render("hello\n\n"), "hello\n");
  EXPECT_EQ(render("hello"), "hello");
}

TEST(JinjaWhitespace, TrimBlocksRemovesTheNewlineAfterABlockTagOnly) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  // Not after an expression: {{ }} keeps the newline that follows it.
  EXPECT_EQ(render("{{ 'x' }}\ny"), "x\ny");
  // A comment is trimmed like a block.
  EXPECT_EQ(render("a{# note #}\nb"), "ab");
}

TEST(JinjaWhitespace, LstripBlocksRemovesTheIndentOfALineThatStartsWithABlockTag) {
  EXPECT_EQ(render("a\n    {% if true %}b{% endif %}"), "a\nb");
  EXPECT_EQ(render("a\n  {# c #}\nb"), "a\nb");
  // Not before {{ }}, nor when the line holds text before the tag.
  EXPECT_EQ(render("a\n    {{ 'b' }}"), "a\n    b");
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");
  // At the start of the template, and after a trimmed newline.
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("{% if true %}\n    {% if true %}y{% endif %}\n{% endif %}"), "y");
}

TEST(JinjaWhitespace, DashesStripAllWhiteSpaceOnTheirSide) {
  EXPECT_EQ(render("a  \n  {%- if true %}b{% endif %}"), "ab");
  EXPECT_EQ(render("{% if true -%}  \n  b{% endif %}"), "b");
  EXPECT_EQ(render("a \n {{- 'x' -}} \n b"), "axb");
  EXPECT_EQ(render("a \n {#- c -#} \n b"), "ab");
  // The usual indented form of chat templates renders nothing of its indentation.
  EXPECT_EQ(render("{%- for m in ms %}\n    {{- m }}\n{%- endfor %}", jinja_testing::context(R"({"ms": [1, 2]})")), "12");
}

TEST(JinjaWhitespace, PlusKeepsWhatTrimAndLstripWouldRemove) {
  EXPECT_EQ(render("a\n    {%+ if true %}b{% endif %}"), "a\n    b");
  EXPECT_EQ(render("{% if true +%}\nb{% endif %}"), "\nb");
}

TEST(JinjaWhitespace, CarriageReturnsReadAsNewlines) {
  EXPECT_EQ(render("{% if true %}\r\nwin{% endif %}\r\n"), "win");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaWhitespace, GenerationBlocksRenderTheirBody) {
  // transformers marks the assistant's part with {% generation %}; it renders as plain text.
  EXPECT_EQ(render("a\n{% generation %}\ngen\n{% endgeneration %}\nb"), "a\ngen\nb");
}

TEST(JinjaStringLiterals, PythonEscapes) {
  EXPECT_EQ(render(R"({{ 'a\tb\nc' }})"), "a\tb\nc");
  EXPECT_EQ(render(R"({{ '\x41\u00e9\U0001F600' }})"), "A\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(render(R"({{ 'it\'s' }}|{{ "say \"hi\"" }}|{{ 'back\\slash' }})"), "it's|say \"hi\"|back\\slash");
  // An escape Python does not know stays as written.
  EXPECT_EQ(render(R"({{ '\d+' }})"), "\\d+");
  EXPECT_EQ(render(R"({{ '\101' }})"), "A");
  // Adjacent literals join, as in Python.
  EXPECT_EQ(render("{{ 'a' \"b\" 'c' }}"), "abc");
}

TEST(JinjaStringLiterals, BracesInsideAnExpressionDoNotCloseIt) {
  EXPECT_EQ(render("{{ {'a': {'b': 1}}['a']['b'] }}"), "1");
  EXPECT_EQ(render("{{ '}}' ~ '%}' }}"), "}}%}");
}

TEST(JinjaLexer, TokensCarryTheirOffsets) {
  const std::vector<Token> tokens = tokenize("ab{{ x.y }}");
  ASSERT_EQ(tokens.size(), 7u);
  EXPECT_EQ(tokens[0].kind, TokenKind::text);
  EXPECT_EQ(tokens[0].value, "ab");
  EXPECT_EQ(tokens[1].kind, TokenKind::open_expression);
  EXPECT_EQ(tokens[1].offset, 2u);
  EXPECT_EQ(tokens[2].value, "x");
  EXPECT_EQ(tokens[2].offset, 5u);
  EXPECT_EQ(tokens[3].value, ".");
  EXPECT_EQ(tokens[5].kind, TokenKind::close_expression);
  EXPECT_EQ(tokens[6].kind, TokenKind::end);
}

TEST(JinjaLexer, NumbersAndOperators) {
  const std::vector<Token> tokens = tokenize("{{ 1.5e3 // 2 ** x.0 }}");
  ASSERT_EQ(tokens.size(), 10u);
  EXPECT_EQ(tokens[1].kind, TokenKind::floating);
  EXPECT_EQ(tokens[1].value, "1.5e3");
  EXPECT_EQ(tokens[2].value, "//");
  EXPECT_EQ(tokens[3].kind, TokenKind::integer);
  EXPECT_EQ(tokens[4].value, "**");
  // x.0 is an attribute chain, not x followed by the float .0
  EXPECT_EQ(tokens[6].value, ".");
  EXPECT_EQ(tokens[7].kind, TokenKind::integer);
}

}  // namespace
}  // namespace gatedlm::chat
