#include "protocol/connection_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace ztask::protocol {
namespace {

ConnectionInfo Sample() {
  ConnectionInfo info;
  info.key = GenerateKey();
  info.hub = {"tcp://127.0.0.1:1001", "tcp://127.0.0.1:1002", "tcp://127.0.0.1:1003",
              "tcp://127.0.0.1:1004", "tcp://127.0.0.1:1005"};
  info.scheduler = {"tcp://127.0.0.1:2001", "tcp://127.0.0.1:2002"};
  return info;
}

void WriteRaw(const std::filesystem::path& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

TEST(ConnectionFile, WriteThenReadGivesTheSameInfo) {
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path() / "profile");
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  auto read = ReadConnectionFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->hub, Sample().hub);
  EXPECT_EQ(read->scheduler, Sample().scheduler);
  EXPECT_EQ(read->key.size(), 32u);
}

TEST(ConnectionFile, IsWrittenWithMode0600) {
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path());
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ConnectionFile, KeysAreFreshAndRandom) { EXPECT_NE(GenerateKey(), GenerateKey()); }

TEST(ConnectionFile, MissingFileSaysSo) {
  testing::TempDir dir;
  auto read = ReadConnectionFile(dir.path() / "nope.json");
  EXPECT_EQ(read.status().code(), Status::Code::kNotFound);
  EXPECT_NE(read.status().message().find("nope.json"), std::string::npos);
}

TEST(ConnectionFile, ReadableByOthersIsRefused) {
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path());
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  ::chmod(path.c_str(), 0644);
  auto read = ReadConnectionFile(path);
  EXPECT_EQ(read.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(read.status().message().find("chmod 600"), std::string::npos);
}

TEST(ConnectionFile, ASymbolicLinkIsNotFollowed) {
  testing::TempDir dir;
  const auto elsewhere = dir.path() / "someone-elses.json";
  ASSERT_TRUE(WriteConnectionFile(elsewhere, Sample()).ok());
  const auto path = ConnectionFilePath(dir.path() / "profile");
  std::filesystem::create_directories(path.parent_path());
  std::filesystem::create_symlink(elsewhere, path);
  auto read = ReadConnectionFile(path);
  EXPECT_EQ(read.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(read.status().message().find("symbolic link"), std::string::npos)
      << read.status().message();
}

// Needs root (a file owned by another user); skipped otherwise.
TEST(ConnectionFile, AFileAnotherUserOwnsIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path());
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  auto read = ReadConnectionFile(path);
  EXPECT_EQ(read.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(read.status().message().find("not to you"), std::string::npos)
      << read.status().message();
}

// A hub or scheduler restarted on its ports needs no free disk: an update
// that changes nothing leaves the file as it is.
TEST(ConnectionFile, AnUpdateThatChangesNothingWritesNothing) {
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path());
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  ASSERT_TRUE(
      UpdateConnectionFile(path, Sample(), [](ConnectionInfo& c) { c.hub = Sample().hub; }).ok());
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the file was replaced";
  ASSERT_TRUE(UpdateConnectionFile(path, Sample(), [](ConnectionInfo& c) {
                c.hub.query = "tcp://127.0.0.1:9";
              }).ok());
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino) << "a change is written";
  EXPECT_EQ(ReadConnectionFile(path)->hub.query, "tcp://127.0.0.1:9");
}

TEST(ConnectionFile, BadJsonIsRefused) {
  testing::TempDir dir;
  WriteRaw(dir.path() / "c.json", "{\"version\": 1,");
  auto read = ReadConnectionFile(dir.path() / "c.json");
  EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(read.status().message().find("not valid JSON"), std::string::npos);
}

TEST(ConnectionFile, MissingFieldIsNamed) {
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path());
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto at = text.find("\"notifier\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"notified\"");
  WriteRaw(path, text);
  auto read = ReadConnectionFile(path);
  EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(read.status().message().find("hub.notifier"), std::string::npos)
      << read.status().message();
}

