#include "chat/jinja_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "chat/jinja_error.h"

namespace gatedlm::chat {

namespace {

// The tag that closes or continues each block, and the block it belongs to.
struct EndTag {
  std::string_view tag;
  std::string_view block;
};
constexpr EndTag kEndTags[] = {{"endif", "if"},         {"elif", "if"},         {"else", "if' or 'for"},
                               {"endfor", "for"},       {"endmacro", "macro"},  {"endset", "set"},
                               {"endfilter", "filter"}, {"endgeneration", "generation"}};
// Jinja tags that chat templates do not get (transformers' sandbox has no loader to include from).
constexpr std::string_view kUnsupportedTags[] = {"include", "import", "from", "extends", "block", "call", "raw",
                                                 "with", "do", "autoescape", "trans"};
// Names that end a test without an argument: `x is defined and y`, `a if x is odd else b`.
constexpr std::string_view kNotTestArguments[] = {"and", "or", "else", "if", "not", "is", "in"};

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view source) : tokens_(tokens), source_(source) {}

  Body parse_all() { return parse_body({}); }

 private:
  struct OpenBlock {
    std::string_view name;
    size_t offset;
  };
  // Counts the nesting of the recursive descent: brackets, blocks, `not not`, `- -`.
  class DepthGuard {
   public:
    DepthGuard(Parser& p, size_t offset) : p_(p) {
      if (++p_.depth_ > kMaxNesting) throw EvalError(cat("nested deeper than ", kMaxNesting, " levels"), offset);
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };

  // --- tokens ---
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::op && peek(ahead).value == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::name && peek(ahead).value == name;
  }
  bool skip_op(std::string_view op) { return at_op(op) ? (next(), true) : false; }
  bool skip_name(std::string_view name) { return at_name(name) ? (next(), true) : false; }
  [[noreturn]] void fail_here(const std::string& message) const { throw EvalError(message, peek().offset); }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail_here(cat("expected '", op, "', found ", describe(peek())));
  }
  std::string expect_name(std::string_view what) {
    if (peek().kind != TokenKind::name) fail_here(cat("expected ", what, ", found ", describe(peek())));
    return next().value;
  }
  void expect_tag_end() {
    if (peek().kind != TokenKind::close_statement) fail_here(cat("expected '%}', found ", describe(peek())));
    next();
  }
  size_t line_of(size_t offset) const { return position_in(source_, offset).line; }

  // --- statements ---
  Body parse_body(std::initializer_list<std::string_view> ends);
  [[noreturn]] void fail_misplaced_end(const Token& tag);
  StmtPtr parse_tag();
  StmtPtr parse_if(size_t offset);
  StmtPtr parse_for(size_t offset);
  StmtPtr parse_set(size_t offset);
  StmtPtr parse_macro(size_t offset);
  StmtPtr parse_filter_block(size_t offset);
  StmtPtr parse_plain_block(size_t offset);
  StmtPtr parse_loop_control(size_t offset, Stmt::Kind kind, std::string_view name);
  Body parse_block_body(std::string_view block, size_t offset, std::initializer_list<std::string_view> ends);
  void consume_tag(std::string_view name);
  std::vector<std::string> parse_targets();

  // --- expressions ---
  ExprPtr parse_expression(bool with_condition = true);
  ExprPtr parse_logical(BinaryOp op);
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary_level(int level);
  ExprPtr parse_unary(bool with_filters);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filters_and_tests(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr object);
  ExprPtr parse_test(ExprPtr operand);
  ExprPtr parse_primary();
  ExprPtr parse_name(const Token& token);
  ExprPtr parse_number(const Token& token);
  ExprPtr parse_bracketed(const Token& open);
  std::vector<Argument> parse_call_args();

  const std::vector<Token>& tokens_;
  std::string_view source_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for bodies around the current statement (break/continue need one)
  std::vector<OpenBlock> open_blocks_;
  std::vector<MacroDef*> macros_;  // macros whose bodies are being parsed
};

ExprPtr make_expr(Expr::Kind kind, size_t offset) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  return e;
}

StmtPtr make_stmt(Stmt::Kind kind, size_t offset) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->offset = offset;
  return s;
}

