#include "protocol/codec.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <atomic>
#include <msgpack.hpp>
#include <random>
#include <thread>

#include "tests/protocol/sample_messages.h"

namespace ztask::protocol {
namespace {

using testing::Sample;
using testing::SampleFrames;
using testing::SampleHeader;

std::vector<std::string_view> ViewsOf(const std::vector<std::string>& frames) {
  return {frames.begin(), frames.end()};
}

const Signer kSigner("a key that only the cluster knows");

template <MsgType kType>
void ExpectRoundTrip() {
  using B = Bodies<kType>;
  SCOPED_TRACE(std::string(MsgTypeName(kType)));
  auto frames = SampleFrames<kType>(kSigner);
  auto decoded = DecodeMessage<kType>(kSigner, Limits{}, ViewsOf(frames));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->header, SampleHeader(kType));
  EXPECT_EQ(decoded->meta, Sample<typename B::Meta>());
  EXPECT_EQ(decoded->content, Sample<typename B::Content>());
  EXPECT_EQ(decoded->buffers, (std::vector<std::string>{"raw-buffer"}));
  if (kType == MsgType::kTaskReply) {
    ASSERT_TRUE(decoded->parent.has_value());
    EXPECT_EQ(*decoded->parent, SampleHeader(MsgType::kTaskRequest));
  } else {
    EXPECT_FALSE(decoded->parent.has_value());
  }
}

TEST(Codec, EveryMessageTypeRoundTrips) {
#define ZTASK_ROUND_TRIP(name, code, text, meta, content) ExpectRoundTrip<MsgType::name>();
  ZTASK_MESSAGE_TYPES(ZTASK_ROUND_TRIP)
#undef ZTASK_ROUND_TRIP
}

TEST(Codec, MessageTypeNamesAndCodesAgree) {
  EXPECT_EQ(MsgTypeName(MsgType::kTaskRequest), "task_request");
  EXPECT_EQ(MsgTypeFromCode(2), MsgType::kTaskReply);
  EXPECT_FALSE(MsgTypeFromCode(200).has_value());
}

// A header written in one of the many forms msgpack allows for the same
// value: keys in any order, some twice or another besides, strings as str
// or bin of any width, integers of any width and sign.
std::string HeaderInSomeForm(std::mt19937_64& random) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  std::vector<int> keys = {0, 1, 2, 3};
  std::shuffle(keys.begin(), keys.end(), random);
  if (random() % 8 == 0) keys.push_back(static_cast<int>(random() % 5));  // twice, or "other"
  if (random() % 8 == 0) keys.pop_back();                                 // one missing
  packer.pack_map(static_cast<uint32_t>(keys.size()));
  const std::string session(random() % 4 == 0 ? 40 : 8, 's');
  for (int key : keys) {
    switch (key) {
      case 0: {
        packer.pack(std::string_view("id"));
        const std::string id = TaskId{random(), random()}.ToBytes();
        const size_t size = random() % 8 == 0 ? 15 : 16;
        packer.pack_bin(static_cast<uint32_t>(size));
        packer.pack_bin_body(id.data(), static_cast<uint32_t>(size));
        break;
      }
      case 1:
        packer.pack(std::string_view("type"));
        switch (random() % 4) {
          case 0:
            packer.pack_uint8(static_cast<uint8_t>(random() % 60));
            break;
          case 1:
            packer.pack_uint16(static_cast<uint16_t>(random() % 300));
            break;
          case 2:
            packer.pack_int8(static_cast<int8_t>(random() % 40 - 5));
            break;
          default:
            packer.pack_fix_uint8(static_cast<uint8_t>(random() % 60));
            break;
        }
        break;
      case 2:
        packer.pack(std::string_view("session"));
        if (random() % 3 == 0) {
          packer.pack_bin(static_cast<uint32_t>(session.size()));
          packer.pack_bin_body(session.data(), static_cast<uint32_t>(session.size()));
        } else {
          packer.pack(session);
        }
        break;
      case 3: {
        packer.pack(std::string_view("date"));
        const int64_t date = static_cast<int64_t>(random() >> (random() % 64));
        switch (random() % 5) {
          case 0:
            packer.pack_int64(-date);
            break;
          case 1:
            packer.pack_int64(date);
            break;
          case 2:
            packer.pack_uint64(random());
            break;  // past int64 at times
          case 3:
            packer.pack_double(1.5);
            break;
          default:
            packer.pack(static_cast<int32_t>(date % 100000 - 50000));
            break;
        }
        break;
      }
      default:
        packer.pack(std::string_view("other"));
        packer.pack(1);
    }
  }
  return std::string(buffer.data(), buffer.size());
}

