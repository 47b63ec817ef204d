#pragma once
// A tokenizer.json's Split regex is Oniguruma's (Hugging Face's tokenizers compile it with
// onig); gatedlm runs it with PCRE2 (UTF + UCP). Where the two engines read the same
// pattern differently, it is rewritten to PCRE2 syntax of Oniguruma's meaning (the meaning
// Hugging Face's JavaScript tokenizers reproduce too, which the reference test compares with):
//   \s, \S     White_Space (PCRE2's \s also matches U+180E, MONGOLIAN VOWEL SEPARATOR)
//   \h, \H     a hexadecimal digit (PCRE2: horizontal white space)
//   \uHHHH     \x{HHHH} (PCRE2 has no \u)
//   (?i:...)   ASCII case folding only: s becomes [sS], so that (?i:'s) no longer matches
//              "'ſ" (U+017F folds to s under PCRE2's Unicode folding), as llama.cpp spells it
//   ^, $       line anchors (Oniguruma's are; PCRE2's match at the subject's ends only)
// Everything else is passed through; constructs PCRE2 would read differently and that have
// no rewrite here (nested character classes, && intersections) are refused.
#include <string>

namespace gatedlm::io {

// `source` names the file for the error messages.
std::string pcre2_pattern_from_oniguruma(const std::string& pattern, const std::string& source);

}  // namespace gatedlm::io
