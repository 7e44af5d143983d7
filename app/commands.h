// Subcommands of allreduce-lab. Each takes the arguments after its name and returns the
// process exit code; errors are printed as one line on stderr.
#pragma once

#include <string>
#include <vector>

namespace arl::app {

int planCommand(const std::vector<std::string>& args);
int benchCommand(const std::vector<std::string>& args);

}  // namespace arl::app