TEST(ConnectionFile, WrongTypesAndValuesAreRefused) {
  testing::TempDir dir;
  const auto path = dir.path() / "c.json";
  const std::string hub =
      R"("hub": {"registration": "", "query": "", "notifier": "", "monitor": "", "events": ""},
         "scheduler": {"client": "", "engine": ""})";
  for (const std::string& body : {
           R"({"version": 2, "signature_scheme": "hmac-sha256", "key": "00", )" + hub + "}",
           R"({"version": 1, "signature_scheme": "md5", "key": "00", )" + hub + "}",
           R"({"version": 1, "signature_scheme": "hmac-sha256", "key": "zz", )" + hub + "}",
           R"({"version": 1, "signature_scheme": "hmac-sha256", "key": "", )" + hub + "}",
           R"({"version": 1, "signature_scheme": "none", "key": "0011", )" + hub + "}",
           R"({"version": 1, "signature_scheme": "hmac-sha256", "key": 7, )" + hub + "}",
           std::string(R"({"version": 1, "signature_scheme": "none", "key": ""})"),
           std::string("[1, 2]"),
       }) {
    WriteRaw(path, body);
    EXPECT_EQ(ReadConnectionFile(path).status().code(), Status::Code::kInvalidArgument) << body;
  }
}

TEST(ConnectionFile, UpdateChangesOnlyWhatItIsAskedTo) {
  testing::TempDir dir;
  const auto path = ConnectionFilePath(dir.path());
  ASSERT_TRUE(WriteConnectionFile(path, Sample()).ok());
  ASSERT_TRUE(UpdateConnectionFile(path, {}, [](ConnectionInfo& c) {
                c.scheduler.client = "tcp://127.0.0.1:9";
              }).ok());
  auto read = ReadConnectionFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->scheduler.client, "tcp://127.0.0.1:9");
  EXPECT_EQ(read->hub, Sample().hub);
}

// A private place of this account's in a shared directory (/tmp,
// /dev/shm): made 0700 when missing, refused when another account made it
// first, when it is a link, or when others may enter it.
TEST(OwnPrivateDirectory, IsMadePrivateAndRefusedWhenAnotherCouldReachIt) {
  testing::TempDir dir;
  const std::filesystem::path made = dir.path() / "made";
  auto own = OwnPrivateDirectory(made);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  struct stat st {};
  ASSERT_EQ(::lstat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(OwnPrivateDirectory(made).ok()) << "found again as it was left";

  const std::filesystem::path open = dir.path() / "open";
  std::filesystem::create_directory(open);
  ::chmod(open.c_str(), 0755);
  EXPECT_FALSE(OwnPrivateDirectory(open).ok()) << "others may enter it";

  const std::filesystem::path link = dir.path() / "link";
  std::filesystem::create_directory_symlink(made, link);
  EXPECT_FALSE(OwnPrivateDirectory(link).ok()) << "a link, to wherever";

  if (::getuid() == 0) {  // root can give a directory away: another account's
    const std::filesystem::path theirs = dir.path() / "theirs";
    std::filesystem::create_directory(theirs);
    ::chmod(theirs.c_str(), 0700);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    auto refused = OwnPrivateDirectory(theirs);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("not a directory of this account's"),
              std::string::npos)
        << refused.status().message();
  }
}

// The same profile has the same tag however it is named; another, another.
TEST(ProfileTag, NamesAProfileByItsAbsolutePath) {
  testing::TempDir dir;
  const std::filesystem::path profile = dir.path() / "profile";
  EXPECT_EQ(ProfileTag(profile), ProfileTag(dir.path() / "x" / ".." / "profile"));
  EXPECT_NE(ProfileTag(profile), ProfileTag(dir.path() / "other"));
  EXPECT_EQ(ProfileTag(profile).size(), 16u);
}

}  // namespace
}  // namespace ztask::protocol
