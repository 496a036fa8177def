#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>

#include "hub/registry.h"
#include "hub/store.h"
#include "protocol/codec.h"
#include "tests/support/temp_dir.h"

namespace ztask::hub {
namespace {

protocol::RegistrationRequest Engine(const std::string& name, const std::string& uuid) {
  return {uuid, name, "host", 1, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
}

TEST(Registry, IdsInRegistrationOrderAndOldIdsForOldNames) {
  EngineRegistry registry;
  EXPECT_EQ(registry.Register(Engine("a", "u1"), 0, 0).id, 0);
  EXPECT_EQ(registry.Register(Engine("b", "u2"), 0, 0).id, 1);
  EXPECT_TRUE(registry.Unregister("u1").has_value());
  auto again = registry.Register(Engine("a", "u3"), 0, 0);
  EXPECT_EQ(again.id, 0) << "a name registered before gets its id back";
  EXPECT_FALSE(again.replaced.has_value());
  EXPECT_EQ(registry.Register(Engine("c", "u4"), 0, 0).id, 2);
}

TEST(Registry, AfterAHubRestartEnginesGetTheIdsTheyHad) {
  EngineRegistry registry;  // a new hub: it knows no name
  auto with_id = [](std::string name, std::string uuid, int32_t id) {
    auto request = Engine(name, uuid);
    request.engine_id = id;
    return request;
  };
  EXPECT_EQ(registry.Register(with_id("b", "u2", 5), 0, 0).id, 5);
  EXPECT_EQ(registry.Register(with_id("a", "u1", 3), 0, 0).id, 3);
  EXPECT_EQ(registry.Register(Engine("c", "u3"), 0, 0).id, 6) << "new engines come after";
  EXPECT_EQ(registry.Register(with_id("d", "u4", 5), 0, 0).id, 7)
      << "an id another engine holds is not given twice";
}

TEST(Registry, ARestartedEngineReplacesItsOldLife) {
  EngineRegistry registry;
  registry.Register(Engine("a", "u1"), 0, 0);
  auto restarted = registry.Register(Engine("a", "u2"), 0, 0);
  EXPECT_EQ(restarted.id, 0);
  ASSERT_TRUE(restarted.replaced.has_value());
  EXPECT_EQ(restarted.replaced->uuid, "u1");
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_FALSE(registry.Touch("u1", 0));
}

TEST(Registry, SilentEnginesExpire) {
  EngineRegistry registry;
  registry.Register(Engine("a", "u1"), 0, 0);
  registry.Register(Engine("b", "u2"), 0, 0);
  EXPECT_TRUE(registry.Touch("u2", 2'500'000));
  auto gone = registry.Expire(3'500'000, 3'000'000);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].info.name, "a");
  EXPECT_EQ(registry.size(), 1u);
}

// The record of `id`, wherever the store keeps it.
std::optional<protocol::TaskRecord> Find(const TaskStore& store, const TaskId& id) {
  protocol::TaskRecord scratch;
  const protocol::TaskRecord* r = store.Find(id, &scratch);
  if (!r) return std::nullopt;
  return *r;
}

protocol::Header Request(uint64_t n) {
  return {TaskId{7, n}, protocol::MsgType::kTaskRequest, "client-1", 1'000'000};
}

TEST(Store, RecordsFollowTheTaskLifecycle) {
  auto store = TaskStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  protocol::TaskSpec spec;
  spec.label = "x";
  (*store)->Submitted(Request(1), {}, spec, {"header", "meta", "content"});
  EXPECT_EQ(Find(**store, TaskId{7, 1})->state, TaskState::kWaiting);
  (*store)->Assigned(TaskId{7, 1}, {3, 1});
  EXPECT_EQ(Find(**store, TaskId{7, 1})->state, TaskState::kRunning);
  protocol::TaskResult result;
  result.stdout_text = "out";
  (*store)->Outcome(TaskId{7, 1}, {false, false, ErrorType::kTaskFailed, 3, 1}, result, 5);
  EXPECT_EQ(Find(**store, TaskId{7, 1})->state, TaskState::kWaiting) << "a retried attempt";
  (*store)->Outcome(TaskId{7, 1}, {true, true, ErrorType::kNone, 4, 2}, result, 9);
  const auto r = Find(**store, TaskId{7, 1});
  EXPECT_EQ(r->state, TaskState::kOk);
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(r->engine_id, 4);
  EXPECT_EQ(r->stdout_text, "out");
  EXPECT_EQ(r->client, "client-1");
  EXPECT_EQ(r->label, "x");
}

TEST(Store, SqliteKeepsRecordsAcrossReopeningAndPurges) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  {
    auto store = TaskStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (uint64_t n = 1; n <= 3; ++n) {
      (*store)->Submitted(Request(n), {}, {}, {"header", "meta", "content " + std::to_string(n)});
    }
    (*store)->Outcome(TaskId{7, 1}, {true, true, ErrorType::kNone, 0, 1}, {}, 5);
    EXPECT_EQ((*store)->unflushed(), 3u) << "one row per task, its request in it";
    ASSERT_TRUE((*store)->Flush().ok());
    EXPECT_EQ((*store)->unflushed(), 0u);
  }
  auto reopened = TaskStore::Open(path);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->size(), 3u);
  EXPECT_EQ(Find(**reopened, TaskId{7, 1})->state, TaskState::kOk);
  EXPECT_EQ((*reopened)->RequestOf(TaskId{7, 1}), nullptr) << "finished: its request is gone";
  ASSERT_NE((*reopened)->RequestOf(TaskId{7, 2}), nullptr) << "unfinished: kept for a restart";
  EXPECT_EQ((*reopened)->RequestOf(TaskId{7, 2})->frames(),
            (std::vector<std::string>{"header", "meta", "content 2"}));
  EXPECT_EQ((*reopened)->Purge({}, /*all=*/true), 1u) << "only finished records go";
  ASSERT_TRUE((*reopened)->Flush().ok());
  reopened->reset();
  auto third = TaskStore::Open(path);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->size(), 2u);
}

