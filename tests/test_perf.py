"""The perf script reader, the hotspots analyzer and the folded writer, against independent
readings of the text (regular expressions and plain loops written here)."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import random
import re
import shutil
import subprocess
import threading
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, SHARED, read_text, shared_path, sweep
from perfetto_check import decode_and_check
from tracekit.cli import main
from tracekit.errors import ReaderCrashError, TraceReadError
from tracekit.overview import conversion_lines
from tracekit.plugins.folded import VARYING_PERIODS, FoldedWriter
from tracekit.plugins.perf import PerfScriptReader
from tracekit.plugins.perf import blocks as perf_blocks
from tracekit.plugins.perf.parser import PerfScriptParser
from tracekit.progress import Progress
from tracekit.testing import check_writer, full_trace

RECORDED = FIXTURES / "perf-recorded"
TIMESTAMP = re.compile(r"\s(\d+)\.(\d{6,9}):(\s|$)")


def perf_files() -> list[str]:
    base = SHARED / "perf-script"
    if not base.exists():
        return ["<missing>"]
    return sorted(str(p.relative_to(SHARED)) for p in base.rglob("*") if p.is_file())


def synthetic_pid(comm: str) -> int:
    """The pid the reader gives the process of ``comm`` when perf printed no pid (no clash
    between the comms of one test file here)."""
    return 2**30 + zlib.crc32(comm.encode()) % 2**30


def text_of(path: Path) -> str:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", "replace")


def independent_samples(text: str) -> list[dict]:
    """Samples as a plain reading sees them: a header line (one with a ``secs.frac:`` token,
    or for timestamp-less perf any line at column 0 that is not a comment) and the frame
    lines under it until a blank line."""
    samples: list[dict] = []
    current = None
    for line in text.splitlines():
        if not line.strip():
            current = None
            continue
        if line.startswith("#") or "PERF_RECORD_" in line:
            continue
        ts = TIMESTAMP.search(line)
        if ts or not line[0].isspace():
            after = line[ts.end():] if ts else line.split(":", 1)[1]
            current = {"line": line, "frames": [],
                       "ns": int(ts.group(1)) * 10**9 + int(ts.group(2).ljust(9, "0"))
                       if ts else None}
            frame = re.match(r"^\s*(?:\d+\s+)?\S+:\s+[0-9a-f]+\s+(\S.*?)\s+\((.*)\)\s*$",
                             after)
            if frame:  # a sample without callchain: its ip on the header line
                current["frames"].append(_symbol(frame.group(1)))
            samples.append(current)
        elif current is not None:
            m = re.match(r"^\s*[0-9a-fA-F]+\s+(.*?)\s+\((.*)\)\s*$", line)
            if m:
                current["frames"].append(_symbol(m.group(1)))
    return samples


def _symbol(text: str) -> str:
    """A frame's symbol without its offset; old perf leaves unresolved ones empty, which
    tracekit (like newer perf) calls [unknown]."""
    return re.sub(r"\+0x[0-9a-fA-F]+$", "", text.strip()) or "[unknown]"


# The fast run: two events in one file, a gzipped file, a header of perf's comments.
@pytest.mark.parametrize("rel", sweep(perf_files(),
                                      "perf-script/flamegraph/perf-cycles-instructions-01.txt",
                                      "perf-script/firefox-profiler/gzip.perf.gz",
                                      "perf-script/speedscope/simple-with-header.linux-perf.txt"))
def test_every_perf_file_reads_with_the_independent_sample_count(rel, registry, tmp_path):
    path = shared_path(*rel.split("/"))
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "perf"
    want = independent_samples(text_of(path))
    ev = trace.events
    assert ev.num_rows == len(want)
    timed = [s["ns"] for s in want if s["ns"] is not None]
    if timed:
        assert pc.min(ev["ts_ns"]).as_py() == min(timed)
        assert pc.max(ev["ts_ns"]).as_py() == max(timed)
    # The leaf of each sample is its first frame.
    leaves = Counter(s["frames"][0] if s["frames"] else "[no call stack]" for s in want)
    samples = ev.filter(pc.equal(ev["kind"].cast("string"), "sample"))
    assert Counter(samples["name"].cast("string").to_pylist()) == leaves
    # Into Perfetto with their call stacks, with no rule broken.
    out = tmp_path / "out.pftrace"
    if not timed:  # old perf: nothing to place on a timeline, and the error says why
        with pytest.raises(tracekit.EmptyOutputError, match=r"-F \+time"):
            tracekit.write(trace, out, registry=registry)
        return
    result = tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    stacked = [s for s in want if s["frames"] and s["ns"] is not None]
    assert len(decoded.samples) == result.written.get("CPU samples", 0) == len(stacked)


def test_recorded_program_has_its_known_call_tree(registry):
    path = RECORDED / "burn.perf"
    trace = tracekit.read(path, registry=registry)
    meta = trace.metadata["sources"]["burn.perf"]
    assert (meta["hostname"], meta["perf_version"]) == ("vm", "6.1.187")
    assert meta["command_line"].startswith("/usr/bin/perf record -q -F 999 -g")
    assert meta["sample_events"] == {"cpu-clock:ppp": 346}
    assert meta["sample_units"] == {"cpu-clock:ppp": "ns"}
    # The header's own first and last sample times.
    assert pc.min(trace.events["ts_ns"]).as_py() == 2_536_576_360_000
    assert pc.max(trace.events["ts_ns"]).as_py() == 2_536_921_781_000
    [report] = tracekit.analyze(trace, "hotspots", registry=registry)
    funcs = {r["function"]: r for r in report.tables["functions"].to_pylist()}
    assert funcs["inner"]["self"] == 345 * 1_001_001
    assert funcs["alpha"]["total"] == 230 * 1_001_001
    assert funcs["beta"]["total"] == 115 * 1_001_001
    assert funcs["main"]["self"] == 0


@pytest.mark.parametrize("name", ["burn.perf", "burn_pid_ns.perf", "burn.perf.gz"])
def test_recorded_variants_agree(name, registry):
    trace = tracekit.read(RECORDED / name, registry=registry)
    ev = trace.events
    assert ev.num_rows == 346
    assert Counter(ev["name"].cast("string").to_pylist())["inner"] == 345
    if name == "burn_pid_ns.perf":
        assert set(ev["pid"].to_pylist()) == {8180}
        log = {k[1]: (k[2], v) for k, v in trace.log.outcomes.items()}
        assert log["PERF_RECORD side-band lines"] == (
            "skipped: side-band record, not a sample",
            text_of(RECORDED / name).count("PERF_RECORD_"))
        # 9 decimals: the ns digits survive.
        first = TIMESTAMP.search(text_of(RECORDED / name).split("cpu-clock")[0]
                                 .splitlines()[-1])
        assert first is not None
    else:  # perf's default fields have the tid, not the pid
        assert set(ev["pid"].to_pylist()) == {synthetic_pid("burn")}
        assert set(ev["tid"].to_pylist()) == {8180}


def test_tracepoint_with_payload_and_callchain(registry):
    trace = tracekit.read(RECORDED / "sched_switch.perf", registry=registry)
    [row] = trace.events.to_pylist()
    assert (row["kind"], row["category"], row["name"]) == ("instant", "host.instant",
                                                          "sched:sched_switch")
    assert "prev_comm=sleep" in row["args"] and "==> next_comm=swapper/1" in row["args"]
    assert row["stack_id"] is not None
    names = {r["name"] for r in trace.frames.to_pylist()}
    assert "__schedule" in names


# --- pitfalls (formats.md section 7, 21 to 26) ---------------------------------------------

def read_perf(tmp_path, registry, text, name="t.perf"):
    return read_text(tmp_path, registry, text, name, "perf")


def rows_of(trace):
    return trace.events.to_pylist()


def test_pitfall_21_comm_pid_tid_cpu_padding_and_decimals(tmp_path, registry):
    text = ("V8 WorkerThread 24636/25607 [000] 94564.109216: cycles:\n"
            "\t    7f00 f (/x)\n\n"
            "FS Broker 5858  5858 [003] 94564.109217123:     10 cycles:\n"
            "\t    7f00 f (/x)\n\n"
            "   java    77/88     94564.2: cycles:\n\n"  # one decimal: not perf's
            "simple-terminat     9 198789.478194:    1001001 cpu-clock:\n"
            "\t    7f00 f (/x)\n")
    trace = read_perf(tmp_path, registry, text)
    rows = rows_of(trace)
    assert [(r["pid"], r["tid"]) for r in rows] == [
        (24636, 25607), (synthetic_pid("FS Broker 5858"), 5858),
        (synthetic_pid("simple-terminat"), 9)]
    assert [r["ts_ns"] for r in rows] == [94564109216000, 94564109217123, 198789478194000]
    threads = {(t["pid"], t["tid"]): t["name"] for t in trace.threads.to_pylist()}
    assert threads[(24636, 25607)] == "V8 WorkerThread"
    assert threads[(synthetic_pid("FS Broker 5858"), 5858)] == "FS Broker 5858"
    assert '"cpu":3' in rows[1]["args"]
    assert {k[2]: v for k, v in trace.log.notices().items()} == {
        "skipped: malformed timestamp (first at line 7)": 1, WARN_PID: 2}


def test_pitfall_22_period_modifiers_and_padded_event_names(tmp_path, registry):
    text = ("a 1 1.000001:     250000 cpu-clock:pppH:\n\t 1 f (/x)\n\n"
            "a 1 1.000002: cpu_atom/cycles/Pu:\n\t 1 f (/x)\n\n"
            "a 1 1.000003:       1000       cycles:\n\t 1 f (/x)\n\n"
            "a 1 1.000004:       1000 instructions:\n\t 1 f (/x)\n")
    trace = read_perf(tmp_path, registry, text)
    rows = rows_of(trace)
    assert [r["value"] for r in rows] == [250000.0, 1.0, 1000.0, 1000.0]
    meta = trace.metadata["sources"]["t.perf"]
    assert meta["sample_events"] == {"cpu-clock:pppH": 1, "cpu_atom/cycles/Pu": 1, "cycles": 1,
                                     "instructions": 1}
    # No period printed: each sample weighs 1, so the unit is samples.
    assert meta["sample_units"] == {"cpu-clock:pppH": "ns", "cpu_atom/cycles/Pu": "samples",
                                    "cycles": "cycles", "instructions": "instructions"}


def test_pitfall_23_tracepoint_payloads_with_colons(tmp_path, registry):
    text = ("     migration/9      67 [009] 105373.359908:                     "
            "sched:sched_switch: prev_comm=migration/9 prev_pid=67 ==> next_comm=swapper/9\n"
            "x 5 [001] 1.000000: syscalls:sys_enter_recvmmsg: fd: 0x00000003, runtime=4050 [ns]\n"
            "\tffffffff81000000 entry_SYSCALL_64+0x0 ([kernel.kallsyms])\n")
    rows = rows_of(read_perf(tmp_path, registry, text))
    assert [r["name"] for r in rows] == ["sched:sched_switch", "syscalls:sys_enter_recvmmsg"]
    assert '"payload":"fd: 0x00000003, runtime=4050 [ns]"' in rows[1]["args"]
    assert rows[0]["stack_id"] is None and rows[1]["stack_id"] is not None
    assert rows[0]["tid"] == 67


def test_pitfall_24_single_line_samples_and_no_final_blank_line(tmp_path, registry):
    text = ("           false 39654 19115.489713:          1 cycles:u:  "
            "ffffffff9b201293 [unknown] ([unknown])\n"
            "           false 39654 19115.489719:          1 cycles:      "
            "7fa68b1f2d84 _dl_start+0x4 (/usr/lib/ld-2.31.so)\n"
            "a 1 2.000000: cycles:\n\t 10 last (/x)")  # callchain sample, no final newline
    rows = rows_of(read_perf(tmp_path, registry, text))
    assert [r["name"] for r in rows] == ["[unknown]", "_dl_start", "last"]


def test_pitfall_25_frame_forms(tmp_path, registry):
    text = ("a 1 1.000000: cycles:\n"
            "\t    7f00 [unknown] ([unknown])\n"
            "\tffffffff81 [unknown] ([kernel.kallsyms])\n"
            "\t    7f01 foo+0x1f (/x)\n"
            "\t    7f02 std::vector<int, std::allocator<int> >::push_back(int const&) (/lib/y.so)\n"
            "\t    7f03 _RNvCs1234_7mycrate4main (/bin/rust)\n"
            "\t    7f04 LazyCompile:~body_0 evalmachine.<anonymous>:1 (/tmp/perf-31912.map)\n"
            "\t    7f05 gone (/usr/lib/libz.so.1 (deleted))\n"
            "  foo.c:12\n"  # -F +srcline
            "\t    7f06 (anonymous namespace)::helper() (/x)\n")
    trace = read_perf(tmp_path, registry, text)
    frames = {r["frame_id"]: (r["name"], r["module"]) for r in trace.frames.to_pylist()}
    assert sorted(frames.values()) == sorted([
        ("[unknown]", "[unknown]"), ("[unknown]", "[kernel.kallsyms]"), ("foo", "/x"),
        ("std::vector<int, std::allocator<int> >::push_back(int const&)", "/lib/y.so"),
        ("_RNvCs1234_7mycrate4main", "/bin/rust"),
        ("LazyCompile:~body_0 evalmachine.<anonymous>:1", "/tmp/perf-31912.map"),
        ("gone", "/usr/lib/libz.so.1 (deleted)"), ("(anonymous namespace)::helper()", "/x")])
    log = {k[1]: v for k, v in trace.log.outcomes.items()}
    assert log["per-frame detail lines"] == 1
    [row] = rows_of(trace)
    assert row["name"] == "[unknown]"  # the leaf


def test_inlined_frames_take_the_module_of_the_code_they_are_inlined_into(tmp_path, registry):
    """``perf script --inline`` prints ``(inlined)`` where the dso goes (firefox-profiler's
    gzip and graphviz captures): no module. An inlined frame takes the dso of the next frame
    with one at the same address, or within 16 MiB (perf leaves the physical frame out at
    times); else none."""
    text = ("gzip 1/1 1.000000: 1000 cycles:\n"
            "\t    7f4547cd43a5 ptmalloc_init+0x1d5 (inlined)\n"
            "\t    7f4547cd4cbb ptmalloc_init+0x2b (inlined)\n"
            "\t    7f4547cd4cbb malloc_hook_ini+0x2b (/usr/lib/libc-2.31.so)\n"
            "\t    55c83b5a52de make_ofname+0x45e (inlined)\n"
            "\t    55c83b5a1feb main+0x65b (/usr/bin/gzip)\n\n"
            "gzip 1/1 1.001000: 1000 cycles:\n"
            "\t    7fbcb1aba293 lone+0x5 (inlined)\n"
            "\t    55fbf3db856f [unknown] ([heap])\n")
    trace = read_perf(tmp_path, registry, text)
    frames = {(r["name"], r["module"]) for r in trace.frames.to_pylist()}
    assert frames == {("ptmalloc_init", "/usr/lib/libc-2.31.so"),
                      ("malloc_hook_ini", "/usr/lib/libc-2.31.so"),
                      ("make_ofname", "/usr/bin/gzip"), ("main", "/usr/bin/gzip"),
                      ("lone", None), ("[unknown]", "[heap]")}
    for name in ("gzip", "graphviz"):
        path = shared_path("perf-script", "firefox-profiler", f"{name}.perf.gz")
        modules = set(tracekit.read(path, registry=registry).frames["module"].to_pylist())
        assert "inlined" not in modules


def test_pitfall_26_header_side_band_lost_and_out_of_order(tmp_path, registry):
    text = ("# ========\n# hostname : box\n# perf version : 6.1\n"
            "# cmdline : /usr/bin/perf record -g\n"
            "# event : name = cycles, , size = 128, sample_type = IP|TID|TIME|CALLCHAIN\n"
            "# ========\n#\n"
            "perf-exec     0/0         0.000000000: PERF_RECORD_COMM: perf-exec:8123/8123\n"
            "a 1 2.000000: cycles:\n\t 1 later (/x)\n\n"
            "a 1 1.000000: cycles:\n\t 1 earlier (/x)\n\n"
            "LOST 20 events!\n")
    trace = read_perf(tmp_path, registry, text)
    meta = trace.metadata["sources"]["t.perf"]
    assert (meta["hostname"], meta["tool_version"]) == ("box", "6.1")
    assert meta["event_descriptions"][0].startswith("name = cycles")
    log = {k[1]: (k[2], v) for k, v in trace.log.outcomes.items()}
    assert log["PERF_RECORD side-band lines"][1] == 1
    assert log["LOST lines"] == ("skipped: the kernel lost these events while recording", 1)
    assert [r["name"] for r in rows_of(trace)] == ["later", "earlier"]
    assert tracekit.read(tmp_path / "t.perf", registry=registry).sources == ["t.perf"]


def test_old_perf_without_timestamps(registry):
    path = shared_path("perf-script", "flamegraph", "perf-js-stacks-01.txt")
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == 2
    assert trace.events["ts_ns"].null_count == 2
    assert {t["name"] for t in trace.threads.to_pylist()} == {"node-v011"}


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (b"\x7fELF\x02\x01\x01\x00" + bytes(200), "no reader recognises this file"),
    (b"", "file is empty"),
    (b"hello world\nthis is not perf\n", "no reader recognises this file"),
])
def test_bad_inputs_give_one_line_errors(tmp_path, capsys, content, message):
    path = tmp_path / "bad.perf"
    path.write_bytes(content)
    out = tmp_path / "out.pftrace"
    assert main(["convert", str(path), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(path) in err[0]
    assert not out.exists()


def test_forced_perf_reader_on_a_binary_file_names_the_problem(tmp_path, capsys):
    path = tmp_path / "perf.data"
    path.write_bytes(b"PERFILE2" + bytes(100))
    assert main(["convert", str(path), "--from", "perf", "-o", str(tmp_path / "o.pftrace"),
                 "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert "no perf script samples found" in err


# --- folded output and hotspots against independent folds ---------------------------------

def independent_fold(text: str, event: str | None = None) -> Counter:
    folds: Counter = Counter()
    events: Counter = Counter()
    parsed = []
    for s in independent_samples(text):
        head = s["line"]
        m = re.match(r"^\s*(.*?)\s+-?\d+(?:/-?\d+)?\s+(?:\[\d+\]\s+)?(?:\d+\.\d+:\s+)?"
                     r"(?:\d+\s+)?(\S+?):", head)
        comm, ev = m.group(1), m.group(2)
        events[ev] += 1
        parsed.append((comm, ev, s["frames"]))
    # The event CPU time is ranked by (cpu-clock, task-clock, cycles), else the most frequent.
    timed = [e for want in ("cpu-clock", "task-clock", "cycles") for e in events
             if e.split(":")[0] == want]
    keep = event or (timed[0] if timed else events.most_common(1)[0][0])
    for comm, ev, frames in parsed:
        if ev == keep and frames:
            # ';' separates frames, so one inside a name (Java's Lpkg/Class;.m) becomes ':'.
            folds[";".join(f.replace(";", ":") for f in [comm, *reversed(frames)])] += 1
    return folds


@pytest.mark.parametrize("rel", ["speedscope/system-wide.linux-perf.txt",
                                 "flamegraph/perf-vertx-stacks-01.txt",
                                 "flamegraph/perf-cycles-instructions-01.txt",
                                 pytest.param("haandfeng_aarch64/out.perf",
                                              marks=pytest.mark.slow)])
def test_folded_output_equals_an_independent_fold(rel, registry, tmp_path):
    path = shared_path("perf-script", *rel.split("/"))
    out = tmp_path / "out.folded"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    got = Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        got[stack] += int(count)
    assert got == independent_fold(text_of(path))
    assert out.read_text().splitlines() == sorted(out.read_text().splitlines())


def test_hotspots_equal_independent_sums(registry):
    path = shared_path("perf-script", "haandfeng_aarch64", "out.perf")
    text = text_of(path)
    periods = [int(m.group(1)) for m in re.finditer(r"\d+\.\d{6}:\s+(\d+)\s+\S+:", text)]
    samples = independent_samples(text)
    assert len(periods) == len(samples)
    self_w: Counter = Counter()
    total_w: Counter = Counter()
    for s, w in zip(samples, periods, strict=True):
        if s["frames"]:
            self_w[s["frames"][0]] += w
            for f in set(s["frames"]):
                total_w[f] += w
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "hotspots",
                                options=["top=0"], registry=registry)
    by_name: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in report.tables["functions"].to_pylist():
        by_name[r["function"]][0] += r["self"]
        by_name[r["function"]][1] = max(by_name[r["function"]][1], r["total"])
    assert {k: v[0] for k, v in by_name.items() if v[0]} == dict(self_w)
    top = max(total_w, key=total_w.get)
    assert by_name[top][1] == total_w[top]


# --- a live recording --------------------------------------------------------------------

def _perf_usable() -> str | None:
    if not shutil.which("perf") or not shutil.which("cc"):
        return "perf or cc is not installed"
    probe = subprocess.run(["perf", "record", "-q", "-o", "/dev/null", "true"],
                           capture_output=True, text=True)
    if probe.returncode:
        return f"perf record is not allowed here: {probe.stderr.strip()[:120]}"
    return None


@pytest.mark.slow  # compiles and records a program
def test_live_recording_matches_perf_script(registry, tmp_path):
    reason = _perf_usable()
    if reason:
        pytest.skip(reason)
    binary = tmp_path / "burn"
    subprocess.run(["cc", "-O0", "-g", "-fno-omit-frame-pointer", "-o", str(binary),
                    str(RECORDED / "burn.c")], check=True)
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-F", "499", "-g", "-o", str(data), str(binary)],
                   check=True, capture_output=True)
    script = subprocess.run(["perf", "script", "-i", str(data)], check=True,
                            capture_output=True, text=True).stdout
    path = tmp_path / "live.perf"
    path.write_text(script)
    headers = [line for line in script.splitlines() if TIMESTAMP.search(line)]
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == len(headers) > 0
    names = Counter(trace.events["name"].cast("string").to_pylist())
    assert names.most_common(1)[0][0] == "inner"


def test_default_analyze_of_a_cpu_profile_shows_hotspots(capsys):
    assert main(["analyze", str(RECORDED / "burn.perf"), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Bottleneck: no GPU activity")
    assert "\nCPU profile\n" in out and "__libc_start_call_main > main > alpha > inner" in out


# --- header layouts: perf script -F field lists (issue 13) --------------------------------

FULL = re.compile(r"^(?P<comm>\S+) (?P<pid>\d+)/(?P<tid>\d+) \[(?P<cpu>\d+)\]\s+(?P<sec>\d+)\."
                  r"(?P<frac>\d{6}):\s+(?P<period>\d+) (?P<event>\S+):\s*$")
WARN_TIME = ("warning: perf script without timestamps: re-run perf script with -F +time to "
             "place samples on a timeline")
WARN_PID = ("warning: perf script without pids: each comm is shown as a process (pid not "
            "recorded); re-run perf script with -F +pid,+tid")
WARN_NO_PROCESS = ("warning: perf script without comm or pid: samples belong to no process; "
                   "re-run perf script with -F +comm,+pid,+tid")


def full_fields_samples() -> list[dict]:
    """forks.perf (every field printed) read with a regular expression and a loop."""
    rows: list[dict] = []
    for line in (RECORDED / "forks.perf").read_text().splitlines():
        if m := FULL.match(line):
            rows.append({"comm": m["comm"], "pid": int(m["pid"]), "tid": int(m["tid"]),
                         "cpu": int(m["cpu"]), "ts": int(m["sec"]) * 10**9 + int(m["frac"]) * 1000,
                         "period": float(m["period"]), "event": m["event"], "leaf": None})
        elif line.startswith("\t") and rows[-1]["leaf"] is None:
            rows[-1]["leaf"] = re.match(r"^\s*[0-9a-f]+ (.*) \(.*\)$", line).group(1)
    return rows


# layout file: (timestamp, ids printed: "pid/tid" | "one" | "none", comm, period, event, cpu)
LAYOUTS = {
    "forks_default.perf": (True, "one", True, True, True, True),
    "forks_no_ids.perf": (True, "none", True, False, True, False),
    "forks_pid_only.perf": (True, "one", True, True, True, False),
    "forks_no_comm.perf": (True, "one", False, False, True, False),
    "forks_no_event.perf": (True, "pid/tid", True, False, False, False),
    "forks_no_time.perf": (False, "one", True, True, True, False),
    "forks_comm_stacks.perf": (False, "none", True, False, False, False),
    "forks_stacks_only.perf": (False, "none", False, False, False, False),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_field_list_reads_as_the_full_one_allows(name, registry):
    timed, ids, comm, period, event, cpu = LAYOUTS[name]
    want = full_fields_samples()
    assert len(want) == 33 and {s["comm"] for s in want} == {"forks", "bash", "python3"}
    trace = tracekit.read(RECORDED / name, registry=registry)
    rows = rows_of(trace)
    assert [r["name"] for r in rows] == [s["leaf"] for s in want]
    assert [r["ts_ns"] for r in rows] == [s["ts"] if timed else None for s in want]
    assert [r["value"] for r in rows] == [s["period"] if period else 1.0 for s in want]

    def expected_ids(s: dict) -> tuple[int | None, int | None]:
        if ids == "pid/tid":
            return s["pid"], s["tid"]
        fake = synthetic_pid(s["comm"]) if comm else None
        return (fake, s["tid"]) if ids == "one" else (fake, fake)
    assert [(r["pid"], r["tid"]) for r in rows] == [expected_ids(s) for s in want]
    for r, s in zip(rows, want, strict=True):
        args = json.loads(r["args"])
        assert args.get("event") == (s["event"] if event else None)
        assert args.get("cpu") == (s["cpu"] if cpu else None)
    threads = {(t["pid"], t["tid"]): t["name"] for t in trace.threads.to_pylist()}
    assert threads == ({expected_ids(s): s["comm"] for s in want} if comm else {})
    processes = {p["pid"]: p["name"] for p in trace.processes.to_pylist()}
    if ids == "pid/tid":
        assert processes == {s["pid"]: s["comm"] for s in want}
    elif comm:
        assert processes == {synthetic_pid(s["comm"]): f"{s['comm']} (pid not recorded)"
                             for s in want}
        assert trace.metadata["sources"][name]["synthetic_pids"] == {
            c: synthetic_pid(c) for c in ("forks", "bash", "python3")}
    else:
        assert processes == {}
    notices = {k[2]: v for k, v in trace.log.notices().items()}
    expected = {}
    if not timed:
        expected[WARN_TIME] = 33
    if ids != "pid/tid":
        expected[WARN_PID if comm else WARN_NO_PROCESS] = 33
    assert notices == expected


@pytest.mark.parametrize("name", ["forks_no_ids.perf", "forks_default.perf"])
def test_samples_without_pids_get_named_tracks_in_perfetto(name, registry, tmp_path):
    trace = tracekit.read(RECORDED / name, registry=registry)
    out = tmp_path / "out.pftrace"
    assert tracekit.write(trace, out, registry=registry).written["CPU samples"] == 33
    decoded = decode_and_check(out)
    assert decoded.violations == []
    threads = {(d.thread.pid, d.thread.tid): d.thread.thread_name
               for d in decoded.tracks.values() if d.HasField("thread")}
    processes = {d.process.pid: d.process.process_name
                 for d in decoded.tracks.values() if d.HasField("process")}
    assert processes == {synthetic_pid(c): f"{c} (pid not recorded)"
                         for c in ("forks", "bash", "python3")}
    want = full_fields_samples()
    # Every sample sits on a declared thread, named by the comm it was taken under.
    assert [threads[(pid, tid)] for _, pid, tid, _ in decoded.samples] == \
        [s["comm"] for s in sorted(want, key=lambda s: s["ts"])]


def test_info_names_a_process_without_a_pid_by_its_comm_and_threads(registry):
    from tracekit.overview import describe

    lines = describe(RECORDED / "forks_default.perf", registry=registry).lines()
    tids: dict[str, set[int]] = {}
    for s in full_fields_samples():
        tids.setdefault(s["comm"], set()).add(s["tid"])
    assert sorted(line.strip() for line in lines if line.startswith("  process ")) == sorted(
        f"process {comm} (pid not recorded), threads {', '.join(map(str, sorted(t)))}"
        for comm, t in tids.items())


def test_folded_output_needs_no_timestamps_or_ids(registry, tmp_path):
    def folded(name: str) -> list[str]:
        out = tmp_path / f"{name}.folded"
        tracekit.write(tracekit.read(RECORDED / name, registry=registry), out,
                       registry=registry)
        return out.read_text().splitlines()
    full = folded("forks.perf")
    assert sum(int(line.rpartition(" ")[2]) for line in full) == 33
    assert folded("forks_no_time.perf") == full
    assert folded("forks_comm_stacks.perf") == full
    # Without comm the stacks have no process root.
    roots_cut = Counter()
    for line in full:
        stack, _, n = line.rpartition(" ")
        roots_cut[stack.split(";", 1)[1]] += int(n)
    assert Counter({line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
                    for line in folded("forks_stacks_only.perf")}) == roots_cut


def _every_row_a_sample() -> tracekit.Trace:
    """``full_trace`` with each row turned into a CPU sample of its stack 1 (main;leaf): so
    that every typed column holds values on rows the folded writer folds."""
    trace = full_trace()
    ev = trace.events
    n = ev.num_rows
    for column, value in (("kind", "sample"), ("category", "cpu.sample")):
        i = ev.schema.get_field_index(column)
        ev = ev.set_column(i, ev.schema.field(i), pa.DictionaryArray.from_arrays(
            pa.array([0] * n, pa.int32()), pa.array([value])))
    i = ev.schema.get_field_index("stack_id")
    ev = ev.set_column(i, ev.schema.field(i), pa.array([1] * n, pa.int64()))
    return dataclasses.replace(trace, events=ev)


def test_folded_writer_keeps_or_counts_every_column():
    trace = _every_row_a_sample()
    data, result = check_writer(FoldedWriter, trace)
    # One line per root: thread 11 of pid 10 is "main"; rows of no thread have no root.
    assert data.decode().splitlines() == ["main;leaf 8", "main;main;leaf 9"]
    assert result.written == {"stacks": 2, "samples": 17}
    ev = trace.events
    held = {"kind", "category", "stack_id", "pid", "tid", "source", "value"}
    by_format = "by the format: folded stacks keep the stacks and their weights only"
    why = {"ts_ns": by_format, "dur_ns": by_format, "args": by_format,
           "name": "a folded line names the leaf frame, not the sample"}
    # What no line holds, counted independently: every value of the other columns (the
    # untimed row makes dur_ns no weight here; no name is the leaf frame, "leaf").
    want = {f"field {c}: {why.get(c, 'folded stacks have no field for it')}":
            ev.num_rows - ev[c].null_count for c in ev.column_names if c not in held}
    want = {k: v for k, v in want.items() if v}
    assert (want[f"field name: {why['name']}"], want[f"field ts_ns: {why['ts_ns']}"],
            want[f"field args: {why['args']}"],
            want["field grid_x: folded stacks have no field for it"]) == (17, 16, 5, 2)
    # The lines count samples; these samples' values (periods) differ, so they are lost too.
    values = [1.0 if v is None else v for v in ev["value"].to_pylist()]
    assert max(values) > 1.01 * min(values)
    want[f"field value: {VARYING_PERIODS}"] = 17
    assert result.skipped == want


def test_folded_writer_with_the_default_check_trace_counts_what_is_not_a_sample():
    """check_writer's full_trace has one CPU sample: the other rows are counted whole, the
    sample's timestamp and its name ("cycles", not its leaf frame) by column."""
    out = io.BytesIO()
    result = FoldedWriter().write(full_trace(), out)
    assert out.getvalue() == b"main;main;leaf 1\n"
    assert result.written == {"stacks": 1, "samples": 1}
    assert result.skipped == {
        "events that are not CPU samples": 16,
        "field ts_ns: by the format: folded stacks keep the stacks and their weights only": 1,
        "field name: a folded line names the leaf frame, not the sample": 1}


