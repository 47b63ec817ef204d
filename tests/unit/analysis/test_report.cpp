// gatedlm report: two small synthetic runs (fake metrics.jsonl / summary.json, real
// analysis JSONs from tiny models) plus a bare analysis file render to an HTML page whose
// every figure is a valid PNG / SVG and whose every src/href names an existing file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "analysis/analyze.h"
#include "analysis/report.h"
#include "analysis/sequences.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"

namespace gatedlm::analysis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("gatedlm_report_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  static void write(const fs::path& p, const std::string& s) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static json tiny_analysis(const json& gate, uint64_t seed) {
    json j{{"vocab_size", 20}, {"d_model", 16}, {"n_layers", 2},    {"n_heads", 2},    {"n_kv_heads", 1},
           {"head_dim", 8},    {"ffn_hidden", 24}, {"max_seq_len", 32}, {"init_std", 0.2}, {"gate", gate}};
    const model::ModelConfig c = model::config_from_json(j, "test");
    std::vector<float> params;
    model::init_params(params, model::ParamLayout(c), c, seed);
    model::Model<float> m(c);
    m.load_params(params);
    std::vector<int32_t> stream(300);
    Rng rng(seed);
    for (auto& t : stream) t = static_cast<int32_t>(rng.below(19));
    AnalyzeOptions opt;
    opt.checkpoint = "tiny";
    opt.map_layers = {0, 1};
    return analyze(m, sample_windows(stream, 19, 3, 12, seed), opt);
  }
  static void write_metrics(const fs::path& run, double base, const std::vector<int64_t>& spikes) {
    std::ostringstream m;
    for (int64_t s = 1; s <= 60; ++s) {
      const bool spike = std::find(spikes.begin(), spikes.end(), s) != spikes.end();
      json rec{{"step", s},       {"lr", 1e-3},           {"loss", base * std::exp(-s / 30.0) + 2 + (spike ? 1.0 : 0.0)},
               {"grad_norm", 1}, {"tokens_per_s", 900.0}, {"elapsed_s", 0.1 * s}};
      if (spike) rec["spike"] = true;
      m << rec.dump() << "\n";
      if (s % 20 == 0)
        m << json{{"step", s}, {"val_loss", 2.5}, {"val_ppl", std::exp(2.5)}, {"val_bpb", 3.6}}.dump() << "\n";
    }
    write(run / "metrics.jsonl", m.str());
  }
  fs::path dir_;
};

