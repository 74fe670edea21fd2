// Run files: what is published is what is read back, by our reader and by h5py; truncation for
// resume drops exactly the rows after the checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "results/run_file.h"
#include "run_record_support.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

results::RunRecord sample() {
  results::RunRecord r = test_support::record_with_train_log("model:\n  layers: 2  # ünïcode\n", 2, 5, 64);
  for (int64_t T : {64, 256}) {
    auto& e = r.eval[T];
    for (int s : {2, 4}) {
      e.step.push_back(s);
      e.loss.push_back(double(T) / 64 + s);
      e.position_loss.push_back({1.0 * s, 2.0 * s, 3.0 * s});
      e.score_std.push_back({0.9, 1.1});
    }
  }
  r.eval[64].window_loss = {3.5, 4.5, 6.5};  // the last validation's (step 4), three windows
  r.eval[64].window_fingerprint = "fnv1a64:0123456789abcdef";
  r.eval[64].window_document = {0, 0, 1};
  r.state = results::RunState::kInterrupted;
  r.reason = "signal 15 at step 5";
  r.status_step = 5;
  return r;
}

fs::path temp_dir() {
  auto dir = fs::temp_directory_path() / ("harness-results-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST(Results, PublishThenReadRoundTrips) {
  const auto path = (temp_dir() / "run.h5").string();
  const auto r = sample();
  results::publish(r, path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const auto back = results::read_run_file(path);
  EXPECT_EQ(back.config, r.config);
  EXPECT_EQ(back.threads, 2);
  EXPECT_EQ(back.train.step, r.train.step);
  EXPECT_EQ(back.train.loss, r.train.loss);
  EXPECT_EQ(back.train.seconds, r.train.seconds);
  ASSERT_EQ(back.eval.size(), 2u);
  EXPECT_EQ(back.eval.at(256).loss, r.eval.at(256).loss);
  EXPECT_EQ(back.eval.at(64).position_loss, r.eval.at(64).position_loss);
  EXPECT_EQ(back.eval.at(64).score_std, r.eval.at(64).score_std);
  EXPECT_EQ(back.eval.at(64).window_loss, r.eval.at(64).window_loss);
  EXPECT_EQ(back.eval.at(64).window_fingerprint, r.eval.at(64).window_fingerprint);
  EXPECT_EQ(back.eval.at(64).window_document, r.eval.at(64).window_document);
  EXPECT_TRUE(back.eval.at(256).window_loss.empty());  // none stored: none read
  EXPECT_EQ(back.state, results::RunState::kInterrupted);
  EXPECT_EQ(back.reason, r.reason);
  EXPECT_EQ(back.status_step, 5);
}

TEST(Results, TruncateAfterDropsLaterRows) {
  auto r = sample();
  r.truncate_after(3);
  EXPECT_EQ(r.train.step, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.train.seconds.size(), 3u);
  EXPECT_EQ(r.eval.at(64).step, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.eval.at(64).position_loss.size(), 1u);
  // The window losses were step 4's, which is dropped: they go with it.
  EXPECT_TRUE(r.eval.at(64).window_loss.empty());
  EXPECT_TRUE(r.eval.at(64).window_fingerprint.empty());
  EXPECT_TRUE(r.eval.at(64).window_document.empty());
  auto kept = sample();
  kept.truncate_after(4);
  EXPECT_EQ(kept.eval.at(64).window_loss.size(), 3u);
}

TEST(Results, ReadableByH5pyWithoutOurCode) {
  const std::string python = test_support::project_python();
  if (python.empty()) GTEST_SKIP() << "no project Python (scripts/install-python.sh)";
  const auto dir = temp_dir();
  const auto path = (dir / "py.h5").string();
  results::publish(sample(), path);
  const auto out = (dir / "py.txt").string();
  const std::string script =
      "import h5py,sys\n"
      "f=h5py.File(sys.argv[1],'r')\n"
      "print([float(x) for x in f['train/loss'][:]], float(f['eval/256/loss'][1]), f['eval/64/position_loss'].shape,"
      " f['status'].attrs['state'], f['config'].attrs['hash'], f['train/loss'].attrs['units'])\n";
  std::ofstream(dir / "read.py") << script;
  ASSERT_EQ(std::system((python + " " + (dir / "read.py").string() + " " + path + " > " + out).c_str()), 0);
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "[4.5, 4.0, 3.5, 3.0, 2.5] 8.0 (2, 3) interrupted 0123456789abcdef nats/token");
}

// A file written before the windows' fingerprint was stored still reads: its windows are unnamed
// (never paired), not an unreadable file.
TEST(Results, WindowLossesWithoutAFingerprintReadAsUnnamed) {
  const std::string python = test_support::project_python();
  if (python.empty()) GTEST_SKIP() << "no project Python (scripts/install-python.sh)";
  const auto path = (temp_dir() / "old.h5").string();
  results::publish(sample(), path);
  const std::string drop = python + " -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r+'); "
                           "del f['eval/64'].attrs['window_fingerprint']\" " + path;
  ASSERT_EQ(std::system(drop.c_str()), 0);
  const auto back = results::read_run_file(path);
  EXPECT_EQ(back.eval.at(64).window_loss.size(), 3u);
  EXPECT_EQ(back.eval.at(64).window_fingerprint, "");
}

TEST(Results, MissingFileIsAClearError) {
  EXPECT_THROW(results::read_run_file("/nonexistent/run.h5"), std::runtime_error);
}
