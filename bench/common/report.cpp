#include "report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "metadata.hpp"

namespace gv::bench {

std::string host_cpu() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) model = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  return model + " (" + std::to_string(std::thread::hardware_concurrency()) + " cores)";
}

JsonLog::~JsonLog() {
  if (f_) std::fclose(f_);
}

void JsonLog::open(const std::string& path, const std::string& device, int argc, char** argv) {
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw std::runtime_error("--json: cannot open " + path + ": " + std::strerror(errno));
  char host[256] = {};
  (void)gethostname(host, sizeof(host) - 1);
  row(metadata_json(device, command_line(argc, argv), "\"host\":\"" + json_escape(host) + "\","));
}

void JsonLog::row(const std::string& object) {
  if (!f_) return;
  std::fprintf(f_, "%s\n", object.c_str());
  std::fflush(f_);
}

}  // namespace gv::bench
