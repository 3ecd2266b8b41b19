// Whether this file is built with AddressSanitizer (and so LeakSanitizer): gcc defines
// __SANITIZE_ADDRESS__, clang 14 answers __has_feature(address_sanitizer) instead.
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