TEST(Store, AHeldRecordReachesTheFileWhenReleasedAndEveryOneWhenClosed) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  const auto in_file = [&] {
    auto peek = TaskStore::Open(path);  // a second connection reads what is committed
    return peek.ok() ? (*peek)->size() : size_t{999};
  };
  {
    auto store = TaskStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (uint64_t n = 1; n <= 3; ++n) {
      ASSERT_TRUE((*store)->Submitted(Request(n), {}, {}, {"header", "content"}, int64_t(n) * 100));
    }
    EXPECT_EQ((*store)->OldestHeldUs(), 100);
    ASSERT_TRUE((*store)->Flush(150).ok());
    EXPECT_EQ(in_file(), 1u) << "the first alone was released";
    EXPECT_EQ((*store)->OldestHeldUs(), 200);
    ASSERT_TRUE((*store)->Outcome(TaskId{7, 2}, {true, true, ErrorType::kNone, 0, 1}, {}, 5));
    ASSERT_TRUE((*store)->Flush(150).ok());
    EXPECT_EQ(in_file(), 2u) << "the second ended: written, final";
    EXPECT_EQ((*store)->OldestHeldUs(), 300);
  }
  // Closed: the third, still held, was written.
  auto reopened = TaskStore::Open(path);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->size(), 3u);
  EXPECT_EQ(Find(**reopened, TaskId{7, 2})->state, TaskState::kOk);
  ASSERT_NE((*reopened)->RequestOf(TaskId{7, 3}), nullptr) << "unfinished: its request kept";
  EXPECT_EQ((*reopened)->OldestHeldUs(), INT64_MAX);
}

TEST(Store, WithoutAFileNothingIsHeld) {
  auto store = TaskStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Submitted(Request(1), {}, {}, {"r"}, 100));
  EXPECT_EQ((*store)->OldestHeldUs(), INT64_MAX);
  ASSERT_TRUE((*store)->Flush(0).ok()) << "nothing to release";
  EXPECT_EQ((*store)->unflushed(), 0u);
}