// A header as msgpack wrote it before the fixed layout (a request a
// database or journal kept from then), in whatever form and broken any
// way: what is read (or refused) is what the general reader reads.
TEST(Codec, AHeaderAsMsgpackWroteItIsReadAsTheGeneralReaderReadsIt) {
  std::mt19937_64 random(7);
  size_t ok = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string frame = HeaderInSomeForm(random);
    switch (random() % 4) {
      case 0:
        break;
      case 1:
        frame[random() % frame.size()] = static_cast<char>(random());
        break;
      case 2:
        frame.resize(random() % frame.size());
        break;
      default:
        frame.insert(random() % (frame.size() + 1), 1, static_cast<char>(random()));
    }
    if (!frame.empty() && static_cast<uint8_t>(frame[0]) == kHeaderLayout) continue;
    const auto fast = DecodeHeader(frame);
    const auto general = DecodeBody<Header>(frame);
    ASSERT_EQ(fast.ok(), general.ok()) << "frame " << i;
    const auto parent = DecodeParent(frame);
    ASSERT_EQ(parent.ok(), general.ok() || frame.empty() || frame == std::string(1, '\xc0'))
        << "frame " << i;
    if (!general.ok()) continue;
    ++ok;
    EXPECT_EQ(*fast, *general);
    ASSERT_TRUE(parent->has_value());
    EXPECT_EQ(**parent, *general);
  }
  EXPECT_GT(ok, 20000u) << "the inputs are valid often enough to compare values";
  EXPECT_FALSE(DecodeParent(std::string(1, '\xc0'))->has_value()) << "nil: no parent";
}

// Every header of every type, session length and date reads back as it
// was written; a frame cut short, one byte longer, or naming an unknown
// type or layout is refused, and any other changed byte reads as that
// change.
TEST(Codec, AHeaderInItsLayoutReadsBackAndBrokenIsRefused) {
  std::mt19937_64 random(11);
  Header reused;
  for (int i = 0; i < 20000; ++i) {
    Header header;
    do {
      header.type = static_cast<MsgType>(random() % 64);
    } while (!MsgTypeFromCode(static_cast<uint8_t>(header.type)));
    header.id = TaskId{random(), random()};
    header.date_us = static_cast<int64_t>(random());
    header.session.assign(random() % 256, static_cast<char>('a' + random() % 26));
    const std::string frame = EncodeHeader(header);
    ASSERT_EQ(frame.size(), 27 + header.session.size());
    ASSERT_EQ(*DecodeHeader(frame), header) << "header " << i;
    ASSERT_TRUE(DecodeHeaderInto(frame, &reused).ok());
    EXPECT_EQ(reused, header) << "into a header that held another";
    EXPECT_EQ(**DecodeParentId(frame), header.id);
    std::string broken = frame;
    broken.resize(random() % frame.size());
    EXPECT_FALSE(DecodeHeader(broken).ok()) << "cut to " << broken.size();
    EXPECT_FALSE(DecodeHeader(frame + static_cast<char>(random())).ok()) << "grown";
    broken = frame;
    const size_t at = random() % frame.size();
    broken[at] = static_cast<char>(broken[at] ^ (1 + random() % 255));
    const auto read = DecodeHeader(broken);
    EXPECT_EQ(DecodeParentId(broken).ok(), read.ok()) << "byte " << at;
    if (at == 0 || at == 26) {
      EXPECT_FALSE(read.ok()) << "layout or session length changed";
    } else if (at == 1) {
      EXPECT_EQ(read.ok(), MsgTypeFromCode(static_cast<uint8_t>(broken[1])).has_value());
    } else {
      ASSERT_TRUE(read.ok()) << "byte " << at;
      EXPECT_NE(*read, header);
      EXPECT_EQ(EncodeHeader(*read), broken);
    }
  }
}

// Every body of every message, encoded as ours are and then broken at
// random: DecodeBody (in place where it can) and the general reader agree
// on whether it reads, and on what.
template <class T>
void ExpectInPlaceAgrees(std::mt19937_64& random, const char* what, size_t* read) {
  SCOPED_TRACE(what);
  const std::string encoded = EncodeBody(Sample<T>());
  for (int i = 0; i < 2000; ++i) {
    std::string frame = encoded;
    for (int k = static_cast<int>(random() % 3); k >= 0 && !frame.empty(); --k) {
      switch (random() % 4) {
        case 0:
          frame[random() % frame.size()] = static_cast<char>(random());
          break;
        case 1:
          frame[random() % frame.size()] ^= static_cast<char>(1 << (random() % 8));
          break;
        case 2:
          frame.resize(random() % frame.size());
          break;
        default:
          frame.insert(frame.begin() + static_cast<std::ptrdiff_t>(random() % (frame.size() + 1)),
                       static_cast<char>(random()));
      }
    }
    if (i == 0) frame = encoded;
    const auto fast = DecodeBody<T>(frame);
    const auto general = DecodeBodyGeneral<T>(frame);
    ASSERT_EQ(fast.ok(), general.ok()) << "mutation " << i;
    if (!general.ok()) continue;
    ++*read;
    ASSERT_TRUE(*fast == *general) << "mutation " << i << " read differently";
  }
}

TEST(Codec, EveryBodyReadInPlaceIsReadAsTheGeneralReaderReadsIt) {
  std::mt19937_64 random(11);
  size_t read = 0;
#define ZTASK_AGREE(name, code, text, meta, content)      \
  ExpectInPlaceAgrees<meta>(random, text " meta", &read); \
  ExpectInPlaceAgrees<content>(random, text " content", &read);
  ZTASK_MESSAGE_TYPES(ZTASK_AGREE)
#undef ZTASK_AGREE
  EXPECT_GT(read, 5000u) << "mutations that still read are compared by value";
}