def test_convert_says_which_values_a_folded_output_leaves_out(registry, tmp_path):
    trace = tracekit.read(RECORDED / "forks.perf", registry=registry)
    result = tracekit.write(trace, tmp_path / "out.folded", registry=registry)
    assert result.written == {"stacks": len(independent_fold(text_of(RECORDED / "forks.perf"))),
                              "samples": 33}
    # What tracekit convert prints after its "wrote" line. perf's args ({"event", "comm",
    # "cpu"}) choose the line and its root; the cpu is lost.
    # The format's nature is a note, not a warning: one line for the columns it has no place
    # for.
    assert conversion_lines(trace, result) == [
        "note: 33 events written without their args and ts_ns: folded stacks keep the stacks "
        "and their weights only"]


def test_without_timestamps_a_timeline_output_says_to_add_time(registry, tmp_path):
    trace = tracekit.read(RECORDED / "forks_no_time.perf", registry=registry)
    with pytest.raises(tracekit.EmptyOutputError, match=r"re-run perf script with -F \+time"):
        tracekit.write(trace, tmp_path / "out.pftrace", registry=registry)
    assert not (tmp_path / "out.pftrace").exists()


def test_single_line_samples_with_a_period_and_no_event(registry):
    path = RECORDED / "burn_flat_no_event.perf"
    want = re.findall(r"^ +burn (\d+) +(\d+)\.(\d{6}): +(\d+) +([0-9a-f]+) (\S+) \((.*)\)$",
                      path.read_text(), flags=re.M)
    assert len(want) == len(path.read_text().splitlines()) == 36
    trace = tracekit.read(path, registry=registry)
    rows = rows_of(trace)
    assert [(r["tid"], r["ts_ns"], r["value"], r["name"]) for r in rows] == [
        (int(tid), int(s) * 10**9 + int(f) * 1000, float(p), sym)
        for tid, s, f, p, _, sym, _ in want]
    assert {(f["name"], f["module"]) for f in trace.frames.to_pylist()} == {
        ("inner", "/tmp/rec/burn")}
    assert trace.metadata["sources"][path.name]["sample_events"] == {}
    assert trace.metadata["sources"][path.name]["sample_units"] == {"": "value"}