TEST_F(ReportTest, TwoRunsAndAnAnalysisFile) {
  if (find_gnuplot().empty()) GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  // Run 1: gated; its analysis named by summary.json (relative path), one spike.
  const fs::path run1 = dir_ / "gated_run", run2 = dir_ / "baseline_run";
  write_metrics(run1, 5.0, {25});
  write(run1 / "probe" / "gated.json", tiny_analysis({{"position", "sdpa"}}, 3).dump());
  write(run1 / "summary.json", json{{"spikes", {{"count", 1}, {"steps", {25}}}},
                                    {"tokens_per_s", 950.0},
                                    {"val_loss", 2.5},
                                    {"val_ppl", std::exp(2.5)},
                                    {"val_bpb", 3.6},
                                    {"analysis", "probe/gated.json"}}
                                   .dump());
  // Run 2: baseline; analysis.json inside the run, no spikes; a truncated last line.
  write_metrics(run2, 5.5, {});
  { std::ofstream(run2 / "metrics.jsonl", std::ios::app) << "{\"step\": 61, \"lo"; }
  write(run2 / "analysis.json", tiny_analysis({{"position", "none"}}, 4).dump());
  write(run2 / "summary.json", json{{"spikes", {{"count", 0}, {"steps", json::array()}}}, {"tokens_per_s", 1000.0}}.dump());
  // A bare analysis file (headwise gate).
  write(dir_ / "headwise.json", tiny_analysis({{"position", "sdpa"}, {"granularity", "headwise"}}, 5).dump());

  ReportOptions opt;
  opt.inputs = {run1.string(), run2.string(), (dir_ / "headwise.json").string()};
  opt.out_dir = (dir_ / "report").string();
  const ReportResult r = render_report(opt);
  EXPECT_EQ(r.warnings.size(), 1u);  // the truncated metrics line

  std::set<std::string> names;
  for (const std::string& f : r.figures) {
    const fs::path p(f);
    names.insert(p.stem().string());
    ASSERT_TRUE(fs::exists(p)) << f;
    const std::string content = read(p);
    ASSERT_GT(content.size(), 100u) << f;
    if (p.extension() == ".png") {
      EXPECT_EQ(content.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << f;
    } else {
      ASSERT_EQ(p.extension(), ".svg") << f;
      EXPECT_NE(content.find("<svg"), std::string::npos) << f;
    }
  }
  for (const char* want : {"train_loss", "val_loss", "f_attn_per_layer", "top_activation", "mean_abs_y",
                           "sparsity_1e-2", "sparsity_1e-3", "gate_mean_per_layer", "gate_histogram",
                           "attention_map_0_layer0", "attention_map_1_layer1", "attention_map_2_layer0"})
    EXPECT_TRUE(names.count(want)) << "missing figure " << want;
  EXPECT_EQ(r.figures.size(), 2 * names.size());  // a PNG and an SVG each

  const std::string html = read(r.html_path);
  const std::regex ref_re("(src|href)=\"([^\"]*)\"");
  int refs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref_re); it != std::sregex_iterator(); ++it) {
    const std::string target = (*it)[2];
    ++refs;
    EXPECT_TRUE(fs::exists(fs::path(opt.out_dir) / target)) << "dangling reference " << target;
  }
  EXPECT_GE(refs, static_cast<int>(names.size()) * 2);
  EXPECT_NE(html.find("gated_run"), std::string::npos);
  EXPECT_NE(html.find("baseline_run"), std::string::npos);
  EXPECT_NE(html.find("headwise"), std::string::npos);
  EXPECT_NE(html.find("none (baseline)"), std::string::npos);
  EXPECT_NE(html.find("—"), std::string::npos);  // baseline gate score, bare analysis has no metrics
  EXPECT_EQ(html.find("http"), std::string::npos);  // offline: nothing fetched from elsewhere
  // Tokens/s: the throughput over metrics.jsonl's steps (900 each), not summary.json's 950 / 1000.
  EXPECT_EQ(html.find("<td>950</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>900</td></tr>"), std::string::npos);
}

TEST_F(ReportTest, MetricsOnlyRunHasNoProbeFigures) {
  if (find_gnuplot().empty()) GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  write_metrics(dir_ / "run", 5.0, {});
  ReportOptions opt;
  opt.inputs = {(dir_ / "run").string()};
  opt.out_dir = (dir_ / "report").string();
  const ReportResult r = render_report(opt);
  std::set<std::string> names;
  for (const std::string& f : r.figures) names.insert(fs::path(f).stem().string());
  EXPECT_EQ(names, (std::set<std::string>{"train_loss", "val_loss"}));
  const std::string html = read(r.html_path);
  EXPECT_NE(html.find("no analysis JSON"), std::string::npos);
}

TEST_F(ReportTest, LongContextResultsGiveCurvesByLength) {
  if (find_gnuplot().empty()) GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  // Two `gatedlm longctx` results (docs/longctx.md), trimmed to the fields the report reads.
  auto longctx = [](const char* scaling, double score) {
    json lengths = json::array();
    for (int len : {256, 512, 1024})
      lengths.push_back({{"length", len},
                         {"rope", {{"scaling", scaling}}},
                         {"perplexity", {{"ppl", 30.0 + len / 100.0}}},
                         {"tasks", {{"passkey", {{"score", score}}}, {"niah_single", {{"skipped", "too long"}}}}}});
    return json{{"lengths", lengths}, {"rope_override", json::object()}};
  };
  write(dir_ / "plain.json", longctx("none", 0.5).dump());
  fs::create_directories(dir_ / "run");
  write(dir_ / "run" / "longctx.json", longctx("yarn", 0.75).dump());
  write_metrics(dir_ / "run", 5.0, {});
  ReportOptions opt;
  opt.inputs = {(dir_ / "plain.json").string(), (dir_ / "run").string()};
  opt.out_dir = (dir_ / "report").string();
  const ReportResult r = render_report(opt);
  std::set<std::string> names;
  for (const std::string& f : r.figures) names.insert(fs::path(f).stem().string());
  EXPECT_TRUE(names.count("longctx_ppl"));
  EXPECT_TRUE(names.count("longctx_accuracy"));
  const std::string data = read(dir_ / "report" / "data" / "longctx_0.dat");
  EXPECT_NE(data.find("512 35.12 0.5 NaN"), std::string::npos) << data;  // skipped task: no point
  const std::string html = read(r.html_path);
  EXPECT_NE(html.find("longctx_accuracy.png"), std::string::npos);
  EXPECT_EQ(html.find("no long-context evaluation"), std::string::npos);
}