TEST(Store, AFinalRecordNeverGoesBackWhenTheMonitorRepeatsItself) {
  auto store = TaskStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  const TaskId id{7, 1};
  EXPECT_TRUE((*store)->Submitted(Request(1), {}, {}, {"h", "m", "c"}));
  EXPECT_TRUE((*store)->Assigned(id, {0, 1}));
  EXPECT_TRUE((*store)->Outcome(id, {true, true, ErrorType::kNone, 0, 1}, {}, 5));
  EXPECT_EQ((*store)->RequestOf(id), nullptr);
  // The same batch again (the scheduler resent what was not acknowledged).
  EXPECT_FALSE((*store)->Submitted(Request(1), {}, {}, {"h", "m", "c"}));
  EXPECT_FALSE((*store)->Assigned(id, {0, 1}));
  EXPECT_FALSE((*store)->Outcome(id, {false, false, ErrorType::kEngineError, 0, 1}, {}, 6));
  EXPECT_EQ(Find(**store, id)->state, TaskState::kOk);
  EXPECT_EQ((*store)->RequestOf(id), nullptr);
}

// The counts a status query reads, as a scan of every record gives them.
void ExpectTalliesMatchTheRecords(const TaskStore& store) {
  int64_t waiting = 0;
  std::map<int32_t, TaskStore::EngineTally> scanned;
  store.ForEachRecord([&](const TaskId&, const protocol::TaskRecord& r) {
    if (r.state == TaskState::kWaiting) {
      ++waiting;
    } else if (r.engine_id && r.state == TaskState::kRunning) {
      ++scanned[*r.engine_id].running;
    } else if (r.engine_id && (r.state == TaskState::kOk || r.state == TaskState::kError)) {
      ++scanned[*r.engine_id].finished;
    }
  });
  EXPECT_EQ(store.waiting(), waiting);
  for (const auto& [engine, tally] : store.by_engine()) {
    EXPECT_EQ(tally.running, scanned[engine].running) << "engine " << engine;
    EXPECT_EQ(tally.finished, scanned[engine].finished) << "engine " << engine;
  }
  for (const auto& [engine, tally] : scanned) {
    EXPECT_EQ(store.by_engine().count(engine), 1u) << "engine " << engine;
  }
}

TEST(Store, StatusCountsFollowEveryChangeWithoutAScan) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  {
    auto store = TaskStore::Open(path);
    ASSERT_TRUE(store.ok());
    TaskStore& s = **store;
    for (uint64_t n = 1; n <= 6; ++n) s.Submitted(Request(n), {}, {}, {"h", "m", "c"});
    ExpectTalliesMatchTheRecords(s);
    EXPECT_EQ(s.waiting(), 6);
    s.Assigned(TaskId{7, 1}, {1, 1});
    s.Assigned(TaskId{7, 2}, {1, 1});
    s.Assigned(TaskId{7, 3}, {2, 1});
    ExpectTalliesMatchTheRecords(s);
    s.Outcome(TaskId{7, 1}, {true, true, ErrorType::kNone, 1, 1}, {}, 5);
    s.Outcome(TaskId{7, 2}, {false, false, ErrorType::kEngineError, 1, 1}, {}, 5);  // retried
    s.Outcome(TaskId{7, 4}, {true, false, ErrorType::kTaskAborted, std::nullopt, 0}, {}, 5);
    s.Outcome(TaskId{7, 1}, {true, true, ErrorType::kNone, 1, 1}, {}, 6);  // repeated
    ExpectTalliesMatchTheRecords(s);
    EXPECT_EQ(s.waiting(), 3);
    EXPECT_EQ(s.by_engine().at(1).finished, 1);
    EXPECT_EQ(s.by_engine().at(2).running, 1);
    EXPECT_EQ(s.Purge({TaskId{7, 1}, TaskId{7, 1}}, false), 1u) << "listed twice, gone once";
    ExpectTalliesMatchTheRecords(s);
    ASSERT_TRUE(s.Flush().ok());
  }
  auto reopened = TaskStore::Open(path);
  ASSERT_TRUE(reopened.ok());
  ExpectTalliesMatchTheRecords(**reopened);
  EXPECT_EQ((*reopened)->waiting(), 3);
}

// Runs one query on a database file and gives its first column, row by row.
std::vector<std::string> Query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> rows;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
      while (sqlite3_step(stmt) == SQLITE_ROW) {
        const auto* text = sqlite3_column_text(stmt, 0);
        rows.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return rows;
}

