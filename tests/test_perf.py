"""The perf script reader, the hotspots analyzer and the folded writer, against independent
readings of the text (regular expressions and plain loops written here)."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, SHARED, read_text, shared_path
from perfetto_check import decode_and_check
from tracekit.cli import main

RECORDED = FIXTURES / "perf-recorded"
TIMESTAMP = re.compile(r"\s(\d+)\.(\d{6,9}):(\s|$)")


def perf_files() -> list[str]:
    base = SHARED / "perf-script"
    if not base.exists():
        return ["<missing>"]
    return sorted(str(p.relative_to(SHARED)) for p in base.rglob("*") if p.is_file())


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


@pytest.mark.parametrize("rel", perf_files())
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
    assert meta["events"] == {"cpu-clock:ppp": 346}
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
    else:
        assert set(ev["pid"].to_pylist()) == {None}


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
            "   java    77/88     94564.2: cycles:\n\n"  # one decimal: not a timestamp
            "simple-terminat     9 198789.478194:    1001001 cpu-clock:\n"
            "\t    7f00 f (/x)\n")
    trace = read_perf(tmp_path, registry, text)
    rows = rows_of(trace)
    assert [(r["pid"], r["tid"]) for r in rows] == [(24636, 25607), (None, 5858), (None, 9)]
    assert [r["ts_ns"] for r in rows] == [94564109216000, 94564109217123, 198789478194000]
    threads = {(t["pid"], t["tid"]): t["name"] for t in trace.threads.to_pylist()}
    assert threads[(24636, 25607)] == "V8 WorkerThread"
    assert threads[(None, 5858)] == "FS Broker 5858"
    assert '"cpu":3' in rows[1]["args"]
    log = {k[1]: v for k, v in trace.log.outcomes.items()}
    assert log["unrecognized lines"] == 1


def test_pitfall_22_period_modifiers_and_padded_event_names(tmp_path, registry):
    text = ("a 1 1.000001:     250000 cpu-clock:pppH:\n\t 1 f (/x)\n\n"
            "a 1 1.000002: cpu_atom/cycles/Pu:\n\t 1 f (/x)\n\n"
            "a 1 1.000003:       1000       cycles:\n\t 1 f (/x)\n\n"
            "a 1 1.000004:       1000 instructions:\n\t 1 f (/x)\n")
    trace = read_perf(tmp_path, registry, text)
    rows = rows_of(trace)
    assert [r["value"] for r in rows] == [250000.0, 1.0, 1000.0, 1000.0]
    events = trace.metadata["sources"]["t.perf"]["events"]
    assert events == {"cpu-clock:pppH": 1, "cpu_atom/cycles/Pu": 1, "cycles": 1,
                      "instructions": 1}


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
    keep = event or events.most_common(1)[0][0]
    for comm, ev, frames in parsed:
        if ev == keep and frames:
            # ';' separates frames, so one inside a name (Java's Lpkg/Class;.m) becomes ':'.
            folds[";".join(f.replace(";", ":") for f in [comm, *reversed(frames)])] += 1
    return folds


@pytest.mark.parametrize("rel", ["speedscope/system-wide.linux-perf.txt",
                                 "flamegraph/perf-vertx-stacks-01.txt",
                                 "flamegraph/perf-cycles-instructions-01.txt",
                                 "haandfeng_aarch64/out.perf"])
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
    assert "CPU hotspots" in out and "__libc_start_call_main > main > alpha > inner" in out
