"""Turn the workloads' raw results into figures (Waypoint, baseline, ratio), targets and a table."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Figure:
    """One measured quantity for Waypoint and for the baseline, in the same run and unit."""

    workload: str
    metric: str
    unit: str
    waypoint: float
    baseline: float
    better: str = "lower"  # which way is good for Waypoint: lower, higher, or "" (neither)
    path: str = ""  # session | graph | in-process | cli, where it matters

    @property
    def ratio(self) -> float:
        if not self.baseline:  # a growth a smoke-sized run did not see: neither grew, or only one
            return 1.0 if not self.waypoint else math.inf
        return self.waypoint / self.baseline

    def as_dict(self) -> dict:
        return asdict(self) | {"ratio": self.ratio}

    def label(self) -> str:
        path = f" [{self.path}]" if self.path else ""
        return f"{self.metric}{path}"


@dataclass(frozen=True)
class Target:
    name: str
    value: float
    limit: float
    unit: str
    met: bool
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


MS_METRICS = {
    "turn_ms_start_median": "turn p50, first turns",
    "turn_ms_start_p95": "turn p95, first turns",
    "turn_ms_end_median": "turn p50, last turns",
    "turn_ms_reference_median": "turn p50, turns 6-10 of short threads alongside the last turns",
    "turn_ms_end_p95": "turn p95, last turns",
}
STORAGE_METRICS = {
    "db_bytes_on_disk": ("DB on disk (db + WAL)", "bytes"),
    "bytes_per_turn_end": ("DB growth per turn, last turns", "bytes"),
    "message_json_bytes_per_turn": ("message JSON per turn", "bytes"),
    "checkpoint_rows": ("checkpoint rows", "rows"),
    "write_rows": ("write rows", "rows"),
}


def thread_figures(turns: int, result: dict) -> list[Figure]:
    workload = f"thread N={turns}"
    base = result["baseline"]
    figures = [
        Figure(workload, label, "ms", result[path][key], base[key], path=path)
        for key, label in MS_METRICS.items()
        for path in ("session", "graph")
        if key in result[path]  # reference turns: when a thread's last window is 6 turns or more
    ]
    figures += [
        Figure(
            workload,
            label,
            unit,
            result["session"][key],
            base[key],
            better="" if key == "message_json_bytes_per_turn" else "lower",
        )
        for key, (label, unit) in STORAGE_METRICS.items()
    ]
    return figures


def listing_figures(result: dict) -> list[Figure]:
    many = f"{result['threads']} threads"
    cases = {
        "threads_list_many": (f"threads list, {many}", "in-process"),
        "history_many": (f"history first page, {many}", "in-process"),
        "threads_list_long": ("threads list, long-thread DB", "in-process"),
        "history_long": ("history first page, long thread", "in-process"),
        "threads_list_cli": (f"threads list, {many}", "cli"),
        "history_cli": ("history first page, long thread", "cli"),
    }
    figures = [
        Figure(
            "listings",
            f"generate {many} (1 turn each)",
            "s",
            result["generation_s"]["waypoint"],
            result["generation_s"]["baseline"],
        ),
        Figure(
            "listings",
            f"DB on disk, {many}",
            "bytes",
            result["db_bytes"]["waypoint"],
            result["db_bytes"]["baseline"],
        ),
    ]
    figures += [
        Figure(
            "listings",
            label,
            "ms",
            1000 * result[key]["waypoint"],
            1000 * result[key]["baseline"],
            path=path,
        )
        for key, (label, path) in cases.items()
    ]
    return figures


def cold_start_figures(result: dict) -> list[Figure]:
    labels = {
        "help_s": "--help",
        "first_token_s": "one-shot turn: first token",
        "one_shot_total_s": "one-shot turn: exit",
    }
    figures = [
        Figure("cold start", label, "s", result[key]["waypoint"], result[key]["baseline"])
        for key, label in labels.items()
    ]
    # The REPL has no baseline counterpart: its start-up is measured against the interpreter's.
    figures.append(
        Figure(
            "cold start",
            "REPL prompt drawn (baseline: python -c pass)",
            "s",
            result["repl_prompt_s"],
            result["interpreter_s"],
        )
    )
    return figures


# (metric, unit, key in each variant's result, which way is better)
CONCURRENT_FIGURES = [
    ("turns per second (all processes)", "turns/s", "turns_per_s", "higher"),
    ("turn p50 under contention", "ms", "turn_ms_median", "lower"),
    ("CPU per turn under contention", "ms", "cpu_ms_per_turn", "lower"),
]


def concurrent_figures(result: dict) -> list[Figure]:
    workload = f"{result['processes']} processes"
    return [
        Figure(
            workload,
            metric,
            unit,
            result["waypoint"][key],
            result["baseline"][key],
            better=better,
        )
        for metric, unit, key, better in CONCURRENT_FIGURES
    ]


FLATNESS = 1.3  # turn time at the longest thread / at the shortest
BYTES_PER_TURN = 8 * 1024
CLI_LISTING_RATIO = 0.5
ONE_SHOT_RATIO = 0.7
REPL_PROMPT_S = 0.3
CONCURRENT_RATIO = 1.5


def targets(threads: dict[int, dict], listings: dict, cold: dict) -> list[Target]:
    sizes = sorted(threads)
    smallest, largest = sizes[0], sizes[-1]
    found = []
    for path in ("session", "graph"):
        longest = threads[largest][path]
        alongside = longest.get("turn_ms_reference_median")
        flat = longest["turn_ms_end_median"] / (
            alongside or threads[smallest][path]["turn_ms_end_median"]
        )
        how = (
            "p50 of its last turns vs turns 6-10 of short threads run alongside them"
            if alongside
            else "p50 of the last turns of each thread"
        )
        found.append(
            Target(
                f"turn {largest} vs turn {'10' if alongside else smallest} per-turn time [{path}]",
                flat,
                FLATNESS,
                "x",
                flat <= FLATNESS,
                how,
            )
        )
        for n in sizes:
            ratio = (
                threads[n][path]["turn_ms_end_median"]
                / threads[n]["baseline"]["turn_ms_end_median"]
            )
            found.append(
                Target(
                    f"turn time vs baseline at N={n} [{path}]",
                    ratio,
                    1.0,
                    "x",
                    ratio < 1.0,
                    "p50 of the last turns",
                )
            )
    session = threads[largest]["session"]
    per_turn = session["bytes_per_turn_end"]
    found.append(
        Target(
            f"DB growth per turn at N={largest}",
            per_turn / 1024,
            BYTES_PER_TURN / 1024,
            "KB",
            per_turn <= BYTES_PER_TURN,
            f"{per_turn / session['message_json_bytes_per_turn']:.1f}x the turn's message JSON; "
            f"baseline {threads[largest]['baseline']['bytes_per_turn_end'] / 1024:.1f} KB",
        )
    )
    for key, label in (
        ("threads_list_many", f"threads list at {listings['threads']} threads"),
        ("history_many", f"history first page at {listings['threads']} threads"),
        ("threads_list_long", f"threads list, {largest}-turn thread DB"),
        ("history_long", f"history first page, {largest}-turn thread"),
    ):
        seconds = listings[key]["waypoint"]
        found.append(Target(label, seconds, 0.3, "s", seconds < 0.3, "in-process"))
    for key, label in (
        ("threads_list_cli", f"threads list at {listings['threads']} threads"),
        ("history_cli", f"history first page, {largest}-turn thread"),
    ):
        ratio = listings[key]["waypoint"] / listings[key]["baseline"]
        found.append(
            Target(
                f"{label}, from the shell, vs baseline",
                ratio,
                CLI_LISTING_RATIO,
                "x",
                ratio <= CLI_LISTING_RATIO,
                f"{listings[key]['waypoint']:.2f} s vs {listings[key]['baseline']:.2f} s",
            )
        )
    help_s = cold["help_s"]["waypoint"]
    found.append(Target("python -m app --help", help_s, 0.4, "s", help_s < 0.4))
    one_shot = cold["one_shot_total_s"]["waypoint"] / cold["one_shot_total_s"]["baseline"]
    floor = cold["stack_import_s"] / cold["one_shot_total_s"]["baseline"]
    found.append(
        Target(
            "one-shot turn (whole process) vs baseline",
            one_shot,
            ONE_SHOT_RATIO,
            "x",
            one_shot <= ONE_SHOT_RATIO,
            f"importing LangGraph's stack alone takes {floor:.2f}x the baseline's turn",
        )
    )
    repl = cold["repl_prompt_s"]
    found.append(
        Target(
            "REPL prompt drawn after start",
            repl,
            REPL_PROMPT_S,
            "s",
            repl <= REPL_PROMPT_S,
            f"{repl / cold['interpreter_s']:.1f}x python -c pass",
        )
    )
    return found


def concurrent_targets(runs: dict[int, dict]) -> list[Target]:
    """Throughput against the baseline, with nothing failed or lost and the file intact."""
    found = []
    for n, run in runs.items():
        waypoint, baseline = run["waypoint"], run["baseline"]
        ratio = waypoint["turns_per_s"] / baseline["turns_per_s"]
        clean = (
            waypoint["errors"] == 0
            and waypoint["integrity"] == "ok"
            and waypoint["turns_kept"] == waypoint["turns_ok"]
        )
        found.append(
            Target(
                f"{n} processes on one database: turns/s vs baseline, nothing failed or lost",
                ratio,
                CONCURRENT_RATIO,
                "x",
                ratio >= CONCURRENT_RATIO and clean,
                f"{waypoint['errors']} errors, {waypoint['turns_kept']}/{waypoint['turns_ok']} "
                f"turns kept, integrity_check {waypoint['integrity']}",
            )
        )
    return found


def format_value(value: float, unit: str) -> str:
    if unit == "bytes":
        for suffix in ("B", "KB", "MB", "GB"):
            if abs(value) < 1024 or suffix == "GB":
                return f"{value:.0f} {suffix}" if suffix == "B" else f"{value:.1f} {suffix}"
            value /= 1024
    if unit == "rows":
        return f"{value:,.0f}"
    if unit == "ms":
        return f"{value:.1f} ms" if value < 1000 else f"{value / 1000:.2f} s"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.1f} {unit}"


def table(figures: list[Figure]) -> str:
    rows = [("workload", "metric", "Waypoint", "baseline", "ratio")]
    for f in figures:
        worse = (
            f.ratio > 1 if f.better == "lower" else f.ratio < 1 if f.better == "higher" else False
        )
        mark = " *" if worse else ""
        rows.append(
            (
                f.workload,
                f.label(),
                format_value(f.waypoint, f.unit),
                format_value(f.baseline, f.unit),
                f"{f.ratio:.2f}x{mark}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [cell.rjust(width) for cell, width in zip(row[2:], widths[2:], strict=True)]
        lines.append("  ".join(cells))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def targets_table(found: list[Target]) -> str:
    lines = []
    for t in found:
        value = f"{t.value:.2f} {t.unit}"
        status = "met" if t.met else "MISSED"
        note = f"  ({t.note})" if t.note else ""
        lines.append(f"{status:6}  {t.name}: {value} (target {t.limit:g} {t.unit}){note}")
    return "\n".join(lines)


def soak_figures(soak: dict[int, dict]) -> list[Figure]:
    return [
        Figure(
            f"soak, {n} processes",
            "`chat -m` turns answered per second",
            "turns/s",
            run["waypoint"]["turns_per_s"],
            run["baseline"]["turns_per_s"],
            better="higher",
        )
        for n, run in soak.items()
    ]


def soak_targets(soak: dict[int, dict]) -> list[Target]:
    """Nothing lost or failed under concurrency: every `chat -m` turn that exited 0 is in the
    history, no turn failed but for a busy shared thread, and the database is intact."""
    found = []
    for n, run in soak.items():
        r, base = run["waypoint"], run["baseline"]
        found.append(
            Target(
                f"soak, {n} processes: turns failed or lost",
                len(r["errors"]) + len(r["lost"]),
                0,
                "turns",
                r["clean"],
                f"integrity_check {r['integrity']}; baseline: {len(base['errors'])} failed, "
                f"{len(base['lost'])} lost",
            )
        )
    return found


def soak_table(soak: dict[int, dict]) -> str:
    lines = ["processes  program   turns/s  answered  busy  failed  lost  integrity"]
    for n, run in soak.items():
        for kind, r in run.items():
            lines.append(
                f"{n:>9}  {kind:<8}  {r['turns_per_s']:>7.1f}  {r['answered']:>8}  {r['busy']:>4}  "
                f"{len(r['errors']):>6}  {len(r['lost']):>4}  {r['integrity']}"
            )
    return "\n".join(lines)
