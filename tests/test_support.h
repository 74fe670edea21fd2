// Helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace test_support {

// A fresh directory named after the running test (and the process, and a counter), removed with
// everything in it when the scope ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test =
        info ? std::string(info->test_suite_name()) + "_" + info->name() : std::string("none");
    for (char& c : test)
      if (c == '/') c = '_';  // parameterised tests are named Suite/Test/0
    path = std::filesystem::temp_directory_path() /
           ("harness_test_" + test + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace test_support
