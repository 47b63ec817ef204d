#pragma once
// httplib::Server with the limits a listening socket needs against slow or greedy clients.
// cpp-httplib gives every connection a worker thread from accept to close and waits up to
// its read timeout on every recv, so 40 clients that send half a body held all 32 workers
// for 30 s and /health went unanswered. Here:
//   - a connection is admitted only while fewer than max_connections are open in all and
//     fewer than max_per_client from its address; past a cap it gets 503 (Retry-After) at
//     once, except a connection whose first bytes are "GET /health", which a few spare
//     workers answer whatever the load;
//   - one request (its line, headers and body) must arrive within request_timeout from its
//     first byte: a client that sends slower is answered (400 for headers cut short, 408
//     for a body: a handler sees request_deadline_passed()) and disconnected;
//   - the pool has a worker for every admitted connection and the spares, so that an
//     admitted connection never waits for a thread.
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace gatedlm::serve {

struct ConnectionLimits {
  int64_t max_connections = 128;                      // open connections in all
  int64_t max_per_client = 32;                        // open connections from one address
  std::chrono::milliseconds request_timeout{10000};  // to receive one whole request
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const ConnectionLimits& limits);
  // After bind_to_port: lets SOMAXCONN finished handshakes wait for accept() instead of the
  // 5 that Debian's compiled cpp-httplib listens with. A burst of clients (40 at once in the
  // tests) overflowed that queue; the kernel then drops their handshakes' last packets and
  // the retransmitted request bytes can arrive after a refused connection was closed, which
  // answers them with a reset that destroys the 503 before the client reads it.
  void widen_listen_backlog();

 private:
  enum class Admission { admitted, health, refused };
  bool process_and_close_socket(socket_t sock) override;
  Admission admit(socket_t sock, const std::string& client);
  void release(Admission a, const std::string& client);
  // Requests on one connection (keep-alive), each read against its own deadline.
  void serve_requests(socket_t sock, size_t max_requests);

  ConnectionLimits limits_;
  std::mutex mu_;
  int64_t open_ = 0, open_health_ = 0;
  std::map<std::string, int64_t> open_per_client_;
};

// For a handler, on the worker thread that serves its request:
// whether the request's deadline passed (a body cut short by it is a 408, not a 400);
bool request_deadline_passed();
// that the connection must close after this response (its body was left unread: the bytes
// that follow are no next request).
void close_after_response();

}  // namespace gatedlm::serve
