#include "serve/request_body.h"

#include "serve/guarded_server.h"

namespace gatedlm::serve {

namespace {

BodyRefusal over_limit(int64_t max_bytes, const std::string& what) {
  return {413, "the request body " + what + " is over the server's limit of " + std::to_string(max_bytes) +
                   " bytes (--max-body-bytes)"};
}

}  // namespace

std::optional<BodyRefusal> check_declared_length(const httplib::Request& req, int64_t max_bytes) {
  if (!req.has_header("Content-Length")) return std::nullopt;
  const std::string value = req.get_header_value("Content-Length");
  const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) return BodyRefusal{400, "Content-Length must be a number of bytes, got '" + value.substr(0, 40) + "'"};
  // Longer than the limit's digits: over it (and no overflow from parsing 10^30).
  if (value.size() > std::to_string(max_bytes).size() || std::stoll(value) > max_bytes)
    return over_limit(max_bytes, "(Content-Length " + value.substr(0, 40) + ")");
  return std::nullopt;
}

Body read_body(const httplib::Request& req, const httplib::ContentReader& reader, int64_t max_bytes) {
  Body body;
  if ((body.refusal = check_declared_length(req, max_bytes))) return body;
  bool too_large = false;
  const bool complete = reader([&](const char* data, size_t n) {
    if (static_cast<int64_t>(body.text.size() + n) > max_bytes) {
      too_large = true;
      return false;
    }
    body.text.append(data, n);
    return true;
  });
  if (complete) return body;
  body.text.clear();
  const bool encoded = req.has_header("Content-Encoding");
  if (too_large)
    body.refusal = over_limit(max_bytes, encoded ? "(decoded)" : "(received)");
  else if (request_deadline_passed())
    body.refusal = BodyRefusal{408, "the request body did not arrive in time (--request-timeout)"};
  else
    body.refusal = BodyRefusal{400, encoded ? "the request body could not be read or decoded (Content-Encoding " +
                                                  req.get_header_value("Content-Encoding") + ")"
                                            : "the request body could not be read (cut short, or bad chunked encoding)"};
  return body;
}

}  // namespace gatedlm::serve
