#pragma once
// Files that are either wholly there or not at all: write to a temporary sibling, fsync,
// rename over the target, fsync the directory. A crash at any instant leaves the old file.
#include <cstdint>
#include <string>
#include <string_view>

namespace gatedlm {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // opens "<path>.tmp.<pid>"
  ~AtomicFile();                          // removes the temporary if not committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();  // fsync + rename + fsync(dir)

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

void write_file_atomic(const std::string& path, std::string_view content);
void fsync_directory(const std::string& dir);

}  // namespace gatedlm