// A task's result kept as its bytes: read in place only where they are
// what the general reader's packing writes again; either way the same.
TEST(Codec, ARawValueReadInPlaceIsTheValueTheGeneralReaderKeeps) {
  std::vector<std::string> values;
  const auto packed = [&](auto&& write) {
    msgpack::sbuffer buffer;
    msgpack::packer<msgpack::sbuffer> packer(buffer);
    write(packer);
    values.emplace_back(buffer.data(), buffer.size());
  };
  // Integers at every boundary of their forms, packed the shortest way.
  for (int64_t v :
       {0ll, 127ll, 128ll, 255ll, 256ll, 65535ll, 65536ll, 4294967295ll, 4294967296ll, -1ll, -32ll,
        -33ll, -128ll, -129ll, -32768ll, -32769ll, -2147483648ll, -2147483649ll}) {
    packed([&](auto& p) { p.pack(v); });
  }
  // The same in longer forms than needed, which packing would shorten.
  for (std::string_view raw :
       {std::string_view("\xcc\x05", 2), std::string_view("\xcd\x00\x05", 3),
        std::string_view("\xd0\x05", 2), std::string_view("\xd0\xf0", 2),
        std::string_view("\xd1\xff\xf0", 3), std::string_view("\xd9\x01x", 3),
        std::string_view("\xdc\x00\x01\x01", 4), std::string_view("\xde\x00\x01\x01\x02", 5),
        std::string_view("\xc5\x00\x01x", 4),
        // Floats with whole values, which packing writes as integers.
        std::string_view("\xca\x42\x44\x00\x00", 5),
        std::string_view("\xcb\x40\x48\x80\x00\x00\x00\x00\x00", 9),
        std::string_view("\xcb\x80\x00\x00\x00\x00\x00\x00\x00", 9),
        std::string_view("\xca\x3f\xc0\x00\x00", 5)}) {
    values.emplace_back(raw);
  }
  // Strings, binaries, arrays and maps around each length's boundary.
  for (size_t n : {0u, 15u, 16u, 31u, 32u, 255u, 256u, 65535u, 65536u}) {
    packed([&](auto& p) { p.pack(std::string(n, 'x')); });
    packed([&](auto& p) {
      p.pack_bin(static_cast<uint32_t>(n));
      p.pack_bin_body(std::string(n, 'y').data(), static_cast<uint32_t>(n));
    });
    packed([&](auto& p) { p.pack(std::vector<int>(n, 1)); });
    packed([&](auto& p) {
      p.pack_map(static_cast<uint32_t>(n));
      for (size_t i = 0; i < n; ++i) {
        p.pack(static_cast<int64_t>(i));
        p.pack(true);
      }
    });
  }
  packed([](auto& p) { p.pack(1.5); });
  packed([](auto& p) { p.pack(1.5f); });
  packed([](auto& p) { p.pack(std::nan("")); });
  packed([](auto& p) { p.pack_nil(); });
  // Nested to the limit, one past it, and far past it.
  for (size_t depth : {kMaxValueDepth - 1, kMaxValueDepth, kMaxValueDepth + 1, size_t{40}}) {
    packed([&](auto& p) {
      for (size_t i = 1; i < depth; ++i) p.pack_array(1);
      p.pack(7);
    });
  }
  std::mt19937_64 random(3);
  size_t read = 0;
  for (const std::string& value : values) {
    for (int i = 0; i < 20; ++i) {
      TaskResult result;
      result.error_message = "e";
      result.result.bytes = value;
      std::string frame = EncodeBody(result);
      if (i > 0) frame[random() % frame.size()] ^= static_cast<char>(1 << (random() % 8));
      const auto fast = DecodeBody<TaskResult>(frame);
      const auto general = DecodeBodyGeneral<TaskResult>(frame);
      ASSERT_EQ(fast.ok(), general.ok()) << "value " << &value - values.data() << ", try " << i;
      if (!general.ok()) continue;
      ++read;
      ASSERT_TRUE(*fast == *general) << "value " << &value - values.data() << ", try " << i;
    }
  }
  EXPECT_GT(read, values.size() * 5);
}

// The hub keeps a request as its frames encoded from the views they came
// in: the very bytes a FrameList body has, which is how the file stores it.
TEST(Codec, AFrameListWrittenFromViewsIsTheFrameListBody) {
  const std::string big(70000, 'x');  // a 32-bit length
  const std::vector<std::vector<std::string>> lists = {
      {}, {""}, {"header", "meta", "content"}, {std::string(31, 'a'), std::string(32, 'b'), big}};
  for (const auto& frames : lists) {
    const std::vector<std::string_view> views(frames.begin(), frames.end());
    const std::string bytes = EncodeFrameList(views);
    EXPECT_EQ(bytes, EncodeBody(FrameList{frames})) << frames.size() << " frames";
    auto back = DecodeBody<FrameList>(bytes);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->frames, frames);
  }
}

TEST(Signature, AcceptedWithTheRightKey) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  EXPECT_TRUE(CheckFrames(kSigner, Limits{}, ViewsOf(frames)).ok());
}

TEST(Signature, RejectedForTheWrongKey) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  Signer other("another key");
  EXPECT_EQ(CheckFrames(other, Limits{}, ViewsOf(frames)).code(), Status::Code::kBadSignature);
}

