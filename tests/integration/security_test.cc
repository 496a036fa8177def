// Security end to end: the key by default, --insecure, replays, CURVE, and
// the limits on what a client or an engine may send.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/wire.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/raw_peer.h"

namespace ztask::testing {
namespace {

using protocol::MsgType;

TEST_F(ClusterTest, EveryClusterGetsAFreshKeyInAPrivateFile) {
  StartCluster(1);
  const auto path = protocol::ConnectionFilePath(profile());
  auto first = protocol::ReadConnectionFile(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->signature_scheme, "hmac-sha256");
  EXPECT_EQ(first->key.size(), 32u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  client_.reset();
  Ran stopped = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stopped.code, 0) << stopped.err;
  running_ = false;
  StartCluster(1);
  auto second = protocol::ReadConnectionFile(path);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(first->key, second->key) << "a new cluster, a new key";

  ::chmod(path.c_str(), 0644);
  Ran readable = Ctl({"engines"});
  EXPECT_EQ(readable.code, 2);
  EXPECT_NE(readable.err.find("can be read by others"), std::string::npos) << readable.err;
  ::chmod(path.c_str(), 0600);
}

// A connection file others can read, or that is a symbolic link, is refused
// by every command with why: `taskcluster scale` once said "no cluster is
// running" instead.
TEST_F(ClusterTest, EveryCommandSaysWhyItRefusesTheConnectionFile) {
  StartCluster(1);
  client_.reset();
  const auto path = protocol::ConnectionFilePath(profile());
  const std::vector<std::vector<std::string>> commands = {
      {kBin + "/taskctl", "--profile-dir", profile(), "engines"},
      {kBin + "/taskctl", "--profile-dir", profile(), "submit", "--", "true"},
      {kBin + "/taskcluster", "scale", "2", "--profile-dir", profile()},
      {kBin + "/taskcluster", "engines", "start", "-n", "1", "--profile-dir", profile()}};
  ::chmod(path.c_str(), 0644);
  for (const auto& argv : commands) {
    Ran r = RunProgram(argv, dir_, 30);
    EXPECT_EQ(r.code, 2) << argv[1] << " " << argv[2] << ": " << r.err;
    EXPECT_NE(r.err.find("mode 0644"), std::string::npos) << argv[1] << ": " << r.err;
  }
  ::chmod(path.c_str(), 0600);
  // A link in the profile to a file of the right mode is not followed.
  const auto moved = dir_.path() / "elsewhere.json";
  std::filesystem::rename(path, moved);
  std::filesystem::create_symlink(moved, path);
  for (const auto& argv : commands) {
    Ran r = RunProgram(argv, dir_, 30);
    EXPECT_EQ(r.code, 2) << argv[1] << " " << argv[2] << ": " << r.err;
    EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << argv[1] << ": " << r.err;
  }
  std::filesystem::remove(path);
  std::filesystem::rename(moved, path);
}

// What the hub publishes to whoever connects (engines coming and going, the
// event stream) is out of reach of another account of the same host: on
// loopback both are Unix sockets inside the 0700 profile. The other
// account (nobody) subscribes to both while tasks run and gets nothing;
// the owner's subscriber gets events.
// Needs root (to run a subscriber as nobody); skipped otherwise.
TEST_F(ClusterTest, AnotherAccountOfTheHostReadsNothingTheHubPublishes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a subscriber as another account";
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  // Counts what both subscriptions receive in 4 s.
  const std::string count =
      "import sys, time, zmq\n"
      "c = zmq.Context()\n"
      "subs = []\n"
      "for e in sys.argv[1:]:\n"
      "    s = c.socket(zmq.SUB); s.setsockopt(zmq.SUBSCRIBE, b''); s.connect(e); subs.append(s)\n"
      "p = zmq.Poller()\n"
      "for s in subs: p.register(s, zmq.POLLIN)\n"
      "n, end = 0, time.monotonic() + 4\n"
      "while time.monotonic() < end:\n"
      "    for s, _ in p.poll(100):\n"
      "        s.recv_multipart(); n += 1\n"
      "print(n)\n";
  // Both listen at once (RunProgram is for one program at a time).
  auto listen = [&](std::vector<std::string> argv, const std::string& out) {
    argv.insert(argv.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" > " + out + " 2>&1"});
    return std::make_unique<ChildProcess>(argv, dir_.path() / "listeners.log");
  };
  const std::string other_out = (dir_.path() / "other.out").string();
  const std::string owner_out = (dir_.path() / "owner.out").string();
  auto other_listener =
      listen({"/usr/sbin/runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", count,
              info->hub.notifier, info->hub.events},
             other_out);
  auto owner_listener = listen({"/usr/bin/python3", "-c", count, info->hub.events}, owner_out);
  // Activity on the event stream for as long as the listeners listen: each
  // connects and subscribes at its own pace, slow under load, and the hub
  // publishes only while someone subscribes.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!owner_listener->Poll() && std::chrono::steady_clock::now() < until) {
    Submit({"--fn", "noop"});
  }
  Ran other, owner;
  other.code = other_listener->Wait(std::chrono::seconds(30)).value_or(-1);
  owner.code = owner_listener->Wait(std::chrono::seconds(30)).value_or(-1);
  other.out = ReadFile(other_out);
  owner.out = ReadFile(owner_out);
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_EQ(other.out, "0\n") << "messages another account read: " << other.out
                              << "(notifier " << info->hub.notifier << ", events "
                              << info->hub.events << ")";
  ASSERT_EQ(owner.code, 0) << owner.out;
  EXPECT_NE(owner.out, "0\n") << "the owner reads the event stream";
}

