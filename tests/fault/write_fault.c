// A full disk on demand, for the fault tests (tests/fault/*.sh): preloaded into a harness
// process (LD_PRELOAD), it makes writes to chosen files fail as a full disk makes them fail.
//
//   HARNESS_FAULT_FILE=<text>  the files whose path (as opened) contains <text>
//   HARNESS_FAULT_WRITE=<n>    the n-th write to such files (1: the first) fails, and every one
//                              after it: a disk that is full stays full   (default 1)
//   HARNESS_FAULT_FROM_OPEN=<m> only writes to the m-th such file opened, and later ones, count:
//                              "the second time run.h5 is written" is FROM_OPEN=2 (default 1)
//   HARNESS_FAULT_COUNT=<k>    only k writes fail (then the disk has room again)  (default: all)
//   HARNESS_FAULT_ERRNO=<e>    ENOSPC (default), EDQUOT or EIO
//   HARNESS_FAULT_CALL=<call>  which call fails: write (default: write/pwrite/writev), fsync
//                              (fsync/fdatasync), close, or rename (of a matching source path);
//                              HARNESS_FAULT_WRITE and _COUNT then count that call
//
// It sees what goes through the C library's open/fopen and write/pwrite/writev calls: HDF5's
// sec2 driver, std::ofstream, and the harness's own writers (checkpoints, text files). A failed
// write returns -1 with errno set, exactly like the kernel's. On exit it prints how many writes it
// saw and failed to stderr when HARNESS_FAULT_REPORT=1.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

static atomic_bool watched[MAX_FDS];  // an fd of a file that counts
static atomic_long opens_seen, writes_seen, writes_failed;

static const char* fault_file(void) {
  const char* f = getenv("HARNESS_FAULT_FILE");
  return f && *f ? f : NULL;
}

static long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  return v && *v ? atol(v) : fallback;
}

static int fault_errno(void) {
  const char* e = getenv("HARNESS_FAULT_ERRNO");
  if (e && strcmp(e, "EDQUOT") == 0) return EDQUOT;
  if (e && strcmp(e, "EIO") == 0) return EIO;
  return ENOSPC;
}

static void watch(int fd, const char* path) {
  if (fd < 0 || fd >= MAX_FDS) return;
  const char* f = fault_file();
  const int matches = f && path && strstr(path, f) != NULL;
  const long ordinal = matches ? atomic_fetch_add(&opens_seen, 1) + 1 : 0;
  atomic_store(&watched[fd], matches && ordinal >= env_long("HARNESS_FAULT_FROM_OPEN", 1));
}

// The call that fails: "write", "fsync", "close" or "rename".
static int faulted_call(const char* call) {
  const char* c = getenv("HARNESS_FAULT_CALL");
  return strcmp(c && *c ? c : "write", call) == 0;
}

// Whether this call, one of those counted, is one that fails.
static int counted_call_fails(void) {
  const long n = atomic_fetch_add(&writes_seen, 1) + 1;
  const long first = env_long("HARNESS_FAULT_WRITE", 1), count = env_long("HARNESS_FAULT_COUNT", -1);
  if (n < first || (count >= 0 && n >= first + count)) return 0;
  atomic_fetch_add(&writes_failed, 1);
  errno = fault_errno();
  return 1;
}

// Whether this `call` on `fd` is one that fails.
static int fails_on(const char* call, int fd) {
  if (fd < 0 || fd >= MAX_FDS || !atomic_load(&watched[fd]) || !faulted_call(call)) return 0;
  return counted_call_fails();
}

static int fails(int fd) { return fails_on("write", fd); }

// The C library's own `name`, found once.
#define NEXT(name)                        \
  static __typeof__(&name) next_##name; \
  if (!next_##name) next_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

static mode_t mode_arg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

// The open family: the real call, then the descriptor watched when its path matches.
#define OPEN_LIKE(name, params, args)        \
  int name params {                          \
    NEXT(name);                              \
    va_list ap;                              \
    va_start(ap, flags);                     \
    const mode_t mode = mode_arg(flags, ap); \
    va_end(ap);                              \
    const int fd = next_##name args;         \
    watch(fd, path);                         \
    return fd;                               \
  }
OPEN_LIKE(open, (const char* path, int flags, ...), (path, flags, mode))
OPEN_LIKE(open64, (const char* path, int flags, ...), (path, flags, mode))
OPEN_LIKE(openat, (int dir, const char* path, int flags, ...), (dir, path, flags, mode))
OPEN_LIKE(openat64, (int dir, const char* path, int flags, ...), (dir, path, flags, mode))

int creat(const char* path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char* path, mode_t mode) { return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

FILE* fopen(const char* path, const char* mode) {
  NEXT(fopen);
  FILE* f = next_fopen(path, mode);
  if (f) watch(fileno(f), path);
  return f;
}

FILE* fopen64(const char* path, const char* mode) {
  NEXT(fopen64);
  FILE* f = next_fopen64(path, mode);
  if (f) watch(fileno(f), path);
  return f;
}

// A failing close still releases the descriptor, as the kernel's does (an NFS or quota error
// reported at close).
int close(int fd) {
  NEXT(close);
  const int fail = fails_on("close", fd);
  if (fd >= 0 && fd < MAX_FDS) atomic_store(&watched[fd], 0);
  const int result = next_close(fd);
  if (!fail) return result;
  errno = fault_errno();
  return -1;
}

int fsync(int fd) {
  NEXT(fsync);
  return fails_on("fsync", fd) ? -1 : next_fsync(fd);
}

int fdatasync(int fd) {
  NEXT(fdatasync);
  return fails_on("fsync", fd) ? -1 : next_fdatasync(fd);
}

int rename(const char* from, const char* to) {
  NEXT(rename);
  const char* f = fault_file();
  if (f && from && strstr(from, f) && faulted_call("rename") && counted_call_fails()) return -1;
  return next_rename(from, to);
}

ssize_t write(int fd, const void* buf, size_t n) {
  NEXT(write);
  return fails(fd) ? -1 : next_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  NEXT(pwrite);
  return fails(fd) ? -1 : next_pwrite(fd, buf, n, at);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t at) {
  NEXT(pwrite64);
  return fails(fd) ? -1 : next_pwrite64(fd, buf, n, at);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  NEXT(writev);
  return fails(fd) ? -1 : next_writev(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t at) {
  NEXT(pwritev);
  return fails(fd) ? -1 : next_pwritev(fd, iov, count, at);
}

__attribute__((destructor)) static void report(void) {
  if (env_long("HARNESS_FAULT_REPORT", 0) == 1)
    fprintf(stderr, "write_fault: %ld files '%s' opened, %ld writes counted, %ld failed\n",
            atomic_load(&opens_seen), fault_file() ? fault_file() : "", atomic_load(&writes_seen),
            atomic_load(&writes_failed));
}
