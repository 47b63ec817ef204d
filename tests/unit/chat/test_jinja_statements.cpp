// Chat template statements: if, for (with loop, filters, else, unpacking, break and
// continue), set (names, tuples, namespaces, blocks), macros, filter blocks, the globals, and
// Jinja's scoping of names.
#include <gtest/gtest.h>

#include <string>

#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::context;
using jinja_testing::error_of;
using jinja_testing::render;

TEST(JinjaStatements, IfElifElse) {
  EXPECT_EQ(render("{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %} {% endfor %}"),
            "one two many ");
  EXPECT_EQ(render("{% if [] %}a{% elif {} %}b{% elif '' %}c{% endif %}."), ".");
}

TEST(JinjaStatements, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem|default('-') }}{{ x }}{{ loop.nextitem|default('-') }} {% endfor %}"),
            "-12 123 23- ");
}

TEST(JinjaStatements, ForWithAConditionCountsOnlyTheItemsItKeeps) {
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}"), "1,3,5,7,9");
  EXPECT_EQ(render("{% for x in [3, 0, 4] if x %}{{ loop.index }}/{{ loop.length }} {% endfor %}"), "1/2 2/2 ");
}

TEST(JinjaStatements, ForElseRunsWhenNothingIsIterated) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [0] if x %}x{% else %}none kept{% endfor %}"), "none kept");
  EXPECT_EQ(render("{% for x in nope %}x{% else %}undefined is empty{% endfor %}"), "undefined is empty");
}

TEST(JinjaStatements, ForUnpacksPairsAndWalksDictsAndStrings) {
  const auto ctx = context(R"({"d": {"b": 2, "a": 1}})");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}", ctx),
            "b=2 a=1 b2a1");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}|{% for c in 'xy' %}{{ c }}.{% endfor %}", ctx), "ba|x.y.");
  EXPECT_EQ(error_of("{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
            "chat template test.jinja: line 1, column 1: cannot unpack 3 values into 2 names");
  EXPECT_EQ(error_of("{% for x in 5 %}{% endfor %}"), "chat template test.jinja: line 1, column 13: cannot loop over integer");
}

TEST(JinjaStatements, BreakAndContinue) {
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "0134");
  // break leaves the inner loop only.
  EXPECT_EQ(render("{% for i in [1, 2] %}{% for j in [1, 2, 3] %}{% if j == 2 %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}"),
            "11 21 ");
}

TEST(JinjaStatements, SetInsideALoopStaysInItsIteration) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "21");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% if i == 1 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}"), "[5][]");
  // `if` has no scope of its own.
  EXPECT_EQ(render("{% if true %}{% set z = 3 %}{% endif %}{{ z }}"), "3");
}

TEST(JinjaStatements, NamespacesCarryStateOutOfLoops) {
  EXPECT_EQ(render("{% set ns = namespace(total=0, seen=false) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}"
                   "{% set ns.seen = true %}{% endfor %}{{ ns.total }} {{ ns.seen }} {{ ns.missing is defined }}"),
            "6 True False");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns['b'] }}"), "12");
  EXPECT_EQ(error_of("{% set d = {} %}{% set d.x = 1 %}"),
            "chat template test.jinja: line 1, column 17: cannot set the attribute 'x' of dict (only a namespace() takes attributes)");
}

TEST(JinjaStatements, SetTuplesAndBlocks) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 3, 4 %}{{ c|length }}{% set (d, e) = ['x', 'y'] %}{{ e }}"),
            "122y");
  EXPECT_EQ(render("{% set greeting %}Hello {{ name }}{% endset %}[{{ greeting }}]", context(R"({"name": "World"})")),
            "[Hello World]");
}

TEST(JinjaStatements, MacrosWithDefaultsAndKeywords) {
  EXPECT_EQ(render("{% macro tag(name, body='') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}"
                   "{{ tag('b', 'x') }}{{ tag('i') }}{{ tag(body='y', name='u') }}"),
            "<b>x</b><i></i><u>y</u>");
  EXPECT_EQ(render("{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}"), "3,6");
  EXPECT_EQ(render("{% macro m() %}  x  {% endmacro %}[{{ m()|trim }}]"), "[x]");
  EXPECT_EQ(render("{% macro count(n) %}{% if n > 0 %}{{ n }}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}"), "321");
}

TEST(JinjaStatements, MacrosSeeTheirDefiningScopeAtCallTime) {
  EXPECT_EQ(render("{% set y = 1 %}{% macro m() %}{{ y }}{% endmacro %}{% set y = 2 %}{{ m() }}"), "2");
  // Not the caller's loop variable.
  EXPECT_EQ(render("{% macro m() %}[{{ i }}]{% endmacro %}{% for i in [1] %}{{ m() }}{% endfor %}"), "[]");
}

TEST(JinjaStatements, MacroArgumentsAreChecked) {
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}"), "1(2, 3){'k': 'v'}");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "chat template test.jinja: line 1, column 35: macro 'm' takes not more than 1 argument(s), got 2");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"),
            "chat template test.jinja: line 1, column 35: macro 'm' takes no keyword argument 'b'");
}

TEST(JinjaStatements, FilterBlocks) {
  EXPECT_EQ(render("{% filter upper %}abc {{ 'd' }}{% endfilter %}"), "ABC D");
  EXPECT_EQ(render("{% filter replace('a', 'o') %}banana{% endfilter %}"), "bonono");
}

TEST(JinjaStatements, Globals) {
  EXPECT_EQ(render("{{ range(3)|list }}{{ range(1, 7, 2)|list }}{{ range(3, 0, -1)|list }}{{ range(0)|list }}"),
            "[0, 1, 2][1, 3, 5][3, 2, 1][]");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
  // The caller's variables hide the globals.
  EXPECT_EQ(render("{{ range }}", context(R"({"range": "mine"})")), "mine");
}

}  // namespace
}  // namespace gatedlm::chat