// `gatedlm stream-eval --json` results (the fields it writes) as a file and as a run's
// stream_eval.json: one table row each, a column per cache setting, the after-fill
// perplexity beside the window's, a dash where a result lacks a setting.
TEST_F(ReportTest, StreamEvalResultsGiveTheWindowTable) {
  if (find_gnuplot().empty()) GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  auto stream = [](double full, std::vector<std::pair<int, double>> sinks) {
    json rows = json::array({{{"cache", "full"}, {"window", 0}, {"sinks", 0}, {"tokens", 1024}, {"ppl", full},
                              {"nll", std::log(full)}, {"tokens_after_fill", 0}, {"ppl_after_fill", nullptr}}});
    for (auto [k, ppl] : sinks)
      rows.push_back({{"cache", "window"}, {"window", 64}, {"sinks", k}, {"tokens", 1024}, {"ppl", ppl},
                      {"nll", std::log(ppl)}, {"tokens_after_fill", 960}, {"ppl_after_fill", ppl + 1}});
    return json{{"checkpoint", "x"}, {"text", "t.txt"}, {"tokenizer", "byte"}, {"train_len", 128}, {"tokens", 1024},
                {"results", rows}};
  };
  write(dir_ / "baseline_stream.json", stream(20.5, {{0, 812.25}, {1, 21.5}, {4, 21.25}}).dump());
  fs::create_directories(dir_ / "gated");
  write(dir_ / "gated" / "stream_eval.json", stream(18.0, {{0, 18.5}}).dump());
  write_metrics(dir_ / "gated", 5.0, {});
  ReportOptions opt;
  opt.inputs = {(dir_ / "baseline_stream.json").string(), (dir_ / "gated").string()};
  opt.out_dir = (dir_ / "report").string();
  const std::string html = read(render_report(opt).html_path);
  EXPECT_EQ(html.find("no streaming-window evaluation"), std::string::npos);
  for (const char* want : {"<th>Full cache</th><th>Window 64, 0 sinks</th><th>Window 64, 1 sink</th>"
                           "<th>Window 64, 4 sinks</th>",
                           "<td class=\"l\">baseline_stream</td><td>1024</td><td>128</td><td>20.50</td>"
                           "<td>812.25 (813.25 after fill)</td><td>21.50 (22.50 after fill)</td>",
                           "<td class=\"l\">gated</td>", "<td>18.50 (19.50 after fill)</td><td>\u2014</td>"})
    EXPECT_NE(html.find(want), std::string::npos) << want << "\n" << html;
  // Without one: a note says how to get it. A stream_eval.json of another shape: refused by name.
  write_metrics(dir_ / "plain", 5.0, {});
  opt.inputs = {(dir_ / "plain").string()};
  EXPECT_NE(read(render_report(opt).html_path).find("no streaming-window evaluation"), std::string::npos);
  write(dir_ / "plain" / "stream_eval.json", "{\"results\": 3}");
  try {
    render_report(opt);
    FAIL() << "a malformed stream_eval.json was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stream_eval.json"), std::string::npos) << e.what();
  }
}

TEST_F(ReportTest, ClearErrors) {
  ReportOptions opt;
  opt.out_dir = (dir_ / "report").string();
  opt.inputs = {(dir_ / "x.json").string()};
  opt.gnuplot = "/nonexistent/gnuplot";
  try {
    render_report(opt);
    FAIL() << "no error without gnuplot";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gnuplot"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos) << e.what();
  }
  if (find_gnuplot().empty()) return;
  opt.gnuplot.clear();
  write(dir_ / "x.json", "{\"not\": \"an analysis\"}");
  EXPECT_THROW(render_report(opt), Error);
  opt.inputs = {(dir_ / "missing").string()};
  EXPECT_THROW(render_report(opt), Error);
  fs::create_directories(dir_ / "empty_run");
  opt.inputs = {(dir_ / "empty_run").string()};
  EXPECT_THROW(render_report(opt), Error);
}

}  // namespace
}  // namespace gatedlm::analysis