TEST(Store, ATaskIsOneRowInTheOrderRecordedItsRequestGoneOnceItEnds) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  {
    auto store = TaskStore::Open(path);
    ASSERT_TRUE(store.ok());
    TaskStore& s = **store;
    for (uint64_t n = 1; n <= 3; ++n) s.Submitted(Request(n), {}, {}, {"h", "m", "c"});
    ASSERT_TRUE(s.Flush().ok());
    s.Assigned(TaskId{7, 2}, {1, 1});
    ASSERT_TRUE(s.Flush().ok());
    s.Outcome(TaskId{7, 2}, {true, true, ErrorType::kNone, 1, 1}, {}, 5);
    s.Submitted(Request(4), {}, {}, {"h", "m", "c"});
    ASSERT_TRUE(s.Flush().ok());
  }
  const auto ids = Query(path, "SELECT hex(id) FROM tasks ORDER BY seq");
  ASSERT_EQ(ids.size(), 4u) << "rewritten in place, never a second row";
  const auto requests = Query(path, "SELECT request IS NULL FROM tasks ORDER BY seq");
  EXPECT_EQ(requests, (std::vector<std::string>{"0", "1", "0", "0"}))
      << "only the finished task's request is gone";
  auto reopened = TaskStore::Open(path);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(Find(**reopened, TaskId{7, 2})->state, TaskState::kOk);
  EXPECT_EQ(Find(**reopened, TaskId{7, 3})->state, TaskState::kWaiting);
  EXPECT_EQ((*reopened)->RequestOf(TaskId{7, 2}), nullptr);
  ASSERT_NE((*reopened)->RequestOf(TaskId{7, 4}), nullptr);
  // A record changed after the reopen is rewritten in its row, not added.
  (*reopened)->Outcome(TaskId{7, 3}, {true, true, ErrorType::kNone, 1, 1}, {}, 6);
  ASSERT_TRUE((*reopened)->Flush().ok());
  EXPECT_EQ(Query(path, "SELECT count(*) FROM tasks"), (std::vector<std::string>{"4"}));
  EXPECT_EQ(Query(path, "SELECT count(*) FROM tasks WHERE request IS NULL"),
            (std::vector<std::string>{"2"}));
}

TEST(Store, ARecordPurgedAndMadeAgainIsOneRow) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  auto store = TaskStore::Open(path);
  ASSERT_TRUE(store.ok());
  TaskStore& s = **store;
  for (const bool flushed_between : {true, false}) {
    const uint64_t n = flushed_between ? 1 : 2;
    s.Submitted(Request(n), {}, {}, {"h", "m", "c"});
    s.Outcome(TaskId{7, n}, {true, true, ErrorType::kNone, 1, 1}, {}, 5);
    if (flushed_between) {
      ASSERT_TRUE(s.Flush().ok());
    }
    EXPECT_EQ(s.Purge({TaskId{7, n}}, false), 1u);
    s.Submitted(Request(n), {}, {}, {"h", "m", "again"});  // the same id, a new task
    ASSERT_TRUE(s.Flush().ok());
    EXPECT_EQ(
        Query(path, "SELECT count(*) FROM tasks WHERE hex(id) = '" + TaskId{7, n}.ToHex() + "'"),
        (std::vector<std::string>{"1"}))
        << (flushed_between ? "flushed before the purge" : "purged before any flush");
  }
  store->reset();
  auto reopened = TaskStore::Open(path);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(Find(**reopened, TaskId{7, 2})->state, TaskState::kWaiting);
  EXPECT_EQ((*reopened)->RequestOf(TaskId{7, 2})->frames()[2], "again");
}

