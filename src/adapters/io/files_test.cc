#include "adapters/io/files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "adapters/io/test_scratch_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

namespace fs = std::filesystem;

int Entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) {
    ++n;
  }
  return n;
}

class OutputDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::temp_directory_path() /
        ("tessera-files-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(OutputDirTest, WritesAllFilesAndReplacesOldDirectory) {
  fs::path dir = root_ / "plan";
  fs::create_directories(dir / "stale");
  std::ofstream(dir / "old.txt") << "old";
  OutputDir out;
  out.Add("plan.json", "{}\n");
  out.Add("deployments/a.yaml", "kind: Deployment\n");
  out.Add("labels.sh", "#!/bin/sh\n", true);
  ASSERT_TRUE(out.Commit(dir.string()).ok());
  EXPECT_EQ(*ReadFile((dir / "plan.json").string()), "{}\n");
  EXPECT_EQ(*ReadFile((dir / "deployments/a.yaml").string()), "kind: Deployment\n");
  EXPECT_FALSE(fs::exists(dir / "old.txt"));
  EXPECT_FALSE(fs::exists(dir / "stale"));
  EXPECT_NE(fs::status(dir / "labels.sh").permissions() & fs::perms::owner_exec, fs::perms::none);
  // No temporary or old directories are left beside it.
  EXPECT_EQ(Entries(root_), 1);
}

TEST_F(OutputDirTest, FailureLeavesTheOldDirectoryUntouched) {
  fs::path dir = root_ / "plan";
  fs::create_directories(dir);
  std::ofstream(dir / "plan.json") << "previous";
  OutputDir bad;
  bad.Add("plan.json", "new");
  bad.Add("../escape.txt", "x");
  EXPECT_FALSE(bad.Commit(dir.string()).ok());
  EXPECT_EQ(*ReadFile((dir / "plan.json").string()), "previous");
  EXPECT_FALSE(fs::exists(root_ / "escape.txt"));
  // A file where the directory should be: refused, file kept, no temporary left.
  fs::path file = root_ / "afile";
  std::ofstream(file) << "keep";
  OutputDir out;
  out.Add("plan.json", "{}");
  EXPECT_FALSE(out.Commit(file.string()).ok());
  EXPECT_EQ(*ReadFile(file.string()), "keep");
  EXPECT_EQ(Entries(root_), 2);
}

TEST_F(OutputDirTest, WriteFileAtomicallyAndCheckWritable) {
  const std::string out = (root_ / "out.json").string();
  ASSERT_TRUE(CheckWritable(out).ok());
  EXPECT_EQ(Entries(root_), 0);  // the probe leaves nothing behind
  ASSERT_TRUE(WriteFileAtomically(out, "{\"a\": 1}\n").ok());
  EXPECT_EQ(*ReadFile(out), "{\"a\": 1}\n");
  ASSERT_TRUE(WriteFileAtomically(out, "{}\n").ok());
  EXPECT_EQ(*ReadFile(out), "{}\n");
  EXPECT_EQ(Entries(root_), 1);          // no temporary left
  EXPECT_TRUE(CheckWritable(out).ok());  // an existing file may be replaced
  // A file replaced keeps its permission bits.
  std::filesystem::permissions(
      out, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  ASSERT_TRUE(WriteFileAtomically(out, "{\"b\": 2}\n").ok());
  EXPECT_EQ(*ReadFile(out), "{\"b\": 2}\n");
  EXPECT_EQ(std::filesystem::status(out).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  // A temporary left by an interrupted write is not the probe's to remove.
  std::ofstream(out + ".tmp") << "partial";
  EXPECT_TRUE(CheckWritable(out).ok());
  EXPECT_EQ(*ReadFile(out + ".tmp"), "partial");

  absl::Status s = CheckWritable((root_ / "missing" / "x.json").string());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no such directory"), std::string::npos) << s;
  EXPECT_EQ(CheckWritable(root_.string()).code(), absl::StatusCode::kInvalidArgument);
  std::ofstream(root_ / "afile") << "x";
  s = CheckWritable((root_ / "afile" / "x.json").string());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is not a directory"), std::string::npos) << s;
  EXPECT_FALSE(CheckWritable("").ok());
  // A directory nobody may create files in, root included.
  s = CheckWritable("/proc/tessera-check.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("cannot create"), std::string::npos) << s;
  // The writer refuses the same paths.
  EXPECT_FALSE(WriteFileAtomically((root_ / "missing" / "x.json").string(), "{}").ok());
}

TEST(ReadFile, Errors) {
  EXPECT_EQ(ReadFile("/nonexistent/tessera").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFile("/").status().code(), absl::StatusCode::kInvalidArgument);
}

// The whole file, whatever its size says: a large one (sized once, huge pages advised), an empty
// one, one whose stat size is 0 although it has content (procfs), and a FIFO read to its end.
TEST(ReadFile, ReadsWholeFilesOfAnySizeAndStreams) {
  testing::ScratchDir dir("readfile");
  std::string big(20u << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i * 7 % 26);
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/big", big).ok());
  absl::StatusOr<std::string> read = ReadFile(dir.path() + "/big");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == big);
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/empty", "").ok());
  EXPECT_EQ(ReadFile(dir.path() + "/empty").value_or("x"), "");
  absl::StatusOr<std::string> proc = ReadFile("/proc/self/status");
  ASSERT_TRUE(proc.ok()) << proc.status();
  EXPECT_THAT(*proc, ::testing::HasSubstr("Pid:"));
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::FILE* f = std::fopen(fifo.c_str(), "w");
    if (f == nullptr) return;
    for (int i = 0; i < 5000; ++i) std::fprintf(f, "line %d\n", i);
    std::fclose(f);
  });
  absl::StatusOr<std::string> streamed = ReadFile(fifo);
  writer.join();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(std::count(streamed->begin(), streamed->end(), '\n'), 5000);
  EXPECT_TRUE(absl::EndsWith(*streamed, "line 4999\n"));
}

}  // namespace
}  // namespace tessera::adapters
