// The Python methods chat templates call on strings and dicts, and Jinja's tests (`is`).
#include <gtest/gtest.h>

#include <string>

#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::context;
using jinja_testing::error_of;
using jinja_testing::render;

TEST(JinjaMethods, StripFamilyWithAndWithoutChars) {
  EXPECT_EQ(render("[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}]"), "[x][x  ][  x]");
  // With chars only those go: the spaces after the newline stay.
  EXPECT_EQ(render("[{{ '\\n\\nx\\n'.strip('\\n') }}][{{ 'xyhixy'.strip('xy') }}][{{ '\\n  x'.lstrip('\\n') }}]"), "[x][hi][  x]");
}

TEST(JinjaMethods, SplitAsPython) {
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}|{{ '  a b  c '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ ' a b c'.split(none, 1) }}"),
            "['a', 'b', '', 'c']|['a', 'b', 'c']|['a', 'b,c']|['a', 'b c']");
  // What the Qwen3 templates do with reasoning in the content.
  const auto ctx = context(R"({"c": "<think>\nplan\n</think>\n\nanswer"})");
  EXPECT_EQ(render("[{{ c.split('</think>')[-1].lstrip('\\n') }}][{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}]",
                   ctx),
            "[answer][plan]");
  EXPECT_EQ(error_of("{{ 'a'.split('') }}"), "chat template test.jinja: line 1, column 13: str.split: empty separator");
}

TEST(JinjaMethods, OtherStringMethods) {
  EXPECT_EQ(render("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('x') }}"),
            "TrueTrueTrueFalse");
  EXPECT_EQ(render("{{ 'ab c'.upper() }}|{{ 'AB'.lower() }}|{{ \"they're 1st\".title() }}|{{ 'hELLO'.capitalize() }}"),
            "AB C|ab|They'Re 1St|Hello");
  EXPECT_EQ(render("{{ 'a-b-c'.replace('-', '+') }}|{{ 'a-b-c'.replace('-', '+', 1) }}"), "a+b+c|a+b-c");
  EXPECT_EQ(render("{{ 'h\xc3\xa9llo'.find('l') }}|{{ 'abc'.find('z') }}|{{ 'banana'.count('an') }}|{{ ', '.join(['a', 'b']) }}"),
            "2|-1|2|a, b");
  EXPECT_EQ(error_of("{{ 'a'.nosuch() }}"), "chat template test.jinja: line 1, column 14: string has no attribute 'nosuch': cannot call it");
}

TEST(JinjaMethods, DictMethods) {
  const auto ctx = context(R"({"d": {"a": 1, "b": 2}, "tricky": {"items": 5}})");
  EXPECT_EQ(render("{{ d.get('a') }}|{{ d.get('z', 'dflt') }}|{{ d.get('z') }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}",
                   ctx),
            "1|dflt|None|['a', 'b']|[1, 2]|[('a', 1), ('b', 2)]");
  // A key shadows a method for attribute access, and a call is the method, as in Python.
  EXPECT_EQ(render("{{ tricky.items }}|{% for k, v in tricky.items() %}{{ k }}{{ v }}{% endfor %}", ctx), "5|items5");
}

TEST(JinjaTests, TypeTests) {
  const auto ctx = context(R"({"m": {"a": 1}, "l": [1], "s": "x", "n": null})");
  EXPECT_EQ(render("{{ nope is defined }}{{ s is defined }}{{ nope is undefined }}{{ n is none }}{{ s is none }}", ctx),
            "FalseTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ s is string }}{{ l is string }}{{ m is mapping }}{{ l is mapping }}", ctx), "TrueFalseTrueFalse");
  // Python's iterables and sequences: lists, strings and dicts.
  EXPECT_EQ(render("{{ l is iterable }}{{ s is iterable }}{{ m is iterable }}{{ 1 is iterable }}{{ l is sequence }}{{ 1 is sequence }}", ctx),
            "TrueTrueTrueFalseTrueFalse");
  // Python's bool is a number but not an integer for Jinja.
  EXPECT_EQ(render("{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.5 is float }}{{ 1 is float }}"),
            "TrueTrueTrueTrueFalseTrueFalse");
  EXPECT_EQ(render("{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}"),
            "TrueFalseTrueFalseTrueFalse");
  EXPECT_EQ(render("{{ range is callable }}{{ 'x' is callable }}"), "TrueFalse");
}

TEST(JinjaTests, ValueTests) {
  EXPECT_EQ(render("{{ 3 is odd }}{{ 4 is even }}{{ 4 is not odd }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'aBc' is lower }}"),
            "TrueTrueTrueTrueTrueFalse");
  // Tests with an argument, in parentheses or not.
  EXPECT_EQ(render("{{ 2 is in [1, 2] }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is eq 'a' }}{{ 3 is gt 2 }}{{ 3 is ne 3 }}"),
            "TrueTrueFalseTrueTrueFalse");
  // `is not` and a conditional expression around a test.
  EXPECT_EQ(render("{{ 'y' if nope is not defined else 'n' }}|{{ 1 is not none and 2 is odd }}"), "y|False");
  EXPECT_EQ(error_of("{{ 'a' is odd }}"), "chat template test.jinja: line 1, column 8: the test 'odd' needs a number, not string");
}

}  // namespace
}  // namespace gatedlm::chat