// A cluster on loopback is out of reach of every other account of the
// host: each of its sockets (and taskcluster's control socket) is a Unix
// socket inside the 0700 profile (where a TCP port on loopback would take a
// connection from anyone), so another account (nobody) cannot even connect
// to one, while the owner can.
// Needs root (to connect as another account); skipped otherwise.
TEST_F(ClusterTest, AnotherAccountOfTheHostCannotConnectToALoopbackCluster) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another account";
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  std::vector<std::string> argv = {"/usr/bin/python3", "-c",
                                   "import socket, sys\n"
                                   "for e in sys.argv[1:]:\n"
                                   "    s = socket.socket(socket.AF_UNIX)\n"
                                   "    try:\n"
                                   "        s.connect(e[len('ipc://'):]); print('connected')\n"
                                   "    except PermissionError:\n"
                                   "        print('denied')\n"};
  std::string control;
  std::ifstream(std::filesystem::path(profile()) / "cluster.control") >> control;
  const std::vector<std::string> endpoints = {
      info->hub.registration, info->hub.query,        info->hub.monitor,      info->hub.notifier,
      info->hub.events,       info->scheduler.client, info->scheduler.engine, control};
  for (const std::string& e : endpoints) {
    EXPECT_EQ(e.rfind("ipc://" + profile() + "/", 0), 0u) << e;
    argv.push_back(e);
  }
  std::string all_denied, all_connected;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    all_denied += "denied\n";
    all_connected += "connected\n";
  }
  Ran owner = RunProgram(argv, dir_, 30);
  ASSERT_EQ(owner.code, 0) << owner.err;
  EXPECT_EQ(owner.out, all_connected);
  argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", "nobody", "--"});
  Ran other = RunProgram(argv, dir_, 30);
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_EQ(other.out, all_denied);
}

