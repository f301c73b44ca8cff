#include "report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>

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

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string command_line(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (i > 0) cmd += ' ';
    if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+@%") ==
                          std::string::npos) {
      cmd += a;
      continue;
    }
    cmd += '\'';
    for (const char c : a) cmd += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += '\'';
  }
  return cmd;
}

JsonLog::~JsonLog() {
  if (f_) std::fclose(f_);
}

void JsonLog::open(const std::string& path, const std::string& device, int argc, char** argv) {
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw std::runtime_error("--json: cannot open " + path + ": " + std::strerror(errno));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &utc);
  char host[256] = {};
  (void)gethostname(host, sizeof(host) - 1);
  row("{\"bench\":\"meta\",\"commit\":" + json_string(build_commit()) + ",\"device\":" + json_string(device) +
      ",\"host\":" + json_string(host) + ",\"date\":\"" + date + "\",\"command\":" + json_string(command_line(argc, argv)) +
      "}");
}

void JsonLog::row(const std::string& object) {
  if (!f_) return;
  std::fprintf(f_, "%s\n", object.c_str());
  std::fflush(f_);
}

}  // namespace gv::bench
