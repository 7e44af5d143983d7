// Subcommands of allreduce-lab. Each registers its options on the lab's CLI11 app; once the
// command line has parsed, run() checks the values (bad ones are refused with one line on
// stderr and exit code 2 before anything starts), does the work and returns the exit code.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace arl::app {

class Command {
 public:
  virtual ~Command() = default;
  virtual int run() = 0;
  CLI::App* app = nullptr;  // the subcommand's own CLI11 app
};

// `args`: the command line (without argv[0]), read to name flags as the user spelt them;
// it must outlive the command.
std::unique_ptr<Command> addPlanCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addBenchCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addExportCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addGuiCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addCalibrateCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addLessonCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addImportCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addKeysCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addModelCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addTrainCommand(CLI::App& lab, const std::vector<std::string>& args);
std::unique_ptr<Command> addSoakCommand(CLI::App& lab, const std::vector<std::string>& args);

}  // namespace arl::app