TEST(Store, AFileFromTheFirstLayoutIsCarriedOverWithItsRequests) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  protocol::TaskRecord done, queued;
  done.id = TaskId{7, 1};
  done.state = TaskState::kOk;
  queued.id = TaskId{7, 2};
  queued.state = TaskState::kWaiting;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE tasks (id BLOB PRIMARY KEY, record BLOB NOT NULL) "
                           "WITHOUT ROWID;"
                           "CREATE TABLE requests (id BLOB PRIMARY KEY, frames BLOB NOT NULL) "
                           "WITHOUT ROWID;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_stmt* insert = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO tasks VALUES (?1, ?2)", -1, &insert, nullptr),
              SQLITE_OK);
    for (const auto* r : {&done, &queued}) {
      char key[16];
      r->id.ToBytes(key);
      const std::string blob = protocol::EncodeBody(*r);
      sqlite3_bind_blob(insert, 1, key, 16, SQLITE_TRANSIENT);
      sqlite3_bind_blob(insert, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(insert), SQLITE_DONE);
      sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO requests VALUES (?1, ?2)", -1, &insert, nullptr),
              SQLITE_OK);
    char key[16];
    queued.id.ToBytes(key);
    const std::string frames = protocol::EncodeBody(protocol::FrameList{{"h", "m", "c 2"}});
    sqlite3_bind_blob(insert, 1, key, 16, SQLITE_TRANSIENT);
    sqlite3_bind_blob(insert, 2, frames.data(), static_cast<int>(frames.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(insert), SQLITE_DONE);
    sqlite3_finalize(insert);
    sqlite3_close(db);
  }
  auto store = TaskStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->size(), 2u);
  EXPECT_EQ(Find(**store, TaskId{7, 1})->state, TaskState::kOk);
  ASSERT_NE((*store)->RequestOf(TaskId{7, 2}), nullptr);
  EXPECT_EQ((*store)->RequestOf(TaskId{7, 2})->frames(), (std::vector<std::string>{"h", "m", "c 2"}));
  store->reset();
  EXPECT_EQ(Query(path, "SELECT name FROM sqlite_master WHERE type = 'table'"),
            (std::vector<std::string>{"tasks", "finished_by_engine", "finished_counts", "jobs"}));
  EXPECT_EQ(Query(path, "PRAGMA user_version"), (std::vector<std::string>{"5"}));
}

TEST(Store, AnUnwritableDatabaseIsAClearError) {
  auto store = TaskStore::Open("/proc/no/such/dir/tasks.db");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("tasks.db"), std::string::npos);
}

}  // namespace
}  // namespace ztask::hub

