// allreduce-lab: subcommands for the headless lab. The window arrives with the UI issue.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

namespace {

void usage(std::FILE* to) {
  std::fputs(
      "usage: allreduce-lab <command> [options]\n"
      "commands:\n"
      "  plan    print, verify, model and optionally run a collective schedule in process\n"
      "  bench   run collectives on worker processes and report nccl-tests' metrics\n"
      "run 'allreduce-lab <command> --help' for the options of a command\n",
      to);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    usage(stderr);
    return 2;
  }
  const std::string cmd = args.front();
  args.erase(args.begin());
  try {
    if (cmd == "plan") return arl::app::planCommand(args);
    if (cmd == "bench") return arl::app::benchCommand(args);
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
      usage(stdout);
      return 0;
    }
    std::fprintf(stderr, "allreduce-lab: unknown command '%s'\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce-lab %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
