// Chat template expressions: Python's arithmetic and comparisons, literals, attribute and
// item access, slices, conditional expressions and undefined values.
#include <gtest/gtest.h>

#include <string>

#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::context;
using jinja_testing::error_of;
using jinja_testing::render;

TEST(JinjaExpressions, ArithmeticAsPython) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 10 - 3 - 2 }}"), "7|9|5");
  // // and % round toward minus infinity; / always gives a float.
  EXPECT_EQ(render("{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 4 / 2 }}"), "3|-4|1|2|3.5|2.0");
  // ** is left-associative in Jinja; a negative power gives a float.
  EXPECT_EQ(render("{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}"), "1024|0.5|64|4");
  EXPECT_EQ(render("{{ 1 + 1.5 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ true + 1 }}"), "2.5|3.0|0.5|2");
  EXPECT_EQ(render("{{ 'ab' * 3 }}|{{ 2 * 'x' }}|{{ 'ab' + 'cd' }}|{{ [1] + [2] }}"), "ababab|xx|abcd|[1, 2]");
}

TEST(JinjaExpressions, TildeJoinsTheTextOfAnything) {
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true ~ nope ~ 2.0 }}"), "a1NoneTrue2.0");
}

TEST(JinjaExpressions, FloatsPrintAsPython) {
  EXPECT_EQ(render("{{ 3.0 }}|{{ 0.1 + 0.2 }}|{{ 1e-5 }}|{{ 1e16 }}|{{ 123456.0 }}|{{ 1.5e-7 }}"),
            "3.0|0.30000000000000004|1e-05|1e+16|123456.0|1.5e-07");
}

TEST(JinjaExpressions, ComparisonsChainAsInPython) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 1 == 1.0 }}|{{ 1 == '1' }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}"),
            "True|False|True|False|True|True");
  EXPECT_EQ(render("{{ [1, [2]] == [1, [2]] }}|{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}|{{ none == none }}"),
            "True|True|True");
  EXPECT_EQ(error_of("{{ [1] < 'a' }}"), "chat template test.jinja: line 1, column 4: cannot order list and string");
}

TEST(JinjaExpressions, MembershipTests) {
  EXPECT_EQ(render("{{ 2 in [1, 2] }}|{{ 'b' in 'abc' }}|{{ 'k' in {'k': 1} }}|{{ 3 not in [1] }}|{{ 1 in nope }}"),
            "True|True|True|True|False");
  EXPECT_EQ(error_of("{{ 1 in 'abc' }}"),
            "chat template test.jinja: line 1, column 4: 'in <string>' needs a string on its left, not integer");
}

TEST(JinjaExpressions, AndOrGiveAnOperandAndNotBindsLoosely) {
  EXPECT_EQ(render("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ none or [] }}"), "x|y||[]");
  EXPECT_EQ(render("{{ not 1 == 2 }}|{{ not 1 in [1] }}|{{ not not 'a' }}"), "True|False|True");
  // The right operand is not evaluated when the left one decides.
  EXPECT_EQ(render("{{ false and nope.x + 1 }}|{{ true or nope + 1 }}"), "False|True");
}

TEST(JinjaExpressions, ConditionalExpressions) {
  EXPECT_EQ(render("{{ 'a' if 0 else 'b' }}|{{ 'c' if 1 }}|{{ 'd' if 0 }}|{{ 1 if false else 2 if false else 3 }}"),
            "b|c||3");
}

TEST(JinjaExpressions, LiteralsRenderAsPythonReprs) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 2.5] }}"), "[1, 'a', None, True, 2.5]");
  EXPECT_EQ(render("{{ {'k': 'v', 'n': [1]} }}"), "{'k': 'v', 'n': [1]}");
  EXPECT_EQ(render("{{ [\"it's\", 'say \"x\"', 'a\\nb'] }}"), "[\"it's\", 'say \"x\"', 'a\\nb']");
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ False }}|{{ None }}"), "None|True|False|None");
  EXPECT_EQ(render("{{ (1, 2) }}|{{ (1,) }}|{{ () }}|{{ [] }}|{{ {} }}|{{ [1, 2,] }}|{{ (1, 2) == [1, 2] }}"), "(1, 2)|(1,)|()|[]|{}|[1, 2]|False");
}

TEST(JinjaExpressions, AttributesAndSubscriptsAreOneForDicts) {
  const auto ctx = context(R"({"m": {"content": "hi", "role": "user"}, "l": [1, 2, 3]})");
  EXPECT_EQ(render("{{ m.content }}|{{ m['content'] }}|{{ m['role'][0] }}|{{ l[-1] }}|{{ l.0 }}", ctx), "hi|hi|u|3|1");
  // Missing keys and indexes are undefined, and so is anything reached through undefined.
  EXPECT_EQ(render("[{{ m.missing }}|{{ m.missing.deeper }}|{{ l[5] }}|{{ nope.x['y'] }}]", ctx), "[|||]");
  EXPECT_EQ(render("{{ m.missing is defined }}|{{ l[1] is defined }}", ctx), "False|True");
}

TEST(JinjaExpressions, SlicesAsPython) {
  const auto ctx = context(R"({"l": [1, 2, 3]})");
  EXPECT_EQ(render("{{ 'abcdef'[1:3] }}|{{ 'abcdef'[-2:] }}|{{ 'abcdef'[::2] }}|{{ 'abcdef'[::-1] }}", ctx),
            "bc|ef|ace|fedcba");
  EXPECT_EQ(render("{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[10:] }}|{{ l[-10:1] }}|{{ l[2:0:-1] }}", ctx),
            "[2, 3]|[1, 2]|[3, 2, 1]|[]|[1]|[3, 2]");
  // Strings index and slice by character.
  EXPECT_EQ(render("{{ 'h\xc3\xa9llo'[1] }}|{{ 'h\xc3\xa9llo'[1:3] }}|{{ 'h\xc3\xa9llo'|length }}"), "\xc3\xa9|\xc3\xa9l|5");
  EXPECT_EQ(error_of("{{ [1][::0] }}"), "chat template test.jinja: line 1, column 7: slice step cannot be zero");
}

TEST(JinjaExpressions, UndefinedIsFalsyAndEmptyButNotANumber) {
  EXPECT_EQ(render("[{{ nope }}]|{{ nope is defined }}|{{ 'yes' if not nope }}|{{ nope|default('d') }}"), "[]|False|yes|d");
  EXPECT_EQ(error_of("{{ nope * 2 }}"), "chat template test.jinja: line 1, column 9: 'nope' is undefined");
}

TEST(JinjaExpressions, IntegerArithmeticStaysWithin64Bits) {
  EXPECT_EQ(render("{{ 9223372036854775806 + 1 }}"), "9223372036854775807");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"),
            "chat template test.jinja: line 1, column 24: integer overflow (beyond 64 bits)");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "chat template test.jinja: line 1, column 6: integer division or modulo by zero");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "chat template test.jinja: line 1, column 6: float division by zero");
}

TEST(JinjaExpressions, DictKeysMustBeStrings) {
  EXPECT_EQ(error_of("{{ {1: 'a'} }}"), "chat template test.jinja: line 1, column 5: dict keys must be strings here, not integer");
}

}  // namespace
}  // namespace gatedlm::chat
