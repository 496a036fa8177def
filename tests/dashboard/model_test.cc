// The dashboard's model without a cluster: what a page is sent.
#include "dashboard/model.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ztask::dashboard {
namespace {

// A poll's answer with `n` finished tasks after `start`, every
// `fail_every`-th of them failed (0: none).
ClusterStats Finished(int n, int start, int fail_every) {
  ClusterStats stats;
  for (int i = 0; i < n; ++i) {
    ClusterStats::Finished f;
    f.id = TaskId{0, static_cast<uint64_t>(start + i + 1)};
    f.engine_id = i % 2;
    f.ok = fail_every == 0 || (i + 1) % fail_every != 0;
    f.label = "sweep";
    f.completed = 1000.0 + i;
    stats.finished.push_back(f);
  }
  stats.feed = start + n;
  stats.ok_total = n;
  return stats;
}

TEST(DashModelTest, AQuietClusterSendsEveryFinishedTask) {
  DashModel model;
  model.ApplyStats(Finished(40, 0, 0), 1.0);
  DashModel::Cursor cursor;
  auto delta = model.Delta(&cursor);
  ASSERT_TRUE(delta);
  EXPECT_EQ((*delta)["stream"].size(), 40u);
  EXPECT_EQ((*delta)["stream_skipped"], 0);
}

// An open page costs the same at any task rate: past kDeltaStream finished
// tasks since its last delta it gets a sample, every failure in it, the
// rest spread over the whole interval, and the count of those left out.
TEST(DashModelTest, ABusyClusterSendsABoundedSampleWithEveryFailureSpreadOverTheInterval) {
  DashModel model;
  DashModel::Cursor cursor;
  model.ApplyStats(Finished(5000, 0, 250), 1.0);  // 20 failures among 5,000
  auto delta = model.Delta(&cursor);
  ASSERT_TRUE(delta);
  const Value& stream = (*delta)["stream"];
  ASSERT_EQ(stream.size(), DashModel::kDeltaStream);
  EXPECT_EQ((*delta)["stream_skipped"], 5000 - static_cast<int>(DashModel::kDeltaStream));
  int failed = 0;
  std::set<std::string> ids;
  double lowest = 1e18, highest = 0;
  for (const Value& t : stream) {
    if (!t["ok"].get<bool>()) ++failed;
    ids.insert(t["id"].get<std::string>());
    lowest = std::min(lowest, t["completed"].get<double>());
    highest = std::max(highest, t["completed"].get<double>());
  }
  EXPECT_EQ(failed, 20) << "no failure is left out of the sample";
  EXPECT_EQ(ids.size(), stream.size()) << "no task twice";
  EXPECT_LT(lowest, 1000.0 + 100) << "the sample starts near the interval's start";
  EXPECT_GT(highest, 1000.0 + 4800) << "and reaches its end";
  // The next delta carries only what finished after.
  model.ApplyStats(Finished(30, 5000, 0), 2.0);
  delta = model.Delta(&cursor);
  ASSERT_TRUE(delta);
  EXPECT_EQ((*delta)["stream"].size(), 30u);
  EXPECT_EQ((*delta)["stream_skipped"], 0);
}

TEST(DashModelTest, MoreFailuresThanASampleHoldsAreSentUpToTheBound) {
  DashModel model;
  DashModel::Cursor cursor;
  model.ApplyStats(Finished(3000, 0, 1), 1.0);  // every one failed
  auto delta = model.Delta(&cursor);
  ASSERT_TRUE(delta);
  EXPECT_EQ((*delta)["stream"].size(), DashModel::kDeltaStream);
  EXPECT_EQ((*delta)["stream_skipped"], 3000 - static_cast<int>(DashModel::kDeltaStream));
}

}  // namespace
}  // namespace ztask::dashboard
