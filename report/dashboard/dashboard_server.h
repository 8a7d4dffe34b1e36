// The dashboard's HTTP server: serves routes.h's answers on ADDR:PORT from a thread of its own while a job runs
// (`pshard launch --dashboard`) or for a run directory (`pshard dashboard RUN_DIR`).
#pragma once

#include <memory>
#include <string>

#include "report/dashboard/routes.h"

namespace pshard::report::dashboard {

// "ADDR:PORT" ("127.0.0.1:8080", "0.0.0.0:0"; port 0: a free one) as given to --dashboard-listen / --listen; a
// malformed one throws pshard::Error naming `option`.
struct ListenAddress {
  std::string address = "127.0.0.1";
  int port = 0;
};
ListenAddress parse_listen_address(const std::string& text, const std::string& option);

class DashboardServer {
 public:
  // Binds at once (throws pshard::Error naming the address when it cannot) and serves until destroyed.
  DashboardServer(const ListenAddress& at, Site site);
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  int port() const;         // the bound port (the free one chosen for port 0)
  std::string url() const;  // http://ADDR:PORT/?token=TOKEN, what a browser opens

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pshard::report::dashboard
