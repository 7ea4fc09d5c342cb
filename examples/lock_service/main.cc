// lock_service: a lock on RDMA atomics, several clients against one server;
// the exit status is the verdict. README.md beside this file explains it.
#include <CLI/CLI.hpp>

#include "roles.h"

int main(int argc, char** argv) {
  lock_service::Options o;
  CLI::App app{"A lock on RDMA atomics: clients take it with CMP_AND_SWP, READ and WRITE the counter it "
               "protects, release it; the server checks that no update was lost."};
  app.add_option("-c,--clients", o.clients, "client processes")->check(CLI::Range(1, 64));
  app.add_option("-n,--iterations", o.iterations, "critical sections per client")->check(CLI::Range(1, 10000000));
  app.add_flag("--fence,!--no-fence", o.fence, "IBV_SEND_FENCE on the release (default: on)");
  app.add_flag("--uc", o.uc, "UC QPs instead: show that ibv_post_send refuses an atomic on UC, then stop");
  app.add_flag("--roce", o.roce,
               "softverbs_roce0 over UDP, each process a RoCE host of its own on 127.0.0.<n> "
               "(private device files)");
  app.add_flag("--private-device", o.private_device,
               "a device instance of this run's own (/dev/shm/softverbs-lock-<pid>), removed at the end");
  app.add_option("-d,--device", o.device, "device name (default softverbs0, softverbs_roce0 with --roce)");
  app.add_option("-t,--timeout-s", o.timeout_s, "time limit for the whole run; every process is killed after it")
      ->check(CLI::Range(1, 3600));
  app.add_option("--json", o.json, "also write the verdict and the figures to this file (JSON)");
  CLI11_PARSE(app, argc, argv);
  return lock_service::launch(o);
}
