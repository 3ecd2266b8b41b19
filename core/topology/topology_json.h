// The topology file: a Machine as JSON (format in docs/topology.md), written by `conflux-info
// --topology-json` and read when CONFLUX_TOPO_FILE is set.
#pragma once

#include <string>

#include "core/topology/topology.h"

namespace conflux::topo {

/// Version written in the "version" field; loading any other version fails.
inline constexpr int kTopologyFileVersion = 1;

/// The machine as indented JSON text (ends with a newline).
std::string toJson(const Machine& m);

/// Parses and validates JSON text. Errors are Error(InvalidArgument) whose message starts with
/// @p what (e.g. "topology file 'p5.json'") and names the bad field, e.g. "field 'nics[3].speedGbps'".
Machine fromJson(const std::string& text, const std::string& what = "topology JSON");

/// Writes toJson(m) to @p path; Error(SystemError) naming the file when it cannot be written.
void dumpFile(const Machine& m, const std::string& path);

/// Reads a topology file; Error(SystemError) when it cannot be read, Error(InvalidArgument) naming the
/// file and the field when it is malformed.
Machine loadFile(const std::string& path);

}  // namespace conflux::topo
