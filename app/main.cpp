// allreduce-lab: the lab's window by default (`gui`), and subcommands for the headless lab.
// With no command, or with only options that are not --help, the window opens: those
// options are the window's (`allreduce-lab --autorun ...` is `allreduce-lab gui --autorun ...`).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#if ARL_HAVE_GPU
#include "gpu/gpu_backends.h"
#endif

int main(int argc, char** argv) {
#if ARL_HAVE_GPU
  // The lab makes no GPU backend itself; registering says that this build has them.
  arl::gpu::registerGpuBackends(-1);
#endif
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool wantsHelp = !args.empty() && (args.front() == "-h" || args.front() == "--help" ||
                                           args.front() == "--help-all");
  if (args.empty() || (args.front().rfind('-', 0) == 0 && !wantsHelp)) {
    args.insert(args.begin(), "gui");
  }
  // `allreduce-lab replay FILE [options]`: the window replaying FILE (`gui FILE`), marked as a
  // replay; with --screenshot it saves a picture of it and exits.
  if (!args.empty() && args.front() == "replay") {
    if (args.size() < 2 || args[1].rfind('-', 0) == 0) {
      std::fprintf(stderr, "allreduce-lab replay: needs a recording, FILE.arlrec\n");
      return 2;
    }
    args.front() = "gui";
  }
  std::vector<char*> argvGui = {argv[0]};
  for (std::string& a : args) argvGui.push_back(a.data());
  argc = static_cast<int>(argvGui.size());
  argv = argvGui.data();
  CLI::App lab(
      "A lab for collective communication: schedules, models and real runs, in a window or on "
      "the command line.",
      "allreduce-lab");
  lab.require_subcommand(1, 1);
  lab.footer(
      "Run 'allreduce-lab COMMAND --help' for the options of a command. 'allreduce-lab replay "
      "FILE' is 'gui FILE': the window replaying a recording.\n");
  // As in nccl-tests and most tools: a flag given twice takes the last value.
  lab.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::unique_ptr<arl::app::Command>> commands;
  commands.push_back(arl::app::addPlanCommand(lab, args));
  commands.push_back(arl::app::addModelCommand(lab, args));
  commands.push_back(arl::app::addBenchCommand(lab, args));
  commands.push_back(arl::app::addExportCommand(lab, args));
  commands.push_back(arl::app::addGuiCommand(lab, args));
  commands.push_back(arl::app::addCalibrateCommand(lab, args));
  commands.push_back(arl::app::addLessonCommand(lab, args));
  commands.push_back(arl::app::addTrainCommand(lab, args));
  commands.push_back(arl::app::addImportCommand(lab, args));
  commands.push_back(arl::app::addKeysCommand(lab, args));
  commands.push_back(arl::app::addSoakCommand(lab, args));

  std::string prog = "allreduce-lab";
  const bool known = std::any_of(commands.begin(), commands.end(), [&](const auto& c) {
    return !args.empty() && c->app->get_name() == args.front();
  });
  if (!args.empty() && args.front().rfind('-', 0) != 0 && !known) {
    std::string names;
    for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c->app->get_name();
    std::fprintf(stderr, "%s: unknown command '%s' (known: %s; see --help)\n", prog.c_str(),
                 args.front().c_str(), names.c_str());
    return 2;
  }
  try {
    lab.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(lab.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ExtrasError&) {
    // CLI11's own message lists the extras last first; name them as they were typed.
    std::string extras;
    for (const CLI::App* sub : lab.get_subcommands()) {
      prog += " " + sub->get_name();
      for (const std::string& x : sub->remaining()) extras += (extras.empty() ? "" : " ") + x;
    }
    for (const std::string& x : lab.remaining()) extras += (extras.empty() ? "" : " ") + x;
    std::fprintf(stderr, "%s: unexpected argument%s: %s (see --help)\n", prog.c_str(),
                 extras.find(' ') == std::string::npos ? "" : "s", extras.c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    // CLI11 exits with its own codes (105 and up); bad arguments exit with 2 here.
    for (const CLI::App* sub : lab.get_subcommands()) prog += " " + sub->get_name();
    std::fprintf(stderr, "%s: %s (see --help)\n", prog.c_str(), e.what());
    return 2;
  }
  for (const auto& c : commands) {
    if (!c->app->parsed()) continue;
    prog += " " + c->app->get_name();
    try {
      return c->run();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", prog.c_str(), e.what());
      return 1;
    }
  }
  return 2;  // unreachable: CLI11 requires one subcommand (gui when none is named)
}
