#pragma once
// The body of a POST, within --max-body-bytes however it is sent. httplib inflates a
// Content-Encoding (gzip, deflate, br) as the bytes arrive and hands each decoded piece to
// a content receiver; counting there bounds the DECODED body (a 100 KB gzip bomb that
// inflates to 100 MB stops at the limit, not after) and a chunked body as it arrives. A
// Content-Length over the limit is refused from the headers, before any of it is read.
#include <httplib.h>

#include <cstdint>
#include <optional>
#include <string>

namespace gatedlm::serve {

struct BodyRefusal {
  int status;  // 413 over the limit, 408 too slow, 400 unreadable
  std::string message;
};

// From the headers alone: a Content-Length that is not a number, or over max_bytes.
std::optional<BodyRefusal> check_declared_length(const httplib::Request& req, int64_t max_bytes);

// Reads the body through the handler's content reader; a refusal leaves the rest unread.
struct Body {
  std::string text;
  std::optional<BodyRefusal> refusal;
};
Body read_body(const httplib::Request& req, const httplib::ContentReader& reader, int64_t max_bytes);

}  // namespace gatedlm::serve
