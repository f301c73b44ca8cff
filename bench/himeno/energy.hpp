// GPU energy and host CPU time for the benchmark rows. Energy is NVML's total-energy counter
// (millijoules since the driver loaded), read through libnvidia-ml.so.1 loaded at run time, so
// the benchmark starts — and says "unavailable" — where the driver's NVML is missing.
#pragma once
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/resource.h>

#include <optional>
#include <string>
#include <vector>

namespace gv::himeno::bench {

/// User + system CPU time of the whole process so far, in microseconds.
inline double process_cpu_us() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

class EnergyMeter {
 public:
  EnergyMeter() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) {
      why_ = "libnvidia-ml.so.1 not found";
      return;
    }
    init_ = reinterpret_cast<Ret (*)()>(dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<Ret (*)()>(dlsym(lib_, "nvmlShutdown"));
    by_bus_ = reinterpret_cast<Ret (*)(const char*, Device*)>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    energy_ = reinterpret_cast<Ret (*)(Device, unsigned long long*)>(dlsym(lib_, "nvmlDeviceGetTotalEnergyConsumption"));
    if (init_ == nullptr || shutdown_ == nullptr || by_bus_ == nullptr || energy_ == nullptr) {
      why_ = "libnvidia-ml.so.1 lacks the energy counter functions";
      return;
    }
    if (init_() != 0) {
      why_ = "nvmlInit failed";
      return;
    }
    ready_ = true;
  }
  ~EnergyMeter() {
    if (ready_) (void)shutdown_();
    if (lib_ != nullptr) dlclose(lib_);
  }
  EnergyMeter(const EnergyMeter&) = delete;
  EnergyMeter& operator=(const EnergyMeter&) = delete;

  /// Why energy is unavailable ("" when it is available).
  const std::string& why() const { return why_; }

  /// The counters of the given CUDA devices, summed, in millijoules; nullopt when NVML cannot
  /// read one of them (why() then says which).
  std::optional<double> total_mj(const std::vector<int>& cuda_devices) {
    if (!ready_) return std::nullopt;
    double sum = 0.0;
    for (int d : cuda_devices) {
      char bus[64] = {};
      Device h = nullptr;
      unsigned long long mj = 0;
      if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) != cudaSuccess || by_bus_(bus, &h) != 0 || energy_(h, &mj) != 0) {
        why_ = "NVML cannot read the energy counter of CUDA device " + std::to_string(d);
        ready_ = false;
        return std::nullopt;
      }
      sum += double(mj);
    }
    return sum;
  }

 private:
  using Ret = int;            // nvmlReturn_t; 0 is NVML_SUCCESS
  using Device = struct Nvml*;  // nvmlDevice_t
  void* lib_ = nullptr;
  Ret (*init_)() = nullptr;
  Ret (*shutdown_)() = nullptr;
  Ret (*by_bus_)(const char*, Device*) = nullptr;
  Ret (*energy_)(Device, unsigned long long*) = nullptr;
  bool ready_ = false;
  std::string why_;
};

/// CPU time and energy over a set of timed repetitions: call begin() and end() around each.
struct CostMeter {
  EnergyMeter& energy;
  std::vector<int> gpus;
  double cpu_us = 0.0;
  std::optional<double> energy_mj = 0.0;
  double cpu0 = 0.0;
  std::optional<double> e0;

  void begin() {
    e0 = energy.total_mj(gpus);
    cpu0 = process_cpu_us();
  }
  void end() {
    cpu_us += process_cpu_us() - cpu0;
    const std::optional<double> e1 = energy.total_mj(gpus);
    if (e0 && e1 && energy_mj) *energy_mj += *e1 - *e0;
    else energy_mj.reset();
  }
};

}  // namespace gv::himeno::bench
