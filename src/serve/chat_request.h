#pragma once
// POST /v1/chat/completions' body, checked and rendered into a prompt by the model's chat
// template (chat/chat_template.h, with add_generation_prompt): OpenAI's messages (system,
// developer, user, assistant, tool; content a string, null (read as "") or a list of
// {"type": "text", "text"} parts, joined), tools, chat_template_kwargs (an object of the
// template's keyword arguments, e.g. {"enable_thinking": false}) and the generation fields
// /v1/completions takes (request_fields.h; max_completion_tokens too). The prompt is the
// rendered text's tokens without an added BOS: the template writes bos_token where the
// model wants one, as transformers' apply_chat_template tokenizes it.
//
// Every problem is an InvalidRequest naming the field, a template's raise_exception or any
// error while rendering included (about "messages": the client's conversation made it).
#include <cstdint>
#include <string>

#include "chat/jinja_template.h"
#include "io/tokenizer.h"
#include "serve/completion_request.h"

namespace gatedlm::serve {

struct ChatRequest {
  CompletionRequest completion;
  std::string prompt_text;   // the template's rendering
  bool tools_given = false;  // tool calls are parsed from the reply only when tools were offered
  bool thinking_open = false;  // the prompt ends inside an opened <think> (chat_reply.h)
};

// The model's special tokens as the template sees them.
struct ChatTokens {
  std::string bos, eos;
  // "<|im_end|>" when the tokenizer has it as one token (ChatML models end a turn with it,
  // before their EOS): generation stops there too.
  std::string end_of_turn;
};
ChatTokens chat_tokens(const io::Tokenizer& tokenizer);

ChatRequest parse_chat(const std::string& body, const chat::JinjaTemplate& chat_template, const ChatTokens& tokens,
                       const io::Tokenizer& tokenizer, int64_t vocab, int64_t context, uint64_t default_seed);

}  // namespace gatedlm::serve
