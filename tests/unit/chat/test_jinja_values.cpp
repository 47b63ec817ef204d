// The values of chat templates: Python's spelling of them, equality, JSON both ways, and the
// text helpers (characters, white space, floats).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_json.h"
#include "chat/jinja_text.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {
namespace {

TEST(JinjaValues, FloatsAsPythonsRepr) {
  EXPECT_EQ(python_float(1.0), "1.0");
  EXPECT_EQ(python_float(0.1), "0.1");
  EXPECT_EQ(python_float(123.456), "123.456");
  EXPECT_EQ(python_float(-0.0), "-0.0");
  EXPECT_EQ(python_float(0.0001), "0.0001");
  EXPECT_EQ(python_float(0.00001), "1e-05");
  EXPECT_EQ(python_float(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float(1e16), "1e+16");
  EXPECT_EQ(python_float(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(python_float(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float(std::nan("")), "nan");
}

TEST(JinjaValues, StringsAsPythonsRepr) {
  EXPECT_EQ(python_quoted("plain"), "'plain'");
  EXPECT_EQ(python_quoted("it's"), "\"it's\"");
  EXPECT_EQ(python_quoted("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(python_quoted("x\ny\t\\"), "'x\\ny\\t\\\\'");
  EXPECT_EQ(python_quoted("\x01\xc3\xa9"), "'\\x01\xc3\xa9'");
}

TEST(JinjaValues, TextOfEachType) {
  Object o;
  o.set("k", Value::array({Value::string("v"), Value::none(), Value::boolean(false), Value::floating(2.0)}));
  EXPECT_EQ(to_text(Value::object(o)), "{'k': ['v', None, False, 2.0]}");
  EXPECT_EQ(to_text(Value::undefined()), "");
  EXPECT_EQ(to_text(Value::integer(-12)), "-12");
  EXPECT_EQ(to_text(Value::string("s")), "s");
  EXPECT_EQ(to_repr(Value::string("s")), "'s'");
  EXPECT_EQ(to_text(Value::tuple({Value::integer(1)})), "(1,)");
}

TEST(JinjaValues, EqualityAsPython) {
  EXPECT_TRUE(values_equal(Value::integer(1), Value::floating(1.0)));
  EXPECT_TRUE(values_equal(Value::integer(1), Value::boolean(true)));
  EXPECT_FALSE(values_equal(Value::integer(1), Value::string("1")));
  Object a, b;
  a.set("x", Value::integer(1));
  a.set("y", Value::integer(2));
  b.set("y", Value::integer(2));
  b.set("x", Value::integer(1));
  EXPECT_TRUE(values_equal(Value::object(a), Value::object(b)));  // dicts ignore key order
  EXPECT_FALSE(values_equal(Value::array({Value::integer(1), Value::integer(2)}),
                            Value::array({Value::integer(2), Value::integer(1)})));
  EXPECT_TRUE(values_equal(Value::undefined(), Value::undefined()));
  EXPECT_FALSE(values_equal(Value::undefined(), Value::none()));
}

TEST(JinjaValues, ObjectsKeepTheirKeysOrderAndReplaceInPlace) {
  Object o;
  o.set("b", Value::integer(1));
  o.set("a", Value::integer(2));
  o.set("b", Value::integer(3));
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o.entries()[0].first, "b");
  EXPECT_EQ(o.entries()[0].second.as_int(), 3);
  EXPECT_EQ(o.find("a")->as_int(), 2);
  EXPECT_EQ(o.find("c"), nullptr);
}

TEST(JinjaValues, JsonBothWays) {
  const auto j = nlohmann::ordered_json::parse(R"({"z": [1, 2.5, "s", true, null], "a": {"n": 18446744073709551615}})");
  const Value v = value_from_json(j);
  EXPECT_EQ(v.as_object().entries()[0].first, "z");
  EXPECT_TRUE(v.as_object().find("z")->as_array()[0].is_int());
  EXPECT_TRUE(v.as_object().find("z")->as_array()[1].is_float());
  // An unsigned integer beyond int64 becomes a float rather than wrapping around.
  EXPECT_TRUE(v.as_object().find("a")->as_object().find("n")->is_float());
  EXPECT_EQ(value_to_json(v).dump(), R"({"z":[1,2.5,"s",true,null],"a":{"n":1.8446744073709552e+19}})");
}

TEST(JinjaValues, JsonWriterFollowsPythonsJsonDumps) {
  const Value v = value_from_json(nlohmann::ordered_json::parse(R"({"b": [], "a": {"x": [1, {}]}})"));
  JsonStyle compact;
  EXPECT_EQ(dump_json(v, compact, 1 << 20), R"({"b": [], "a": {"x": [1, {}]}})");
  JsonStyle indented;
  indented.indent = "  ";
  EXPECT_EQ(dump_json(v, indented, 1 << 20), "{\n  \"b\": [],\n  \"a\": {\n    \"x\": [\n      1,\n      {}\n    ]\n  }\n}");
  EXPECT_THROW(dump_json(v, compact, 10), EvalError);
}

TEST(JinjaText, CharactersAndWhiteSpace) {
  EXPECT_EQ(count_characters("h\xc3\xa9\xf0\x9f\x98\x80"), 3u);
  EXPECT_EQ(characters("a\xc3\xa9")[1], "\xc3\xa9");
  // A malformed byte counts as one character.
  EXPECT_EQ(count_characters("a\xff" "b"), 3u);
  EXPECT_TRUE(is_space(0x3000));   // ideographic space: Python's str.isspace
  EXPECT_FALSE(is_space(0x200B));  // zero-width space: not
  EXPECT_EQ(strip_text("\xe3\x80\x80 x\n", StripSide::both, true, ""), "x");
  EXPECT_EQ(strip_text("\xc3\xa9x\xc3\xa9", StripSide::both, false, "\xc3\xa9"), "x");
  EXPECT_EQ(trailing_space_bytes("ab \n\t"), 3u);
  EXPECT_EQ(leading_space_bytes("\n  x "), 3u);
}

}  // namespace
}  // namespace gatedlm::chat
