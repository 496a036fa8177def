// The ready queue alone: its order, the wide tasks' groups, and what a walk
// sees while tasks are taken and added.
#include "scheduler/ready_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace ztask::scheduler {
namespace {

using Key = ReadyQueue::Key;
using Units = ReadyQueue::Units;

Key K(int priority, uint64_t seq) {
  return {-static_cast<int64_t>(priority), seq, TaskId{seq + 1, 0}};
}

std::vector<uint64_t> Walk(const ReadyQueue& q) {
  std::vector<uint64_t> seqs;
  for (auto it = q.begin(); it != q.end(); ++it) seqs.push_back(it->seq);
  return seqs;
}

TEST(ReadyQueue, HigherPriorityFirstThenSubmissionOrder) {
  ReadyQueue q;
  q.Add(K(0, 1), nullptr);
  q.Add(K(5, 2), nullptr);
  q.Add(K(0, 0), nullptr);
  q.Add(K(5, 3), nullptr);
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{2, 3, 0, 1}));
  EXPECT_EQ(q.size(), 4u);
}

TEST(ReadyQueue, OnlyTheFirstOfAGroupIsWalkedButAllAreCounted) {
  ReadyQueue q;
  const Units gpus{{0, 1}};
  const ReadyQueue::Group wide{2, gpus};
  for (uint64_t seq = 0; seq < 1000; ++seq) q.Add(K(0, seq), &wide);
  q.Add(K(0, 5000), nullptr);
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{0, 5000}));
  EXPECT_EQ(q.size(), 1001u);
}

TEST(ReadyQueue, GroupsAreTheirSlotsAndUnitsTogether) {
  ReadyQueue q;
  const Units one_gpu{{0, 1}}, two_gpus{{0, 2}};
  const ReadyQueue::Group a{1, one_gpu}, b{1, two_gpus}, c{2, one_gpu};
  q.Add(K(0, 0), &a);
  q.Add(K(0, 1), &b);
  q.Add(K(0, 2), &c);
  q.Add(K(0, 3), &a);
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{0, 1, 2}));
}

TEST(ReadyQueue, RemovingAGroupsFirstPutsItsNextInTheWalk) {
  ReadyQueue q;
  const Units gpus{{0, 1}};
  const ReadyQueue::Group wide{1, gpus};
  q.Add(K(0, 0), &wide);
  q.Add(K(0, 1), &wide);
  q.Add(K(0, 2), nullptr);
  q.Remove(K(0, 0), &wide);
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{1, 2}));
  q.Remove(K(0, 1), &wide);
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{2}));
  EXPECT_EQ(q.size(), 1u);
}

TEST(ReadyQueue, ANewcomerBeforeItsGroupsFirstJoinsTheWalkBesideIt) {
  ReadyQueue q;
  const Units gpus{{0, 1}};
  const ReadyQueue::Group wide{1, gpus};
  q.Add(K(0, 4), &wide);
  q.Add(K(9, 7), &wide);  // higher priority: now the group's first
  // Adding removed nothing from the walk: a walk in progress stays valid.
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{7, 4}));
  q.Remove(K(9, 7), &wide);
  EXPECT_EQ(Walk(q), (std::vector<uint64_t>{4}));
}

TEST(ReadyQueue, TakeInAWalkGoesOnWithWhatComesNextTheGroupsNextIncluded) {
  ReadyQueue q;
  const Units gpus{{0, 1}};
  const ReadyQueue::Group wide{1, gpus};
  q.Add(K(0, 0), &wide);
  q.Add(K(0, 1), nullptr);
  q.Add(K(0, 2), &wide);
  std::vector<uint64_t> placed;
  for (auto it = q.begin(); it != q.end();) {
    placed.push_back(it->seq);
    it = q.Take(it, it->seq == 1 ? nullptr : &wide);
  }
  EXPECT_EQ(placed, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_TRUE(q.empty());
}

TEST(ReadyQueue, GrewSaysATaskCameSinceItWasCleared) {
  ReadyQueue q;
  EXPECT_FALSE(q.grew());
  q.Add(K(0, 0), nullptr);
  EXPECT_TRUE(q.grew());
  q.ClearGrew();
  q.Remove(K(0, 0), nullptr);
  EXPECT_FALSE(q.grew());
}

// Random adds and removes against a plain model: the walk is always the
// ungrouped keys and each group's first, in order, and the count all.
TEST(ReadyQueue, AgreesWithAModelUnderRandomAddsAndRemoves) {
  std::mt19937_64 rng(20261126);
  const Units u0{{0, 1}}, u1{{1, 3}};
  const ReadyQueue::Group groups[] = {{1, u0}, {2, u0}, {1, u1}};
  ReadyQueue q;
  struct Entry {
    Key key;
    int group;  // -1: none
  };
  std::vector<Entry> model;
  uint64_t seq = 0;
  for (int step = 0; step < 20000; ++step) {
    if (model.empty() || rng() % 3 != 0) {
      const int group = static_cast<int>(rng() % 4) - 1;
      const Key key = K(static_cast<int>(rng() % 4), seq++);
      q.Add(key, group < 0 ? nullptr : &groups[group]);
      model.push_back({key, group});
    } else {
      const size_t at = rng() % model.size();
      const Entry e = model[at];
      q.Remove(e.key, e.group < 0 ? nullptr : &groups[e.group]);
      model.erase(model.begin() + static_cast<std::ptrdiff_t>(at));
    }
    ASSERT_EQ(q.size(), model.size());
    if (step % 97 != 0) continue;
    std::set<Key> expected;
    std::map<int, Key> first;
    for (const Entry& e : model) {
      if (e.group < 0) {
        expected.insert(e.key);
      } else if (!first.count(e.group) || e.key < first.at(e.group)) {
        first.insert_or_assign(e.group, e.key);
      }
    }
    for (const auto& [g, key] : first) expected.insert(key);
    // The walk holds at least these; a group's former first may stay
    // beside a newcomer that came before it (never removed by an add).
    std::set<uint64_t> walked;
    for (auto it = q.begin(); it != q.end(); ++it) walked.insert(it->seq);
    for (const Key& key : expected) ASSERT_TRUE(walked.count(key.seq)) << "step " << step;
    for (uint64_t s : walked) {
      ASSERT_TRUE(std::any_of(model.begin(), model.end(),
                              [&](const Entry& e) { return e.key.seq == s; }))
          << "a removed task is still walked at step " << step;
    }
  }
}

}  // namespace
}  // namespace ztask::scheduler
