#include "serve/guarded_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace gatedlm::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Spare workers beyond the admitted connections: up to kHealthSpares answer /health past
// the caps, the rest write the 503 refusals.
constexpr int64_t kHealthSpares = 4;
constexpr int64_t kRefusalSpares = 8;
// How long a connection past the caps may take to show "GET /health".
constexpr int kHealthPeekMs = 300;

struct RequestState {
  Clock::time_point deadline = Clock::time_point::max();
  bool close_after = false;
};
thread_local RequestState t_request;

// Rounded up: a wait for it must not end before t (then a read would fail with the request's
// deadline not yet passed, a 400 instead of its 408).
int ms_until(Clock::time_point t) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

bool wait_for(socket_t sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  int r;
  do r = ::poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  return r > 0;
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

void peer_or_local(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ip.clear();
  port = 0;
  if ((peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &len)
            : ::getsockname(sock, reinterpret_cast<sockaddr*>(&a), &len)) == 0)
    address_of(a, ip, port);
}

// httplib's SocketStream, with one deadline for the whole request instead of a timeout per
// recv. Buffered: httplib reads the request line and headers one byte at a time.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, Clock::time_point deadline, int write_timeout_ms)
      : sock_(sock), deadline_(deadline), write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override { return wait_for(sock_, POLLIN, ms_until(deadline_)); }
  // Writable, and the peer still there (a closed peer reads as end of file).
  bool is_writable() const override {
    if (!wait_for(sock_, POLLOUT, write_timeout_ms_)) return false;
    if (!wait_for(sock_, POLLIN, 0)) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!is_readable()) return -1;  // the deadline passed (or the socket failed)
      const ssize_t n = ::recv(sock_, buffer_, sizeof buffer_, 0);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return ::send(sock_, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { peer_or_local(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { peer_or_local(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  socket_t sock_;
  Clock::time_point deadline_;
  int write_timeout_ms_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// Whether the connection's first bytes, once they come, are a GET of /health.
bool asks_for_health(socket_t sock) {
  static constexpr char kWant[] = "GET /health";
  constexpr size_t n = sizeof kWant - 1;
  char got[n + 1];
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(kHealthPeekMs);
  for (;;) {
    if (!wait_for(sock, POLLIN, ms_until(until))) return false;
    const ssize_t r = ::recv(sock, got, n + 1, MSG_PEEK | MSG_DONTWAIT);
    if (r <= 0 || std::memcmp(got, kWant, std::min<size_t>(static_cast<size_t>(r), n)) != 0) return false;
    if (static_cast<size_t>(r) == n + 1) return got[n] == ' ' || got[n] == '?';
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the rest is on its way
  }
}

void write_all(socket_t sock, const std::string& s) {
  size_t done = 0;
  while (done < s.size() && wait_for(sock, POLLOUT, 1000)) {
    const ssize_t n = ::send(sock, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void refuse_connection(socket_t sock) {
  const std::string body =
      R"({"error":{"message":"too many open connections (--max-connections, --max-connections-per-client); )"
      R"(retry later","type":"server_busy","param":null}})";
  write_all(sock, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                  "Connection: close\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body);
}

// Closes after the answer has gone: what the client still sends (a body that was refused
// unread) is read and dropped first, until the client closes its end or for at most a
// second, since closing a socket with unread bytes, or before bytes still on their way
// arrive, sends a reset that can destroy the answer before the client reads it. A client
// that sends the rest of its body a moment after its head (a busy machine) must not lose
// its 503: no shorter wait between reads than the whole second.
void close_gently(socket_t sock, bool body_left_unread) {
  ::shutdown(sock, SHUT_WR);
  if (body_left_unread || wait_for(sock, POLLIN, 0)) {
    const Clock::time_point until = Clock::now() + std::chrono::seconds(1);
    char sink[16384];
    size_t dropped = 0;
    while (dropped < (64u << 20) && wait_for(sock, POLLIN, ms_until(until))) {
      const ssize_t n = ::recv(sock, sink, sizeof sink, 0);
      if (n <= 0) break;
      dropped += static_cast<size_t>(n);
    }
  }
  ::close(sock);
}

}  // namespace

GuardedServer::GuardedServer(const ConnectionLimits& limits) : limits_(limits) {
  const size_t workers = static_cast<size_t>(limits.max_connections + kHealthSpares + kRefusalSpares);
  new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
}

void GuardedServer::widen_listen_backlog() {
  // listen() on a listening socket only changes its backlog (Linux, the BSDs).
  if (svr_sock_ != INVALID_SOCKET && ::listen(svr_sock_, SOMAXCONN) != 0)
    std::fprintf(stderr, "serve: could not widen the listen backlog (%s); bursts of connections may wait\n",
                 std::strerror(errno));
}

GuardedServer::Admission GuardedServer::admit(socket_t sock, const std::string& client) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& mine = open_per_client_[client];
    if (open_ < limits_.max_connections && mine < limits_.max_per_client) {
      ++open_;
      ++mine;
      return Admission::admitted;
    }
    if (mine == 0) open_per_client_.erase(client);
    if (open_health_ >= kHealthSpares) return Admission::refused;
    ++open_health_;  // held while looking, so that at most kHealthSpares workers look
  }
  if (asks_for_health(sock)) return Admission::health;
  release(Admission::health, client);
  return Admission::refused;
}

void GuardedServer::release(Admission a, const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (a == Admission::health) {
    --open_health_;
  } else if (a == Admission::admitted) {
    --open_;
    if (--open_per_client_[client] == 0) open_per_client_.erase(client);
  }
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  std::string client;
  int port;
  peer_or_local(sock, true, client, port);
  const Admission a = admit(sock, client);
  t_request = {};
  if (a == Admission::refused)
    refuse_connection(sock);
  else
    serve_requests(sock, a == Admission::health ? 1 : keep_alive_max_count_);
  close_gently(sock, a == Admission::refused || t_request.close_after);
  release(a, client);
  return true;
}

void GuardedServer::serve_requests(socket_t sock, size_t max_requests) {
  const int write_timeout_ms = static_cast<int>(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  for (size_t left = max_requests; left > 0; --left) {
    // Idle between requests for at most the keep-alive timeout (and not past a stop()).
    const Clock::time_point idle_until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    bool ready = false;
    while (!ready && svr_sock_ != INVALID_SOCKET && Clock::now() < idle_until)
      ready = wait_for(sock, POLLIN, std::min(ms_until(idle_until), 100));
    if (!ready || svr_sock_ == INVALID_SOCKET) return;
    t_request.deadline = Clock::now() + limits_.request_timeout;
    DeadlineStream stream(sock, t_request.deadline, write_timeout_ms);
    bool connection_closed = false;
    if (!process_request(stream, left == 1, connection_closed, nullptr) || connection_closed ||
        t_request.close_after)
      return;
  }
}

bool request_deadline_passed() { return Clock::now() >= t_request.deadline; }

void close_after_response() { t_request.close_after = true; }

}  // namespace gatedlm::serve
