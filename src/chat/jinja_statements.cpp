// The statements of Interpreter (jinja_interpreter.h): text and {{ }} output, if, for, set,
// macro definitions and calls, filter blocks, break and continue.
#include <algorithm>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_filters.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_operators.h"

namespace gatedlm::chat {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::~Interpreter() {
  for (const ScopePtr& scope : macro_scopes_) scope->vars.clear();
  for (const auto& ns : namespaces_) ns->fields = Object{};
}

std::string Interpreter::render(const Body& body, const ScopePtr& globals) {
  std::string out;
  exec(body, globals, out);
  return out;
}

Interpreter::NestingGuard::NestingGuard(Interpreter& in) : in_(in) {
  if (++in_.nesting_ > in_.limits_.max_nesting) {
    --in_.nesting_;
    throw EvalError(cat("blocks and expressions nest deeper than ", in_.limits_.max_nesting,
                        " levels, counted across macro calls"));
  }
}

void Interpreter::count_step() {
  if (++steps_ > limits_.max_steps)
    throw EvalError(cat("more than ", limits_.max_steps, " loop iterations and macro calls (the limit of one render)"));
}

void Interpreter::check_text_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    throw EvalError(cat("a string of ", bytes, " bytes passes the output limit of ", limits_.max_output_bytes, " bytes"));
}

void Interpreter::check_list_size(size_t items) const {
  if (items > static_cast<uint64_t>(limits_.max_steps))
    throw EvalError(cat("a list of ", items, " items passes the limit of ", limits_.max_steps));
}

std::shared_ptr<Namespace> Interpreter::make_namespace() {
  namespaces_.push_back(std::make_shared<Namespace>());
  return namespaces_.back();
}

void Interpreter::append(std::string& out, std::string_view text) const {
  check_text_size(out.size() + text.size());
  out.append(text);
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  const NestingGuard nesting(*this);
  for (const StmtPtr& s : body) {
    Flow flow = Flow::normal;
    try {
      flow = exec_one(*s, scope, out);
    } catch (EvalError& e) {
      if (e.offset == kNoOffset) e.offset = s->offset;
      throw;
    }
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_one(const Stmt& s, const ScopePtr& scope, std::string& out) {
  switch (s.kind) {
    case Stmt::Kind::text: append(out, s.text); break;
    case Stmt::Kind::output: append(out, to_text(eval(*s.expr, scope))); break;
    case Stmt::Kind::if_chain:
      for (const auto& [condition, body] : s.branches)
        if (eval(*condition, scope).truthy()) return exec(body, scope, out);
      return exec(s.otherwise, scope, out);
    case Stmt::Kind::for_loop: return exec_for(s, scope, out);
    case Stmt::Kind::set_value:
    case Stmt::Kind::set_block: exec_set(s, scope); break;
    case Stmt::Kind::macro: define_macro(s, scope); break;
    case Stmt::Kind::filter_block: {
      std::string text;
      exec(s.body, scope, text);
      append(out, to_text(apply_filter(*this, s.filter_name, Value::string(std::move(text)), eval_args(s.filter_args, scope))));
      break;
    }
    case Stmt::Kind::plain_block: return exec(s.body, scope, out);
    case Stmt::Kind::break_loop: return Flow::break_loop;
    case Stmt::Kind::continue_loop: return Flow::continue_loop;
  }
  return Flow::normal;
}

namespace {

// Binds a loop's or set's names to a value: one name takes it whole, several unpack a list.
void bind_targets(const std::vector<std::string>& names, const Value& value, Scope& scope) {
  if (names.size() == 1) {
    scope.vars[names[0]] = value;
    return;
  }
  if (!value.is_array()) throw EvalError(cat("cannot unpack ", type_name(value), " into ", names.size(), " names"));
  const Array& items = value.as_array();
  if (items.size() != names.size())
    throw EvalError(cat("cannot unpack ", items.size(), " values into ", names.size(), " names"));
  for (size_t i = 0; i < names.size(); ++i) scope.vars[names[i]] = items[i];
}

// Jinja's `loop` for item i of n.
Value loop_object(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size()), k = static_cast<int64_t>(i);
  Object loop;
  loop.set("index", Value::integer(k + 1));
  loop.set("index0", Value::integer(k));
  loop.set("revindex", Value::integer(n - k));
  loop.set("revindex0", Value::integer(n - k - 1));
  loop.set("first", Value::boolean(k == 0));
  loop.set("last", Value::boolean(k == n - 1));
  loop.set("length", Value::integer(n));
  loop.set("depth", Value::integer(1));
  loop.set("depth0", Value::integer(0));
  if (i > 0) loop.set("previtem", items[i - 1]);
  if (i + 1 < items.size()) loop.set("nextitem", items[i + 1]);
  return Value::object(std::move(loop));
}

}  // namespace

std::vector<Value> Interpreter::filtered_items(const Stmt& s, const ScopePtr& scope) {
  const Value iterable = eval(*s.expr, scope);
  std::vector<Value> items;
  try {
    items = iteration_items(iterable);
  } catch (EvalError& e) {
    if (e.offset == kNoOffset) e.offset = s.expr->offset;
    throw;
  }
  if (!s.condition) return items;
  // `for x in xs if cond`: the condition sees each item (not `loop`), and loop.index,
  // loop.length and loop.last count only the items it keeps.
  std::vector<Value> kept;
  for (Value& item : items) {
    count_step();
    auto probe = std::make_shared<Scope>(scope);
    bind_targets(s.targets, item, *probe);
    if (eval(*s.condition, probe).truthy()) kept.push_back(std::move(item));
  }
  return kept;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  const std::vector<Value> items = filtered_items(s, scope);
  if (items.empty()) return exec(s.otherwise, scope, out);
  for (size_t i = 0; i < items.size(); ++i) {
    count_step();
    // Each iteration has its own scope, as in Jinja: what `set` does inside stays there.
    auto iteration = std::make_shared<Scope>(scope);
    bind_targets(s.targets, items[i], *iteration);
    iteration->vars["loop"] = loop_object(items, i);
    if (exec(s.body, iteration, out) == Flow::break_loop) break;
  }
  return Flow::normal;
}

void Interpreter::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value value;
  if (s.kind == Stmt::Kind::set_block) {
    std::string text;
    exec(s.body, scope, text);
    value = Value::string(std::move(text));
  } else {
    value = eval(*s.expr, scope);
  }
  if (!s.target_object) {
    bind_targets(s.targets, value, *scope);
    return;
  }
  const Value object = eval(*s.target_object, scope);
  if (!object.is_namespace())
    throw EvalError(cat("cannot set the attribute '", s.target_attribute, "' of ", type_name(object),
                        " (only a namespace() takes attributes)"));
  object.as_namespace().fields.set(s.target_attribute, std::move(value));
}