def test_a_file_cut_at_its_start_skips_the_frames_of_its_first_sample(tmp_path, registry):
    text = (RECORDED / "forks.perf").read_text()
    cut = text[text.index("\t", text.index("\t") + 1):]  # from the 2nd frame of sample 1
    trace = read_perf(tmp_path, registry, cut)
    assert [r["name"] for r in rows_of(trace)] == [s["leaf"] for s in full_fields_samples()[1:]]
    assert {k[2]: v for k, v in trace.log.notices().items()} == {
        "skipped: frames without a sample header line (first at line 1)": 1}


def test_lines_that_are_not_headers_stay_unrecognised(tmp_path, registry):
    text = ("forks\n\t 10 f (/x)\n\n"  # perf script -F comm,ip,sym: a header
            "hello world\n\n"          # text on its own line: not one
            "forks\n\n")               # no frame under it: not one either
    trace = read_perf(tmp_path, registry, text)
    assert [(r["name"], r["pid"]) for r in rows_of(trace)] == [("f", synthetic_pid("forks"))]
    log = {k[1]: v for k, v in trace.log.outcomes.items()}
    assert log["unrecognized lines"] == 2


# --- damaged input: gzip, numbers out of range, pathological lines --------------------------

def _read_error(path: Path, registry) -> TraceReadError:
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, format="perf", registry=registry)
    assert not isinstance(info.value, ReaderCrashError)
    assert "\n" not in str(info.value)
    return info.value


