#pragma once
// Typed conveniences over Communicator's byte collectives, for plain values.
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "dist/communicator.h"

namespace gatedlm::dist {

// Every rank's `mine` (the same length on every rank), rank 0's first.
template <typename T>
std::vector<T> allgather_values(Communicator& comm, std::span<const T> mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> all(mine.size() * static_cast<size_t>(comm.size()));
  comm.allgather(std::as_bytes(mine), std::as_writable_bytes(std::span<T>(all)));
  return all;
}

// `values` on every rank becomes root's (the same length on every rank).
template <typename T>
void broadcast_values(Communicator& comm, std::span<T> values, int root = 0) {
  static_assert(std::is_trivially_copyable_v<T>);
  comm.broadcast(std::as_writable_bytes(values), root);
}

// Root's value of `v`, on every rank.
template <typename T>
T from_root(Communicator& comm, T v, int root = 0) {
  broadcast_values(comm, std::span<T>(&v, 1), root);
  return v;
}

// Root's string, on every rank (any length).
inline std::string broadcast_string(Communicator& comm, std::string s, int root = 0) {
  size_t n = from_root(comm, s.size(), root);
  s.resize(n);
  broadcast_values(comm, std::span<char>(s.data(), n), root);
  return s;
}

// True on every rank when it is true on any.
inline bool any_rank(Communicator& comm, bool mine) {
  if (comm.size() == 1) return mine;
  const char flag = mine ? 1 : 0;
  for (char f : allgather_values(comm, std::span<const char>(&flag, 1)))
    if (f) return true;
  return false;
}

}  // namespace gatedlm::dist
