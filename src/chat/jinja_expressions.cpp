// The expressions of Interpreter (jinja_interpreter.h): names, literals, attribute and
// item access, slices, calls (macros, global functions, methods), filters, tests and the
// operators.
#include <optional>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_filters.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_predicates.h"

namespace gatedlm::chat {

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    const NestingGuard nesting(*this);
    return eval_node(e, scope);
  } catch (EvalError& err) {
    if (err.offset == kNoOffset) err.offset = e.offset;  // the innermost expression that failed
    throw;
  }
}

Value Interpreter::eval_node(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: {
      const Value* v = scope->find(e.name);
      return v != nullptr ? *v : Value::undefined(cat("'", e.name, "' is undefined"));
    }
    case Expr::Kind::list:
    case Expr::Kind::dict: return eval_collection(e, scope);
    case Expr::Kind::attribute: return get_attribute(eval(*e.a, scope), e.name);
    case Expr::Kind::subscript: return get_item(eval(*e.a, scope), eval(*e.b, scope));
    case Expr::Kind::slice: return eval_slice(e, scope);
    case Expr::Kind::call: return eval_call(e, scope);
    case Expr::Kind::filter: {
      const Value operand = eval(*e.a, scope);
      return apply_filter(*this, e.name, operand, eval_args(e.args, scope));
    }
    case Expr::Kind::test: {
      const Value operand = eval(*e.a, scope);
      return Value::boolean(apply_test(e.name, operand, eval_args(e.args, scope)) != e.negated);
    }
    case Expr::Kind::negate: return negate(eval(*e.a, scope));
    case Expr::Kind::plus: {
      const Value v = eval(*e.a, scope);
      if (!v.is_number()) fail_type(v, "unary '+'", "a number");
      return v.is_bool() ? Value::integer(v.as_bool()) : v;
    }
    case Expr::Kind::logical_not: return Value::boolean(!eval(*e.a, scope).truthy());
    case Expr::Kind::binary: return eval_binary(e, scope);
    case Expr::Kind::compare: return eval_compare(e, scope);
    case Expr::Kind::conditional:
      if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined();
  }
  return Value::undefined();
}

Value Interpreter::filter(std::string_view name, const Value& operand, const CallArgs& args) {
  return apply_filter(*this, name, operand, args);
}

CallArgs Interpreter::eval_args(const std::vector<Argument>& args, const ScopePtr& scope) {
  CallArgs out;
  for (const Argument& arg : args) {
    if (arg.keyword.empty())
      out.positional.push_back(eval(*arg.value, scope));
    else
      out.keyword.emplace_back(arg.keyword, eval(*arg.value, scope));
  }
  return out;
}

namespace {

Value call_value(Interpreter& in, const Value& fn, const CallArgs& args, const std::string& name) {
  if (fn.is_callable()) return fn.as_callable().call(in, args);
  if (fn.is_undefined())
    throw EvalError(cat(fn.undefined_hint().empty() ? "an undefined value" : fn.undefined_hint(), ": cannot call it"));
  throw EvalError(cat(name.empty() ? "this" : "'" + name + "'", " is ", type_name(fn), ", not a function"));
}

}  // namespace

Value Interpreter::eval_call(const Expr& e, const ScopePtr& scope) {
  const Expr& callee = *e.a;
  if (callee.kind == Expr::Kind::attribute) {
    // s.split('x'), d.items(): a method of the value comes before a key of that name, as
    // in Python (d.items() of a dict that has an "items" key is still the method).
    const Value object = eval(*callee.a, scope);
    const CallArgs args = eval_args(e.args, scope);
    Value result;
    if (call_method(*this, object, callee.name, args, result)) return result;
    return call_value(*this, get_attribute(object, callee.name), args, callee.name);
  }
  const Value fn = eval(callee, scope);
  return call_value(*this, fn, eval_args(e.args, scope), callee.kind == Expr::Kind::name ? callee.name : "");
}

Value Interpreter::eval_binary(const Expr& e, const ScopePtr& scope) {
  // `and` / `or` give one of their operands, as in Python, and skip the right one when the
  // left decides.
  if (e.binary_op == BinaryOp::logical_and || e.binary_op == BinaryOp::logical_or) {
    Value left = eval(*e.a, scope);
    if (left.truthy() == (e.binary_op == BinaryOp::logical_or)) return left;
    return eval(*e.b, scope);
  }
  const Value left = eval(*e.a, scope);
  const Value right = eval(*e.b, scope);
  Value result = binary_operation(e.binary_op, left, right, limits_.max_output_bytes);
  if (result.is_array()) check_list_size(result.as_array().size());
  return result;
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  // a < b < c is a < b and b < c, with b evaluated once.
  Value left = eval(*e.items[0], scope);
  for (size_t i = 0; i < e.compare_ops.size(); ++i) {
    Value right = eval(*e.items[i + 1], scope);
    if (!compare(e.compare_ops[i], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_collection(const Expr& e, const ScopePtr& scope) {
  if (e.kind == Expr::Kind::list) {
    Array items;
    for (const ExprPtr& item : e.items) items.push_back(eval(*item, scope));
    return e.tuple ? Value::tuple(std::move(items)) : Value::array(std::move(items));
  }
  Object fields;
  for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
    const Value key = eval(*e.items[i], scope);
    if (!key.is_string()) throw EvalError(cat("dict keys must be strings here, not ", type_name(key)), e.items[i]->offset);
    fields.set(key.as_string(), eval(*e.items[i + 1], scope));
  }
  return Value::object(std::move(fields));
}

Value Interpreter::eval_slice(const Expr& e, const ScopePtr& scope) {
  const Value object = eval(*e.a, scope);
  std::optional<int64_t> parts[3];
  for (size_t i = 0; i < 3; ++i) {
    if (!e.items[i]) continue;
    const Value v = eval(*e.items[i], scope);
    if (v.is_int())
      parts[i] = v.as_int();
    else if (!v.is_none() && !v.is_undefined())
      throw EvalError(cat("slice bounds must be integers, not ", type_name(v)), e.items[i]->offset);
  }
  return slice(object, parts[0], parts[1], parts[2]);
}

}  // namespace gatedlm::chat
