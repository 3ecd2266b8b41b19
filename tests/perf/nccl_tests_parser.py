"""Reads nccl-tests style output the way dashboards and scripts that consume nccl-tests do.

Data rows are the lines that do not start with '#': split on whitespace, fields taken by position
(size count type redop root, then time algbw busbw #wrong out of place, then the same in place; anything
after that is extra columns). Footer values are found by line prefix. Standard library only.
"""

import re

OOB_PREFIX = "# Out of bounds values"
AVG_PREFIX = "# Avg bus bandwidth"

TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16")
OPS = ("sum", "prod", "max", "min", "avg")

# busbw = algbw * factor(collective, nranks), as nccl-tests defines bus bandwidth.
def bus_factor(collective, nranks):
    n = float(nranks)
    if collective == "allreduce":
        return 2.0 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


class ParseError(Exception):
    pass


class Place:
    """time algbw busbw #wrong of one half of a row."""

    def __init__(self, fields):
        if len(fields) != 4:
            raise ParseError("expected 4 fields, got %r" % (fields,))
        self.time = float(fields[0])
        self.algbw = float(fields[1])
        self.busbw = float(fields[2])
        self.wrong = None if fields[3] == "N/A" else int(fields[3])

    def __repr__(self):
        return "Place(%g, %g, %g, %r)" % (self.time, self.algbw, self.busbw, self.wrong)


class Row:
    def __init__(self, line):
        f = line.split()
        if len(f) < 13:
            raise ParseError("a data row has %d fields, nccl-tests rows have 13: %r" % (len(f), line))
        self.line = line
        self.size = int(f[0])
        self.count = int(f[1])
        self.type = f[2]
        self.redop = f[3]
        self.root = int(f[4])
        self.out_of_place = Place(f[5:9])
        self.in_place = Place(f[9:13])
        self.extra = f[13:]
        if self.type not in TYPES:
            raise ParseError("unknown type %r in %r" % (self.type, line))
        if self.redop not in OPS + ("none",):
            raise ParseError("unknown redop %r in %r" % (self.redop, line))

    def places(self):
        return (self.out_of_place, self.in_place)


class Report:
    def __init__(self):
        self.rows = []
        self.comments = []
        self.out_of_bounds = None  # (count, "OK" or "FAILED")
        self.avg_busbw = None


def parse(text):
    """Parses one run's stdout into a Report."""
    report = Report()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            report.comments.append(line)
            if line.startswith(OOB_PREFIX):
                value = line.split(":", 1)[1].split()
                report.out_of_bounds = (int(value[0]), value[1] if len(value) > 1 else "")
            elif line.startswith(AVG_PREFIX):
                report.avg_busbw = float(line.split(":", 1)[1].split()[0])
            continue
        report.rows.append(Row(line))
    if report.out_of_bounds is None or report.avg_busbw is None:
        raise ParseError("footer lines missing")
    return report


def format_float(value, width):
    """nccl-tests' number formatting: %.2f if it fits the width, else %.1f, %.0f, then %.1e/%.0e."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def column_header_lines(time_label="time"):
    """The three column-header lines nccl-tests prints (without the trailing space it adds to two)."""
    l1 = "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % (
        "", "", "", "", "")
    l2 = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
        "size", "count", "type", "redop", "root", time_label, "algbw", "busbw", "#wrong",
        time_label, "algbw", "busbw", "#wrong")
    l3 = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
    return l1, l2, l3


ROW_RE = re.compile(r"^ *\d+ +\d+ +\S+ +\S+ +-?\d+( +\S+){8}")
