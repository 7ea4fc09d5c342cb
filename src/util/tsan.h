// ThreadSanitizer annotations, empty in every other build.
//
// UnsyncedAccess marks the adapter's accesses to registered application
// memory (an RDMA payload placed, an atomic carried out, a READ's data read)
// as outside TSan's view: the verbs leave them unsynchronised with the
// application's threads, which order their own accesses by completions or by
// a protocol with the peer across processes — nothing TSan can see. On the
// host fabric those accesses come from another process anyway; on the UDP
// fabric from this process's receive thread.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace softverbs {

class UnsyncedAccess {
 public:
#if defined(__SANITIZE_THREAD__)
  UnsyncedAccess() { __tsan_ignore_thread_begin(); }
  ~UnsyncedAccess() { __tsan_ignore_thread_end(); }
#else
  UnsyncedAccess() {}  // user-provided: a guard, not an unused variable
  ~UnsyncedAccess() {}
#endif
  UnsyncedAccess(const UnsyncedAccess&) = delete;
  UnsyncedAccess& operator=(const UnsyncedAccess&) = delete;
};

}  // namespace softverbs