// Asked for ports (--tcp: peers that dial through a tunnel), a cluster on
// loopback binds them, and runs tasks there; what the hub publishes stays
// a Unix socket in the profile.
TEST_F(ClusterTest, OnLoopbackTcpBindsPortsWhenAskedFor) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, {"--tcp"}));
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  for (const std::string& e : {info->hub.registration, info->hub.query, info->hub.monitor,
                               info->scheduler.client, info->scheduler.engine}) {
    EXPECT_EQ(e.rfind("tcp://127.0.0.1:", 0), 0u) << e;
  }
  for (const std::string& e : {info->hub.notifier, info->hub.events}) {
    EXPECT_EQ(e.rfind("ipc://" + profile() + "/", 0), 0u) << e;
  }
  auto records = Wait({Submit({"--fn", "noop"})});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
}

// A profile whose path is too long for a Unix socket (107 bytes) keeps its
// sockets from other accounts all the same: they go to this account's
// private /tmp/ztask-UID, never back to TCP loopback, and the owner runs
// tasks and reads the event stream there.
TEST_F(ClusterTest, AProfileTooLongForUnixSocketsStillPublishesOnlyToItsAccount) {
  profile_name_ = std::string(110, 'p');
  ASSERT_GT(profile().size(), 110u);
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  const std::string dir = "/tmp/ztask-" + std::to_string(::getuid());
  for (const std::string& endpoint :
       {info->hub.registration, info->hub.query, info->hub.monitor, info->hub.notifier,
        info->hub.events, info->scheduler.client, info->scheduler.engine}) {
    EXPECT_EQ(endpoint.rfind("ipc://" + dir + "/", 0), 0u) << endpoint;
  }
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::getuid());
  // The owner's monitor reads an event; the hub publishes only while
  // someone subscribes, so tasks run until it has.
  ChildProcess monitor({kBin + "/taskctl", "--profile-dir", profile(), "monitor", "--count", "1"},
                       dir_.path() / "monitor.log");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!monitor.Poll() && std::chrono::steady_clock::now() < until) Submit({"--fn", "noop"});
  EXPECT_EQ(monitor.Wait(std::chrono::seconds(5)).value_or(-1), 0) << monitor.Log();
}

