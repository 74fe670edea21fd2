// Faults after the writes: an fsync, a close or a rename that fails (a disk that reports its
// error late, a network file system, a quota checked at close). Each must stop the run with exit
// 1 naming the file and the cause, leave the previous run.h5 or checkpoint whole and no temporary
// file, and let --resume finish equal to an uninterrupted run — as a failed write does
// (fault_test.cpp). The write_fault library fails the chosen call (HARNESS_FAULT_CALL).
#include "fault_support.h"

namespace {

// run.h5's second publication (step 4) fails at `call`; the first (step 2) stays.
void expect_run_file_kept(const std::string& call, const std::string& nth) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "run.h5.tmp"}, {"HARNESS_FAULT_CALL", call},
                                     {"HARNESS_FAULT_WRITE", nth}, {"HARNESS_FAULT_COUNT", "1"},
                                     {"HARNESS_FAULT_ERRNO", "EIO"}});
  EXPECT_EQ(r.code, 1) << call << ": " << r.output;
  const std::string file = (run.dir("run") / "run.h5").string();
  EXPECT_TRUE(has(r.output, "error: cannot write " + file + ": ")) << call << ": " << r.output;
  EXPECT_TRUE(has(r.output, "Input/output error")) << call << ": " << r.output;
  EXPECT_EQ(leftovers(run.dir("run")), std::vector<std::string>{}) << call;
  const auto record = results::read_run_file(file);  // whole: the previous publication, or the failure recorded
  EXPECT_NE(record.state, results::RunState::kDone) << call;
  run.expect_resume_equals_whole("run");
}

}  // namespace

// Each publication fsyncs its temporary file once: the second fsync is the second publication's.
TEST(FaultsAfterTheWrite, AFailedFsyncOfTheRunFileKeepsThePreviousFile) { expect_run_file_kept("fsync", "2"); }

// Each publication renames its temporary file once.
TEST(FaultsAfterTheWrite, AFailedRenameOfTheRunFileKeepsThePreviousFile) { expect_run_file_kept("rename", "2"); }

// The checkpoint's fsync, close or rename: the run stops naming the checkpoint, no .tmp is left,
// and the run resumes from the start equal to an uninterrupted run.
TEST(FaultsAfterTheWrite, AFailedFsyncOrRenameOfACheckpointStopsTheRunAndSaysSo) {
  for (const std::string call : {"fsync", "close", "rename"}) {
    FaultRun run;
    const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "checkpoint-"}, {"HARNESS_FAULT_CALL", call},
                                       {"HARNESS_FAULT_ERRNO", "EIO"}});
    EXPECT_EQ(r.code, 1) << call << ": " << r.output;
    const std::string file = (run.dir("run") / "checkpoint-2.pt").string();
    EXPECT_TRUE(has(r.output, "error: cannot write the checkpoint " + file + ": Input/output error"))
        << call << ": " << r.output;
    EXPECT_FALSE(fs::exists(file)) << call;
    EXPECT_EQ(leftovers(run.dir("run")), std::vector<std::string>{}) << call;
    run.expect_resume_equals_whole("run");
  }
}

// An export's table: the previous file stays, whichever call fails, and the error names the file.
TEST(FaultsAfterTheWrite, AnExportWhoseFsyncCloseOrRenameFailsKeepsThePreviousFile) {
  FaultRun run;
  ExportedTable exported;
  ASSERT_NO_FATAL_FAILURE(export_table_once(run, exported));
  const auto& [table, args, before] = exported;
  for (const std::string call : {"fsync", "close", "rename"}) {
    const Result r = run_with_faults(args, {{"HARNESS_FAULT_FILE", "table.md"}, {"HARNESS_FAULT_CALL", call},
                                            {"HARNESS_FAULT_ERRNO", "EIO"}}, run.tmp.path / "export.log");
    EXPECT_EQ(r.code, 1) << call << ": " << r.output;
    EXPECT_TRUE(has(r.output, "cannot write " + table.string() + ": Input/output error")) << call << ": " << r.output;
    EXPECT_EQ(test_support::read_text(table), before) << call;
    EXPECT_EQ(leftovers(run.tmp.path / "out"), std::vector<std::string>{}) << call;
  }
}
