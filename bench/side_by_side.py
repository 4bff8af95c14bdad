"""Side-by-side table of moq-bench runs (bench/ab.sh, bench/drafts.sh, bench/transports.sh):
reads OUT/LABEL-ROUND.json for each label and round, prints each run's relay CPU per delivered
GB, p50/p99 latency and loss, then each label's medians and its CPU ratio to the first label's.

    python3 bench/side_by_side.py OUT ROUNDS LABEL [LABEL ...]
"""
import json
import statistics
import sys

out, rounds, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for label in labels:
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{label}-{r}.json"))
        cpu = d.get("relay_cpu_s") or 0
        gb = d["delivered_bytes"] / 1e9
        lat = d["latency_us"]
        rows.setdefault(label, []).append((cpu / gb if gb else float("nan"), lat["p50"], lat["p99"], d["lost"]))
width = max(6, *(len(label) for label in labels))
print(f"{'':<{width}} {'run':>3} {'relay CPU s/GB':>15} {'p50 µs':>8} {'p99 µs':>8} {'lost':>6}")
for label, rs in rows.items():
    for i, (c, p50, p99, lost) in enumerate(rs, 1):
        print(f"{label:<{width}} {i:>3} {c:>15.2f} {str(p50):>8} {str(p99):>8} {str(lost):>6}")
base = statistics.median(r[0] for r in rows[labels[0]])
for label, rs in rows.items():
    cpu = statistics.median(r[0] for r in rs)
    p99 = statistics.median(r[2] for r in rs)
    print(f"{label}: median relay CPU s/GB {cpu:.2f} (ratio to {labels[0]} {cpu / base:.3f}), median p99 µs {p99}")