// Sets e's depth from its children's and refuses a tree deeper than kMaxNesting (a chain of
// 10000 `+` parses without recursion, but evaluating it recurses once per link).
ExprPtr finish(ExprPtr e) {
  int depth = 0;
  for (const ExprPtr* child : {&e->a, &e->b, &e->c})
    if (*child) depth = std::max(depth, (*child)->depth);
  for (const ExprPtr& item : e->items)
    if (item) depth = std::max(depth, item->depth);
  for (const Argument& arg : e->args) depth = std::max(depth, arg.value->depth);
  e->depth = depth + 1;
  if (e->depth > kMaxNesting) throw EvalError(cat("an expression nested deeper than ", kMaxNesting, " levels"), e->offset);
  return e;
}

ExprPtr make_binary(BinaryOp op, ExprPtr left, ExprPtr right, size_t offset) {
  auto e = make_expr(Expr::Kind::binary, offset);
  e->binary_op = op;
  e->a = std::move(left);
  e->b = std::move(right);
  return finish(std::move(e));
}

ExprPtr make_unary(Expr::Kind kind, ExprPtr operand, size_t offset) {
  auto e = make_expr(kind, offset);
  e->a = std::move(operand);
  return finish(std::move(e));
}

Body Parser::parse_body(std::initializer_list<std::string_view> ends) {
  Body body;
  while (true) {
    const Token& t = peek();
    if (t.kind == TokenKind::end) {
      if (!open_blocks_.empty()) {
        const OpenBlock& open = open_blocks_.back();
        throw EvalError(cat("'", open.name, "' is never closed (the template ends before its 'end", open.name, "')"),
                        open.offset);
      }
      return body;
    }
    if (t.kind == TokenKind::text) {
      auto s = make_stmt(Stmt::Kind::text, t.offset);
      s->text = next().value;
      body.push_back(std::move(s));
    } else if (t.kind == TokenKind::open_expression) {
      next();
      auto s = make_stmt(Stmt::Kind::output, t.offset);
      s->expr = parse_expression();
      if (peek().kind != TokenKind::close_expression) fail_here(cat("expected '}}', found ", describe(peek())));
      next();
      body.push_back(std::move(s));
    } else if (t.kind == TokenKind::open_statement) {
      const Token& tag = peek(1);
      if (tag.kind == TokenKind::name && std::find(ends.begin(), ends.end(), tag.value) != ends.end()) return body;
      body.push_back(parse_tag());
    } else {
      fail_here(cat("unexpected ", describe(t)));
    }
  }
}

void Parser::fail_misplaced_end(const Token& tag) {
  const auto* end = std::find_if(std::begin(kEndTags), std::end(kEndTags),
                                 [&](const EndTag& e) { return e.tag == tag.value; });
  const bool block_open = std::any_of(open_blocks_.begin(), open_blocks_.end(), [&](const OpenBlock& b) {
    return end->block.find(b.name) != std::string_view::npos;
  });
  if (!block_open) throw EvalError(cat("unexpected '", tag.value, "' (no open '", end->block, "')"), tag.offset);
  const OpenBlock& inner = open_blocks_.back();
  throw EvalError(cat("unexpected '", tag.value, "' (the '", inner.name, "' of line ", line_of(inner.offset),
                      " is still open)"),
                  tag.offset);
}

StmtPtr Parser::parse_tag() {
  const size_t offset = next().offset;  // {%
  const Token& tag = peek();
  if (tag.kind != TokenKind::name) fail_here(cat("expected a tag name after '{%', found ", describe(tag)));
  const std::string name = tag.value;
  if (std::any_of(std::begin(kEndTags), std::end(kEndTags), [&](const EndTag& e) { return e.tag == name; }))
    fail_misplaced_end(tag);
  if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), name) != std::end(kUnsupportedTags))
    fail_here(cat("the tag '", name, "' is not supported in chat templates"));
  next();
  if (name == "if") return parse_if(offset);
  if (name == "for") return parse_for(offset);
  if (name == "set") return parse_set(offset);
  if (name == "macro") return parse_macro(offset);
  if (name == "filter") return parse_filter_block(offset);
  if (name == "generation") return parse_plain_block(offset);
  if (name == "break") return parse_loop_control(offset, Stmt::Kind::break_loop, name);
  if (name == "continue") return parse_loop_control(offset, Stmt::Kind::continue_loop, name);
  throw EvalError(cat("unknown tag '", name, "'"), tag.offset);
}

