#pragma once
// Text for the HTML report: escaping and number formatting shared by its sections.
#include <optional>
#include <string>

namespace gatedlm::analysis {

// The dash shown where a value is not available for an input.
inline constexpr const char* kDash = "\u2014";

// s with & < > " ' escaped, safe inside element text and quoted attributes.
std::string html_escape(const std::string& s);

// v printed with a printf format (one double), or kDash when absent or not finite.
std::string fmt(std::optional<double> v, const char* format);

}  // namespace gatedlm::analysis
