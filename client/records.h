// The boundary between the wire's records and the client's public values:
// a hub's TaskRecord as a TaskInfo, dependency sets both ways, and the
// names the wire gives to what the client keeps as enums (a task's kind, a
// held request's condition). Pure functions, no I/O.
//
// Must not: send, receive or wait. Thread safety: plain functions over
// plain values; safe from any thread.
#ifndef ZTASK_CLIENT_RECORDS_H_
#define ZTASK_CLIENT_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "protocol/messages.h"
#include "ztask/client.h"

namespace ztask::client {

// What a task runs: the wire's enum (protocol/messages.h), whose name
// TaskSpec carries.
using protocol::ParseTaskKind;
using protocol::TaskKind;
using protocol::TaskKindName;

// When the hub answers a held result_request: once every task has a record
// ("recorded") or has finished ("final").
enum class HeldUntil : uint8_t { kRecorded = 0, kFinal };

std::string_view HeldUntilName(HeldUntil until);
// The inverse of HeldUntilName; nullopt for an unknown name.
std::optional<HeldUntil> ParseHeldUntil(std::string_view name);

// Microseconds as seconds; nullopt for none or 0 (unknown).
std::optional<double> Seconds(std::optional<int64_t> us);

DependencySet FromWire(const protocol::WireDependencies& w);
protocol::WireDependencies ToWire(const DependencySet& d);

// The hub's record as the public TaskInfo, with its spec (what it runs,
// ready to submit again) when the record kept one.
TaskInfo FromRecord(const protocol::TaskRecord& r);

}  // namespace ztask::client

#endif  // ZTASK_CLIENT_RECORDS_H_