Body Parser::parse_block_body(std::string_view block, size_t offset, std::initializer_list<std::string_view> ends) {
  DepthGuard guard(*this, offset);
  open_blocks_.push_back({block, offset});
  Body body = parse_body(ends);
  open_blocks_.pop_back();
  return body;
}

// Consumes `{% name %}`, the end or middle of a block (parse_body stopped in front of it).
void Parser::consume_tag(std::string_view name) {
  next();  // {%
  if (!skip_name(name)) fail_here(cat("expected '", name, "', found ", describe(peek())));
  expect_tag_end();
}

StmtPtr Parser::parse_if(size_t offset) {
  auto s = make_stmt(Stmt::Kind::if_chain, offset);
  ExprPtr condition = parse_expression();
  expect_tag_end();
  while (true) {
    Body body = parse_block_body("if", offset, {"elif", "else", "endif"});
    s->branches.emplace_back(std::move(condition), std::move(body));
    next();  // {%
    const std::string tag = next().value;
    if (tag == "elif") {
      condition = parse_expression();
      expect_tag_end();
      continue;
    }
    expect_tag_end();
    if (tag == "else") {
      s->otherwise = parse_block_body("if", offset, {"endif"});
      consume_tag("endif");
    }
    return s;
  }
}

std::vector<std::string> Parser::parse_targets() {
  const bool parenthesised = skip_op("(");
  std::vector<std::string> names{expect_name("a variable name")};
  while (skip_op(",")) names.push_back(expect_name("a variable name"));
  if (parenthesised) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(size_t offset) {
  auto s = make_stmt(Stmt::Kind::for_loop, offset);
  s->targets = parse_targets();
  if (!skip_name("in")) fail_here(cat("expected 'in' after the loop variable, found ", describe(peek())));
  // `for x in xs if x.ok`: the `if` filters the items (it is no conditional expression).
  s->expr = parse_expression(false);
  if (skip_name("if")) s->condition = parse_expression();
  if (at_name("recursive")) fail_here("recursive loops are not supported in chat templates");
  expect_tag_end();
  ++loop_depth_;
  s->body = parse_block_body("for", offset, {"else", "endfor"});
  --loop_depth_;
  if (at_name("else", 1)) {
    consume_tag("else");
    s->otherwise = parse_block_body("for", offset, {"endfor"});
  }
  consume_tag("endfor");
  return s;
}

StmtPtr Parser::parse_set(size_t offset) {
  auto s = make_stmt(Stmt::Kind::set_value, offset);
  const Token& first = peek();
  if (first.kind == TokenKind::name && at_op(".", 1)) {  // set ns.attr = ...
    next();
    next();
    s->target_object = parse_name(first);
    s->target_attribute = expect_name("an attribute name");
  } else {
    s->targets = parse_targets();  // x, or x, y, or (x, y)
  }
  if (!skip_op("=")) {
    if (s->target_object || s->targets.size() != 1) fail_here(cat("expected '=', found ", describe(peek())));
    expect_tag_end();
    s->kind = Stmt::Kind::set_block;
    s->body = parse_block_body("set", offset, {"endset"});
    consume_tag("endset");
    return s;
  }
  s->expr = parse_expression();
  if (at_op(",")) {  // set x = 1, 2: a tuple
    auto tuple = make_expr(Expr::Kind::list, s->expr->offset);
    tuple->tuple = true;
    tuple->items.push_back(std::move(s->expr));
    while (skip_op(",")) tuple->items.push_back(parse_expression());
    s->expr = finish(std::move(tuple));
  }
  expect_tag_end();
  return s;
}

StmtPtr Parser::parse_macro(size_t offset) {
  auto s = make_stmt(Stmt::Kind::macro, offset);
  s->macro = std::make_unique<MacroDef>();
  MacroDef& m = *s->macro;
  m.name = expect_name("the macro's name");
  expect_op("(");
  while (!skip_op(")")) {
    const Token& param = peek();
    m.params.push_back(expect_name("a parameter name"));
    if (std::count(m.params.begin(), m.params.end(), m.params.back()) > 1)
      throw EvalError(cat("the parameter '", param.value, "' is named twice"), param.offset);
    m.defaults.push_back(skip_op("=") ? parse_expression() : nullptr);
    if (!m.defaults.back() && m.defaults.size() > 1 && m.defaults[m.defaults.size() - 2])
      throw EvalError("a parameter without a default follows one with a default", param.offset);
    if (!at_op(")")) expect_op(",");
  }
  expect_tag_end();
  const int loops_outside = loop_depth_;
  loop_depth_ = 0;  // a macro's body is not inside the caller's loop
  macros_.push_back(&m);
  m.body = parse_block_body("macro", offset, {"endmacro"});
  macros_.pop_back();
  loop_depth_ = loops_outside;
  consume_tag("endmacro");
  return s;
}

StmtPtr Parser::parse_filter_block(size_t offset) {
  auto s = make_stmt(Stmt::Kind::filter_block, offset);
  s->filter_name = expect_name("a filter name");
  if (at_op("(")) s->filter_args = parse_call_args();
  expect_tag_end();
  s->body = parse_block_body("filter", offset, {"endfilter"});
  consume_tag("endfilter");
  return s;
}

StmtPtr Parser::parse_plain_block(size_t offset) {
  auto s = make_stmt(Stmt::Kind::plain_block, offset);
  expect_tag_end();
  s->body = parse_block_body("generation", offset, {"endgeneration"});
  consume_tag("endgeneration");
  return s;
}

StmtPtr Parser::parse_loop_control(size_t offset, Stmt::Kind kind, std::string_view name) {
  if (loop_depth_ == 0) throw EvalError(cat("'", name, "' outside a loop"), offset);
  expect_tag_end();
  return make_stmt(kind, offset);
}

ExprPtr Parser::parse_expression(bool with_condition) {
  DepthGuard guard(*this, peek().offset);
  ExprPtr expr = parse_logical(BinaryOp::logical_or);
  while (with_condition && at_name("if")) {
    auto e = make_expr(Expr::Kind::conditional, next().offset);
    e->b = std::move(expr);
    e->a = parse_logical(BinaryOp::logical_or);
    if (skip_name("else")) e->c = parse_expression();
    expr = finish(std::move(e));
  }
  return expr;
}

// `or` over `and` over `not`, each left to right.
ExprPtr Parser::parse_logical(BinaryOp op) {
  const bool is_or = op == BinaryOp::logical_or;
  const auto operand = [&] { return is_or ? parse_logical(BinaryOp::logical_and) : parse_not(); };
  ExprPtr left = operand();
  while (at_name(is_or ? "or" : "and")) {
    const size_t offset = next().offset;
    left = make_binary(op, std::move(left), operand(), offset);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  const size_t offset = next().offset;
  DepthGuard guard(*this, offset);
  return make_unary(Expr::Kind::logical_not, parse_not(), offset);
}

ExprPtr Parser::parse_compare() {
  static constexpr std::pair<std::string_view, CompareOp> kOps[] = {
      {"==", CompareOp::eq}, {"!=", CompareOp::ne}, {"<", CompareOp::lt},
      {"<=", CompareOp::le}, {">", CompareOp::gt},  {">=", CompareOp::ge}};
  const size_t offset = peek().offset;
  ExprPtr first = parse_binary_level(0);
  auto chain = make_expr(Expr::Kind::compare, offset);
  chain->items.push_back(std::move(first));
  while (true) {
    const auto* op = std::find_if(std::begin(kOps), std::end(kOps), [&](const auto& o) { return at_op(o.first); });
    if (op != std::end(kOps)) {
      chain->compare_ops.push_back(op->second);
    } else if (at_name("in")) {
      chain->compare_ops.push_back(CompareOp::in);
    } else if (at_name("not") && at_name("in", 1)) {
      next();
      chain->compare_ops.push_back(CompareOp::not_in);
    } else {
      break;
    }
    next();
    chain->items.push_back(parse_binary_level(0));
  }
  if (chain->compare_ops.empty()) return std::move(chain->items[0]);
  return finish(std::move(chain));
}

// The binary operators from loosest to tightest, below the comparisons: + -, then ~, then
// * / // %, then ** (all left to right, ** too, as Jinja parses it).
ExprPtr Parser::parse_binary_level(int level) {
  static const std::vector<std::vector<std::pair<std::string_view, BinaryOp>>> kLevels = {
      {{"+", BinaryOp::add}, {"-", BinaryOp::subtract}},
      {{"~", BinaryOp::concat}},
      {{"*", BinaryOp::multiply}, {"/", BinaryOp::divide}, {"//", BinaryOp::floor_divide}, {"%", BinaryOp::modulo}},
      {{"**", BinaryOp::power}}};
  const auto operand = [&] { return level + 1 < static_cast<int>(kLevels.size()) ? parse_binary_level(level + 1) : parse_unary(true); };
  ExprPtr left = operand();
  while (true) {
    const auto& ops = kLevels[static_cast<size_t>(level)];
    const auto op = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return at_op(o.first); });
    if (op == ops.end()) return left;
    const size_t offset = next().offset;
    left = make_binary(op->second, std::move(left), operand(), offset);
  }
}

