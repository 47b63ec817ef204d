// Chat template filters, each with Python Jinja's meaning (tojson as transformers defines it).
#include <gtest/gtest.h>

#include <string>

#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::context;
using jinja_testing::error_of;
using jinja_testing::render;

nlohmann::ordered_json users() {
  return context(R"({"users": [{"name": "ann", "age": 30, "admin": true}, {"name": "bob", "age": 25, "admin": false}]})");
}

TEST(JinjaFilters, Text) {
  EXPECT_EQ(render("[{{ '  a b  '|trim }}][{{ 'xxaxx'|trim('x') }}]"), "[a b][a]");
  EXPECT_EQ(render("{{ 'Hello'|upper }}|{{ 'Hello'|lower }}|{{ 'hELLO wORLD'|capitalize }}"), "HELLO|hello|Hello world");
  // Jinja's title starts words after white space and - ( { [ <, not after an apostrophe.
  EXPECT_EQ(render("{{ \"they're x-ray (tests)\"|title }}"), "They're X-Ray (Tests)");
  EXPECT_EQ(render("{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'ab'|replace('', '-') }}"), "bbb|bba|-a-b-");
  EXPECT_EQ(render("{{ 1|string ~ true|string ~ none|string }}|{{ [1, 'a']|string }}"), "1TrueNone|[1, 'a']");
  EXPECT_EQ(render("{{ '<b>'|safe }}"), "<b>");
}

TEST(JinjaFilters, Indent) {
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent(2) }}"), "a\n  b\n\n  c");
  EXPECT_EQ(render("{{ 'a\\nb'|indent(2, true) }}"), "  a\n  b");
  EXPECT_EQ(render("{{ 'a\\n\\nb'|indent(2, blank=true) }}"), "a\n  \n  b");
  EXPECT_EQ(render("{{ 'a\\nb'|indent('> ') }}|{{ 'a\\nb'|indent }}"), "a\n> b|a\n    b");
}

TEST(JinjaFilters, Numbers) {
  EXPECT_EQ(render("{{ '42'|int + 1 }}|{{ ' 7 '|int }}|{{ '3.9'|int }}|{{ 'x'|int }}|{{ 'x'|int(-1) }}|{{ 3.9|int }}|"
                   "{{ -3.9|int }}|{{ true|int }}"),
            "43|7|3|0|-1|3|-3|1");
  EXPECT_EQ(render("{{ '2.5'|float }}|{{ 'x'|float }}|{{ 2|float }}|{{ '1e3'|float }}"), "2.5|0.0|2.0|1000.0");
  EXPECT_EQ(render("{{ -5|abs }}|{{ -2.5|abs }}"), "5|2.5");
  // round: Python's round (to even on exact ties), giving a float; ceil and floor.
  EXPECT_EQ(render("{{ 2.567|round(2) }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.1|round(method='ceil') }}|"
                   "{{ 2.9|round(method='floor') }}|{{ 7|round }}"),
            "2.57|2.0|4.0|3.0|2.0|7");
}

TEST(JinjaFilters, DefaultAndD) {
  EXPECT_EQ(render("{{ nope|default('dflt') }}|{{ ''|default('dflt') }}|{{ ''|default('dflt', true) }}|{{ none|d('n') }}|"
                   "{{ 0|d(5, boolean=true) }}|{{ nope|d }}."),
            "dflt||dflt|None|5|.");
}

TEST(JinjaFilters, LengthFirstLastListItems) {
  EXPECT_EQ(render("{{ 'h\xc3\xa9llo'|length }}|{{ [1, 2]|count }}|{{ {'a': 1}|length }}|{{ nope|length }}"), "5|2|1|0");
  EXPECT_EQ(render("{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ 'abc'|first }}{{ 'abc'|last }}[{{ []|first }}]"), "13ac[]");
  EXPECT_EQ(render("{{ 'ab'|list }}|{{ {'k': 1, 'j': 2}|list }}|{{ {'k': 1}|items|list }}|{{ nope|items|list }}"),
            "['a', 'b']|['k', 'j']|[('k', 1)]|[]");
  EXPECT_EQ(error_of("{{ none|length }}"), "chat template test.jinja: line 1, column 8: filter 'length' needs a string, list or dict, not none");
}

