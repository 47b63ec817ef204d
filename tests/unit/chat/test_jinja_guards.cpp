// Chat templates that would never end, grow without bound or nest beyond the stack: each is
// stopped by a limit (RenderLimits, kMaxNesting) with an error that names it.
#include <gtest/gtest.h>

#include <string>

#include "chat/jinja_parser.h"
#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using jinja_testing::error_of;
using jinja_testing::render;

std::string repeated(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

TEST(JinjaGuards, AMacroCallingItselfStopsAtTheDepthLimit) {
  EXPECT_EQ(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
            "chat template test.jinja: line 1, column 20: macro calls nest deeper than 100 levels (does the macro 'f' call itself "
            "without end?)");
  RenderLimits limits;
  limits.max_call_depth = 5;
  const std::string countdown = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}x{% endmacro %}";
  EXPECT_EQ(render(countdown + "{{ f(4) }}", nullptr, limits), "xxxxx");  // five calls deep
  EXPECT_NE(error_of(countdown + "{{ f(5) }}", nullptr, limits).find("macro calls nest deeper than 5 levels"), std::string::npos);
}

TEST(JinjaGuards, NestingAcrossMacroCallsIsBounded) {
  // Each call nests its body's blocks and expressions inside the caller's: the stack grows
  // with the sum, which max_nesting bounds.
  RenderLimits limits;
  limits.max_nesting = 50;
  const std::string recursion = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}.{% endmacro %}";
  EXPECT_EQ(render(recursion + "{{ f(5) }}", nullptr, limits), "......");
  EXPECT_NE(error_of(recursion + "{{ f(20) }}", nullptr, limits).find("blocks and expressions nest deeper than 50 levels"),
            std::string::npos);
  // With the default limits, 190 blocks inside each of 95 nested calls is too deep.
  const std::string deep = "{% macro g(n) %}" + repeated("{% if n > 0 %}", 190) + "{{ g(n - 1) }}" + repeated("{% endif %}", 190) +
                           "{% endmacro %}{{ g(95) }}";
  EXPECT_NE(error_of(deep).find("blocks and expressions nest deeper than 3000 levels"), std::string::npos);
}

TEST(JinjaGuards, LoopsAndCallsCountAgainstOneBudget) {
  RenderLimits limits;
  limits.max_steps = 100;
  EXPECT_EQ(render("{% for i in range(10) %}{% for j in range(9) %}{% endfor %}{% endfor %}ok", nullptr, limits), "ok");  // 100
  EXPECT_EQ(error_of("{% for i in range(50) %}{% for j in range(3) %}{% endfor %}{% endfor %}", nullptr, limits),
            "chat template test.jinja: line 1, column 1: more than 100 loop iterations and macro calls (the limit of one render)");
  // A macro whose calls double at each level ends although it never nests deep.
  EXPECT_NE(error_of("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(30) }}", nullptr, limits)
                .find("more than 100 loop iterations and macro calls"),
            std::string::npos);
  EXPECT_EQ(error_of("{{ range(1000)|length }}", nullptr, limits),
            "chat template test.jinja: line 1, column 9: a list of 1000 items passes the limit of 100");
  EXPECT_EQ(error_of("{{ range(10**18)|length }}"),
            "chat template test.jinja: line 1, column 9: a list of 1000000000000000000 items passes the limit of 1000000");
}

TEST(JinjaGuards, TheOutputAndEveryStringStayWithinTheOutputLimit) {
  RenderLimits limits;
  limits.max_output_bytes = 1000;
  EXPECT_EQ(render("{% for i in range(100) %}123456789 {% endfor %}", nullptr, limits).size(), 1000u);
  EXPECT_EQ(error_of("{% for i in range(101) %}123456789 {% endfor %}", nullptr, limits),
            "chat template test.jinja: line 1, column 26: a string of 1010 bytes passes the output limit of 1000 bytes");
  // A string that doubles is stopped before it is made, whether or not it is printed.
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", nullptr, limits)
                .find("output limit of 1000 bytes"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000 }}", nullptr, limits).find("output limit of 1000 bytes"), std::string::npos);
  EXPECT_NE(error_of("{{ ('x' * 500)|replace('x', 'yyy') }}", nullptr, limits).find("output limit of 1000 bytes"), std::string::npos);
  EXPECT_NE(error_of("{{ ['x' * 600, 'y' * 600]|join }}", nullptr, limits).find("output limit of 1000 bytes"), std::string::npos);
  EXPECT_NE(error_of("{% macro m() %}{{ 'z' * 900 }}{% endmacro %}{{ m() ~ m() }}", nullptr, limits).find("output limit of 1000 bytes"),
            std::string::npos);
}

TEST(JinjaGuards, DeepNestingIsRefusedWhenParsing) {
  const std::string deep = "nested deeper than " + std::to_string(kMaxNesting) + " levels";
  EXPECT_NE(error_of("{{ " + repeated("(", 300) + "1" + repeated(")", 300) + " }}").find(deep), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeated("[", 300) + repeated("]", 300) + " }}").find(deep), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeated("not ", 300) + "1 }}").find(deep), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeated("-", 300) + "1 }}").find(deep), std::string::npos);
  EXPECT_NE(error_of(repeated("{% if true %}", 300) + repeated("{% endif %}", 300)).find(deep), std::string::npos);
  // A long chain of operators parses without recursion, but would evaluate with it.
  EXPECT_EQ(error_of("{{ " + repeated("1 + ", 5000) + "1 }}"),
            "chat template test.jinja: line 1, column 802: an expression nested deeper than 200 levels");
  // Below the limits, fine.
  EXPECT_EQ(render("{{ " + repeated("(", 50) + "1" + repeated(")", 50) + " }}|{{ " + repeated("1 + ", 150) + "1 }}"), "1|151");
}

TEST(JinjaGuards, ValuesThatHoldThemselvesAreRefused) {
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "chat template test.jinja: line 1, column 47: a value nests deeper than 256 levels");
  // Comparing it is fine: a namespace equals only itself, as in Python.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns.me }}"), "True");
}

TEST(JinjaGuards, ContextNestingIsBounded) {
  const auto deep = nlohmann::ordered_json::parse(repeated("[", 300) + repeated("]", 300));
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["x"] = deep;
  EXPECT_EQ(error_of("{{ x }}", ctx), "chat template test.jinja: the context nests deeper than 256 levels");
}

}  // namespace
}  // namespace gatedlm::chat
