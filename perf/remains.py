#!/usr/bin/env python3
"""What remains above twice the floor, from several runs of perf/accounting.sh.

    python3 perf/remains.py perf/out/accounting/run-*     # each holds a table.txt

Reads each run's table (µs per packet sent, by component, moq-edge beside the floor, per
load), takes the median of every figure over the runs, groups the components by what could
take them out (the kernel, quiche, the crypto, the reactor, moq-edge's own code, the
allocator) and prints a Markdown table: each group's cost above the floor's, the gap to twice
the floor, and what the ratio would be if moq-edge's own code and allocations cost nothing, or
if only QUIC's own work (quiche, and the crypto above the floor's) were added to the floor.
"""
import statistics
import sys

GROUPS = [
    ("kernel (UDP send and receive, page faults, other)", ("kernel:",)),
    ("quiche (packet building, ACK processing, streams, timers)", ("quiche:",)),
    ("crypto (BoringSSL; the floor's ring)", ("crypto",)),
    ("reactor (glommio, the shard loop, io_uring)", ("runtime:", "kernel: io_uring")),
    ("moq-edge's own code (session, moqt, wire, host glue, relay)", ("session,", "host glue", "relay (")),
    ("allocator (mimalloc)", ("allocator",)),
    ("other (libc, std, unresolved)", ("other (",)),
]


def group_of(name):
    # io_uring is the reactor's, not the network's: test it before the other kernel rows.
    for title, prefixes in sorted(GROUPS, key=lambda g: -max(len(p) for p in g[1])):
        if any(name.startswith(p) for p in prefixes):
            return title
    return "other (libc, std, unresolved)"


def read(path):
    """{load: {"edge"|"floor": {component: µs}}} from one accounting table."""
    lines = open(f"{path}/table.txt").read().splitlines()
    loads = lines[0].split()[4:]
    out = {load: {"edge": {}, "floor": {}} for load in loads}
    for line in lines[2:]:
        name, nums = line[:56].strip(), line[56:].split()
        if name in ("total", "x floor") or name.startswith("packets"):
            continue
        for i, load in enumerate(loads):
            out[load]["edge"][name] = float(nums[2 * i])
            out[load]["floor"][name] = float(nums[2 * i + 1])
    return loads, out


def main(paths):
    runs = [read(p) for p in paths]
    loads = runs[0][0]
    med = statistics.median
    rows = {title: [] for title, _ in GROUPS}
    totals, floors, ratios = [], [], []
    for load in loads:
        per_run = []
        for _, data in runs:
            edge, floor = data[load]["edge"], data[load]["floor"]
            g_edge = {t: 0.0 for t, _ in GROUPS}
            g_floor = {t: 0.0 for t, _ in GROUPS}
            for name, us in edge.items():
                g_edge[group_of(name)] += us
            for name, us in floor.items():
                g_floor[group_of(name)] += us
            per_run.append((g_edge, g_floor, sum(edge.values()), sum(floor.values())))
        for title, _ in GROUPS:
            rows[title].append((med(r[0][title] for r in per_run), med(r[1][title] for r in per_run)))
        totals.append(med(r[2] for r in per_run))
        floors.append(med(r[3] for r in per_run))
        ratios.append(med(r[2] / r[3] for r in per_run))
    print(f"Medians of {len(runs)} runs, µs a packet sent: moq-edge / floor (above the floor)\n")
    print("| | " + " | ".join(loads) + " |")
    print("|---|" + "---:|" * len(loads))
    for title, _ in GROUPS:
        cells = [f"{e:.2f} / {f:.2f} ({e - f:+.2f})" for e, f in rows[title]]
        print(f"| {title} | " + " | ".join(cells) + " |")
    print("| **total** | " + " | ".join(f"**{t:.2f} / {f:.2f}**" for t, f in zip(totals, floors)) + " |")
    print("| **x floor** | " + " | ".join(f"**{r:.2f}**" for r in ratios) + " |")
    print("| above twice the floor | " + " | ".join(f"{t - 2 * f:+.2f}" for t, f in zip(totals, floors)) + " |")
    own = "moq-edge's own code (session, moqt, wire, host glue, relay)"
    alloc = "allocator (mimalloc)"
    free = [(t - rows[own][i][0] - rows[alloc][i][0]) / f for i, (t, f) in enumerate(zip(totals, floors))]
    print("| x floor with moq-edge's own code and allocator at zero | " + " | ".join(f"{r:.2f}" for r in free) + " |")
    quic = "quiche (packet building, ACK processing, streams, timers)"
    crypto = "crypto (BoringSSL; the floor's ring)"
    only = [
        (f + rows[quic][i][0] + max(rows[crypto][i][0] - rows[crypto][i][1], 0)) / f for i, f in enumerate(floors)
    ]
    print("| x floor of the floor plus QUIC's own work alone (quiche, crypto above the floor's) | "
          + " | ".join(f"{r:.2f}" for r in only) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: perf/remains.py RUN_DIR...")
    main(sys.argv[1:])
