#pragma once
// Text as Python's str sees it, over UTF-8 bytes: code points (indexing and slicing count
// them, not bytes), Python's white space (str.strip, str.split), ASCII case mapping, and
// Python's spelling of floats and quoted strings.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gatedlm::chat {

// The code point at s[i], advancing i past it; a malformed byte reads as U+FFFD (one byte).
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t c);
// s cut into its characters (code points), each a view into s.
std::vector<std::string_view> characters(std::string_view s);
size_t count_characters(std::string_view s);

// Python's str.isspace (what str.strip() and str.split() with no argument treat as space,
// and what Jinja's `{%-` / `-%}` remove).
bool is_space(char32_t c);
// The byte length of the white space at the end of s / at its start.
size_t trailing_space_bytes(std::string_view s);
size_t leading_space_bytes(std::string_view s);

// str.strip / lstrip / rstrip: with chars empty and strip_space, Python's white space;
// otherwise the characters (code points) in chars.
enum class StripSide { left, right, both };
std::string strip_text(std::string_view s, StripSide side, bool strip_space, std::string_view chars);

// Case mapping of ASCII letters (other characters are kept as they are).
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
bool is_ascii_letter_or_digit(char c);

// repr(float) of Python: shortest round trip, "1.0", "1e-05", "1.5e+16", "inf", "nan".
std::string python_float(double d);
// repr(str) of Python: 'text' (or "it's"), with \n, \t, \\ and unprintable characters escaped.
std::string python_quoted(std::string_view s);

}  // namespace gatedlm::chat
