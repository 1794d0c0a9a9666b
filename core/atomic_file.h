// Writing a file so that readers and crashes only ever see the old content or
// the new, never a mix: a temporary file beside the target, fsync, rename,
// fsync of the directory. Symbolic links are written through, and temporaries
// left by killed writers are cleaned up. Guide: docs/reliability.md.
#pragma once

#include <cstddef>
#include <string>

namespace ember {

/// The name every temporary file of a write to a file called `name` starts
/// with: "." + the first 100 bytes of `name` (cut at a UTF-8 boundary) + "."
/// + 16 hex digits of the FNV-1a hash of all of `name` + ".ember-tmp-". The
/// full temporary name adds "<pid>-<n>": at most 160 bytes whatever `name`
/// is, so any valid file name can be written; hidden, and recognisable.
std::string atomic_temp_prefix(const std::string& name);

/// A file written beside its target and renamed over it by commit().
///
///     AtomicFile f(path, "save_safetensors: 'w.safetensors'");
///     f.write(bytes, n);  // as often as needed
///     f.commit();         // now, and only now, `path` has the new content
///
/// Until commit() the target is untouched. On any failure (an exception, or
/// destruction without commit) the temporary file is removed. A process
/// killed before commit leaves its temporary file behind; the next
/// successful commit to the same target removes such files (those with the
/// target's atomic_temp_prefix, owned by this user, and no longer held by a
/// live writer: each writer holds an flock on its file, which the kernel
/// releases when the process dies).
///
/// A `path` that is a symbolic link (or a chain of them) is written through:
/// the file the link points to is replaced, atomically in its own directory,
/// and the link stays a link. A link to a missing file creates it. Replacing
/// an existing file keeps its permission bits.
class AtomicFile {
  public:
    /// Creates the temporary file. `context` leads every error message.
    AtomicFile(const std::string& path, const std::string& context);
    /// Closes and removes the temporary file unless commit() succeeded.
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    /// Appends n bytes (retried on EINTR and short writes).
    void write(const void* data, size_t n);
    /// fsync, rename over the target, fsync of the directory, then removes
    /// stale temporaries of the same target (best effort, errors ignored).
    void commit();

    /// The file that commit() replaces: the path given, or what its symbolic
    /// links lead to.
    const std::string& target() const { return target_; }
    /// The temporary file being written.
    const std::string& temp_path() const { return temp_; }

  private:
    void remove_stale_temporaries() const;

    std::string context_, target_, dir_, prefix_, temp_;
    int fd_ = -1;
    bool committed_ = false;
};

}  // namespace ember
