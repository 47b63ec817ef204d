#pragma once
// Renders a parsed template: statements (jinja_statements.cpp) and expressions
// (jinja_expressions.cpp) over a chain of scopes, as Jinja scopes names: a loop iteration and
// a macro call each get a scope of their own, so `set` inside them is not seen outside
// (which is why templates carry state out of loops in a namespace()); `if` has none.
// One Interpreter renders once; a JinjaTemplate makes one per render.
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_call_args.h"
#include "chat/jinja_limits.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

struct Scope {
  explicit Scope(std::shared_ptr<Scope> outer = nullptr) : parent(std::move(outer)) {}
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
  // The value of name here or in an enclosing scope; null when none has it.
  const Value* find(const std::string& name) const;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}
  // Clears what the render left holding itself (a macro's scope holds the macro, a
  // namespace may hold itself), so that nothing leaks.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const Body& body, const ScopePtr& globals);

  // --- for filters, globals and macros ---
  Value eval(const Expr& e, const ScopePtr& scope);
  // The filter `name` (jinja_filters.h), for filters that apply another one (map).
  Value filter(std::string_view name, const Value& operand, const CallArgs& args);
  // Counts a loop iteration or macro call; throws past RenderLimits::max_steps.
  void count_step();
  // Throws when a string of `bytes` would pass RenderLimits::max_output_bytes.
  void check_text_size(size_t bytes) const;
  // Throws when a list of `items` would pass RenderLimits::max_steps.
  void check_list_size(size_t items) const;
  std::shared_ptr<Namespace> make_namespace();
  const RenderLimits& limits() const { return limits_; }

 private:
  enum class Flow { normal, break_loop, continue_loop };

  // jinja_statements.cpp
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec_one(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  std::vector<Value> filtered_items(const Stmt& s, const ScopePtr& scope);
  void exec_set(const Stmt& s, const ScopePtr& scope);
  void define_macro(const Stmt& s, const ScopePtr& scope);
  Value call_macro(const MacroDef& m, const ScopePtr& defining_scope, const CallArgs& args);
  void bind_macro_args(const MacroDef& m, const CallArgs& args, const ScopePtr& scope);
  void append(std::string& out, std::string_view text) const;

  // jinja_expressions.cpp
  Value eval_node(const Expr& e, const ScopePtr& scope);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const std::vector<Argument>& args, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_collection(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Expr& e, const ScopePtr& scope);

  // Counts the nesting of exec and eval (RenderLimits::max_nesting) while it lives.
  class NestingGuard {
   public:
    explicit NestingGuard(Interpreter& in);
    ~NestingGuard() { --in_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Interpreter& in_;
  };

  const RenderLimits& limits_;
  int nesting_ = 0;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<ScopePtr> macro_scopes_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace gatedlm::chat
