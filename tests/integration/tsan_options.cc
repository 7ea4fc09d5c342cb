// TSan's defaults for the integration binary (TSAN_OPTIONS still overrides).
//
// A process with threads still running sleeps atexit_sleep_ms before TSan
// finishes it (1000 by default), so that those threads can race with exit.
// Every child of every test here exits that way (harness.cc: exit(), for the
// sanitizers' hooks), with the library's threads alive: the default second
// per child was most of the TSan run (datapath-map: 47 s, about 30 of them
// asleep). 100 ms still lets those threads run against exit; the race
// detection itself and the exit-time report are unchanged.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "atexit_sleep_ms=100"; }
#endif

// The adapter's own accesses to registered application memory — an RDMA
// WRITE's or SEND's payload placed, an atomic carried out, a READ response's
// data read — are unsynchronised with the application's threads by the
// verbs' contract: an application orders its accesses by completions or by
// its own protocol with the peer, across processes, which TSan cannot see.
// On the host fabric those accesses come from another process (invisible to
// TSan); on the UDP fabric (the roce-* entries) from this process's receive
// thread, so TSan reports them. Only those functions are exempt; everything
// else the receive thread does is checked.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "race:softverbs::transport::LocalMemory::write\n"
         "race:softverbs::transport::LocalMemory::read\n"
         "race:softverbs::transport::LocalMemory::do_atomic\n"
         "race:softverbs::transport::answer_request\n";
}
#endif
