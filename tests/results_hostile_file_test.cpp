// A run file from someone else reads only itself. HDF5 lets a file name other files: an external
// link, a dataset's external raw storage, a virtual dataset's sources; libhdf5 opens them (any
// path the file's author chose) as soon as a reader walks into them. Each kind, made with h5py
// from a real run file, must be refused by the run-file reader with an error naming the file,
// in-process and through export, report, analyse and tau check, and the file it names must never
// be opened: inotify watches it (the test fails if the refusal is removed: every kind below is
// read by libhdf5 1.10 through the other file).
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "results/hdf5_io.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The files among `files` that any process opened or read since the last call (inotify).
class OpenWatch {
 public:
  explicit OpenWatch(const std::vector<fs::path>& files) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    for (const auto& f : files) names_[::inotify_add_watch(fd_, f.c_str(), IN_OPEN | IN_ACCESS)] = f.string();
  }
  ~OpenWatch() { ::close(fd_); }
  OpenWatch(const OpenWatch&) = delete;
  OpenWatch& operator=(const OpenWatch&) = delete;
  std::set<std::string> touched() {
    std::set<std::string> out;
    alignas(inotify_event) char buffer[4096];
    for (ssize_t n; (n = ::read(fd_, buffer, sizeof buffer)) > 0;)
      for (char* p = buffer; p < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(p);
        out.insert(names_.count(event->wd) ? names_[event->wd] : "?");
        p += sizeof(inotify_event) + event->len;
      }
    return out;
  }

 private:
  int fd_;
  std::map<int, std::string> names_;
};

struct Kind {
  const char* name;
  const char* says;  // what the refusal calls it
};
const Kind kKinds[] = {{"external-link", "/train is an external link to "},
                       {"external-storage", "/train/loss is stored in an external file "},
                       {"virtual-dataset", "/train/loss is a virtual dataset of "}};

// h5py turns a copy of a real run file into one of each kind, pointing at target/run.h5 (a whole
// run file) or target/loss.bin (its losses as raw float64).
const char* kMakeHostile = R"(import sys, h5py
kind, path, target_h5, target_bin = sys.argv[1:]
with h5py.File(path, "r+") as f:
    train = f["train"]
    n = train["loss"].shape[0]
    if kind == "external-link":
        del f["train"]
        f["train"] = h5py.ExternalLink(target_h5, "/train")
    elif kind == "external-storage":
        del train["loss"]
        train.create_dataset("loss", shape=(n,), dtype="<f8", external=[(target_bin, 0, 8 * n)])
    else:
        del train["loss"]
        layout = h5py.VirtualLayout(shape=(n,), dtype="<f8")
        layout[:] = h5py.VirtualSource(target_h5, "/train/loss", shape=(n,))
        train.create_virtual_dataset("loss", layout)
)";

struct Result {
  int code = -1;
  std::string output;
};

Result harness(const std::vector<std::string>& args, const fs::path& log) {
  fs::remove(log);
  const pid_t pid = test_support::spawn_harness(log.parent_path(), args, log);
  Result r;
  r.code = test_support::wait_exit(pid, std::chrono::seconds(300));
  r.output = test_support::read_text(log);
  return r;
}