TEST(Signature, RejectedWhenAnySignedFrameChangesByOneByte) {
  const auto original = SampleFrames<MsgType::kTaskRequest>(kSigner);
  for (size_t f = kFrameHeader; f < original.size(); ++f) {
    for (size_t byte = 0; byte < original[f].size(); ++byte) {
      auto frames = original;
      frames[f][byte] = static_cast<char>(frames[f][byte] ^ 0x01);
      EXPECT_EQ(CheckFrames(kSigner, Limits{}, ViewsOf(frames)).code(),
                Status::Code::kBadSignature)
          << "frame " << f << " byte " << byte;
    }
  }
}

TEST(Signature, RejectedWhenBytesMoveBetweenFrames) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  // Same concatenation, other boundaries.
  frames[kFrameMeta] += frames[kFrameContent].substr(0, 1);
  frames[kFrameContent].erase(0, 1);
  EXPECT_EQ(CheckFrames(kSigner, Limits{}, ViewsOf(frames)).code(), Status::Code::kBadSignature);
}

TEST(Signature, MissingOrTruncatedHmacIsRejected) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameHmac].clear();
  EXPECT_EQ(CheckFrames(kSigner, Limits{}, ViewsOf(frames)).code(), Status::Code::kBadSignature);
  frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameHmac].pop_back();
  EXPECT_EQ(CheckFrames(kSigner, Limits{}, ViewsOf(frames)).code(), Status::Code::kBadSignature);
}

TEST(Signature, UnsignedClusterRefusesSignedMessages) {
  Signer none;
  auto unsigned_frames = SampleFrames<MsgType::kHeartbeat>(none);
  EXPECT_TRUE(unsigned_frames[kFrameHmac].empty());
  EXPECT_TRUE(CheckFrames(none, Limits{}, ViewsOf(unsigned_frames)).ok());
  auto signed_frames = SampleFrames<MsgType::kHeartbeat>(kSigner);
  EXPECT_EQ(CheckFrames(none, Limits{}, ViewsOf(signed_frames)).code(),
            Status::Code::kBadSignature);
  EXPECT_EQ(CheckFrames(kSigner, Limits{}, ViewsOf(unsigned_frames)).code(),
            Status::Code::kBadSignature);
}

// Bad input: each case decodes to an error Status, never a crash.

std::vector<std::string> Resigned(std::vector<std::string> frames) {
  auto views = ViewsOf(frames);
  frames[kFrameHmac] = kSigner.Sign(views);
  return frames;
}

Status DecodeRequest(const std::vector<std::string>& frames, Limits limits = {}) {
  return DecodeMessage<MsgType::kTaskRequest>(kSigner, limits, ViewsOf(frames)).status();
}

TEST(BadInput, WrongVersionIsRejected) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameSignature] = "ZTASK0";
  EXPECT_EQ(DecodeRequest(frames).code(), Status::Code::kVersionMismatch);
}

TEST(BadInput, TooFewFramesAreRejected) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  for (size_t n = 0; n < kMinFrames; ++n) {
    std::vector<std::string> truncated(frames.begin(), frames.begin() + static_cast<long>(n));
    EXPECT_EQ(DecodeRequest(truncated).code(), Status::Code::kMalformed) << n << " frames";
  }
}

TEST(BadInput, TruncatedMsgpackIsMalformed) {
  const auto original = SampleFrames<MsgType::kTaskRequest>(kSigner);
  for (size_t f = kFrameHeader; f <= kFrameContent; ++f) {
    for (size_t keep = 0; keep < original[f].size(); ++keep) {
      auto frames = original;
      frames[f].resize(keep);
      EXPECT_EQ(DecodeRequest(Resigned(frames)).code(), Status::Code::kMalformed)
          << "frame " << f << " cut to " << keep;
    }
  }
}

TEST(BadInput, GarbageIsMalformed) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameMeta] = "\xc1\xff\x00garbage";
  EXPECT_EQ(DecodeRequest(Resigned(frames)).code(), Status::Code::kMalformed);
  frames[kFrameMeta] = std::string("\xdd\xff\xff\xff\xff", 5);  // array32 of 4G items
  EXPECT_EQ(DecodeRequest(Resigned(frames)).code(), Status::Code::kMalformed);
}

TEST(BadInput, TrailingBytesAreMalformed) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameContent] += '\x01';
  EXPECT_EQ(DecodeRequest(Resigned(frames)).code(), Status::Code::kMalformed);
}

TEST(BadInput, MissingFieldIsNamed) {
  auto frames = SampleFrames<MsgType::kAbortRequest>(kSigner);
  frames[kFrameContent] = EncodeBody(Sample<EngineRef>());  // a map, other fields
  auto decoded =
      DecodeMessage<MsgType::kAbortRequest>(kSigner, Limits{}, ViewsOf(Resigned(frames)));
  EXPECT_EQ(decoded.status().code(), Status::Code::kMalformed);
  EXPECT_NE(decoded.status().message().find("missing field 'task_ids'"), std::string::npos)
      << decoded.status().message();
}

TEST(BadInput, WrongTypeIsNamed) {
  auto frames = SampleFrames<MsgType::kEngineReady>(kSigner);
  // {"engine_id": "one", "uuid": "u"}
  frames[kFrameContent] = std::string("\x82\xa9""engine_id\xa3one\xa4uuid\xa1u", 22);
  auto decoded =
      DecodeMessage<MsgType::kEngineReady>(kSigner, Limits{}, ViewsOf(Resigned(frames)));
  EXPECT_EQ(decoded.status().code(), Status::Code::kMalformed);
  EXPECT_NE(decoded.status().message().find("engine_id"), std::string::npos)
      << decoded.status().message();
}

