// Topology file reading and writing with nlohmann::json; see topology_json.h and docs/topology.md.
#include "core/topology/topology_json.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace conflux::topo {

namespace {

using Json = nlohmann::ordered_json;

std::string hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, value);
  return buf;
}

Json pciToJson(const Machine& m, const PciNode& n) {
  Json j;
  j["id"] = n.id;
  if (n.parent >= 0) j["parent"] = m.pci[static_cast<size_t>(n.parent)].id;
  j["kind"] = pciKindName(n.kind);
  if (n.kind != PciKind::HostBridge) {
    j["vendor"] = hex(n.vendorId, 4);
    j["device"] = hex(n.deviceId, 4);
    j["class"] = hex(n.classId, 4);
    j["linkGBps"] = n.linkGBps;
  }
  return j;
}

// Reads fields of one JSON object, naming "<what>: field '<path>'" in every error. Unknown fields are
// errors too, so that a typo in a hand-written fixture does not silently become a default.
class ObjectReader {
 public:
  ObjectReader(const Json& obj, std::string what, std::string path, std::initializer_list<const char*> known)
      : obj_(obj), what_(std::move(what)), path_(std::move(path)) {
    if (!obj_.is_object()) fail(path_.empty() ? "(top level)" : path_, "must be an object");
    for (const auto& item : obj_.items()) {
      bool ok = false;
      for (const char* k : known) ok = ok || item.key() == k;
      if (!ok) fail(name(item.key()), "unknown field");
    }
  }

  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw Error(Code::InvalidArgument, what_ + ": field '" + field + "': " + problem);
  }

  const Json* find(const char* key, bool required) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) fail(name(key), "missing");
      return nullptr;
    }
    return &*it;
  }

  std::string str(const char* key, bool required, std::string def = "") const {
    const Json* v = find(key, required);
    if (v == nullptr) return def;
    if (!v->is_string()) fail(name(key), "expected a string, got " + v->dump());
    return v->get<std::string>();
  }

  int64_t integer(const char* key, bool required, int64_t def, int64_t lo, int64_t hi) const {
    const Json* v = find(key, required);
    if (v == nullptr) return def;
    if (!v->is_number_integer()) fail(name(key), "expected an integer, got " + v->dump());
    int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) {
      fail(name(key), std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return x;
  }

  double number(const char* key, bool required, double def) const {
    const Json* v = find(key, required);
    if (v == nullptr) return def;
    if (!v->is_number() || v->get<double>() < 0) fail(name(key), "expected a non-negative number, got " + v->dump());
    return v->get<double>();
  }

  bool boolean(const char* key, bool def) const {
    const Json* v = find(key, false);
    if (v == nullptr) return def;
    if (!v->is_boolean()) fail(name(key), "expected true or false, got " + v->dump());
    return v->get<bool>();
  }

  unsigned hexField(const char* key, unsigned max) const {
    std::string s = str(key, false, "0");
    char* end = nullptr;
    errno = 0;
    unsigned long x = std::strtoul(s.c_str(), &end, 16);
    if (s.empty() || *end != '\0' || errno != 0 || x > max || s[0] == '-' || s[0] == '+') {
      fail(name(key), "expected hex digits, got '" + s + "'");
    }
    return static_cast<unsigned>(x);
  }

  std::vector<int> cpus(const char* key, bool required) const {
    std::string s = str(key, required);
    try {
      return parseCpuList(s);
    } catch (const Error& e) {
      fail(name(key), e.what());
    }
  }

  std::string busId(const char* key) const {
    std::string s = str(key, true);
    try {
      return normalizeBusId(s);
    } catch (const Error& e) {
      fail(name(key), e.what());
    }
  }

  const Json& array(const char* key, bool required) const {
    static const Json empty = Json::array();
    const Json* v = find(key, required);
    if (v == nullptr) return empty;
    if (!v->is_array()) fail(name(key), "expected an array, got " + v->dump());
    return *v;
  }

 private:
  const Json& obj_;
  std::string what_;
  std::string path_;
};

std::string indexed(const char* key, size_t i) { return std::string(key) + "[" + std::to_string(i) + "]"; }

void readPci(const ObjectReader& top, const std::string& what, Machine& m) {
  const Json& arr = top.array("pci", false);
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string path = indexed("pci", i);
    ObjectReader r(arr[i], what, path, {"id", "parent", "kind", "vendor", "device", "class", "linkGBps"});
    PciNode n;
    std::string kind = r.str("kind", true);
    if (!parsePciKind(kind, &n.kind)) {
      r.fail(r.name("kind"), "'" + kind + "' is not one of hostbridge, bridge, gpu, nic, other");
    }
    if (n.kind == PciKind::HostBridge) {
      n.id = r.str("id", true);
      if (n.id.rfind("pci", 0) != 0) r.fail(r.name("id"), "a host bridge is named pci<domain>:<bus>, got '" + n.id + "'");
    } else {
      n.id = r.busId("id");
    }
    std::string parent = r.str("parent", false);
    if (!parent.empty()) {
      n.parent = findPci(m, parent);
      if (n.parent < 0) r.fail(r.name("parent"), "'" + parent + "' is not an earlier entry of pci");
    }
    n.vendorId = static_cast<uint16_t>(r.hexField("vendor", 0xffff));
    n.deviceId = static_cast<uint16_t>(r.hexField("device", 0xffff));
    n.classId = r.hexField("class", 0xffffff);
    n.linkGBps = r.number("linkGBps", false, 0);
    m.pci.push_back(n);
  }
}

}  // namespace

