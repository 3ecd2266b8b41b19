// Whether this file is built with AddressSanitizer (and so LeakSanitizer): gcc defines
// __SANITIZE_ADDRESS__, clang 14 answers __has_feature(address_sanitizer) instead. Also the LeakSanitizer
// suppressions of the programs that check their forked ranks for leaks.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define CONFLUX_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONFLUX_TEST_ASAN 1
#endif
#endif
#ifndef CONFLUX_TEST_ASAN
#define CONFLUX_TEST_ASAN 0
#endif

// libfabric 1.17's rxm frees neither a connection's 376-byte record after its peer aborted nor some of its
// buffers when an endpoint closes over a broken connection. They are the provider's leaks, not ours. The
// pattern hides every leak whose allocation passes through libfabric.so; that Conflux closes the libfabric
// objects holding descriptors is checked by descriptor counts instead (Lifecycle.*, conflux-fault-matrix).
// A program returns it from its one definition of __lsan_default_suppressions.
#define CONFLUX_TEST_LSAN_SUPPRESSIONS "leak:libfabric.so\n"