// A record's state travels as its name; a name no version knows is
// refused, never read as some other state.
TEST(BadInput, ATaskStateIsOneOfItsNames) {
  for (TaskState state : {TaskState::kNone, TaskState::kWaiting, TaskState::kRunning,
                          TaskState::kOk, TaskState::kError}) {
    EXPECT_EQ(ParseTaskState(TaskStateName(state)), state);
    TaskRecord r;
    r.state = state;
    auto back = DecodeBody<TaskRecord>(EncodeBody(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->state, state);
  }
  EXPECT_EQ(TaskStateName(TaskState::kOk), "ok");
  EXPECT_EQ(TaskStateName(TaskState::kNone), "");
  EXPECT_FALSE(ParseTaskState("finished").has_value());
  TaskRecord r;
  r.state = TaskState::kOk;
  std::string encoded = EncodeBody(r);
  const size_t at = encoded.find("\xa2ok");
  ASSERT_NE(at, std::string::npos);
  encoded.replace(at, 3, "\xa2no");
  EXPECT_EQ(DecodeBody<TaskRecord>(encoded).status().code(), Status::Code::kMalformed);
}

// The hub's rows (EncodeStored): arrays of fields in Visit() order.
TaskRecord FullRecord() { return Sample<ResultReply>().records.front(); }

TaskRecord NoOpRecord() {
  TaskRecord r;
  r.id = testing::SampleId(7);
  r.client = "bd359f4098ab5765ac6d228779ca7b40";
  r.state = TaskState::kOk;
  r.engine_id = 0;
  r.attempts = 1;
  r.submitted_us = 1'795'000'000'000'000;
  r.started_us = 1'795'000'000'000'300;
  r.completed_us = 1'795'000'000'000'310;
  r.job = "3";
  TaskSpec spec;
  spec.function = "noop";
  spec.job = "3";
  r.spec = spec;
  return r;
}

TEST(StoredRecords, EveryFieldComesBackAndTheRowIsAThirdOfTheMap) {
  for (const TaskRecord& r : {FullRecord(), NoOpRecord(), TaskRecord{}}) {
    auto back = DecodeStored<TaskRecord>(EncodeStored(r));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, r);
  }
  const std::string stored = EncodeStored(NoOpRecord());
  EXPECT_EQ(static_cast<uint8_t>(stored[0]), 0xdc) << "an array";
  EXPECT_LT(stored.size() * 2, EncodeBody(NoOpRecord()).size())
      << stored.size() << " against " << EncodeBody(NoOpRecord()).size();
}

TEST(StoredRecords, ARowStoredAsAMapStillReads) {
  // Every row written before the positional form.
  for (const TaskRecord& r : {FullRecord(), NoOpRecord()}) {
    auto back = DecodeStored<TaskRecord>(EncodeBody(r));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, r);
  }
}

std::string HexOf(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const char c : bytes) {
    hex += kDigits[static_cast<uint8_t>(c) >> 4];
    hex += kDigits[static_cast<uint8_t>(c) & 15];
  }
  return hex;
}

std::string BytesOf(std::string_view hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return bytes;
}

TEST(StoredRecords, TheLayoutIsFixed) {
  // NoOpRecord's row, byte for byte: it must read as it did in every later
  // version (fields are only added at the end of a struct's Visit()). Its
  // routing and spec stop at their last field that is not a default: the
  // routing is an empty array (0x90), the spec nine fields (0x99).
  const std::string vector = BytesOf(
      "dc0016c4100123456789abcdef0000000000000007a0d920626433353966343039386162"
      "3537363561633664323238373739636137623430a26f6bc0a00001cf0006608b015f3000"
      "cf0006608b015f312ccf0006608b015f3136c0a0a0c0c2c290a133c099a0a46e6f6f70c0"
      "90a080a0c0a133c0");
  EXPECT_EQ(HexOf(EncodeStored(NoOpRecord())), HexOf(vector));
  auto back = DecodeStored<TaskRecord>(vector);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, NoOpRecord());
  // The same row as versions that wrote every field of the routing and the
  // spec stored it.
  const std::string earlier = BytesOf(
      "dc0016c4100123456789abcdef0000000000000007a0d920626433353966343039386162"
      "3537363561633664323238373739636137623430a26f6bc0a00001cf0006608b015f3000"
      "cf0006608b015f312ccf0006608b015f3136c0a0a0c0c2c2999390a3616c6ca773756363"
      "6573739390a3616c6ca7737563636573739000000000c0c0a133c09da0a46e6f6f70c090"
      "a080a0c0a133c0c0c0c0c0");
  back = DecodeStored<TaskRecord>(earlier);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, NoOpRecord());
}

