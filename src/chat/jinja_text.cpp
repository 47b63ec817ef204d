#include "chat/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gatedlm::chat {

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  int extra = 0;
  char32_t c = 0;
  if (b0 < 0x80) {
    ++i;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    extra = 1, c = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    extra = 2, c = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    extra = 3, c = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + static_cast<size_t>(extra) >= s.size()) {  // cut short by the end of the text
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k <= extra; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    c = (c << 6) | (byte(i + k) & 0x3F);
  }
  i += static_cast<size_t>(extra) + 1;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;  // no lone surrogates in UTF-8
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<std::string_view> characters(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    next_code_point(s, i);
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

size_t count_characters(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_code_point(s, i);
  return n;
}

bool is_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Whether the code point ending at byte `end` (exclusive) of s is white space; its start in `start`.
bool space_before(std::string_view s, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
  size_t i = start;
  const char32_t c = next_code_point(s, i);
  if (i != end) {  // a stray continuation byte: one byte, not space
    start = end - 1;
    return false;
  }
  return is_space(c);
}

bool in_chars(char32_t c, std::string_view chars) {
  for (size_t i = 0; i < chars.size();)
    if (next_code_point(chars, i) == c) return true;
  return false;
}

}  // namespace

size_t trailing_space_bytes(std::string_view s) {
  size_t end = s.size();
  size_t start = 0;
  while (end > 0 && space_before(s, end, start)) end = start;
  return s.size() - end;
}

size_t leading_space_bytes(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!is_space(next_code_point(s, next))) break;
    i = next;
  }
  return i;
}

std::string strip_text(std::string_view s, StripSide side, bool strip_space, std::string_view chars) {
  const auto strips = [&](char32_t c) { return strip_space ? is_space(c) : in_chars(c, chars); };
  size_t begin = 0, end = s.size();
  if (side != StripSide::right) {
    while (begin < end) {
      size_t next = begin;
      if (!strips(next_code_point(s, next))) break;
      begin = next;
    }
  }
  if (side != StripSide::left) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
      size_t i = start;
      const char32_t c = next_code_point(s, i);
      if (i != end || !strips(c)) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool is_ascii_letter_or_digit(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // The shortest digits that read back as d, in scientific form: "-1.25e+16".
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, result.ptr);
  const size_t e_at = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_at; ++i)
    if (sci[i] >= '0' && sci[i] <= '9') digits += sci[i];
  const int exponent = std::atoi(sci.c_str() + e_at + 1);
  const std::string sign = d < 0 || (d == 0 && std::signbit(d)) ? "-" : "";
  // Python's repr switches to the exponent form outside 1e-4 <= |d| < 1e16.
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) mantissa.append(".").append(digits, 1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + mantissa + exp;
  }
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (static_cast<size_t>(point) >= digits.size())
    return sign + digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
  return sign + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

namespace {

// Characters Python's repr escapes beyond ASCII: the C1 controls, the separators and the
// format characters chat text meets (str.isprintable is false for them).
bool unprintable(char32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) ||
         c == 0x3000 || c == 0xFEFF;
}

}  // namespace

std::string python_quoted(std::string_view s) {
  const bool double_quotes = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = next_code_point(s, i);
    char buf[16];
    if (c == '\\' || c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (unprintable(c)) {
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += quote;
  return out;
}

}  // namespace gatedlm::chat