void Interpreter::define_macro(const Stmt& s, const ScopePtr& scope) {
  auto callable = std::make_shared<Callable>();
  callable->name = s.macro->name;
  const MacroDef* def = s.macro.get();
  // The macro sees the names of the scope it is defined in, as they are when it is called.
  callable->call = [def, scope](Interpreter& in, const CallArgs& args) { return in.call_macro(*def, scope, args); };
  scope->vars[def->name] = Value::callable(std::move(callable));
  macro_scopes_.push_back(scope);  // scope -> macro -> scope: cleared when the render ends
}

Value Interpreter::call_macro(const MacroDef& m, const ScopePtr& defining_scope, const CallArgs& args) {
  count_step();
  if (call_depth_ >= limits_.max_call_depth)
    throw EvalError(cat("macro calls nest deeper than ", limits_.max_call_depth,
                        " levels (does the macro '", m.name, "' call itself without end?)"));
  auto scope = std::make_shared<Scope>(defining_scope);
  bind_macro_args(m, args, scope);
  ++call_depth_;
  std::string out;
  try {
    exec(m.body, scope, out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(out));
}

void Interpreter::bind_macro_args(const MacroDef& m, const CallArgs& args, const ScopePtr& scope_ptr) {
  Scope& scope = *scope_ptr;
  const size_t n = m.params.size();
  if (args.positional.size() > n && !m.reads_varargs)
    throw EvalError(cat("macro '", m.name, "' takes not more than ", n, " argument(s), got ", args.positional.size()));
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) scope.vars[m.params[i]] = args.positional[i];
  Object extra_keywords;
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find(m.params.begin(), m.params.end(), key);
    if (it == m.params.end()) {
      if (!m.reads_kwargs) throw EvalError(cat("macro '", m.name, "' takes no keyword argument '", key, "'"));
      extra_keywords.set(key, value);
    } else if (static_cast<size_t>(it - m.params.begin()) < args.positional.size()) {
      throw EvalError(cat("macro '", m.name, "' got the argument '", key, "' twice"));
    } else {
      scope.vars[key] = value;
    }
  }
  if (m.reads_varargs) {
    Array rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope.vars["varargs"] = Value::tuple(std::move(rest));
  }
  if (m.reads_kwargs) scope.vars["kwargs"] = Value::object(std::move(extra_keywords));
  // Defaults last, in the macro's scope: a default may name an earlier parameter.
  for (size_t i = 0; i < n; ++i) {
    if (scope.vars.count(m.params[i])) continue;
    scope.vars[m.params[i]] =
        m.defaults[i] ? eval(*m.defaults[i], scope_ptr) : Value::undefined(cat("'", m.params[i], "' is undefined"));
  }
}

}  // namespace gatedlm::chat
