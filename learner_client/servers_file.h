// Copyright dreplay authors.
//
// servers_file.h: the buffer nodes a learner trains on, as a file it
// watches (learner --servers_file), so that an edge site can join while the
// learner trains: add its line, and within the watch interval the learner
// connects to it off its own thread and takes it in at its next batch
// (MultiNodeIo::Offer).
//
// The file: one node per line, "HOST:PORT" or "HOST:PORT LINK" (LINK as
// --link: none, 10km-25g, ... or DELAY_US:GBPS; without one, the learner's
// --link); blank lines and text after '#' are ignored.
//
//   # edge sites
//   10.0.0.2:7471 10km-25g
//   10.0.1.2:7471 1000km-1g
//
// A line removed from the file does not remove its node: a node that is gone
// is passed over (multi_node_source.h) until it stages again.
//
//   ASSIGN_OR_RETURN(std::vector<NodeAddress> nodes, ReadServersFile(path));
//   ASSIGN_OR_RETURN(auto watcher, ServersFileWatcher::Start(options, known, join));
//
// Thread safety: the functions are pure; a watcher runs `join` on a thread
// of its own (owned: the destructor stops and joins it).

#ifndef DREPLAY_LEARNER_CLIENT_SERVERS_FILE_H_
#define DREPLAY_LEARNER_CLIENT_SERVERS_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/connection_flags.h"
#include "common/mutex.h"

namespace dreplay::learner {

struct NodeAddress {
  std::string server;  // HOST:PORT
  std::string link;    // empty: the learner's default link
};

// The nodes `text` lists, in order. InvalidArgument naming the line for a
// malformed one (not HOST:PORT, more than two fields, an unknown link) or
// an address listed twice.
absl::StatusOr<std::vector<NodeAddress>> ParseServersFile(absl::string_view text);
// The same from a file; NotFound or another error when it cannot be read.
absl::StatusOr<std::vector<NodeAddress>> ReadServersFile(const std::string& path);

// `base` with the node's host, port and (when it names one) link.
// InvalidArgument for a bad address or link.
absl::StatusOr<client::ConnectionOptions> NodeConnection(const client::ConnectionOptions& base,
                                                         const NodeAddress& node);

struct ServersFileWatcherOptions {
  std::string path;
  // How often the file is read again (> 0).
  absl::Duration interval = absl::Seconds(1);

  absl::Status Validate() const;
};

class ServersFileWatcher {
 public:
  // Connects a node and hands it to the learner; runs on the watcher's
  // thread and may block up to its own deadlines. An error is logged and
  // the node tried again at the next reading.
  using Join = std::function<absl::Status(const NodeAddress&)>;

  // Starts watching; `known` are the addresses already in use (never
  // joined again).
  static absl::StatusOr<std::unique_ptr<ServersFileWatcher>> Start(
      const ServersFileWatcherOptions& options, const std::vector<std::string>& known, Join join);
  // Stops and joins the thread (after a join in flight returns).
  ~ServersFileWatcher();

  ServersFileWatcher(const ServersFileWatcher&) = delete;
  ServersFileWatcher& operator=(const ServersFileWatcher&) = delete;

  // Nodes joined so far; readings of the file that failed (unreadable or
  // malformed: the last good list stands).
  uint64_t joined() const;
  uint64_t bad_readings() const;

 private:
  ServersFileWatcher(const ServersFileWatcherOptions& options,
                     const std::vector<std::string>& known, Join join);
  void Run();
  // One reading: joins what is new.
  void ReadOnce();

  const ServersFileWatcherOptions options_;
  const Join join_;
  std::set<std::string> known_;  // the watcher's thread only
  mutable Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar stopped_;  // signalled when stop_ is set
  uint64_t joined_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bad_readings_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_SERVERS_FILE_H_