TEST(StoredRecords, ARowOfAnEarlierVersionReadsWithTheNewFieldsAtTheirDefaults) {
  TaskRecord r = NoOpRecord();
  r.replaced_by = testing::SampleId(9);
  std::string stored = EncodeStored(r);
  // The same row as a version without replaced_by (the last field) wrote
  // it: one field fewer in the top array (array 16: 0xdc, then the count),
  // the id's 18 bytes gone.
  ASSERT_EQ(HexOf(stored.substr(0, 3)), "dc0016");
  stored[2] = 21;
  stored.resize(stored.size() - 18);
  auto back = DecodeStored<TaskRecord>(stored);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  r.replaced_by.reset();
  EXPECT_EQ(*back, r);
  // A later version's extra field is ignored.
  std::string later = EncodeStored(NoOpRecord());
  later[2] = 23;
  later += '\x07';
  auto ahead = DecodeStored<TaskRecord>(later);
  ASSERT_TRUE(ahead.ok()) << ahead.status().ToString();
  EXPECT_EQ(*ahead, NoOpRecord());
}

TEST(StoredRecords, MessagesNeverTakeTheStoredForm) {
  // Both readers of messages (in place and general) refuse the array.
  EXPECT_EQ(DecodeBody<TaskRecord>(EncodeStored(NoOpRecord())).status().code(),
            Status::Code::kMalformed);
  EXPECT_EQ(DecodeBodyGeneral<TaskRecord>(EncodeStored(NoOpRecord())).status().code(),
            Status::Code::kMalformed);
}

TEST(BadInput, AnEngineStateIsOneOfItsNames) {
  for (EngineState state : {EngineState::kStarting, EngineState::kRunning, EngineState::kRestarting,
                            EngineState::kDraining, EngineState::kFailed, EngineState::kStopped}) {
    EXPECT_EQ(ParseEngineState(EngineStateName(state)), state);
    EngineStateReport report{"e-0", state, 0, ""};
    auto back = DecodeBody<EngineStateReport>(EncodeBody(report));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->state, state);
  }
  EXPECT_EQ(EngineStateName(EngineState::kDraining), "draining");
  EXPECT_FALSE(ParseEngineState("").has_value());
  EXPECT_FALSE(ParseEngineState("Running").has_value());
  EXPECT_TRUE(IsGone(EngineState::kStopped));
  EXPECT_TRUE(IsGone(EngineState::kFailed));
  EXPECT_FALSE(IsGone(EngineState::kRestarting));
  // A supervisor (or anyone with the key) naming a state there is not is
  // refused, not shown.
  std::string encoded = EncodeBody(EngineStateReport{"e-0", EngineState::kFailed, 0, ""});
  const size_t at = encoded.find("\xa6" "failed");
  ASSERT_NE(at, std::string::npos);
  encoded.replace(at, 7, "\xa6" "frozen");
  EXPECT_EQ(DecodeBody<EngineStateReport>(encoded).status().code(), Status::Code::kMalformed);
  EngineInfo info;
  info.state = EngineState::kStopped;
  std::string listed = EncodeBody(info);
  const size_t stopped = listed.find("\xa7" "stopped");
  ASSERT_NE(stopped, std::string::npos);
  listed.replace(stopped, 8, "\xa7" "paused!");
  EXPECT_EQ(DecodeBody<EngineInfo>(listed).status().code(), Status::Code::kMalformed);
}

TEST(BadInput, ContentThatIsNotAMapIsMalformed) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameContent] = "\x01";
  EXPECT_EQ(DecodeRequest(Resigned(frames)).code(), Status::Code::kMalformed);
}

TEST(BadInput, UnknownMessageTypeIsMalformed) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  std::string header = frames[kFrameHeader];
  header[1] = static_cast<char>(0x7f);  // the type's code: 127, no such type
  frames[kFrameHeader] = header;
  Status s = DecodeRequest(Resigned(frames));
  EXPECT_EQ(s.code(), Status::Code::kMalformed);
  EXPECT_NE(s.message().find("unknown message type 127"), std::string::npos) << s.message();
}

TEST(BadInput, AnotherTypeThanExpectedIsMalformed) {
  auto frames = SampleFrames<MsgType::kHeartbeat>(kSigner);
  EXPECT_EQ(DecodeRequest(frames).code(), Status::Code::kMalformed);
}

TEST(BadInput, BadTaskIdSizeIsMalformed) {
  auto frames = SampleFrames<MsgType::kAbortRequest>(kSigner);
  frames[kFrameContent] = std::string("\x81\xa8task_ids\x91\xc4\x03\x01\x02\x03", 16);
  auto decoded = DecodeMessage<MsgType::kAbortRequest>(kSigner, Limits{}, ViewsOf(Resigned(frames)));
  EXPECT_EQ(decoded.status().code(), Status::Code::kMalformed);
}

TEST(BadInput, OversizedMessageIsTooLarge) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  Limits limits;
  limits.max_message_bytes = 64;
  EXPECT_EQ(DecodeRequest(frames, limits).code(), Status::Code::kTooLarge);
  limits = {};
  limits.max_frames = 6;
  EXPECT_EQ(DecodeRequest(frames, limits).code(), Status::Code::kTooLarge);
}

TEST(BadInput, DeepNestingIsRefused) {
  auto frames = SampleFrames<MsgType::kTaskRequest>(kSigner);
  frames[kFrameContent] = std::string(100000, '\x91') + "\x01";
  EXPECT_EQ(DecodeRequest(Resigned(frames)).code(), Status::Code::kMalformed);
}

}  // namespace
}  // namespace ztask::protocol

