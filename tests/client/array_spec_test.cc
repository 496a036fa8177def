#include "client/array_spec.h"

#include <gtest/gtest.h>

namespace ztask {
namespace {

TEST(ArraySpec, RangesStepsAndListsInTheOrderGivenEachIndexOnce) {
  EXPECT_EQ(*ParseArraySpec("1-5"), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(*ParseArraySpec("0-10:5"), (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(*ParseArraySpec("7"), (std::vector<int64_t>{7}));
  EXPECT_EQ(*ParseArraySpec("9,1-3,2"), (std::vector<int64_t>{9, 1, 2, 3}));
  EXPECT_EQ(ParseArraySpec("0-999999")->size(), kMaxArrayTasks);
}

TEST(ArraySpec, MistakesSayWhichPartIsWrong) {
  for (const char* bad : {"", "5-1", "1-3:0", "1-3:-1", "a", "1-", "-1", "1,,2", "1-2,", "0-1000000",
                          "1-99999999999999999999", "1-3:x", "1.5"}) {
    auto parsed = ParseArraySpec(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument) << bad;
    const std::string& why = parsed.status().message();
    EXPECT_TRUE(why.find("--array '") != std::string::npos || why.find("at most") != std::string::npos)
        << why;
  }
}

TEST(ArraySpec, LinesAreEntriesWithoutTheirEndings) {
  auto entries = EntriesOfLines("a\r\nb c\n\nlast");
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ((*entries)[1].text(), "b c");
  EXPECT_EQ((*entries)[0].text(), "a");
  EXPECT_EQ((*entries)[2].text(), "");
  EXPECT_EQ((*entries)[3].index, 3);
  EXPECT_EQ(EntriesOfLines("one\n")->size(), 1u) << "the final newline makes no entry";
  EXPECT_TRUE(EntriesOfLines("")->empty());
}

TEST(ArraySpec, JsonElementsAreEntriesAsCompactJson) {
  auto entries = EntriesOfJson(R"([{"a": 1}, "s", 3])");
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].text(), R"({"a":1})");
  EXPECT_EQ((*entries)[1].text(), R"("s")");
  EXPECT_EQ((*entries)[1].value(), "s");
  EXPECT_FALSE(EntriesOfJson("{}").ok());
  EXPECT_FALSE(EntriesOfJson("[1,").ok());
  auto picked = SelectEntries(*entries, {2, 0, 5});
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].index, 2);
  EXPECT_EQ(picked[1].index, 0);
}

}  // namespace
}  // namespace ztask
