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