std::string toJson(const Machine& m) {
  Json top;
  top["version"] = kTopologyFileVersion;
  top["hostname"] = m.hostname;
  top["source"] = m.source;
  top["packages"] = m.packages;
  top["cores"] = m.cores;
  top["cpus"] = formatCpuList(m.cpus);
  top["numa"] = Json::array();
  for (const NumaNode& n : m.numa) {
    top["numa"].push_back(Json{{"id", n.id}, {"cpus", formatCpuList(n.cpus)}, {"memoryBytes", n.memoryBytes}});
  }
  top["numaDistances"] = m.numaDistances;
  top["pci"] = Json::array();
  for (const PciNode& n : m.pci) top["pci"].push_back(pciToJson(m, n));
  top["gpus"] = Json::array();
  for (const Gpu& g : m.gpus) {
    top["gpus"].push_back(Json{{"name", g.name}, {"pciBusId", g.pciBusId}, {"numa", g.numaNode}});
  }
  top["nics"] = Json::array();
  for (const Nic& n : m.nics) {
    top["nics"].push_back(Json{{"name", n.name}, {"pciBusId", n.pciBusId}, {"speedGbps", n.speedGbps},
                               {"numa", n.numaNode}, {"rdma", n.rdma}, {"fabricDomain", n.fabricDomain}});
  }
  // One line per top-level field, one line per element of a list: diffs of fixtures stay readable.
  std::ostringstream out;
  out << "{\n";
  size_t k = 0;
  for (const auto& item : top.items()) {
    out << "  " << Json(item.key()).dump() << ": ";
    const Json& v = item.value();
    if (v.is_array() && !v.empty() && v.front().is_structured()) {
      out << "[\n";
      for (size_t i = 0; i < v.size(); ++i) out << "    " << v[i].dump() << (i + 1 < v.size() ? ",\n" : "\n");
      out << "  ]";
    } else {
      out << v.dump();
    }
    out << (++k < top.size() ? ",\n" : "\n");
  }
  out << "}\n";
  return out.str();
}

Machine fromJson(const std::string& text, const std::string& what) {
  Json top;
  try {
    top = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers out of range (out_of_range)
    throw Error(Code::InvalidArgument, what + ": not valid JSON: " + e.what());
  }
  ObjectReader r(top, what, "", {"version", "hostname", "source", "packages", "cores", "cpus", "numa",
                                 "numaDistances", "pci", "gpus", "nics"});
  int64_t version = r.integer("version", true, 0, INT32_MIN, INT32_MAX);
  if (version != kTopologyFileVersion) {
    r.fail("version", "unsupported version " + std::to_string(version) + " (this build reads " +
                          std::to_string(kTopologyFileVersion) + ")");
  }
  Machine m;
  m.hostname = r.str("hostname", false);
  m.source = r.str("source", false);
  m.cpus = r.cpus("cpus", true);
  m.packages = static_cast<int>(r.integer("packages", false, 1, 1, 1 << 16));
  m.cores = static_cast<int>(r.integer("cores", false, static_cast<int64_t>(m.cpus.size()), 1, 1 << 24));
  const Json& numa = r.array("numa", true);
  for (size_t i = 0; i < numa.size(); ++i) {
    ObjectReader n(numa[i], what, indexed("numa", i), {"id", "cpus", "memoryBytes"});
    m.numa.push_back({static_cast<int>(n.integer("id", true, 0, 0, 1 << 16)), n.cpus("cpus", true),
                      static_cast<uint64_t>(n.integer("memoryBytes", false, 0, 0, INT64_MAX))});
  }
  const Json& dist = r.array("numaDistances", false);
  for (size_t i = 0; i < dist.size(); ++i) {
    if (!dist[i].is_array()) r.fail(indexed("numaDistances", i), "expected an array of integers");
    m.numaDistances.emplace_back();
    for (size_t j = 0; j < dist[i].size(); ++j) {
      if (!dist[i][j].is_number_integer() || dist[i][j].get<int64_t>() < 0 || dist[i][j].get<int64_t>() > 10000) {
        r.fail(indexed("numaDistances", i) + "[" + std::to_string(j) + "]", "expected an integer in [0, 10000]");
      }
      m.numaDistances.back().push_back(dist[i][j].get<int>());
    }
  }
  readPci(r, what, m);
  const Json& gpus = r.array("gpus", false);
  for (size_t i = 0; i < gpus.size(); ++i) {
    ObjectReader g(gpus[i], what, indexed("gpus", i), {"name", "pciBusId", "numa"});
    m.gpus.push_back({g.str("name", false), g.busId("pciBusId"),
                      static_cast<int>(g.integer("numa", false, -1, -1, 1 << 16))});
  }
  const Json& nics = r.array("nics", false);
  for (size_t i = 0; i < nics.size(); ++i) {
    ObjectReader n(nics[i], what, indexed("nics", i), {"name", "pciBusId", "speedGbps", "numa", "rdma", "fabricDomain"});
    m.nics.push_back({n.str("name", true), n.busId("pciBusId"), n.number("speedGbps", false, 0),
                      static_cast<int>(n.integer("numa", false, -1, -1, 1 << 16)), n.boolean("rdma", false),
                      n.str("fabricDomain", false)});
  }
  validate(m, what);
  return m;
}

void dumpFile(const Machine& m, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(Code::SystemError, systemErrorMessage("cannot write topology file '" + path + "'", errno));
  out << toJson(m);
  out.close();
  if (!out) throw Error(Code::SystemError, "cannot write topology file '" + path + "'");
}

Machine loadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Code::SystemError, systemErrorMessage("cannot read topology file '" + path + "'", errno));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw Error(Code::SystemError, "cannot read topology file '" + path + "'");
  return fromJson(buf.str(), "topology file '" + path + "'");
}

}  // namespace conflux::topo
