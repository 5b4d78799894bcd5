// Copyright dreplay authors.
//
// peer_bench_redis_server.h: a redis-server child process for the Redis arm
// of tools/bench/peer_bench, on loopback, in a temporary directory, without
// persistence.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<RedisServerProcess> redis,
//                    RedisServerProcess::Start("redis-server"));
//   ... connect to 127.0.0.1:redis->port() ...
//   RETURN_IF_ERROR(redis->Stop());
//
// The port is probed free (bound to port 0, released, handed to Redis); if
// Redis loses the race for it, Start tries another. The child gets SIGTERM
// if the thread that started it dies. Not thread-safe: one owner.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_REDIS_SERVER_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dreplay::tools {

class RedisServerProcess {
 public:
  // Starts `binary` (a path, or a name looked up in PATH) and waits until it
  // answers PING (10 s). NotFound when the binary is not there; Unavailable
  // with the tail of its log when it does not come up.
  static absl::StatusOr<std::unique_ptr<RedisServerProcess>> Start(const std::string& binary);

  RedisServerProcess(const RedisServerProcess&) = delete;
  RedisServerProcess& operator=(const RedisServerProcess&) = delete;
  ~RedisServerProcess();  // Stop(), its status dropped

  int port() const { return port_; }
  // CPU time (user + system) the server has used, in seconds, from
  // /proc/PID/stat (clock-tick resolution); 0 once stopped or unreadable.
  double CpuSeconds() const;

  // SIGTERM, then SIGKILL after 10 s; waits for the child and removes the
  // directory. Idempotent. Internal when the child did not exit cleanly.
  absl::Status Stop();

 private:
  RedisServerProcess(std::string dir, pid_t pid, int port) : dir_(dir), pid_(pid), port_(port) {}

  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_REDIS_SERVER_H_