// One `tau check` sweep of 4 tiny runs (τ × 0.5, 1; seeds 0, 1), trained once for the suite; for
// each kind a folder <kind>/ holding one of its runs whole (good/) and one made hostile (bad/).
class HostileRunFile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    python_ = test_support::project_python();
    if (python_.empty()) return;
    tmp_ = std::make_unique<test_support::TempDir>();
    const fs::path root = tmp_->path;
    std::ofstream(root / "tau.yaml") << "data: {corpus: '" << HARNESS_TEST_DATA << "/sotu', data_dir: '"
                                     << (root / "cache").string() << "'}\n"
                                     << "model: {layers: 1, d_model: 16, heads: 1}\n"
                                        "train: {context: 32, batch_size: 2, steps: 4}\n"
                                        "eval: {contexts: [L], windows: 2, every: 2}\n"
                                        "run: {checkpoint_every: 4, threads: 1, out_dir: '"
                                     << (root / "tau").string() << "'}\n";
    const Result trained = harness(tau_check({"--jobs", "1", "--threads-per-job", "1"}), root / "tau.log");
    ASSERT_EQ(trained.code, 0) << trained.output;
    for (const auto& sweep : fs::directory_iterator(root / "tau"))
      for (const auto& run : fs::directory_iterator(sweep.path()))
        if (fs::exists(run.path() / "run.h5")) runs_.push_back(run.path());
    ASSERT_EQ(runs_.size(), 4u);
    fs::create_directories(root / "target");
    fs::copy_file(runs_[0] / "run.h5", target_h5());
    python("import h5py, sys; h5py.File(sys.argv[1], 'r')['train/loss'][:].astype('<f8').tofile(sys.argv[2])",
           {target_h5().string(), target_bin().string()});
    std::ofstream(root / "make_hostile.py") << kMakeHostile;
    for (const Kind& kind : kKinds) {
      fs::create_directories(root / kind.name);
      fs::copy(runs_[0], root / kind.name / "good", fs::copy_options::recursive);
      fs::copy(runs_[0], root / kind.name / "bad", fs::copy_options::recursive);
      python_file(root / "make_hostile.py",
                  {kind.name, hostile(kind).string(), target_h5().string(), target_bin().string()});
    }
    ready_ = !::testing::Test::HasFailure();
  }
  static void TearDownTestSuite() { tmp_.reset(); }
  void SetUp() override {
    if (python_.empty()) GTEST_SKIP() << "no project Python with h5py (scripts/install-python.sh)";
    ASSERT_TRUE(ready_) << "the suite's run files could not be made";
  }

  static std::vector<std::string> tau_check(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"tau", "check", "--config", (tmp_->path / "tau.yaml").string(),
                                     "--factors", "0.5,1", "--seeds", "0,1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  static void python(const std::string& code, const std::vector<std::string>& args) {
    std::ofstream(tmp_->path / "snippet.py") << code << "\n";
    python_file(tmp_->path / "snippet.py", args);
  }
  static void python_file(const fs::path& script, const std::vector<std::string>& args) {
    std::string command = python_ + " " + script.string();
    for (const auto& a : args) command += " '" + a + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static fs::path target_h5() { return tmp_->path / "target" / "run.h5"; }
  static fs::path target_bin() { return tmp_->path / "target" / "loss.bin"; }
  static fs::path hostile(const Kind& kind) { return tmp_->path / kind.name / "bad" / "run.h5"; }
  // The watch on the files the hostile ones name, shown to see an open first.
  static std::unique_ptr<OpenWatch> watch_targets() {
    auto watch = std::make_unique<OpenWatch>(std::vector<fs::path>{target_h5(), target_bin()});
    std::ifstream(target_bin()).get();
    EXPECT_EQ(watch->touched(), std::set<std::string>{target_bin().string()}) << "inotify sees no open";
    return watch;
  }
  // The refusal as the reader words it: the file, what in it points elsewhere, and where.
  static void expect_refusal(const std::string& message, const Kind& kind) {
    EXPECT_TRUE(has(message, hostile(kind).string() + ": refused: " + kind.says)) << message;
    EXPECT_TRUE(has(message, kind.name == std::string("external-storage") ? target_bin().string()
                                                                          : target_h5().string()))
        << message;
  }

  static inline std::string python_;
  static inline bool ready_ = false;
  static inline std::unique_ptr<test_support::TempDir> tmp_;
  static inline std::vector<fs::path> runs_;
};

}  // namespace

TEST_F(HostileRunFile, TheReaderRefusesEachKindWithoutOpeningTheFileItNames) {
  const auto watch = watch_targets();
  for (const Kind& kind : kKinds) {
    SCOPED_TRACE(kind.name);
    try {
      results::read_run_file(hostile(kind).string());
      ADD_FAILURE() << "read";
    } catch (const std::runtime_error& e) {
      expect_refusal(e.what(), kind);
    }
    EXPECT_THROW(results::h5::file_kind(hostile(kind).string()), std::runtime_error);
    EXPECT_EQ(watch->touched(), std::set<std::string>{});
  }
}

// A soft link is a path inside the file: not refused.
TEST_F(HostileRunFile, ASoftLinkInsideTheFileIsRead) {
  const fs::path path = tmp_->path / "soft.h5";
  fs::copy_file(runs_[0] / "run.h5", path, fs::copy_options::overwrite_existing);
  python("import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['alias'] = h5py.SoftLink('/train/loss')",
         {path.string()});
  EXPECT_EQ(results::read_run_file(path.string()).train.loss,
            results::read_run_file((runs_[0] / "run.h5").string()).train.loss);
}

TEST_F(HostileRunFile, ExportReportAndAnalyseRefuseItNamingTheFile) {
  const auto watch = watch_targets();
  for (const Kind& kind : kKinds) {
    SCOPED_TRACE(kind.name);
    const fs::path dir = tmp_->path / kind.name;
    const Result table = harness({"export", "table", dir.string()}, tmp_->path / "table.log");
    EXPECT_EQ(table.code, 0) << table.output;  // the good run's table, the other skipped
    expect_refusal(table.output, kind);
    const Result report = harness({"report", dir.string(), "--out", (dir / "report.html").string()},
                                  tmp_->path / "report.log");
    EXPECT_EQ(report.code, 0) << report.output;
    expect_refusal(report.output, kind);
    const Result analyse = harness({"analyse", (dir / "bad").string()}, tmp_->path / "analyse.log");
    EXPECT_EQ(analyse.code, 2) << analyse.output;  // the run it was given cannot be used
    expect_refusal(analyse.output, kind);
    EXPECT_EQ(watch->touched(), std::set<std::string>{});
  }
}

TEST_F(HostileRunFile, TauCheckRefusesItNamingTheFile) {
  const fs::path run_file = runs_[1] / "run.h5", kept = tmp_->path / "kept.h5";
  fs::copy_file(run_file, kept, fs::copy_options::overwrite_existing);
  const auto watch = watch_targets();
  for (const Kind& kind : kKinds) {
    SCOPED_TRACE(kind.name);
    fs::copy_file(hostile(kind), run_file, fs::copy_options::overwrite_existing);
    const Result check = harness(tau_check({"--no-run"}), tmp_->path / "check.log");
    EXPECT_TRUE(has(check.output, run_file.string() + ": refused: " + kind.says)) << check.output;
    EXPECT_EQ(watch->touched(), std::set<std::string>{});
  }
  fs::copy_file(kept, run_file, fs::copy_options::overwrite_existing);
}