namespace ztask::protocol {
namespace {

// A monitor batch's own frames, then `records` as its frame 6.
std::vector<std::string> MonitorBatchOf(const Signer& signer, std::string records) {
  std::vector<std::string> frames = EncodeMessage(
      signer, testing::SampleHeader(MsgType::kMonitorBatch), std::nullopt, Empty{},
      MonitorBatch{}, {std::move(records)});
  return frames;
}

std::string RecordOf(const std::vector<std::string>& message, size_t from = kFrameHeader) {
  std::vector<std::string_view> views(message.begin() + static_cast<std::ptrdiff_t>(from),
                                      message.end());
  std::string records;
  AppendRecord(records, views);
  return records;
}

TEST(MonitorBatch, UnpacksEachMessageInOrder) {
  const Signer signer("k");
  const auto a = EncodeMessage(signer, testing::SampleHeader(MsgType::kTaskAssigned), Header{},
                               Assignment{3, 1}, Empty{});
  const auto b = EncodeMessage(signer, testing::SampleHeader(MsgType::kTaskOutcome), Header{},
                               OutcomeMeta{}, TaskResult{}, {"buffer"});
  const std::vector<std::string> frames = MonitorBatchOf(signer, RecordOf(a) + RecordOf(b));
  ASSERT_EQ(frames.size(), kBatchFrames);
  std::vector<std::string_view> views(frames.begin(), frames.end());
  auto messages = UnpackBatch(views);
  ASSERT_TRUE(messages.ok()) << messages.status().ToString();
  ASSERT_EQ(messages->size(), 2u);
  EXPECT_EQ((*messages)[0][kFrameHeader], a[kFrameHeader]);
  EXPECT_EQ((*messages)[1].size(), kMinFrames + 1);
  EXPECT_EQ((*messages)[1][kFirstBuffer], "buffer");
  auto meta = DecodeBody<Assignment>((*messages)[0][kFrameMeta]);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->engine_id, 3);
}

// A record is its frame count, then each frame's length and bytes, all
// within the records frame: anything else is refused, never read past.
TEST(MonitorBatch, RecordsThatDoNotAddUpAreMalformed) {
  const Signer signer("k");
  const auto a = EncodeMessage(signer, testing::SampleHeader(MsgType::kTaskAssigned), Header{},
                               Assignment{3, 1}, Empty{});
  const std::string good = RecordOf(a);
  auto word = [](uint32_t w) { return std::string(reinterpret_cast<const char*>(&w), 4); };
  const std::vector<std::string> bad = {
      good.substr(0, good.size() - 1),                    // cut short
      good + "x",                                         // bytes left over
      good.substr(0, 2),                                  // half a count
      word(3) + word(0) + word(0) + word(0),              // too few frames
      word(63) + std::string(63 * 4, '\0'),               // too many frames
      word(4) + word(0xffffffff) + "abc",                 // a length past the end
      good.substr(0, 4),                                  // a count and no frames
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::vector<std::string> frames = MonitorBatchOf(signer, bad[i]);
    std::vector<std::string_view> views(frames.begin(), frames.end());
    EXPECT_EQ(UnpackBatch(views).status().code(), Status::Code::kMalformed) << "case " << i;
  }
  // A batch is its six frames and the records, no other count.
  std::vector<std::string> frames = MonitorBatchOf(signer, good);
  frames.push_back(good);
  std::vector<std::string_view> views(frames.begin(), frames.end());
  EXPECT_EQ(UnpackBatch(views).status().code(), Status::Code::kMalformed);
  // And one with no records holds no message.
  const std::vector<std::string> empty = MonitorBatchOf(signer, "");
  std::vector<std::string_view> empty_views(empty.begin(), empty.end());
  auto none = UnpackBatch(empty_views);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(MonitorBatch, HoldsAtMostItsLimitOfMessages) {
  const Signer signer("k");
  const auto a = EncodeMessage(signer, testing::SampleHeader(MsgType::kTaskAssigned), Header{},
                               Assignment{3, 1}, Empty{});
  const std::string one = RecordOf(a);
  std::string records;
  for (size_t i = 0; i < kMaxBatchMessages; ++i) records += one;
  const std::vector<std::string> full = MonitorBatchOf(signer, records);
  std::vector<std::string_view> views(full.begin(), full.end());
  EXPECT_TRUE(UnpackBatch(views).ok());
  const std::vector<std::string> over = MonitorBatchOf(signer, records + one);
  std::vector<std::string_view> over_views(over.begin(), over.end());
  EXPECT_EQ(UnpackBatch(over_views).status().code(), Status::Code::kTooLarge);
}

}  // namespace
}  // namespace ztask::protocol

