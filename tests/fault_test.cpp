// Faults around writes, injected: the write_fault library (tests/fault/write_fault.c), preloaded
// into the harness binary, makes writes to chosen files fail as a full disk (or a quota, or a
// failing disk) makes them fail. Each test checks what a user sees: an exit code that is not a
// signal, a message naming the file and the cause, no temporary file, earlier results whole, and
// a resume that ends equal to an uninterrupted run.
#include "fault_support.h"

TEST(Faults, DiskFullDuringACheckpoint) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "checkpoint-"}});
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string file = (run.dir("run") / "checkpoint-2.pt").string();
  EXPECT_TRUE(has(r.output, "error: cannot write the checkpoint " + file + ": No space left on device")) << r.output;
  EXPECT_FALSE(has(r.output, "Exception raised from") || has(r.output, "terminate called")) << r.output;
  EXPECT_EQ(leftovers(run.dir("run")), std::vector<std::string>{});
  const auto record = results::read_run_file((run.dir("run") / "run.h5").string());
  EXPECT_EQ(record.state, results::RunState::kFailed);
  EXPECT_TRUE(has(record.reason, "No space left on device")) << record.reason;
  run.expect_resume_equals_whole("run");
}

TEST(Faults, QuotaExceededDuringACheckpointSaysSo) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "checkpoint-"}, {"HARNESS_FAULT_ERRNO", "EDQUOT"}});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "checkpoint-2.pt: Disk quota exceeded")) << r.output;
}

// The disk fills while run.h5 is written at step 4 (its second publication) and stays full: the
// run stops with exit 1 naming run.h5 and the cause; run.h5 is still step 2's whole file.
TEST(Faults, DiskFullDuringARunFileWriteKeepsThePreviousFile) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "run.h5.tmp"}, {"HARNESS_FAULT_FROM_OPEN", "2"}});
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string file = (run.dir("run") / "run.h5").string();
  EXPECT_TRUE(has(r.output, "error: cannot write " + file + ": ")) << r.output;
  EXPECT_TRUE(has(r.output, "No space left on device")) << r.output;
  EXPECT_TRUE(has(r.output, "the failure is not recorded in " + file)) << r.output;
  EXPECT_EQ(leftovers(run.dir("run")), std::vector<std::string>{});
  const auto record = results::read_run_file(file);  // the previous publication, whole
  EXPECT_EQ(record.state, results::RunState::kRunning);
  EXPECT_EQ(record.status_step, 2);
  run.expect_resume_equals_whole("run");
}

// One write fails, then the disk has room again: the failure itself is recorded in run.h5.
TEST(Faults, ARunFileWriteThatFailsOnceIsRecordedAsTheReason) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "run.h5.tmp"}, {"HARNESS_FAULT_FROM_OPEN", "2"},
                                     {"HARNESS_FAULT_COUNT", "1"}, {"HARNESS_FAULT_ERRNO", "EIO"}});
  EXPECT_EQ(r.code, 1) << r.output;
  const auto record = results::read_run_file((run.dir("run") / "run.h5").string());
  EXPECT_EQ(record.state, results::RunState::kFailed);
  EXPECT_TRUE(has(record.reason, "cannot write " + (run.dir("run") / "run.h5").string())) << record.reason;
  EXPECT_TRUE(has(record.reason, "Input/output error")) << record.reason;
  run.expect_resume_equals_whole("run");
}

// Exports: the table and the figures' CSVs. A full disk leaves the previous file and no
// temporary one, and says which file.
TEST(Faults, DiskFullDuringAnExportKeepsThePreviousFile) {
  FaultRun run;
  ExportedTable exported;
  ASSERT_NO_FATAL_FAILURE(export_table_once(run, exported));
  const auto& [table, args, before] = exported;
  const Result r = run_with_faults(args, {{"HARNESS_FAULT_FILE", "table.md"}}, run.tmp.path / "export.log");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "error: cannot write " + table.string() + ": No space left on device")) << r.output;
  EXPECT_EQ(test_support::read_text(table), before);
  EXPECT_EQ(leftovers(run.tmp.path / "out"), std::vector<std::string>{});

  const fs::path figures = run.tmp.path / "figures";
  const Result curves = run_with_faults({"export", "curves", run.dir("run").string(), "--out", figures.string()},
                                        {{"HARNESS_FAULT_FILE", ".csv"}}, run.tmp.path / "curves.log");
  EXPECT_EQ(curves.code, 1) << curves.output;
  EXPECT_TRUE(has(curves.output, ".csv: No space left on device")) << curves.output;
  EXPECT_EQ(leftovers(figures), std::vector<std::string>{});
}

// gnuplot does not check its own writes: on a full disk it leaves a cut-off image and exits 0.
// Played by a stand-in gnuplot that writes half an SVG: the figure is not taken as drawn, the
// cut-off images are removed, and `export curves` exits 1 naming the file.
TEST(Faults, AFigureGnuplotLeftIncompleteIsAnError) {
  FaultRun run;
  ASSERT_EQ(run.train("run", {}).code, 0);
  const fs::path fake = run.tmp.path / "gnuplot";
  std::ofstream(fake) << "#!/bin/sh\n"
                         "stem=\"${1%.gp}\"\n"
                         "printf '<svg xmlns=\"http://www.w3.org/2000/svg\"><path d=\"M 0 0' > \"$stem.svg\"\n"
                         "printf '\\211PNG' > \"$stem.png\"\n";
  fs::permissions(fake, fs::perms::owner_all);
  const fs::path figures = run.tmp.path / "figures";
  const Result r = run_with_faults({"export", "curves", run.dir("run").string(), "--out", figures.string()},
                                   {{"HARNESS_GNUPLOT", fake.string()}}, run.tmp.path / "curves.log");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "error: ")) << r.output;
  EXPECT_TRUE(has(r.output, ".svg incomplete (")) << r.output;
  for (const auto& f : fs::directory_iterator(figures)) {
    const auto ext = f.path().extension();
    EXPECT_TRUE(ext != ".svg" && ext != ".png") << f.path() << " kept";
  }
}
