// Small files a run writes whole: atomically (AtomicFile: a temporary beside
// the target, flushed, renamed over it, the directory synced; links written
// through; a killed writer's temporary removed by the next write), so a
// reader sees the old or the new one.
#pragma once

#include <string>

namespace ember::train {

/// Writes `content` to `path` atomically; an Error names the path on failure.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace ember::train
