// An engine's slots and resource units: which a task is given, and when
// the next one fits.
#include "engine/capacity.h"

#include <gtest/gtest.h>

namespace ztask::engine {
namespace {

TEST(Capacity, TasksAreGivenTheLowestFreeUnitsAndGiveThemBack) {
  Capacity c(4, {{"gpus", 4}});
  const Grant a = c.Take(1, {{"gpus", 1}});
  const Grant b = c.Take(2, {{"gpus", 2}});
  EXPECT_EQ(a.units.at("gpus"), (std::vector<int64_t>{0}));
  EXPECT_EQ(b.units.at("gpus"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.free_slots(), 1);
  EXPECT_FALSE(c.FitsNow(1, {{"gpus", 2}})) << "one unit is left";
  EXPECT_FALSE(c.FitsNow(2, {})) << "one slot is left";
  c.Give(a);
  const Grant d = c.Take(2, {{"gpus", 2}});
  EXPECT_EQ(d.units.at("gpus"), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(d.Environment().at("ZTASK_RESOURCE_GPUS"), "0,3");
  EXPECT_EQ(d.Environment().at("CUDA_VISIBLE_DEVICES"), "0,3");
  EXPECT_EQ(d.Environment().at("ZTASK_SLOTS"), "2");
}

TEST(Capacity, OtherResourcesAreNamedInUpperCaseAndGpusAloneSetCuda) {
  Capacity c(2, {{"fpga_cards", 2}});
  const auto env = c.Take(1, {{"fpga_cards", 1}}).Environment();
  EXPECT_EQ(env.at("ZTASK_RESOURCE_FPGA_CARDS"), "0");
  EXPECT_FALSE(env.count("CUDA_VISIBLE_DEVICES"));
}

TEST(Capacity, WhatNeverFitsSaysWhatTheEngineHas) {
  Capacity c(4, {{"gpus", 1}});
  EXPECT_EQ(c.NeverFits(8, {}), "needs 8 slots, this engine has 4");
  EXPECT_EQ(c.NeverFits(1, {{"gpus", 2}}), "needs gpus=2, this engine has 1");
  EXPECT_EQ(c.NeverFits(1, {{"fpgas", 1}}), "needs fpgas=1, this engine has no fpgas");
  EXPECT_EQ(c.NeverFits(4, {{"gpus", 1}}), "");
}

}  // namespace
}  // namespace ztask::engine
