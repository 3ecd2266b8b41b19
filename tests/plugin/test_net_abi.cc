// ABI checks of libnccl-net-conflux.so: the four structs are exported under NCCL's names, are named
// "Conflux", fill every member NCCL requires and leave the optional ones NULL; our result codes agree
// with the installed nccl.h where there is one. (Field offsets are static_asserts in nccl_net_abi.h.)
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "plugin/nccl_net_abi.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define CONFLUX_HAVE_NCCL_H 1
#endif

namespace conflux::plugintest {
namespace {

namespace abi = conflux::plugin::abi;

void* symbol(const char* name) {
  void* lib = ::dlopen(CONFLUX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << ::dlerror();
  return lib != nullptr ? ::dlsym(lib, name) : nullptr;
}

template <class Net>
void checkCommon(const Net* net) {
  ASSERT_NE(net, nullptr);
  EXPECT_STREQ(net->name, "Conflux");
  for (const void* fn : {(const void*)net->init, (const void*)net->devices, (const void*)net->getProperties,
                         (const void*)net->listen, (const void*)net->connect, (const void*)net->accept,
                         (const void*)net->regMr, (const void*)net->regMrDmaBuf, (const void*)net->deregMr,
                         (const void*)net->isend, (const void*)net->irecv, (const void*)net->iflush,
                         (const void*)net->test, (const void*)net->closeSend, (const void*)net->closeRecv,
                         (const void*)net->closeListen}) {
    EXPECT_NE(fn, nullptr);
  }
  EXPECT_EQ(net->getDeviceMr, nullptr);
  EXPECT_EQ(net->irecvConsumed, nullptr);
}

TEST(PluginAbi, ExportsV8) { checkCommon(static_cast<abi::NetV8*>(symbol("ncclNetPlugin_v8"))); }

TEST(PluginAbi, ExportsV9) {
  auto* net = static_cast<abi::NetV9*>(symbol("ncclNetPlugin_v9"));
  checkCommon(net);
  EXPECT_NE(net->makeVDevice, nullptr);
}

TEST(PluginAbi, ExportsV10) {
  auto* net = static_cast<abi::NetV10*>(symbol("ncclNetPlugin_v10"));
  checkCommon(net);
  EXPECT_NE(net->makeVDevice, nullptr);
}

TEST(PluginAbi, ExportsV11) {
  auto* net = static_cast<abi::NetV11*>(symbol("ncclNetPlugin_v11"));
  checkCommon(net);
  EXPECT_NE(net->makeVDevice, nullptr);
  EXPECT_NE(net->finalize, nullptr);  // NCCL requires it from v11 on
  EXPECT_EQ(net->setNetAttr, nullptr);
}

TEST(PluginAbi, NoOtherVersionsOrInternals) {
  EXPECT_EQ(symbol("ncclNetPlugin_v7"), nullptr);
  EXPECT_EQ(symbol("ncclNetPlugin_v12"), nullptr);
  EXPECT_EQ(symbol("_ZN7conflux3log5writeENS0_5LevelEjPKcz"), nullptr);  // conflux::log::write stays hidden
}

TEST(PluginAbi, ResultCodesAgreeWithInstalledNcclH) {
#ifdef CONFLUX_HAVE_NCCL_H
  // NCCL reads the codes our plugin returns as its own ncclResult_t.
  EXPECT_EQ(int(ncclSuccess), abi::kSuccess);
  EXPECT_EQ(int(ncclUnhandledCudaError), abi::kUnhandledCudaError);
  EXPECT_EQ(int(ncclSystemError), abi::kSystemError);
  EXPECT_EQ(int(ncclInternalError), abi::kInternalError);
  EXPECT_EQ(int(ncclInvalidArgument), abi::kInvalidArgument);
  EXPECT_EQ(int(ncclInvalidUsage), abi::kInvalidUsage);
  EXPECT_EQ(int(ncclRemoteError), abi::kRemoteError);
  EXPECT_EQ(int(ncclInProgress), abi::kInProgress);
#else
  GTEST_SKIP() << "no nccl.h installed: the result codes are compared where one is";
#endif
}

}  // namespace
}  // namespace conflux::plugintest