namespace ztask::protocol {
namespace {

// The signature is HMAC-SHA256 itself: the same as libsodium's over the same
// bytes (each frame's 8-byte little-endian length, then the frame), for
// short, block-sized and long keys.
TEST(Signer, IsHmacSha256OfTheLengthPrefixedFrames) {
  for (size_t key_size : {1u, 32u, 64u, 65u, 200u}) {
    std::string key(key_size, '\0');
    for (size_t i = 0; i < key_size; ++i) key[i] = static_cast<char>(i * 7 + 3);
    const Signer signer(key);
    std::vector<std::string> frames = {"ZTASK3", "", "header", "", "meta", std::string(1000, 'c'),
                                       "buffer"};
    std::vector<std::string_view> views(frames.begin(), frames.end());
    std::string stream;
    for (size_t i = kFrameHeader; i < frames.size(); ++i) {
      const uint64_t n = frames[i].size();
      for (int b = 0; b < 8; ++b) stream += static_cast<char>(n >> (8 * b));
      stream += frames[i];
    }
    unsigned char expected[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(key.data()),
                                key.size());
    crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(stream.data()),
                                  stream.size());
    crypto_auth_hmacsha256_final(&state, expected);
    EXPECT_EQ(signer.Sign(views), std::string(reinterpret_cast<char*>(expected), sizeof expected))
        << "key of " << key_size << " bytes";
    frames[kFrameHmac] = signer.Sign(views);
    views.assign(frames.begin(), frames.end());
    EXPECT_TRUE(signer.Verify(views));
  }
}

TEST(Signer, SignsTheSameFromManyThreadsAtOnce) {
  const Signer signer("shared key");
  const std::vector<std::string> frames = {"ZTASK3", "", "h", "p", "m", "c"};
  const std::vector<std::string_view> views(frames.begin(), frames.end());
  const std::string expected = signer.Sign(views);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (signer.Sign(views) != expected) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// The limits on values, the same wherever a value is read: the check a
// client makes before sending and the decoder every process uses.
TEST(ValueLimits, TheCheckAndTheDecoderAgreeOnEveryLimit) {
  auto nested = [](size_t depth) { return std::string(depth - 1, '\x91') + '\x01'; };
  auto decoded = [](const std::string& args) {
    TaskSpec spec;
    spec.kind = "function";
    spec.args.bytes = args;
    return DecodeBody<TaskSpec>(EncodeBody(spec)).status();
  };
  EXPECT_TRUE(CheckValue("").ok());
  EXPECT_TRUE(CheckValue(nested(kMaxValueDepth)).ok());
  EXPECT_TRUE(decoded(nested(kMaxValueDepth)).ok());
  // A map counts as a level too: {"a": [[...]]}.
  EXPECT_FALSE(CheckValue("\x81\xa1" "a" + nested(kMaxValueDepth)).ok());
  for (const size_t depth : {kMaxValueDepth + 1, size_t{31}, size_t{40}, size_t{5000}}) {
    const Status checked = CheckValue(nested(depth));
    EXPECT_EQ(checked.code(), Status::Code::kTooLarge) << depth;
    EXPECT_NE(checked.message().find("nests deeper than 24 levels"), std::string::npos)
        << checked.message();
    EXPECT_FALSE(decoded(nested(depth)).ok()) << depth;
  }
  std::string big = "\xdd\x00\x11\x00\x00";  // an array of 0x110000 items
  big.append(0x110000, '\x01');
  EXPECT_NE(CheckValue(big).message().find("more than 1048576 items"), std::string::npos)
      << CheckValue(big).message();
  EXPECT_FALSE(decoded(big).ok());
  const std::string ext = "\xd4\x01\x00";  // fixext 1
  EXPECT_FALSE(CheckValue(ext).ok());
  EXPECT_FALSE(decoded(ext).ok());
  EXPECT_FALSE(CheckValue("\xc1").ok());
  EXPECT_FALSE(CheckValue("\x01\x01").ok()) << "one value, nothing after it";
}

// What every task carries leaves out the fields at their defaults, and
// both readers take a missing one as its default: a task with no options
// has an empty map for its routing.
TEST(Codec, FieldsAtTheirDefaultsAreLeftOutAndReadBack) {
  EXPECT_EQ(HexOf(EncodeBody(RoutingMeta{})), "80");
  EXPECT_EQ(HexOf(EncodeBody(ReplyMeta{})), "80");
  EXPECT_EQ(HexOf(EncodeBody(TaskResult{})), "80");
  EXPECT_EQ(HexOf(EncodeBody(OutcomeMeta{})), "80");
  RoutingMeta routing;
  routing.retries = 3;
  routing.after.mode = DependencyMode::kAny;
  // {"after": {"mode": "any"}, "retries": 3}
  EXPECT_EQ(HexOf(EncodeBody(routing)),
            "82a5616674657281a46d6f6465a3616e79a7726574726965730"
            "3");
  ReplyMeta failed;
  failed.ok = false;  // the default is true: written
  EXPECT_EQ(HexOf(EncodeBody(failed)), "81a26f6bc2");
  const auto check = [](const auto& value) {
    using T = std::remove_cvref_t<decltype(value)>;
    const std::string frame = EncodeBody(value);
    auto fast = DecodeBody<T>(frame);
    auto general = DecodeBodyGeneral<T>(frame);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    ASSERT_TRUE(general.ok()) << general.status().ToString();
    EXPECT_TRUE(*fast == value);
    EXPECT_TRUE(*general == value);
  };
  check(RoutingMeta{});
  check(routing);
  check(ReplyMeta{});
  check(failed);
  check(TaskResult{});
  check(TaskSpec{});
  check(Sample<RoutingMeta>());
  check(Sample<TaskSpec>());
  check(Sample<TaskResult>());
  check(Sample<ReplyMeta>());
  // A field given at its default still reads (as other writers send it).
  auto spelled =
      DecodeBody<RoutingMeta>(BytesOf("81a772657472696573"
                                      "00"));
  ASSERT_TRUE(spelled.ok());
  EXPECT_TRUE(*spelled == RoutingMeta{});
}

}  // namespace
}  // namespace ztask::protocol
