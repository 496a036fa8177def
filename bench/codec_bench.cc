// The codec alone: encode+sign and verify+decode of every message type (its
// sample from the tests), and of a task request and reply carrying payloads
// of 64 B, 4 KiB and 256 KiB.
#include <benchmark/benchmark.h>

#include "protocol/codec.h"
#include "tests/protocol/sample_messages.h"

namespace ztask::protocol {
namespace {

const Signer& BenchSigner() {
  static const Signer signer(std::string(32, 'k'));
  return signer;
}

template <MsgType kType>
void BM_EncodeSign(benchmark::State& state) {
  using B = Bodies<kType>;
  const Header header = testing::SampleHeader(kType);
  const auto meta = testing::Sample<typename B::Meta>();
  const auto content = testing::Sample<typename B::Content>();
  for (auto _ : state) {
    auto frames = EncodeMessage(BenchSigner(), header, std::nullopt, meta, content);
    benchmark::DoNotOptimize(frames.data());
  }
  state.SetItemsProcessed(state.iterations());
}

template <MsgType kType>
void BM_VerifyDecode(benchmark::State& state) {
  const auto frames = testing::SampleFrames<kType>(BenchSigner());
  const std::vector<std::string_view> views(frames.begin(), frames.end());
  for (auto _ : state) {
    auto decoded = DecodeMessage<kType>(BenchSigner(), Limits{}, views);
    if (!decoded.ok()) state.SkipWithError("does not decode");
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations());
}

// The header and the parent every message carries: read in place.
void BM_DecodeHeader(benchmark::State& state) {
  const std::string frame = EncodeHeader(testing::SampleHeader(MsgType::kTaskRequest));
  for (auto _ : state) {
    auto header = DecodeHeader(frame);
    benchmark::DoNotOptimize(header);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeHeader);

// The same header as protocol 2 wrote it (a msgpack map), through the
// general reader (msgpack's object tree), for comparison.
void BM_DecodeHeaderGeneral(benchmark::State& state) {
  const std::string frame = EncodeBody(testing::SampleHeader(MsgType::kTaskRequest));
  for (auto _ : state) {
    auto header = DecodeBodyGeneral<Header>(frame);
    benchmark::DoNotOptimize(header);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeHeaderGeneral);

// The small bodies every task carries, in place and through the general
// reader.
template <class T, bool kGeneral>
void BM_DecodeSmallBody(benchmark::State& state) {
  const std::string frame = EncodeBody(testing::Sample<T>());
  for (auto _ : state) {
    auto body = kGeneral ? DecodeBodyGeneral<T>(frame) : DecodeBody<T>(frame);
    benchmark::DoNotOptimize(body);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_TEMPLATE(BM_DecodeSmallBody, RoutingMeta, false)->Name("DecodeInPlace/RoutingMeta");
BENCHMARK_TEMPLATE(BM_DecodeSmallBody, RoutingMeta, true)->Name("DecodeGeneral/RoutingMeta");
BENCHMARK_TEMPLATE(BM_DecodeSmallBody, ReplyMeta, false)->Name("DecodeInPlace/ReplyMeta");
BENCHMARK_TEMPLATE(BM_DecodeSmallBody, ReplyMeta, true)->Name("DecodeGeneral/ReplyMeta");

#define ZTASK_CODEC_BENCH(name, code, text, meta, content)                   \
  BENCHMARK_TEMPLATE(BM_EncodeSign, MsgType::name)->Name("EncodeSign/" text); \
  BENCHMARK_TEMPLATE(BM_VerifyDecode, MsgType::name)->Name("VerifyDecode/" text);
ZTASK_MESSAGE_TYPES(ZTASK_CODEC_BENCH)
#undef ZTASK_CODEC_BENCH

// A function task with `bytes` of arguments, and its reply with as much result.
std::vector<std::string> TaskWithPayload(MsgType type, size_t bytes) {
  const Header header{TaskId{1, 2}, type, "session", 1};
  if (type == MsgType::kTaskRequest) {
    TaskSpec spec;
    spec.kind = "function";
    spec.function = "echo";
    spec.args.bytes.assign(bytes, 'a');
    return EncodeMessage(BenchSigner(), header, std::nullopt, RoutingMeta{}, spec);
  }
  TaskResult result;
  result.result.bytes.assign(bytes, 'r');
  return EncodeMessage(BenchSigner(), header, header, ReplyMeta{}, result);
}

void BM_TaskRequestEncodeSign(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(TaskWithPayload(MsgType::kTaskRequest, state.range(0)));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_TaskRequestEncodeSign)->Arg(64)->Arg(4 << 10)->Arg(256 << 10);

void BM_TaskReplyVerifyDecode(benchmark::State& state) {
  const auto frames = TaskWithPayload(MsgType::kTaskReply, state.range(0));
  const std::vector<std::string_view> views(frames.begin(), frames.end());
  for (auto _ : state) {
    auto decoded = DecodeMessage<MsgType::kTaskReply>(BenchSigner(), Limits{}, views);
    benchmark::DoNotOptimize(decoded);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_TaskReplyVerifyDecode)->Arg(64)->Arg(4 << 10)->Arg(256 << 10);

// What the scheduler does with a request: verify, header and metadata only.
void BM_SchedulerOpen(benchmark::State& state) {
  const auto frames = TaskWithPayload(MsgType::kTaskRequest, state.range(0));
  const std::vector<std::string_view> views(frames.begin(), frames.end());
  for (auto _ : state) {
    Status checked = CheckFrames(BenchSigner(), Limits{}, views);
    auto header = DecodeHeader(views[kFrameHeader]);
    auto meta = DecodeBody<RoutingMeta>(views[kFrameMeta]);
    benchmark::DoNotOptimize(checked);
    benchmark::DoNotOptimize(header);
    benchmark::DoNotOptimize(meta);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SchedulerOpen)->Arg(64)->Arg(4 << 10)->Arg(256 << 10);

}  // namespace
}  // namespace ztask::protocol
