#pragma once
// The parsed form of a chat template: expressions and statements, each with the byte offset
// of its first token (messages name its line). Built once by the parser, then only read:
// rendering never changes it, so one JinjaTemplate renders in many threads at once.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace gatedlm::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One argument of a call, filter or test: positional when keyword is empty.
struct Argument {
  std::string keyword;
  ExprPtr value;
};

enum class BinaryOp { add, subtract, multiply, divide, floor_divide, modulo, power, concat, logical_and, logical_or };
enum class CompareOp { eq, ne, lt, le, gt, ge, in, not_in };

struct Expr {
  enum class Kind {
    literal,      // value
    name,         // name
    list,         // items
    dict,         // items: key, value, key, value, ...
    attribute,    // a.name
    subscript,    // a[b]
    slice,        // a[items[0]:items[1]:items[2]], an absent part a null pointer
    call,         // a(args)
    filter,       // a|name(args)
    test,         // a is [not] name(args)
    negate,       // -a
    plus,         // +a
    logical_not,  // not a
    binary,       // a op b
    compare,      // items[0] ops[0] items[1] ops[1] items[2] ...: a chain, as Python's a < b < c
    conditional,  // b if a else c (c null: undefined when a is false)
  };
  Kind kind = Kind::literal;
  size_t offset = 0;
  int depth = 1;  // of the tree below it, to refuse expressions that would exhaust the stack
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<Argument> args;
  BinaryOp binary_op = BinaryOp::add;
  std::vector<CompareOp> compare_ops;
  bool negated = false;  // `is not`
  bool tuple = false;    // a list literal written (a, b)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per parameter, null where it has none
  Body body;
  // Jinja lets a macro take more arguments than it names only if its body reads `varargs`
  // or `kwargs`.
  bool reads_varargs = false;
  bool reads_kwargs = false;
};

struct Stmt {
  enum class Kind {
    text,          // text
    output,        // {{ expr }}
    if_chain,      // branches (if, elif...), otherwise (else)
    for_loop,      // for targets in expr [if condition]: body [else: otherwise]
    set_value,     // set targets = expr, or set target_object.target_attribute = expr
    set_block,     // set targets[0] %}body{% endset
    macro,         // macro
    filter_block,  // filter name(args) %}body{% endfilter
    plain_block,   // generation %}body{% endgeneration: transformers renders the body as it is
    break_loop,
    continue_loop,
  };
  Kind kind = Kind::text;
  size_t offset = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, otherwise;
  std::vector<std::string> targets;
  ExprPtr target_object;
  std::string target_attribute;
  std::unique_ptr<MacroDef> macro;
  std::string filter_name;
  std::vector<Argument> filter_args;
};

}  // namespace gatedlm::chat