TEST_F(ClusterTest, RunningWithoutAKeyNeedsInsecureAndWarns) {
  // A keyless connection file: the hub refuses it unless told --insecure.
  const auto other = dir_.path() / "keyless";
  protocol::ConnectionInfo keyless;
  keyless.signature_scheme = std::string(protocol::kSchemeNone);
  ASSERT_TRUE(protocol::WriteConnectionFile(protocol::ConnectionFilePath(other), keyless).ok());
  Ran refused = RunProgram({kBin + "/taskhub", "--profile-dir", other.string(), "--db", ":memory:"},
                           dir_, 20);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("has no key"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--insecure"), std::string::npos) << refused.err;

  std::vector<std::string> argv = {kBin + "/taskcluster", "start", "--profile-dir", profile(),
                                   "--daemonize", "-n", "1", "--insecure"};
  Ran started = RunProgram(argv, dir_);
  ASSERT_EQ(started.code, 0) << started.err;
  running_ = true;
  EXPECT_NE(started.err.find("WARNING"), std::string::npos) << started.err;
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->signature_scheme, "none");
  const std::string id = Submit({"--fn", "noop"});
  auto records = Wait({id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
}

TEST_F(ClusterTest, ACapturedRequestSentAgainDoesNotRunAgain) {
  StartCluster(1);
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  const protocol::Signer signer(info->key);
  const auto marks = dir_.path() / "marks";
  const TaskId id = TaskId::Random();
  const auto captured = CommandRequest(signer, "victim", id,
                                       {"sh", "-c", "echo ran >> " + marks.string()});
  {
    RawPeer victim(info->scheduler.client);
    victim.Send(captured);
    protocol::Frames reply;
    ASSERT_TRUE(victim.Receive(reply, 20000)) << "the genuine request is answered";
  }
  RawPeer attacker(info->scheduler.client);
  attacker.Send(captured);
  // A later genuine task through the same scheduler: once it is done, the
  // replay (sent before it) has certainly been handled.
  const std::string later = Submit({"--fn", "noop"});
  ASSERT_EQ(Wait({later}).size(), 1u);
  protocol::Frames none;
  EXPECT_FALSE(attacker.Receive(none, 200)) << "no reply to a replay";
  EXPECT_EQ(ReadFile(marks), "ran\n") << "the command ran once";
  EXPECT_TRUE(cluster::WaitFor([&] {
    return ReadFile(dir_.path() / "profile" / "logs" / (RoleLogName("scheduler") + ".log"))
               .find("replayed message") !=
           std::string::npos;
  }, std::chrono::seconds(20)));
}

TEST_F(ClusterTest, CurveEncryptsAndLetsInOnlyTheClustersKeys) {
  StartCluster(1, {"--curve"});
  const auto path = protocol::ConnectionFilePath(profile());
  auto info = protocol::ReadConnectionFile(path);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->curve.enabled());
  struct stat st {};
  ASSERT_EQ(::stat((std::filesystem::path(profile()) / "curve-server.secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(path).find(ReadFile(std::filesystem::path(profile()) / "curve-server.secret")
                                    .substr(0, 40)),
            std::string::npos)
      << "the servers' secret key is not in the connection file";

  // The cluster's own clients and engines work as before.
  const std::string id = Submit({"--fn", "echo", "--args", "[1, 2]"});
  auto records = Wait({id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[0]["result"], Value({1, 2}));

  // A peer with the HMAC key but no CURVE keys, and one with the server's
  // public key but a client key of its own: neither gets through.
  const protocol::Signer signer(info->key);
  RawPeer plain(info->scheduler.client);
  // Refused at the handshake, a send may not even be queued: either way
  // nothing gets through.
  (void)plain.TrySend(CommandRequest(signer, "plain", TaskId::Random(), {"true"}));
  protocol::CurveKeys stranger = info->curve;
  char public_key[41], secret_key[41];
  ASSERT_EQ(zmq_curve_keypair(public_key, secret_key), 0);
  stranger.client_public = public_key;
  stranger.client_secret = secret_key;
  RawPeer impostor(info->scheduler.client, &stranger);
  (void)impostor.TrySend(CommandRequest(signer, "impostor", TaskId::Random(), {"true"}));
  protocol::Frames none;
  EXPECT_FALSE(plain.Receive(none, 1000));
  EXPECT_FALSE(impostor.Receive(none, 1000));
  const auto log = std::filesystem::path(profile()) / "logs" / (RoleLogName("scheduler") + ".log");
  EXPECT_TRUE(cluster::WaitFor([&] {
    const std::string text = ReadFile(log);
    return text.find("does not use CURVE") != std::string::npos &&
           text.find("unknown client key") != std::string::npos;
  }, std::chrono::seconds(20))) << ReadFile(log);
  auto all = client_->FetchAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u) << "only the genuine task reached the cluster";
}

TEST_F(ClusterTest, TasksOverALimitFailWithAClearError) {
  StartCluster(1, {"--max-task-bytes", "2000", "--max-dependencies", "2",
                   "--max-queued-per-client", "3", "--max-result-bytes", "1000",
                   "--max-output-bytes", "100"});
  auto wait_one = [&](const TaskId& id) {
    EXPECT_TRUE(client_->Wait({id}, 60).ok());
    auto records = client_->Fetch({id});
    EXPECT_TRUE(records.ok());
    return records.ok() && records->size() == 1 ? (*records)[0] : TaskInfo{};
  };
  TaskOptions big;
  big.function = "echo";
  big.args = std::string(3000, 'x');
  auto too_big = client_->Submit(big);
  ASSERT_TRUE(too_big.ok());
  TaskInfo r = wait_one(*too_big);
  EXPECT_EQ(r.error_type, ErrorType::kTaskRejected);
  EXPECT_NE(r.error_message.find("--max-task-bytes"), std::string::npos) << r.error_message;

  TaskOptions many;
  many.function = "noop";
  many.after.ids = {TaskId::Random(), TaskId::Random(), TaskId::Random()};
  auto too_many = client_->Submit(many);
  ASSERT_TRUE(too_many.ok());
  r = wait_one(*too_many);
  EXPECT_EQ(r.error_type, ErrorType::kTaskRejected);
  EXPECT_NE(r.error_message.find("--max-dependencies"), std::string::npos) << r.error_message;

  TaskOptions large_result;
  large_result.function = "echo";
  large_result.args = std::string(1500, 'y');
  auto result = client_->Submit(large_result);
  ASSERT_TRUE(result.ok());
  r = wait_one(*result);
  EXPECT_EQ(r.error_type, ErrorType::kTaskFailed);
  EXPECT_NE(r.error_message.find("--max-result-bytes"), std::string::npos) << r.error_message;

  TaskOptions loud;
  loud.command = {"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' 'z'"};
  auto output = client_->Submit(loud);
  ASSERT_TRUE(output.ok());
  r = wait_one(*output);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.stdout_text.size(), 100u);
  EXPECT_TRUE(r.stdout_truncated);

  // Three tasks of this client wait or run; a fourth is refused, and once
  // they are done there is room again.
  TaskOptions slow;
  slow.function = "sleep";
  slow.args = 0.5;
  std::vector<TaskId> queued;
  for (int i = 0; i < 3; ++i) {
    auto id = client_->Submit(slow);
    ASSERT_TRUE(id.ok());
    queued.push_back(*id);
  }
  TaskOptions quick;
  quick.function = "noop";
  auto fourth = client_->Submit(quick);
  ASSERT_TRUE(fourth.ok());
  r = wait_one(*fourth);
  EXPECT_EQ(r.error_type, ErrorType::kTaskRejected);
  EXPECT_NE(r.error_message.find("--max-queued-per-client"), std::string::npos) << r.error_message;
  ASSERT_TRUE(client_->Wait(queued, 60).ok());
  auto fifth = client_->Submit(quick);
  ASSERT_TRUE(fifth.ok());
  EXPECT_TRUE(wait_one(*fifth).ok());
}

TEST(HubLimits, RegistrationsPastMaxEnginesAreRefusedWithAReason) {
  TempDir dir;
  const auto profile = dir.path() / "profile";
  ChildProcess hub({kBin + "/taskhub", "--profile-dir", profile.string(), "--db", ":memory:",
                    "--max-engines", "1"},
                   dir.path() / "hub.log");
  Result<protocol::ConnectionInfo> info = Status::NotFound("");
  ASSERT_TRUE(cluster::WaitFor([&] {
    info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
    return info.ok() && !info->hub.registration.empty();
  }, std::chrono::seconds(20)));
  const protocol::Signer signer(info->key);
  RawPeer engine(info->hub.registration);
  auto register_as = [&](const std::string& name) {
    protocol::RegistrationRequest request;
    request.uuid = name + "-uuid";
    request.name = name;
    engine.Send(protocol::EncodeMessage(
        signer, {TaskId::Random(), MsgType::kRegistrationRequest, "s", base::WallMicros()},
        std::nullopt, protocol::Empty{}, request));
    protocol::Frames reply;
    EXPECT_TRUE(engine.Receive(reply, 10000));
    auto decoded = protocol::DecodeMessage<MsgType::kRegistrationReply>(signer, {},
                                                                        protocol::Views(reply));
    EXPECT_TRUE(decoded.ok());
    return decoded.ok() ? decoded->content : protocol::RegistrationReply{};
  };
  EXPECT_TRUE(register_as("first").ok);
  const protocol::RegistrationReply second = register_as("second");
  EXPECT_FALSE(second.ok);
  EXPECT_NE(second.error.find("--max-engines"), std::string::npos) << second.error;
  EXPECT_TRUE(register_as("first").ok) << "a known name may always come back";
}

}  // namespace
}  // namespace ztask::testing