@pytest.mark.parametrize("damage, message", [
    (lambda gz: gz[: len(gz) * 2 // 3], "gzip data is truncated (the file ends early)"),
    (lambda gz: gz[:10], "gzip data is truncated (the file ends early)"),
    (lambda gz: gz[:-8] + b"\xde\xad\xbe\xef" + gz[-4:], "corrupt gzip data: CRC check failed"),
    (lambda gz: gz[:200] + bytes(64) + gz[264:], "corrupt gzip data: "),
    (lambda gz: gz + b"this is not gzip", "corrupt gzip data: "),
])
def test_damaged_gzip_is_a_read_error(damage, message, tmp_path, registry):
    gz = (RECORDED / "burn.perf.gz").read_bytes()
    path = tmp_path / "d.perf.gz"
    path.write_bytes(damage(gz))
    error = _read_error(path, registry)
    assert message in error.message and error.path == str(path)


def test_numbers_out_of_range_skip_their_sample_and_count_it(tmp_path, registry):
    text = (RECORDED / "forks.perf").read_text()
    headers = [m.start() for m in re.finditer(r"^\S", text, flags=re.M)]
    lines_before = [text.count("\n", 0, h) + 1 for h in headers]
    want = full_fields_samples()
    damage = {  # sample index: (text in the header, replacement)
        1: (r"\d+\.\d{6}:", f"{2**70}.000001:"),                 # ts beyond int64 ns
        2: (r"\d+\.\d{6}:", "NaN:"),                             # not a number
        3: (r"\d+\.\d{6}:", "1e300:"),
        4: (r"\d+\.\d{6}:", "-1.000001:"),
        5: (r"^(\S+) \d+/", rf"\g<1> {2**63}/"),                 # pid beyond pid_t
        6: (r"/\d+ ", f"/{'9' * 5000} "),                        # tid: 5,000 digits
        7: (r"\[\d+\]", f"[{2**40}]"),                           # cpu
        8: (r"(:\s+)\d+( cpu-clock)", rf"\g<1>{2**64}\g<2>"),    # period beyond u64
        9: (r"(:\s+)\d+( cpu-clock)", r"\g<1>-1\g<2>"),          # negative period
        10: (r"(:\s+)\d+( cpu-clock)", r"\g<1>1e300\g<2>"),
        11: (r"(:\s+)\d+( cpu-clock)", r"\g<1>NaN\g<2>"),
        12: (r"\d+\.\d{6}: ", ""),                                # no timestamp at all
    }
    pieces, last = [], 0
    for i, h in enumerate(headers):
        end = text.index("\n", h)
        pieces.append(text[last:h])
        header = text[h:end]
        if i in damage:
            pattern, repl = damage[i]
            header, n = re.subn(pattern, repl, header, count=1)
            assert n == 1
        pieces.append(header)
        last = end
    pieces.append(text[last:])
    trace = read_perf(tmp_path, registry, "".join(pieces))
    assert [r["name"] for r in rows_of(trace)] == [
        s["leaf"] for i, s in enumerate(want) if i not in damage]
    at = {i: lines_before[i] for i in damage}
    assert {k[2]: v for k, v in trace.log.notices().items()} == {
        f"skipped: timestamp out of range (first at line {at[1]})": 1,
        f"skipped: malformed timestamp (first at line {at[2]})": 3,
        f"skipped: no timestamp, unlike the samples before it (first at line {at[12]})": 1,
        f"skipped: pid or tid out of range (first at line {at[5]})": 2,
        f"skipped: cpu out of range (first at line {at[7]})": 1,
        f"skipped: period out of range (first at line {at[8]})": 1,
        f"skipped: period is not a whole number (first at line {at[9]})": 3,
    }
    # The skipped samples' frame lines went with them: nothing else is unaccounted for.
    assert ("t.perf", "unrecognized lines", "skipped: not a perf script line") \
        not in trace.log.outcomes


def test_long_runs_of_blanks_parse_in_linear_time(tmp_path, registry):
    line = "x" + " " * 200_000 + "1: y"
    text = f"a 1 1.000000: cycles:\n\t 10 f (/x)\n\n{line}\n {line}\n"
    start = time.process_time()
    trace = read_perf(tmp_path, registry, text)
    assert time.process_time() - start < 5  # quadratic backtracking took hours
    assert trace.events.num_rows == 1
    assert {k[1]: v for k, v in trace.log.outcomes.items()}["unrecognized lines"] == 2


# --- streams: a pipe is read once, front to back -------------------------------------------

@pytest.mark.parametrize("name, compress", [("forks_no_ids.perf", False),
                                            ("burn.perf", True)])
def test_perf_script_through_a_pipe_reads_like_the_file(name, compress, registry):
    data = (RECORDED / name).read_bytes()
    if compress:
        data = gzip.compress(data)
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as f:
            f.write(data)
    thread = threading.Thread(target=feed)
    thread.start()
    try:
        piped = tracekit.read(f"/dev/fd/{read_end}", registry=registry,
                              progress=Progress(enabled=True, stream=io.StringIO()))
    finally:
        thread.join(10)
        os.close(read_end)
    direct = tracekit.read(RECORDED / name, registry=registry)
    assert piped.metadata["sources"][str(read_end)]["reader"] == "perf"
    assert piped.events.drop_columns(["source"]).equals(direct.events.drop_columns(["source"]))
    assert piped.threads.drop_columns(["source"]).equals(
        direct.threads.drop_columns(["source"]))


def test_a_file_of_only_damaged_samples_says_what_was_wrong(tmp_path, registry):
    path = tmp_path / "t.perf"
    path.write_text(f"a 1 {'9' * 30}.000000: c:\n\t 1 f (/x)\n\na 1 1.000000: -5 c:\n")
    error = _read_error(path, registry)
    assert error.message == ("no perf script samples found (2 skipped; line 1: timestamp out "
                             "of range)")


def test_a_damaged_first_header_does_not_decide_the_layout(tmp_path, registry):
    text = ("a 1 NaN: c:\n\t 1 f (/x)\n\n"      # the malformed timestamp
            "a 1/1 1.5: c:\n\t 1 f (/x)\n\n"    # one decimal: not one perf prints
            "a 1/1 2.000000: c:\n\t 2 g (/x)\n\n"
            "a 1/1 c:\n\t 3 h (/x)\n")          # no timestamp where the others have one
    trace = read_perf(tmp_path, registry, text)
    assert [(r["name"], r["ts_ns"]) for r in rows_of(trace)] == [("g", 2_000_000_000)]
    assert {k[2]: v for k, v in trace.log.notices().items()} == {
        "skipped: malformed timestamp (first at line 1)": 2,
        "skipped: no timestamp, unlike the samples before it (first at line 10)": 1}


# --- column-wise reading: the same trace as the line parser ----------------------------------

def _by_lines(self, source, parser, out) -> None:
    """How the reader parsed before the column-wise path: the line parser fed from a text
    stream."""
    with source.open() as raw:
        parser.feed(io.TextIOWrapper(raw, "utf-8", "replace", newline=""))
    parser.finish()
    for batch in parser.take_batches():
        out.add_events(batch)


def _model(trace) -> dict:
    """Every table of ``trace`` as plain values (dictionary columns decoded), its metadata
    and account."""
    tables = {name: [{k: v for k, v in row.items() if k != "source"}
                     for row in trace.table(name).to_pylist()]
              for name in ("events", "stacks", "frames", "threads", "processes")}
    return {**tables, "metadata": trace.metadata, "log": dict(trace.log.outcomes)}


def every_perf_input() -> list:
    """The recorded and damaged inputs of this repository (small: the fast run), and the
    shared perf scripts (slow)."""
    bad = sorted(str(p.relative_to(FIXTURES)) for p in (FIXTURES / "bad" / "perf").iterdir())
    recorded = sorted(str(p.relative_to(FIXTURES)) for p in RECORDED.glob("*.perf*"))
    return [pytest.param(f"shared:{rel}", marks=pytest.mark.slow) for rel in perf_files()] \
        + recorded + bad


def _input(rel: str) -> Path:
    return shared_path(*rel[7:].split("/")) if rel.startswith("shared:") else FIXTURES / rel


def _read_or_error(path: Path, registry) -> dict | str:
    try:
        return _model(tracekit.read(path, format="perf", registry=registry))
    except TraceReadError as exc:
        return str(exc)


@pytest.mark.parametrize("rel", every_perf_input())
def test_column_wise_reading_gives_the_line_parsers_trace(rel, registry, monkeypatch):
    path = _input(rel)
    column_wise = _read_or_error(path, registry)
    monkeypatch.setattr(perf_blocks, "MIN_RUN", 1)  # every record it can take, however few
    monkeypatch.setattr(perf_blocks, "BLOCK_BYTES", 4096)  # records cut by block ends
    small_blocks = _read_or_error(path, registry)
    monkeypatch.setattr(PerfScriptReader, "_parse", _by_lines)
    by_lines = _read_or_error(path, registry)
    assert column_wise == by_lines
    assert small_blocks == by_lines


def test_the_column_wise_path_reads_the_records_of_perfs_default_layout(registry,
                                                                         monkeypatch):
    """Guard against a column-wise path that gives every record to the line parser."""
    taken = []
    emit = perf_blocks.BlockParser._emit

    def counting(self, rows, *args):
        taken.append(rows.stop - rows.start)
        return emit(self, rows, *args)
    monkeypatch.setattr(perf_blocks.BlockParser, "_emit", counting)
    monkeypatch.setattr(perf_blocks, "MIN_RUN", 1)
    trace = tracekit.read(RECORDED / "burn.perf", registry=registry)
    # All but the first sample (the line parser reads it: its time tells whether the times
    # may be --deltatime deltas, and it fixes the layout) and the last: its header is
    # followed by PERF_RECORD lines in the same record.
    assert trace.events.num_rows == 346 and sum(taken) == 345


_HEADERS = ["burn 8180 [001] 2536.576360: 1001001 cpu-clock:ppp:",
            "  java  12/34 5.000000001:  7 cycles:u:",
            "my comm 9 [3] 1.123456: instructions:"]
_DAMAGE = ["\t", "  ", "x", "1.000000:", "12345678901234567890", "-1", "[1234567890]", "1/2/3",
           "#", "PERF_RECORD_MMAP", "LOST", ":", "é", "\x0b", "\xa0", "nan:", "0x10", "a:",
           "1234567890.123456:", "99999999999999999", "007", "[x]", "ev::", "\x00"]
_FRAMES = ["\t 10 f (/x)", "\tffff80000845a024 perf_lock+0x0 ([kernel.kallsyms])",
           "\t    ffff888aa6cc [unknown] ([unknown])", "    7f1e g (/y)", " a 1 2.000000: b:",
           "\t", "\u3000", "#c", "\tsrc.c:10", "plain", "\x0c"]


def _variant(rng: random.Random) -> bytes:
    """perf script text near the default layout: headers with a token added, replaced or
    dropped, odd separators, odd frame lines, blank lines and CRs."""
    lines = []
    for _ in range(rng.randint(1, 25)):
        words = rng.choice(_HEADERS).split(" ")
        if rng.random() < 0.4:
            at = rng.randrange(len(words))
            change = rng.choice(["add", "replace", "drop"])
            if change == "add":
                words.insert(at, rng.choice(_DAMAGE))
            elif change == "replace":
                words[at] = rng.choice(_DAMAGE)
            else:
                del words[at]
        header = rng.choice([" ", " ", " ", "  ", "\t"]).join(words)
        lines.append(rng.choice(["", "", "   "]) + header + rng.choice(["", " ", "  "]))
        lines += [rng.choice(_FRAMES[:3]) if rng.random() < 0.9 else rng.choice(_FRAMES)
                  for _ in range(rng.choice([0, 1, 3, 6]))]
        lines += [""] * rng.choice([1, 1, 2, 0])
    text = "\n".join(lines) + rng.choice(["\n", "", "\n\n"])
    if rng.random() < 0.1:  # a line end a text stream splits at too
        text = text.replace("\n", rng.choice(["\r\n", "\r"]), 1)
    data = text.encode()
    return data.replace(b"f (", b"\xff (") if rng.random() < 0.05 else data


def _parse(data: bytes, block: int | None = None) -> tuple:
    """The parser's state after ``data``: read in blocks of ``block`` bytes, every record the
    column-wise path can take taken; with no block size, line by line from a text stream
    (as tracekit read perf text before the column-wise path)."""
    parser = PerfScriptParser()
    if block is None:
        parser.feed(io.TextIOWrapper(io.BytesIO(data), "utf-8", "replace", newline=""))
    else:
        reader = perf_blocks.BlockParser(parser, min_run=1)
        for buf, size, whole in perf_blocks.read_blocks(io.BytesIO(data), block):
            reader.feed(buf, size, whole)
    parser.finish()
    rows = []
    for batch in parser.take_batches():
        columns = {k: v.to_pylist() if hasattr(v, "to_pylist") else list(v)
                   for k, v in batch.items()}
        rows += [dict(zip(columns, values, strict=True))
                 for values in zip(*columns.values(), strict=True)]
    frames, stacks = parser.stacks.tables()
    return (rows, vars(parser.counts), parser.threads, list(parser.events.items()),
            list(parser.periods.items()), list(parser.synthetic_pids.items()),
            parser.header_lines, frames.to_pylist(), stacks.to_pylist())


@pytest.mark.slow  # 3 s; the damaged corpus above stays in the fast run
def test_the_column_wise_path_agrees_with_the_line_parser_on_damaged_variants(monkeypatch):
    taken, rows = [], 0
    emit = perf_blocks.BlockParser._emit

    def counting(self, run, *args):
        taken.append(run.stop - run.start)
        return emit(self, run, *args)
    for seed in range(120):
        data = _variant(random.Random(seed))
        by_lines = _parse(data)
        with monkeypatch.context() as m:
            m.setattr(perf_blocks.BlockParser, "_emit", counting)
            assert _parse(data, 64 if seed % 2 else 4096) == by_lines, (seed, data)
        rows += len(by_lines[0])
    assert sum(taken) > rows // 8  # the column-wise path took its share


class _Recording(Progress):
    def __init__(self, enabled: bool) -> None:
        super().__init__(enabled)
        self.calls: list[tuple] = []

    def phase(self, label, total=0):
        self.calls.append(("phase", label, total))

    def update(self, done, total=None):
        self.calls.append(("update", done, total))


def test_progress_reports_the_file_bytes_read(tmp_path, registry, monkeypatch):
    monkeypatch.setattr(perf_blocks, "BLOCK_BYTES", 64 << 10)
    text = (RECORDED / "burn.perf").read_bytes() * 8
    for name, data in [("p.perf", text), ("p.perf.gz", gzip.compress(text))]:
        path = tmp_path / name
        path.write_bytes(data)
        progress = _Recording(enabled=False)
        tracekit.read(path, registry=registry, progress=progress)
        calls = progress.calls
        size = len(data)
        start = calls.index(("phase", f"reading {name}", size))
        done = [c[1] for c in calls[start:] if c[0] == "update"]
        assert done == sorted(done) and done[-1] == size
        if name == "p.perf":
            assert len(done) == -(-len(text) // (64 << 10))  # one per block


def test_batches_hold_at_most_batch_rows(registry):
    trace = tracekit.read(RECORDED / "burn.perf", registry=registry,
                          options=["batch_rows=100"])
    sizes = [len(c) for c in trace.events["kind"].chunks]
    assert sum(sizes) == 346 and max(sizes) == 100 and len(sizes) >= 4


# --- fields on the header line: -F +addr, +misc, --deltatime ----------------------------------

FIELD_HEADER = re.compile(r"^\s*(?P<comm>\S+)\s+(?:(?P<pid>\d+)/)?(?P<tid>\d+)\s+"
                          r"(?:(?P<misc>[KU])\s+)?(?P<s>\d+)\.(?P<f>\d+):\s+\d+\s+\S+:\s+"
                          r"(?P<addr>[0-9a-f]+)(?P<rest>.*)$")


def _field_samples(text: str) -> list[dict]:
    """The samples of ``-F +addr[,+misc]`` text, cut as a plain reading does: records
    between blank lines; the leaf is the first frame line, or without a callchain the last
    ``hex sym (dso)`` on the header line (after the address and its symbol)."""
    out, records = [], []
    for line in text.splitlines():
        if line.startswith("\t"):
            records[-1].append(line)
        elif line.strip():
            records.append([line])
    for lines in records:
        m = FIELD_HEADER.match(lines[0])
        assert m, lines[0]
        if len(lines) > 1:
            leaf = re.match(r"^\s*[0-9a-f]+ (\S+?) \(", lines[1]).group(1)
        else:
            leaf = re.findall(r"\s[0-9a-f]+ (\S+?) \(", m["rest"])[-1]
        out.append({"name": re.sub(r"\+0x[0-9a-f]+$", "", leaf), "tid": int(m["tid"]),
                    "pid": int(m["pid"]) if m["pid"] else synthetic_pid(m["comm"]),
                    "ts_ns": int(m["s"]) * 10**9 + int(m["f"].ljust(9, "0")),
                    "misc": m["misc"], "addr": "0x" + m["addr"]})
    return out


def _read_both_ways(path: Path, registry, monkeypatch, how: str) -> tracekit.Trace:
    """``path`` read column-wise (every record it can take) or by the line parser alone."""
    if how == "lines":
        monkeypatch.setattr(PerfScriptReader, "_parse", _by_lines)
    else:
        monkeypatch.setattr(perf_blocks, "MIN_RUN", 1)
        monkeypatch.setattr(perf_blocks, "BLOCK_BYTES", 4096)
    return tracekit.read(path, registry=registry)


@pytest.mark.parametrize("how", ["columns", "lines"])
@pytest.mark.parametrize("name", ["burn_addr.perf", "burn_flat_addr_misc.perf",
                                  "burn_faults_addr.perf", "burn_faults_flat_addr.perf",
                                  "burn_misc.perf"])
def test_addr_and_misc_fields_are_read_as_fields(name, how, registry, monkeypatch):
    """-F +addr: the sample address (and for page faults its symbol) is not the function;
    -F +misc: the K/U flag is not part of the comm, and the pid is perf's."""
    text = (RECORDED / name).read_text()
    want = _field_samples(text) if "addr" in name else None
    trace = _read_both_ways(RECORDED / name, registry, monkeypatch, how)
    rows = trace.events.to_pylist()
    assert {r["kind"] for r in rows} == {"sample"}
    got = []
    for r in rows:
        args = json.loads(r["args"])
        got.append({"name": r["name"], "tid": r["tid"], "pid": r["pid"], "ts_ns": r["ts_ns"],
                    "misc": args.get("misc"), "addr": args.get("addr")})
    if want is None:  # burn_misc: a callchain, no address
        heads = [line for line in text.splitlines() if TIMESTAMP.search(line)]
        assert len(rows) == len(heads) == 71
        assert [g["misc"] for g in got] == [h.split()[2] for h in heads]
        assert {g["pid"] for g in got} == {int(heads[0].split()[1].split("/")[0])}
        assert {r["name"] for r in rows} <= {"inner", "handle_softirqs"}
        return
    assert got == want
    assert len(rows) == {"burn_addr.perf": 71, "burn_flat_addr_misc.perf": 55}.get(name, 30)
    assert not any(" " in r["name"] for r in rows)
    names = {r["name"] for r in trace.table("frames").to_pylist()}
    assert "inner" in names or "dl_main" in names


def _times(text: str, kind: str) -> list[tuple[bool, int]]:
    """(is a sample, seconds.frac in ns) of each timed line, in file order."""
    out = []
    for line in text.splitlines():
        m = TIMESTAMP.search(line)
        if m and not line.startswith("\t"):
            out.append(("PERF_RECORD_" not in line, int(m.group(1)) * 10**9
                        + int(m.group(2).ljust(9, "0"))))
    return out


@pytest.mark.parametrize("how", ["columns", "lines"])
def test_deltatime_is_rebuilt_into_times(how, registry, monkeypatch):
    """perf script --deltatime prints each line's time as the time since the line before it
    (one previous time for the whole stream, side-band lines included): with --ns the sum
    of the deltas is exactly the time since the first line, as the absolute times say."""
    absolute = _times((RECORDED / "forks_abs_ns.perf").read_text(), "abs")
    origin = absolute[0][1] if absolute[0][1] else absolute[1][1]  # perf-exec's time 0
    want = [t - origin for sample, t in absolute if sample]
    clock, summed = 0, []
    for sample, t in _times((RECORDED / "forks_delta_ns.perf").read_text(), "delta"):
        clock += t
        if sample:
            summed.append(clock)
    assert summed == want and len(want) == 19
    trace = _read_both_ways(RECORDED / "forks_delta_ns.perf", registry, monkeypatch, how)
    assert trace.events["ts_ns"].to_pylist() == want
    notes = {k[2]: v for k, v in trace.log.outcomes.items()}
    assert notes["times rebuilt from perf script --deltatime: the deltas added up, from 0 "
                 "at the first line"] == 19
    assert not any(k.startswith("warning") for k in notes)
    # In microseconds each delta is cut: the sum is early, by less than 1 us per line.
    trace = _read_both_ways(RECORDED / "forks_delta.perf", registry, monkeypatch, how)
    deltas = [t for _, t in _times((RECORDED / "forks_delta.perf").read_text(), "delta")]
    got = trace.events["ts_ns"].to_pylist()
    assert got == [sum(deltas[:i + 1]) for i in range(len(deltas))]
    true = [t - want[0] for t in want]
    assert all(0 <= a - b < 1000 * len(deltas) for a, b in zip(true, got, strict=True))
    assert any("--deltatime without --ns" in k[2] for k in trace.log.outcomes)
    # Absolute times that start with a side-band line at 0 are not deltas.
    trace = _read_both_ways(RECORDED / "forks_abs_ns.perf", registry, monkeypatch, how)
    assert trace.events["ts_ns"].to_pylist() == [t for s, t in absolute if s]
    assert not any("deltatime" in k[2] for k in trace.log.outcomes)


@pytest.mark.parametrize("how", ["columns", "lines"])
@pytest.mark.parametrize("name", ["burn_mem_fields.perf", "burn_mem_fields_flat.perf"])
def test_fields_before_the_ip_are_kept_apart_from_the_function(name, how, registry,
                                                                monkeypatch):
    """-F +weight,+data_src (perf mem's fields) print numbers and ``|OP …|BLK  N/A`` between
    the event and the ip: the function stays the frame's symbol, the fields are kept."""
    text = (RECORDED / name).read_text()
    heads, leaves, lines = [], [], text.splitlines()
    for i, line in enumerate(lines):
        if TIMESTAMP.search(line):
            heads.append(line)
            below = lines[i + 1] if i + 1 < len(lines) else ""
            frame = below if below.startswith("\t") else line.rsplit("  ", 1)[1]
            leaves.append(re.match(r"^\s*[0-9a-f]+ (\S+?)\+0x", frame).group(1))
    trace = _read_both_ways(RECORDED / name, registry, monkeypatch, how)
    rows = trace.events.to_pylist()
    assert len(rows) == len(heads) == 60
    assert [r["name"] for r in rows] == leaves
    assert all("|OP N/A|" in json.loads(r["args"])["fields"] for r in rows)
    assert [r["ts_ns"] for r in rows] == [
        int(m.group(1)) * 10**9 + int(m.group(2)) * 1000
        for m in map(TIMESTAMP.search, heads)]
    notes = {k[2]: v for k, v in trace.log.outcomes.items()}
    assert notes["fields besides the ip (-F +data_src, +weight, ...): kept as text in "
                 "args.fields"] == 60


@pytest.mark.parametrize("how", ["columns", "lines"])
def test_branch_stacks_are_counted_not_read_as_tracepoints(how, tmp_path, registry,
                                                           monkeypatch):
    """-F brstack (LBR hardware, which the recording machine lacks: the lines as perf
    prints them) puts from/to/flags entries after the event, after the ip frame if any."""
    entries = "  0x401136/0x401120/P/-/-/0  0x401150/0x401130/M/-/-/3 "
    text = "".join(f"a.out  4321/4321  [002] 1000.00{i}000:     100003 cycles:u: {entries}\n"
                   for i in range(3))
    text += ("a.out  4321/4321  [002] 1000.004000:     100003 cycles:u:  "
             f"          401136 main+0x16 (/tmp/a.out){entries}\n")
    path = tmp_path / "br.perf"
    path.write_text(text)
    trace = _read_both_ways(path, registry, monkeypatch, how)
    rows = trace.events.to_pylist()
    assert [(r["kind"], r["name"], r["ts_ns"]) for r in rows] == [
        ("sample", "[no call stack]", 1000_000_000_000),
        ("sample", "[no call stack]", 1000_001_000_000),
        ("sample", "[no call stack]", 1000_002_000_000),
        ("sample", "main", 1000_004_000_000)]
    notes = {k[2]: v for k, v in trace.log.outcomes.items()}
    assert notes["branch stacks (-F brstack) not represented: 8 entries skipped"] == 4


@pytest.mark.parametrize("how", ["columns", "lines"])
def test_deltatime_cut_at_its_start_is_a_warning(how, tmp_path, registry, monkeypatch):
    """Without its first line (0) --deltatime output cannot be told from times for sure:
    the times that go back within a thread are counted in a warning, as a plain reading
    counts them."""
    text = (RECORDED / "forks_delta.perf").read_text()
    cut = text[text.index("\n\n") + 2:]  # the first sample gone
    path = tmp_path / "cut.perf"
    path.write_text(cut)
    last, back = {}, 0
    for line in cut.splitlines():
        if (m := TIMESTAMP.search(line)) and not line.startswith("\t"):
            ids, t = line.split()[1], int(m.group(1)) * 10**9 + int(m.group(2)) * 1000
            back += ids in last and t < last[ids]
            last[ids] = t
    trace = _read_both_ways(path, registry, monkeypatch, how)
    assert trace.events.num_rows == 18
    notes = {k[2]: v for k, v in trace.log.outcomes.items()}
    [(note, count)] = [(k, v) for k, v in notes.items() if "go back" in k]
    assert count == back > 0 and "--deltatime" in note
    assert not any("rebuilt" in k for k in notes)


def test_a_file_cut_short_is_warned_of(tmp_path, registry):
    """A perf script file whose last byte is no line break was cut (head -c, a copy taken
    while perf wrote it): its last sample may be incomplete, and a warning says so. Whole
    files, the recorded ones and the real fixtures, end every line and get no such warning."""
    whole = shared_path("perf-script", "speedscope", "system-wide.linux-perf.txt")
    cut = tmp_path / "cut.perf"
    cut.write_bytes(whole.read_bytes()[:5000])
    assert not cut.read_bytes().endswith(b"\n")
    warning = ("samples", "warning: the last line has no line break: the file may be cut "
               "short, and its last sample incomplete")
    assert tracekit.read(cut, registry=registry).log.outcomes[("cut.perf", *warning)] == 1
    assert (whole.name, *warning) not in tracekit.read(whole, registry=registry).log.outcomes


@pytest.mark.parametrize("rel,varies", [("firefox-profiler/graphviz.perf.gz", True),
                                        ("flamegraph/perf-cycles-instructions-01.txt", False)])
def test_folded_samples_say_when_their_periods_vary(rel, varies, registry, tmp_path):
    """graphviz was recorded at a frequency (perf record -F 4000): its samples' periods vary,
    so a count of samples is not the count of cycles, and the conversion says so; the
    cycles-instructions file used fixed periods (-c), so counting samples loses nothing."""
    path = shared_path("perf-script", *rel.split("/"))
    text = gzip.decompress(path.read_bytes()).decode() if rel.endswith(".gz") else \
        path.read_text()
    periods: dict[str, set[int | None]] = {}
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            m = re.search(r":\s+(?:(\d+)\s+)?([\w.:/-]+?):\s*$", line)
            periods.setdefault(m.group(2), set()).add(int(m.group(1)) if m.group(1) else None)
    trace = tracekit.read(path, registry=registry)
    result = tracekit.write(trace, tmp_path / "out.folded", registry=registry)
    assert "cycles" in periods  # the event folded; without a printed period, 1 each
    assert (len(periods["cycles"]) > 1) is varies
    lost = result.skipped.get(f"field value: {VARYING_PERIODS}", 0)
    assert lost == (result.written["samples"] if varies else 0)