namespace ztask::hub {
namespace {

TEST(Registry, ListingShowsWhatSupervisorsReport) {
  EngineRegistry registry;
  registry.Register(Engine("a", "u1"), 0, 0);
  registry.Register(Engine("b", "u2"), 0, 0);
  registry.SetSupervised({"a", EngineState::kStarting, 1, "restart 1"});
  registry.SetSupervised({"b", EngineState::kFailed, 3, "gave up"});
  EXPECT_EQ(registry.UuidOfName("b"), "u2");
  registry.Unregister("u2");
  EXPECT_FALSE(registry.UuidOfName("b").has_value());
  auto listing = registry.Listing();
  ASSERT_EQ(listing.size(), 2u);
  EXPECT_EQ(listing[0].name, "a");
  EXPECT_EQ(listing[0].state, EngineState::kRunning) << "a live engine is running, whatever was reported";
  EXPECT_EQ(listing[0].restarts, 1);
  EXPECT_EQ(listing[1].name, "b");
  EXPECT_EQ(listing[1].state, EngineState::kFailed);
  EXPECT_EQ(listing[1].id, 1) << "a failed engine keeps its id";
}

StoreOptions Durability(bool power) {
  StoreOptions options;
  options.power = power;
  return options;
}

TEST(Store, PowerDurabilitySyncsEveryCommitAndProcessDurabilityDoesNot) {
  ztask::testing::TempDir dir;
  auto power = TaskStore::Open((dir.path() / "power.db").string(), Durability(true));
  ASSERT_TRUE(power.ok()) << power.status().ToString();
  EXPECT_EQ((*power)->synchronous_level(), 2) << "FULL";
  auto process = TaskStore::Open((dir.path() / "process.db").string(), Durability(false));
  ASSERT_TRUE(process.ok());
  EXPECT_EQ((*process)->synchronous_level(), 1) << "NORMAL";
  auto memory = TaskStore::Open(":memory:", Durability(true));
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ((*memory)->synchronous_level(), 0) << "no database";
}

// ---- retention: finished records beyond keep_finished live in the file ----

StoreOptions Keeping(size_t finished) {
  StoreOptions options;
  options.keep_finished = finished;
  return options;
}

// Records `count` tasks 7/first.. on engine 3, finished ok (with an output)
// but the last `open` of them, which stay waiting with their requests.
void Record(TaskStore& store, uint64_t first, uint64_t count, uint64_t open = 0) {
  for (uint64_t n = first; n < first + count; ++n) {
    ASSERT_TRUE(store.Submitted(Request(n), {}, {}, {"h", "m", "c" + std::to_string(n)}));
    if (n >= first + count - open) continue;
    ASSERT_TRUE(store.Assigned(TaskId{7, n}, {3, 1}));
    protocol::TaskResult result;
    result.stdout_text = "out " + std::to_string(n);
    ASSERT_TRUE(store.Outcome(TaskId{7, n}, {true, true, ErrorType::kNone, 3, 1}, result, 5));
  }
}

// Every id the store can page through, from the start.
std::vector<TaskId> AllIds(const TaskStore& store, size_t page) {
  std::vector<TaskId> all;
  std::optional<TaskId> after;
  while (true) {
    auto ids = store.IdsAfter(after, page);
    all.insert(all.end(), ids.begin(), ids.end());
    if (ids.size() < page) return all;
    after = ids.back();
  }
}

TEST(Store, FinishedRecordsBeyondWhatIsKeptAreReadFromTheFile) {
  ztask::testing::TempDir dir;
  auto store = TaskStore::Open((dir.path() / "tasks.db").string(), Keeping(10));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  TaskStore& s = **store;
  ASSERT_NO_FATAL_FAILURE(Record(s, 1, 100, /*open=*/5));
  EXPECT_GT(s.size(), 10u) << "nothing leaves memory before it is written";
  ASSERT_TRUE(s.Flush().ok());
  EXPECT_EQ(s.size(), 15u) << "5 unfinished and the 10 latest finished";
  EXPECT_TRUE(s.has_evicted());
  const auto first = Find(s, TaskId{7, 1});
  ASSERT_TRUE(first) << "the oldest is read from the file";
  EXPECT_EQ(first->state, TaskState::kOk);
  EXPECT_EQ(first->stdout_text, "out 1");
  EXPECT_EQ(s.by_engine().at(3).finished, 95) << "counts cover every record";
  EXPECT_EQ(s.waiting(), 5);
  // What the monitor repeats for a record let go of changes nothing, and
  // never makes a second row.
  EXPECT_FALSE(s.Submitted(Request(1), {}, {}, {"h", "m", "c"}));
  EXPECT_FALSE(s.Outcome(TaskId{7, 1}, {false, true, ErrorType::kEngineError, 3, 1}, {}, 9));
  ASSERT_TRUE(s.Flush().ok());
  const auto ids = AllIds(s, 7);
  ASSERT_EQ(ids.size(), 100u) << "every record once, in memory or not";
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_EQ(Find(s, TaskId{7, 1})->state, TaskState::kOk);
  EXPECT_EQ(s.by_engine().at(3).finished, 95);
  // A listed purge reaches records in the file only.
  EXPECT_EQ(s.Purge({TaskId{7, 1}, TaskId{7, 2}, TaskId{7, 99}}, false), 2u)
      << "7/99 is unfinished: it stays";
  ASSERT_TRUE(s.Flush().ok());
  EXPECT_FALSE(Find(s, TaskId{7, 1}));
  EXPECT_EQ(s.by_engine().at(3).finished, 93);
  EXPECT_EQ(AllIds(s, 1000).size(), 98u);
}

TEST(Store, ARestartReadsTheUnfinishedAndTheLatestFinishedOnly) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  {
    auto store = TaskStore::Open(path, Keeping(1000000));
    ASSERT_TRUE(store.ok());
    ASSERT_NO_FATAL_FAILURE(Record(**store, 1, 2000, /*open=*/3));
    ASSERT_TRUE((*store)->Flush().ok());
    EXPECT_EQ((*store)->size(), 2000u);
  }
  auto reopened = TaskStore::Open(path, Keeping(50));
  ASSERT_TRUE(reopened.ok());
  TaskStore& s = **reopened;
  EXPECT_EQ(s.size(), 53u) << "3 unfinished and the 50 latest finished";
  EXPECT_EQ(s.by_engine().at(3).finished, 1997);
  EXPECT_EQ(s.waiting(), 3);
  ASSERT_NE(s.RequestOf(TaskId{7, 2000}), nullptr) << "an unfinished task's request";
  EXPECT_EQ(Find(s, TaskId{7, 1950})->state, TaskState::kOk);
  EXPECT_EQ(Find(s, TaskId{7, 1})->stdout_text, "out 1") << "from the file";
  EXPECT_EQ(AllIds(s, 300).size(), 2000u);
  // Purging every finished record reaches the file too.
  EXPECT_EQ(s.Purge({}, /*all=*/true), 1997u);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_FALSE(Find(s, TaskId{7, 1}));
  EXPECT_EQ(s.by_engine().at(3).finished, 0);
  ASSERT_TRUE(s.Flush().ok());
  reopened->reset();
  auto third = TaskStore::Open(path, Keeping(50));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->size(), 3u);
  EXPECT_EQ((*third)->by_engine().count(3) ? (*third)->by_engine().at(3).finished : 0, 0);
  EXPECT_EQ(AllIds(**third, 10).size(), 3u);
}

