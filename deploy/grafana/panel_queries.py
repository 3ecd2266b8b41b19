#!/usr/bin/env python3
"""Prints the PromQL of every panel target of the Conflux dashboard, ready to run against Prometheus.

    python deploy/grafana/panel_queries.py [--dashboard FILE] [--var NAME=VALUE ...]

Prints one JSON list of {"panel": <panel title>, "expr": <expression>}, one entry per target, in the
dashboard's order (the panels of collapsed rows included). Each dashboard template variable is replaced
by ".*" (its "All"), or by VALUE for a --var NAME=VALUE; the forms $name, ${name}, ${name:format} and
[[name]] are all replaced. A Grafana macro ($__rate_interval, $__interval, ...) or a variable the
dashboard does not define cannot be given a meaning here: either is an error (exit status 1), unless a
--var names it. Only the Python standard library is needed.
"""

import argparse
import json
import os
import re
import sys

DEFAULT_DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conflux-dashboard.json")

# $name, ${name}, ${name:format}, [[name]] (Grafana's variable syntaxes). A name starts with a letter or
# "_": label_replace's "$1" and "${1}" are PromQL's own, and stay.
VARIABLE = re.compile(
    r"\$\{(?P<braced>[A-Za-z_]\w*)(?::[^}]*)?\}|\[\[(?P<old>[A-Za-z_]\w*)\]\]|\$(?P<plain>[A-Za-z_]\w*)"
)


def iter_panels(panels):
    for panel in panels or []:
        yield panel
        # A collapsed row carries its panels inside it.
        yield from iter_panels(panel.get("panels"))


def substitute(expr, values):
    unknown = []

    def repl(m):
        name = m.group("braced") or m.group("old") or m.group("plain")
        if name in values:
            return values[name]
        unknown.append(name)
        return m.group(0)

    return VARIABLE.sub(repl, expr), unknown


def parse_vars(pairs):
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"panel_queries.py: --var wants NAME=VALUE, got {pair!r}")
        out[name] = value
    return out


def queries(dashboard, overrides):
    values = {v["name"]: ".*" for v in dashboard.get("templating", {}).get("list", []) if v.get("name")}
    values.update(overrides)
    result, problems = [], []
    for panel in iter_panels(dashboard.get("panels")):
        for t in panel.get("targets") or []:
            expr = t.get("expr")
            if not expr:
                continue
            text, unknown = substitute(expr, values)
            for name in unknown:
                problems.append(f"panel {panel.get('title')!r}: ${name} is not a dashboard variable (give --var {name}=...)")
            result.append({"panel": panel.get("title", ""), "expr": text})
    return result, problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dashboard", default=DEFAULT_DASHBOARD, help="the dashboard JSON (default: %(default)s)")
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help='the value of a template variable (default ".*"); may be repeated')
    args = parser.parse_args(argv)
    with open(args.dashboard, encoding="utf-8") as f:
        dashboard = json.load(f)
    result, problems = queries(dashboard, parse_vars(args.var))
    if problems:
        for p in problems:
            print(f"panel_queries.py: {p}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
