#pragma once
// Plain-text inputs shared by tokenizer training and dataset preparation: finding the
// files behind the paths a user gives, reading them, and cutting text into pieces at
// places where a tokenizer cannot merge across (newlines, then spaces, then UTF-8
// character boundaries).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gatedlm::io {

// Files behind `inputs`, in order: a file is taken as it is; a directory is read
// recursively, its regular files in sorted path order, skipping hidden entries (names that
// start with '.') and binary files (a NUL byte in the first 64 KiB), each skip noted on
// stderr. A path that does not exist, or a directory without a text file, throws.
std::vector<std::string> collect_text_files(const std::vector<std::string>& inputs);

// The whole file; throws naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

// Offset of the first byte that is not part of valid UTF-8 (overlong forms, surrogates
// and code points above U+10FFFF are invalid), or -1 when all of it is valid.
int64_t find_invalid_utf8(std::string_view text);

// The largest offset <= pos that starts a UTF-8 character (or pos itself when the bytes
// before it are not UTF-8 continuation bytes).
size_t utf8_boundary_at_or_before(std::string_view text, size_t pos);

// Cuts text into consecutive pieces of at most max_bytes (a piece may be longer only when
// it is a single character). Each piece ends just after a newline if the window holds one,
// else just before a space, else at a UTF-8 character boundary. The pieces concatenate to
// the text.
std::vector<std::string_view> split_text(std::string_view text, size_t max_bytes);

// Where a text's validation tail starts for a val_fraction in [0, 1): nominally at
// size - round(size * val_fraction), moved to just after the nearest newline within a
// window of min(64 KiB, half the tail) around it, else back to a UTF-8 character
// boundary. Returns size (no tail) when the nominal tail is empty.
size_t validation_cut(std::string_view text, double val_fraction);

}  // namespace gatedlm::io
