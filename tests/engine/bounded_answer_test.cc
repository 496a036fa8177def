// BoundedAnswer: a worker's answer larger than the engine keeps whole is
// walked as it comes, each value kept within its bound, every byte taken.
#include "engine/bounded_answer.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>

namespace ztask::engine {
namespace {

class Memory final : public AnswerSource {
 public:
  explicit Memory(std::string bytes) : bytes_(std::move(bytes)) {}
  bool Read(char* into, size_t n) override {
    if (n > bytes_.size() - at_) return false;
    std::memcpy(into, bytes_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool Skip(size_t n) override {
    if (n > bytes_.size() - at_) return false;
    at_ += n;
    return true;
  }
  size_t taken() const { return at_; }

 private:
  std::string bytes_;
  size_t at_ = 0;
};

std::string Answer(const std::string& out, const std::string& result) {
  msgpack::sbuffer body;
  msgpack::packer<msgpack::sbuffer> packer(body);
  packer.pack_map(5);
  packer.pack(std::string("status"));
  packer.pack(std::string("ok"));
  packer.pack(std::string("stdout"));
  packer.pack(out);
  packer.pack(std::string("stderr"));
  packer.pack(std::string(""));
  packer.pack(std::string("result"));
  packer.pack_bin(static_cast<uint32_t>(result.size()));
  packer.pack_bin_body(result.data(), static_cast<uint32_t>(result.size()));
  packer.pack(std::string("outputs"));
  packer.pack_array(2);
  packer.pack(1.5);
  packer.pack(-7);
  return std::string(body.data(), body.size());
}

std::string Field(const msgpack::object& map, const std::string& key) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.as<std::string>() != key) continue;
    if (kv.val.type == msgpack::type::BIN) return {kv.val.via.bin.ptr, kv.val.via.bin.size};
    return kv.val.as<std::string>();
  }
  return "<absent>";
}

TEST(BoundedAnswer, PrintedOutputIsCutToItsBoundAndTheRestKept) {
  const std::string bytes = Answer(std::string(5000, 'o'), "pickled");
  Memory in(bytes);
  BoundedOutcome out;
  ASSERT_TRUE(BoundedAnswer(in, bytes.size(), {100, 1000, 100}).Read(&out));
  EXPECT_EQ(in.taken(), bytes.size()) << "every byte taken: the next answer follows";
  EXPECT_TRUE(out.stdout_cut);
  EXPECT_FALSE(out.stderr_cut);
  EXPECT_FALSE(out.result_dropped);
  msgpack::object_handle h = msgpack::unpack(out.map.data(), out.map.size());
  EXPECT_EQ(Field(h.get(), "stdout"), std::string(100, 'o'));
  EXPECT_EQ(Field(h.get(), "result"), "pickled");
  EXPECT_EQ(Field(h.get(), "status"), "ok");
}

TEST(BoundedAnswer, AResultOverItsBoundIsDroppedWhole) {
  const std::string bytes = Answer("hi", std::string(5000, 'r'));
  Memory in(bytes);
  BoundedOutcome out;
  ASSERT_TRUE(BoundedAnswer(in, bytes.size(), {100, 1000, 100}).Read(&out));
  EXPECT_EQ(in.taken(), bytes.size());
  EXPECT_TRUE(out.result_dropped);
  EXPECT_EQ(out.result_bytes, 5000u);
  EXPECT_LT(out.map.size(), 200u);
  msgpack::object_handle h = msgpack::unpack(out.map.data(), out.map.size());
  EXPECT_EQ(Field(h.get(), "result"), "");
  EXPECT_EQ(Field(h.get(), "stdout"), "hi");
}

TEST(BoundedAnswer, WhatIsNotAMapIsTakenAndNotKept) {
  const std::string bytes = std::string("\x93\x01\x02\x03", 4) + std::string(100, 'x');
  Memory in(bytes);
  BoundedOutcome out;
  EXPECT_TRUE(BoundedAnswer(in, bytes.size(), {}).Read(&out));
  EXPECT_EQ(in.taken(), bytes.size());
  EXPECT_TRUE(out.map.empty());
}

TEST(BoundedAnswer, AnAnswerThatEndsEarlyFails) {
  const std::string bytes = Answer(std::string(5000, 'o'), "r");
  Memory in(bytes.substr(0, 1000));
  BoundedOutcome out;
  EXPECT_FALSE(BoundedAnswer(in, bytes.size(), {100, 1000, 100}).Read(&out));
}

}  // namespace
}  // namespace ztask::engine