TEST(Store, AFileOfTheEarlierLayoutIsConvertedOnce) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  {
    // Layout 2: no column marking finished rows, no indexes, no counts.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE tasks (seq INTEGER PRIMARY KEY, id BLOB NOT NULL, "
                           "record BLOB NOT NULL, request BLOB); PRAGMA user_version = 2;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_stmt* insert = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO tasks (id, record) VALUES (?1, ?2)", -1, &insert,
                       nullptr);
    for (uint64_t n = 1; n <= 30; ++n) {
      protocol::TaskRecord r;
      r.id = TaskId{7, n};
      r.state = n <= 15 ? TaskState::kOk : n <= 20 ? TaskState::kError : TaskState::kRunning;
      r.engine_id = 4;
      const std::string id = r.id.ToBytes(), blob = protocol::EncodeBody(r);
      sqlite3_bind_blob(insert, 1, id.data(), 16, SQLITE_TRANSIENT);
      sqlite3_bind_blob(insert, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(insert), SQLITE_DONE);
      sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    sqlite3_close(db);
  }
  for (int open = 0; open < 2; ++open) {
    auto store = TaskStore::Open(path, Keeping(5));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->size(), 15u) << "10 running and the 5 latest finished";
    EXPECT_EQ((*store)->by_engine().at(4).finished, 20);
    EXPECT_EQ((*store)->by_engine().at(4).running, 10);
    EXPECT_EQ((*store)->ok(), 15);
    EXPECT_EQ((*store)->failed(), 5);
    EXPECT_EQ(Find(**store, TaskId{7, 1})->state, TaskState::kOk);
  }
}

// The counts by outcome cover the whole history, not what is in memory:
// kept across a restart that reads only the latest records, and lowered by
// a purge.
TEST(Store, OutcomeCountsCoverTheWholeHistory) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  {
    auto store = TaskStore::Open(path, Keeping(2));
    ASSERT_TRUE(store.ok());
    for (uint64_t n = 1; n <= 10; ++n) {
      protocol::Header h;
      h.id = TaskId{9, n};
      (*store)->Submitted(h, {}, {}, {"x"});
      protocol::OutcomeMeta meta;
      meta.final = true;
      meta.ok = n <= 7;
      meta.error_type = meta.ok ? ErrorType::kNone : ErrorType::kTaskFailed;
      (*store)->Outcome(h.id, meta, {}, 1);
    }
    protocol::Header waiting;
    waiting.id = TaskId{9, 11};
    (*store)->Submitted(waiting, {}, {}, {"x"});
    EXPECT_EQ((*store)->ok(), 7);
    EXPECT_EQ((*store)->failed(), 3);
    EXPECT_EQ((*store)->waiting(), 1);
    ASSERT_TRUE((*store)->Flush().ok());
  }
  auto store = TaskStore::Open(path, Keeping(2));
  ASSERT_TRUE(store.ok());
  EXPECT_LE((*store)->size(), 3u) << "only the latest finished are read";
  EXPECT_EQ((*store)->ok(), 7);
  EXPECT_EQ((*store)->failed(), 3);
  EXPECT_EQ((*store)->waiting(), 1);
  EXPECT_EQ((*store)->Purge({TaskId{9, 1}, TaskId{9, 9}}, false), 2u);
  EXPECT_EQ((*store)->ok(), 6);
  EXPECT_EQ((*store)->failed(), 2);
  ASSERT_TRUE((*store)->Flush().ok());
  store->reset();
  auto again = TaskStore::Open(path, Keeping(2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->ok(), 6);
  EXPECT_EQ((*again)->failed(), 2);
  EXPECT_EQ((*again)->Purge({}, true), 8u);
  EXPECT_EQ((*again)->ok(), 0);
  EXPECT_EQ((*again)->failed(), 0);
}

