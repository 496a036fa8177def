// The one table of every message type in ztask: its wire code, its name, who
// sends it to whom. docs/protocol.md describes each frame by frame; the
// bodies (routing metadata and content) are in messages.h.
#ifndef ZTASK_PROTOCOL_MESSAGE_TYPE_H_
#define ZTASK_PROTOCOL_MESSAGE_TYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace ztask::protocol {

// X(enumerator, wire code, name)
#define ZTASK_MESSAGE_TYPES(X)                                              \
  /* client -> scheduler -> engine, and engine -> scheduler -> client */   \
  X(kTaskRequest, 1, "task_request")                                        \
  X(kTaskReply, 2, "task_reply")                                            \
  /* client <-> scheduler */                                                \
  X(kAbortRequest, 3, "abort_request")                                      \
  X(kAbortReply, 4, "abort_reply")                                          \
  /* engine -> scheduler: my DEALER is connected and I can take tasks */    \
  X(kEngineReady, 5, "engine_ready")                                        \
  /* scheduler -> engine: drained, exit now */                              \
  X(kEngineRetire, 6, "engine_retire")                                      \
  /* many task_requests or task_replies in one message, one signature: */  \
  /* client -> scheduler -> engine, engine -> scheduler -> client */       \
  X(kTaskBatch, 7, "task_batch")                                            \
  /* engine <-> hub */                                                      \
  X(kRegistrationRequest, 10, "registration_request")                       \
  X(kRegistrationReply, 11, "registration_reply")                           \
  X(kUnregistration, 12, "unregistration")                                  \
  X(kHeartbeat, 13, "heartbeat")                                            \
  /* supervisor -> hub: an engine it runs is starting, restarting, failed */ \
  X(kEngineState, 14, "engine_state")                                       \
  X(kEngineStateReply, 15, "engine_state_reply")                            \
  /* client <-> hub queries */                                              \
  X(kResultRequest, 20, "result_request")                                   \
  X(kResultReply, 21, "result_reply")                                       \
  X(kQueueRequest, 22, "queue_request")                                     \
  X(kQueueReply, 23, "queue_reply")                                         \
  X(kEnginesRequest, 24, "engines_request")                                 \
  X(kEnginesReply, 25, "engines_reply")                                     \
  X(kPurgeRequest, 26, "purge_request")                                     \
  X(kPurgeReply, 27, "purge_reply")                                         \
  X(kShutdownRequest, 28, "shutdown_request")                               \
  X(kShutdownReply, 29, "shutdown_reply")                                   \
  /* restarted scheduler <-> hub: the unfinished tasks, page by page */     \
  X(kRecoverRequest, 30, "recover_request")                                 \
  X(kRecoverReply, 31, "recover_reply")                                     \
  /* monitor (dashboard) <-> hub: counts and the latest finished tasks */   \
  X(kStatsRequest, 32, "stats_request")                                     \
  X(kStatsReply, 33, "stats_reply")                                         \
  /* jobs: their counts, and fresh names */                                 \
  X(kJobsRequest, 34, "jobs_request")                                       \
  X(kJobsReply, 35, "jobs_reply")                                           \
  /* scheduler -> hub monitor */                                            \
  X(kTaskSubmitted, 40, "task_submitted")                                   \
  X(kTaskAssigned, 41, "task_assigned")                                     \
  X(kTaskOutcome, 42, "task_outcome")                                       \
  /* many of the three above in one message, under one signature */         \
  X(kMonitorBatch, 43, "monitor_batch")                                     \
  /* hub -> scheduler: the batches up to this one are recorded */           \
  X(kMonitorAck, 44, "monitor_ack")                                         \
  /* scheduler -> hub, every second: its own counts */                      \
  X(kSchedulerStats, 45, "scheduler_stats")                                 \
  /* hub -> scheduler notifier */                                           \
  X(kEngineRegistered, 50, "engine_registered")                             \
  X(kEngineUnregistered, 51, "engine_unregistered")                         \
  X(kEngineDraining, 52, "engine_draining")                                 \
  /* hub -> monitors event stream */                                        \
  X(kEvent, 60, "event")                                                    \
  /* taskcluster -> the cluster's supervisor */                             \
  X(kClusterRequest, 70, "cluster_request")                                 \
  X(kClusterReply, 71, "cluster_reply")

enum class MsgType : uint8_t {
#define ZTASK_ENUM_ENTRY(name, code, text) name = code,
  ZTASK_MESSAGE_TYPES(ZTASK_ENUM_ENTRY)
#undef ZTASK_ENUM_ENTRY
};

// "task_request" for kTaskRequest; "unknown" for a code not in the table.
std::string_view MsgTypeName(MsgType type);
// The type with this wire code, or nullopt when the table has none.
std::optional<MsgType> MsgTypeFromCode(uint8_t code);

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_MESSAGE_TYPE_H_
