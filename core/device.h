// Where a tensor's memory lives: the host or one CUDA device.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { cpu, cuda };

/// A device: `Device::cpu()` or `Device::cuda(n)`; parsed from "cpu", "cuda", "cuda:1".
struct Device {
    DeviceType type = DeviceType::cpu;
    int index = 0;  // always 0 for the CPU

    static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
    static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
    /// Parses "cpu", "cuda" or "cuda:N"; throws ember::Error on anything else.
    static Device parse(const std::string& s);

    bool is_cpu() const { return type == DeviceType::cpu; }
    bool is_cuda() const { return type == DeviceType::cuda; }
    std::string str() const;
    friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

/// True when ember was compiled with its CUDA backend.
bool cuda_built();
/// Number of CUDA devices usable now (0 without a driver, a device or the backend).
int cuda_device_count();

}  // namespace ember
