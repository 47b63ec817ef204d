// Errors of chat templates: each a TemplateError naming the template's origin, the line and
// the column, found when parsing where the syntax is at fault and when rendering otherwise.
#include <gtest/gtest.h>

#include <string>

#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::error_of;

TEST(JinjaErrors, AnEndTagWithoutItsBlockNamesTheLine) {
  EXPECT_EQ(error_of("{% endfor %}"), "chat template test.jinja: line 1, column 4: unexpected 'endfor' (no open 'for')");
  EXPECT_EQ(error_of("a\nb\n{% for x in y %}\n{% if x %}\n{% endfor %}"),
            "chat template test.jinja: line 5, column 4: unexpected 'endfor' (the 'if' of line 4 is still open)");
  EXPECT_EQ(error_of("{% if a %}{% else %}{% elif b %}{% endif %}"),
            "chat template test.jinja: line 1, column 24: unexpected 'elif' (the 'if' of line 1 is still open)");
}

TEST(JinjaErrors, ABlockLeftOpenNamesWhereItOpened) {
  EXPECT_EQ(error_of("x\n  {% for m in messages %}\nabc"),
            "chat template test.jinja: line 2, column 3: 'for' is never closed (the template ends before its 'endfor')");
}

TEST(JinjaErrors, SyntaxErrorsAreFoundWhenParsing) {
  // Parsing alone throws: the template is never rendered.
  EXPECT_THROW(JinjaTemplate::parse("{{ 1 + }}", "t"), TemplateError);
  EXPECT_EQ(error_of("{{ 1 + }}"), "chat template test.jinja: line 1, column 8: expected an expression, found '}}'");
  EXPECT_EQ(error_of("{{ 'open }}"), "chat template test.jinja: line 1, column 4: this string is never closed");
  EXPECT_EQ(error_of("{{ (1 }}"), "chat template test.jinja: line 1, column 7: unexpected '}' (the '(' before it is still open)");
  EXPECT_EQ(error_of("{# open"), "chat template test.jinja: line 1, column 1: this comment is never closed ('#}' missing)");
  EXPECT_EQ(error_of("{{ a ! b }}"), "chat template test.jinja: line 1, column 6: unexpected character '!' inside a tag");
  EXPECT_EQ(error_of("{% bogus %}"), "chat template test.jinja: line 1, column 4: unknown tag 'bogus'");
  EXPECT_EQ(error_of("{% break %}"), "chat template test.jinja: line 1, column 1: 'break' outside a loop");
  EXPECT_EQ(error_of("{% macro m(a=1, b) %}{% endmacro %}"),
            "chat template test.jinja: line 1, column 17: a parameter without a default follows one with a default");
}

TEST(JinjaErrors, TagsChatTemplatesDoNotGetAreRefusedByName) {
  EXPECT_EQ(error_of("{% include 'other.jinja' %}"),
            "chat template test.jinja: line 1, column 4: the tag 'include' is not supported in chat templates");
  EXPECT_EQ(error_of("{% extends 'base' %}"),
            "chat template test.jinja: line 1, column 4: the tag 'extends' is not supported in chat templates");
}

TEST(JinjaErrors, RenderErrorsNameTheExpression) {
  EXPECT_EQ(error_of("line one\n{{ x | nosuchfilter }}"), "chat template test.jinja: line 2, column 6: unknown filter 'nosuchfilter'");
  EXPECT_EQ(error_of("{{ nope + 1 }}"), "chat template test.jinja: line 1, column 9: 'nope' is undefined");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "chat template test.jinja: line 1, column 8: '+' cannot combine string and integer");
  EXPECT_EQ(error_of("{{ x is shiny }}"), "chat template test.jinja: line 1, column 6: unknown test 'shiny'");
  EXPECT_EQ(error_of("{{ nope() }}"), "chat template test.jinja: line 1, column 8: 'nope' is undefined: cannot call it");
}

TEST(JinjaErrors, ColumnsCountCharactersNotBytes) {
  // 'é' is two bytes and one character: the '|' is the fifth character.
  EXPECT_EQ(error_of("\xc3\xa9{{x|nope}}"), "chat template test.jinja: line 1, column 5: unknown filter 'nope'");
}

TEST(JinjaErrors, TheErrorKeepsItsPartsApart) {
  try {
    JinjaTemplate::parse("a\n{{ 1 // 0 }}", "tokenizer_config.json").render(nullptr);
    FAIL() << "expected a TemplateError";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.origin, "tokenizer_config.json");
    EXPECT_EQ(e.line, 2u);
    EXPECT_EQ(e.column, 6u);
    EXPECT_EQ(e.detail, "integer division or modulo by zero");
    EXPECT_FALSE(e.raised_by_template);
  }
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesOwnMessage) {
  const auto t = JinjaTemplate::parse("{% if x < 0 %}\n  {{ raise_exception('x must not be negative') }}\n{% endif %}ok", "t");
  EXPECT_EQ(t.render(jinja_testing::context(R"({"x": 1})")), "ok");
  try {
    t.render(jinja_testing::context(R"({"x": -1})"));
    FAIL() << "expected a TemplateError";
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised_by_template);
    EXPECT_EQ(e.detail, "x must not be negative");
    EXPECT_EQ(e.line, 2u);
  }
}

TEST(JinjaErrors, TheContextMustBeAnObject) {
  EXPECT_THROW(JinjaTemplate::parse("x", "t").render(nlohmann::ordered_json::array()), TemplateError);
}

}  // namespace
}  // namespace gatedlm::chat