TEST(JinjaFilters, ReverseSortUniqueDictsort) {
  EXPECT_EQ(render("{{ [1, 2, 3]|reverse|list }}|{{ 'abc'|reverse }}"), "[3, 2, 1]|cba");
  EXPECT_EQ(render("{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ ['b', 'a', 'B']|sort }}|"
                   "{{ ['b', 'a', 'B']|sort(case_sensitive=true) }}"),
            "[1, 2, 3]|[3, 2, 1]|['a', 'b', 'B']|['B', 'a', 'b']");
  EXPECT_EQ(render("{{ users|sort(attribute='age')|map(attribute='name')|join(',') }}", users()), "bob,ann");
  EXPECT_EQ(render("{{ [1, 2, 1, 3]|unique|list }}|{{ ['a', 'A', 'b']|unique|list }}|"
                   "{{ ['a', 'A', 'b']|unique(case_sensitive=true)|list }}"),
            "[1, 2, 3]|['a', 'b']|['a', 'A', 'b']");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}|dictsort %}{{ k }}{{ v }}{% endfor %}|"
                   "{% for k, v in {'b': 1, 'a': 2}|dictsort(by='value') %}{{ k }}{% endfor %}"),
            "a2b1|ba");
  EXPECT_EQ(error_of("{{ [1, 'a']|sort }}"), "chat template test.jinja: line 1, column 12: cannot order string and integer");
}

TEST(JinjaFilters, JoinAndMap) {
  EXPECT_EQ(render("{{ [1, 'a', none]|join(', ') }}|{{ ['x', 'y']|join }}|{{ users|join('/', attribute='name') }}", users()),
            "1, a, None|xy|ann/bob");
  EXPECT_EQ(render("{{ users|map(attribute='name')|list }}|{{ ['a', 'b']|map('upper')|list }}|"
                   "{{ users|map(attribute='nick', default='?')|list }}|{{ ['ab', 'cb']|map('replace', 'b', 'x')|join }}",
                   users()),
            "['ann', 'bob']|['A', 'B']|['?', '?']|axcx");
}

TEST(JinjaFilters, SelectRejectAndTheirAttributeForms) {
  EXPECT_EQ(render("{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('odd')|list }}|{{ [0, 1, '', 'a']|select|list }}|"
                   "{{ [1, 5, 10]|select('gt', 4)|list }}"),
            "[1, 3]|[2, 4]|[1, 'a']|[5, 10]");
  EXPECT_EQ(render("{{ users|selectattr('admin')|map(attribute='name')|join }}|{{ users|rejectattr('admin')|map(attribute='name')|join }}|"
                   "{{ users|selectattr('name', 'equalto', 'bob')|map(attribute='age')|first }}|"
                   "{{ users|selectattr('age', 'lt', 28)|list|length }}",
                   users()),
            "ann|bob|25|1");
}

TEST(JinjaFilters, ToJsonAsTransformersWritesIt) {
  EXPECT_EQ(render("{{ {'a': 1, 'b': [true, none, 1.5, 'x']}|tojson }}"), R"({"a": 1, "b": [true, null, 1.5, "x"]})");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': {}}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(render("{{ 'h\xc3\xa9\xf0\x9f\x98\x80'|tojson }}|{{ 'h\xc3\xa9\xf0\x9f\x98\x80'|tojson(ensure_ascii=true) }}"),
            "\"h\xc3\xa9\xf0\x9f\x98\x80\"|\"h\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}"),
            R"({"a": 2, "b": 1}|{"a":[1,2]})");
  EXPECT_EQ(render("{{ 'q\"b\\\\s\\nt\\tc'|tojson }}"), R"("q\"b\\s\nt\tc")");
  EXPECT_EQ(render("{{ [1.0, 0.5, 1e-7, 1e20]|tojson }}"), "[1.0, 0.5, 1e-07, 1e+20]");
  // A tool's schema keeps the keys in the order they came.
  EXPECT_EQ(render("{{ tool|tojson }}", context(R"({"tool": {"type": "function", "name": "f", "a": 1}})")),
            R"({"type": "function", "name": "f", "a": 1})");
  EXPECT_EQ(error_of("{{ nope|tojson }}"),
            "chat template test.jinja: line 1, column 8: tojson cannot write undefined (not JSON serializable)");
}

TEST(JinjaFilters, UnknownAndUnsupportedFiltersAreNamed) {
  EXPECT_EQ(error_of("{{ 'x'|escape }}"), "chat template test.jinja: line 1, column 7: unknown filter 'escape'");
  EXPECT_EQ(error_of("{{ 'x'|upper(1) }}"), "chat template test.jinja: line 1, column 7: filter 'upper' takes no arguments");
}

}  // namespace
}  // namespace gatedlm::chat