// A job's counts follow its tasks, leave out the failed ones submitted
// again, and survive a restart that reads only the latest records; a page
// of a job's records finds those only in the file.
TEST(Store, JobCountsFollowTheirTasksAcrossARestart) {
  ztask::testing::TempDir dir;
  const std::string path = (dir.path() / "tasks.db").string();
  auto submit = [](TaskStore& store, uint64_t n, const std::string& job,
                   std::optional<TaskId> replaces = std::nullopt) {
    protocol::Header h;
    h.id = TaskId{9, n};
    h.date_us = static_cast<int64_t>(n) * 1000;
    protocol::TaskSpec spec;
    spec.kind = "command";
    spec.argv = {"true"};
    spec.job = job;
    spec.array_index = static_cast<int64_t>(n);
    spec.replaces = replaces;
    store.Submitted(h, {}, spec, {"x"});
    return h.id;
  };
  auto finish = [](TaskStore& store, const TaskId& id, bool ok, int64_t at) {
    protocol::OutcomeMeta meta;
    meta.final = true;
    meta.ok = ok;
    meta.error_type = ok ? ErrorType::kNone : ErrorType::kTaskFailed;
    protocol::TaskResult result;
    result.completed_us = at;
    store.Outcome(id, meta, result, at);
  };
  {
    auto store = TaskStore::Open(path, Keeping(2));
    ASSERT_TRUE(store.ok());
    for (uint64_t n = 1; n <= 10; ++n) {
      const TaskId id = submit(**store, n, n <= 8 ? "sweep" : "other");
      if (n <= 6) finish(**store, id, n != 3, 50000 + static_cast<int64_t>(n));
    }
    // Task 3 failed: submitted again as 11.
    submit(**store, 11, "sweep", TaskId{9, 3});
    const auto& sweep = (*store)->jobs().at("sweep");
    EXPECT_EQ(sweep.ok, 5);
    EXPECT_EQ(sweep.failed, 0);
    EXPECT_EQ(sweep.replaced, 1);
    EXPECT_EQ(sweep.waiting, 3) << "7, 8 and 11";
    EXPECT_EQ(sweep.first_submit_us, 1000);
    EXPECT_EQ(sweep.last_finish_us, 50006);
    EXPECT_EQ((*store)->jobs().at("other").waiting, 2);
    EXPECT_EQ((*store)->NewJobName(), "1");
    ASSERT_TRUE((*store)->Flush().ok());
  }
  auto store = TaskStore::Open(path, Keeping(2));
  ASSERT_TRUE(store.ok());
  const auto& sweep = (*store)->jobs().at("sweep");
  EXPECT_EQ(sweep.ok, 5);
  EXPECT_EQ(sweep.failed, 0);
  EXPECT_EQ(sweep.replaced, 1);
  EXPECT_EQ(sweep.waiting, 3);
  EXPECT_EQ(sweep.first_submit_us, 1000);
  EXPECT_EQ(sweep.last_finish_us, 50006);
  protocol::TaskRecord scratch;
  const protocol::TaskRecord* replaced = (*store)->Find(TaskId{9, 3}, &scratch);
  ASSERT_NE(replaced, nullptr);
  EXPECT_EQ(replaced->replaced_by, (TaskId{9, 11}));
  ASSERT_TRUE(replaced->spec.has_value());
  EXPECT_EQ(replaced->spec->argv, (std::vector<std::string>{"true"}));
  const std::vector<TaskId> ids = (*store)->IdsAfter(std::nullopt, 100, std::string("sweep"));
  EXPECT_EQ(ids.size(), 9u) << "1-8 and 11, read from the file and memory";
  EXPECT_EQ((*store)->IdsAfter(TaskId{9, 8}, 100, std::string("sweep")),
            (std::vector<TaskId>{TaskId{9, 11}}));
  EXPECT_EQ((*store)->IdsAfter(std::nullopt, 100, std::string("none")).size(), 0u);
  // Purging every finished record leaves the unfinished counted.
  (*store)->Purge({}, true);
  EXPECT_EQ((*store)->jobs().at("sweep").ok, 0);
  EXPECT_EQ((*store)->jobs().at("sweep").waiting, 3);
}

}  // namespace
}  // namespace ztask::hub