ExprPtr Parser::parse_unary(bool with_filters) {
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    const Token& sign = next();
    DepthGuard guard(*this, sign.offset);
    node = make_unary(sign.value == "-" ? Expr::Kind::negate : Expr::Kind::plus, parse_unary(false), sign.offset);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (!with_filters) return node;
  return parse_filters_and_tests(std::move(node));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      auto call = make_expr(Expr::Kind::call, peek().offset);
      call->a = std::move(node);
      call->args = parse_call_args();
      node = finish(std::move(call));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filters_and_tests(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      auto filter = make_expr(Expr::Kind::filter, next().offset);
      filter->a = std::move(node);
      filter->name = expect_name("a filter name after '|'");
      if (at_op("(")) filter->args = parse_call_args();
      node = finish(std::move(filter));
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_postfix(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr object) {
  const Token& open = next();
  if (open.value == ".") {
    const Token& t = next();
    if (t.kind == TokenKind::integer) {  // x.0 is x[0]
      auto e = make_expr(Expr::Kind::subscript, open.offset);
      e->a = std::move(object);
      e->b = parse_number(t);
      return finish(std::move(e));
    }
    if (t.kind != TokenKind::name) throw EvalError(cat("expected an attribute name after '.', found ", describe(t)), t.offset);
    auto e = make_expr(Expr::Kind::attribute, open.offset);
    e->a = std::move(object);
    e->name = t.value;
    return finish(std::move(e));
  }
  ExprPtr parts[3];
  bool is_slice = false;
  if (!at_op(":")) parts[0] = parse_expression();
  if (skip_op(":")) {
    is_slice = true;
    if (!at_op("]") && !at_op(":")) parts[1] = parse_expression();
    if (skip_op(":") && !at_op("]")) parts[2] = parse_expression();
  }
  expect_op("]");
  auto e = make_expr(is_slice ? Expr::Kind::slice : Expr::Kind::subscript, open.offset);
  e->a = std::move(object);
  if (is_slice) {
    for (ExprPtr& part : parts) e->items.push_back(std::move(part));
  } else {
    e->b = std::move(parts[0]);
  }
  return finish(std::move(e));
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  auto test = make_expr(Expr::Kind::test, next().offset);  // is
  test->a = std::move(operand);
  test->negated = skip_name("not");
  test->name = expect_name("a test name after 'is'");
  const Token& t = peek();
  const bool starts_argument =
      t.kind == TokenKind::string || t.kind == TokenKind::integer || t.kind == TokenKind::floating ||
      (t.kind == TokenKind::op && (t.value == "[" || t.value == "{")) ||
      (t.kind == TokenKind::name &&
       std::find(std::begin(kNotTestArguments), std::end(kNotTestArguments), t.value) == std::end(kNotTestArguments));
  if (at_op("(")) {
    test->args = parse_call_args();
  } else if (starts_argument) {  // `x is divisibleby 3`, `x is in [1, 2]`
    test->args.push_back({"", parse_postfix(parse_primary())});
  }
  return finish(std::move(test));
}

std::vector<Argument> Parser::parse_call_args() {
  expect_op("(");
  std::vector<Argument> args;
  bool keywords = false;
  while (!skip_op(")")) {
    if (at_op("*") || at_op("**")) fail_here("argument unpacking (*args, **kwargs) is not supported");
    Argument arg;
    if (peek().kind == TokenKind::name && at_op("=", 1)) {
      arg.keyword = next().value;
      next();
      keywords = true;
    } else if (keywords) {
      fail_here("a positional argument follows a keyword argument");
    }
    arg.value = parse_expression();
    args.push_back(std::move(arg));
    if (!at_op(")")) expect_op(",");
  }
  return args;
}

ExprPtr Parser::parse_primary() {
  const Token& t = next();
  switch (t.kind) {
    case TokenKind::name: return parse_name(t);
    case TokenKind::integer:
    case TokenKind::floating: return parse_number(t);
    case TokenKind::string: {
      std::string text = t.value;
      while (peek().kind == TokenKind::string) text += next().value;  // 'a' 'b' is 'ab', as in Python
      auto e = make_expr(Expr::Kind::literal, t.offset);
      e->value = Value::string(std::move(text));
      return e;
    }
    case TokenKind::op:
      if (t.value == "(" || t.value == "[" || t.value == "{") return parse_bracketed(t);
      break;
    default: break;
  }
  throw EvalError(cat("expected an expression, found ", describe(t)), t.offset);
}

ExprPtr Parser::parse_name(const Token& t) {
  static constexpr std::pair<std::string_view, int> kConstants[] = {{"true", 1},  {"True", 1}, {"false", 0},
                                                                    {"False", 0}, {"none", 2}, {"None", 2}};
  for (const auto& [name, which] : kConstants) {
    if (t.value != name) continue;
    auto e = make_expr(Expr::Kind::literal, t.offset);
    e->value = which == 2 ? Value::none() : Value::boolean(which == 1);
    return e;
  }
  if (!macros_.empty() && t.value == "varargs") macros_.back()->reads_varargs = true;
  if (!macros_.empty() && t.value == "kwargs") macros_.back()->reads_kwargs = true;
  auto e = make_expr(Expr::Kind::name, t.offset);
  e->name = t.value;
  return e;
}

ExprPtr Parser::parse_number(const Token& t) {
  auto e = make_expr(Expr::Kind::literal, t.offset);
  errno = 0;
  if (t.kind == TokenKind::integer) {
    const long long v = std::strtoll(t.value.c_str(), nullptr, 10);
    if (errno == ERANGE) throw EvalError(cat("the integer ", t.value, " is too large (64 bits at most)"), t.offset);
    e->value = Value::integer(v);
  } else {
    e->value = Value::floating(std::strtod(t.value.c_str(), nullptr));
  }
  return e;
}

// ( ) a tuple or a parenthesised expression, [ ] a list, { } a dict.
ExprPtr Parser::parse_bracketed(const Token& open) {
  DepthGuard guard(*this, open.offset);
  const std::string_view close = open.value == "(" ? ")" : open.value == "[" ? "]" : "}";
  auto e = make_expr(open.value == "{" ? Expr::Kind::dict : Expr::Kind::list, open.offset);
  bool tuple = open.value != "(";
  while (!skip_op(close)) {
    e->items.push_back(parse_expression());
    if (open.value == "{") {
      expect_op(":");
      e->items.push_back(parse_expression());
    }
    if (at_op(close)) continue;
    expect_op(",");
    tuple = true;  // (a,) is a tuple, (a) is a
  }
  if (!tuple && e->items.size() == 1) return std::move(e->items[0]);
  e->tuple = open.value == "(";
  return finish(std::move(e));
}

}  // namespace

Body parse_template(const std::vector<Token>& tokens, std::string_view source) {
  return Parser(tokens, source).parse_all();
}

}  // namespace gatedlm::chat
