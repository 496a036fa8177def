// The one table of every message type in ztask: its wire code, its name, who
// sends it to whom. docs/protocol.md describes each frame by frame; the
// bodies (routing metadata and content) are in messages.h.
#ifndef ZTASK_PROTOCOL_MESSAGE_TYPE_H_
#define ZTASK_PROTOCOL_MESSAGE_TYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace ztask::protocol {

// X(enumerator, wire code, name, routing metadata, content): the body
// types are messages.h's, named here so that nothing about a message type is
// written twice (messages.h's Bodies and the codec's instantiations expand
// this table).
#define ZTASK_MESSAGE_TYPES(X)                                               \
  /* client -> scheduler -> engine, and engine -> scheduler -> client */     \
  X(kTaskRequest, 1, "task_request", RoutingMeta, TaskSpec)                  \
  X(kTaskReply, 2, "task_reply", ReplyMeta, TaskResult)                      \
  /* client <-> scheduler */                                                 \
  X(kAbortRequest, 3, "abort_request", Empty, AbortRequest)                  \
  X(kAbortReply, 4, "abort_reply", Empty, AbortReply)                        \
  /* engine -> scheduler: my DEALER is connected and I can take tasks */     \
  X(kEngineReady, 5, "engine_ready", Empty, EngineReady)                     \
  /* scheduler -> engine: drained, exit now */                               \
  X(kEngineRetire, 6, "engine_retire", Empty, EngineRef)                     \
  /* many task_requests or task_replies in one message, one signature: */    \
  /* client -> scheduler -> engine, engine -> scheduler -> client */         \
  X(kTaskBatch, 7, "task_batch", Empty, TaskBatch)                           \
  /* scheduler -> engine: give these back if not started (answered */       \
  /* "not run" each; started ones run and are answered as usual) */          \
  X(kTaskTakeBack, 8, "task_take_back", Empty, TaskIdList)                   \
  /* engine <-> hub */                                                       \
  X(kRegistrationRequest, 10, "registration_request", Empty, RegistrationRequest) \
  X(kRegistrationReply, 11, "registration_reply", Empty, RegistrationReply)  \
  X(kUnregistration, 12, "unregistration", Empty, EngineRef)                 \
  X(kHeartbeat, 13, "heartbeat", Empty, HeartbeatBody)                           \
  /* supervisor -> hub: an engine it runs is starting, restarting, failed */ \
  X(kEngineState, 14, "engine_state", Empty, EngineStateReport)              \
  X(kEngineStateReply, 15, "engine_state_reply", Empty, Acknowledgement)     \
  /* client <-> hub queries */                                               \
  X(kResultRequest, 20, "result_request", Empty, TaskIdList)                 \
  X(kResultReply, 21, "result_reply", Empty, ResultReply)                    \
  X(kQueueRequest, 22, "queue_request", Empty, Empty)                        \
  X(kQueueReply, 23, "queue_reply", Empty, QueueReply)                       \
  X(kEnginesRequest, 24, "engines_request", Empty, Empty)                    \
  X(kEnginesReply, 25, "engines_reply", Empty, EnginesReply)                 \
  X(kPurgeRequest, 26, "purge_request", Empty, PurgeRequest)                 \
  X(kPurgeReply, 27, "purge_reply", Empty, Count)                            \
  X(kShutdownRequest, 28, "shutdown_request", Empty, Empty)                  \
  X(kShutdownReply, 29, "shutdown_reply", Empty, Acknowledgement)            \
  /* restarted scheduler <-> hub: the unfinished tasks, page by page */      \
  X(kRecoverRequest, 30, "recover_request", Empty, RecoverRequest)           \
  X(kRecoverReply, 31, "recover_reply", Empty, RecoverReply)                 \
  /* monitor (dashboard) <-> hub: counts and the latest finished tasks */    \
  X(kStatsRequest, 32, "stats_request", Empty, StatsRequest)                 \
  X(kStatsReply, 33, "stats_reply", Empty, StatsReply)                       \
  /* jobs: their counts, and fresh names */                                  \
  X(kJobsRequest, 34, "jobs_request", Empty, JobsRequest)                    \
  X(kJobsReply, 35, "jobs_reply", Empty, JobsReply)                          \
  /* scheduler -> hub monitor */                                             \
  X(kTaskSubmitted, 40, "task_submitted", RoutingMeta, TaskSpec)             \
  X(kTaskAssigned, 41, "task_assigned", Assignment, Empty)                   \
  X(kTaskOutcome, 42, "task_outcome", OutcomeMeta, TaskResult)               \
  /* many of the three above in one message, under one signature */          \
  X(kMonitorBatch, 43, "monitor_batch", BatchMeta, MonitorBatch)             \
  /* hub -> scheduler: the batches up to this one are recorded */            \
  X(kMonitorAck, 44, "monitor_ack", Empty, MonitorAck)                       \
  /* scheduler -> hub, every second: its own counts */                       \
  X(kSchedulerStats, 45, "scheduler_stats", Empty, SchedulerStats)           \
  /* hub -> scheduler notifier */                                            \
  X(kEngineRegistered, 50, "engine_registered", Empty, EngineInfo)           \
  X(kEngineUnregistered, 51, "engine_unregistered", Empty, EngineRef)        \
  X(kEngineDraining, 52, "engine_draining", Empty, EngineRef)                \
  /* hub -> monitors event stream */                                         \
  X(kEvent, 60, "event", Empty, Event)                                       \
  /* taskcluster -> the cluster's supervisor */                              \
  X(kClusterRequest, 70, "cluster_request", Empty, ClusterRequest)           \
  X(kClusterReply, 71, "cluster_reply", Empty, Acknowledgement)

enum class MsgType : uint8_t {
#define ZTASK_ENUM_ENTRY(name, code, text, meta, content) name = code,
  ZTASK_MESSAGE_TYPES(ZTASK_ENUM_ENTRY)
#undef ZTASK_ENUM_ENTRY
};

// "task_request" for kTaskRequest; "unknown" for a code not in the table.
std::string_view MsgTypeName(MsgType type);
// The type with this wire code, or nullopt when the table has none.
std::optional<MsgType> MsgTypeFromCode(uint8_t code);

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_MESSAGE_TYPE_H_
