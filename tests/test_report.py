"""`krefine report`: a self-contained report.html, checked as text and in headless Chromium.

The Chromium tests need Debian's `chromium` (apt-get install -y chromium) and skip
without it. The screenshot is kept under build/test-artifacts/ (or
$KREFINE_TEST_ARTIFACTS) for CI to upload.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent import REPO_ROOT
from agent.cli import main
from fixtures.runs.builder import Cand, build_run, recorded, story
from tools.verdict import Status

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install -y chromium)")
ARTIFACTS = Path(os.environ.get("KREFINE_TEST_ARTIFACTS", REPO_ROOT / "build" / "test-artifacts"))


@pytest.fixture
def report(tmp_path) -> Path:
    build_run(tmp_path / "run", story())
    assert main(["report", str(tmp_path / "run")]) == 0
    return tmp_path / "run" / "report.html"


class _Lineage(HTMLParser):
    """Depth of <ul> nesting of each candidate link inside ul#lineage."""
    def __init__(self):
        super().__init__()
        self.depth, self.inside, self.found = 0, False, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "ul":
            self.inside = self.inside or a.get("id") == "lineage"
            self.depth += self.inside
        elif tag == "a" and self.inside and a.get("href", "").startswith("#cand-"):
            self.found[a["href"][6:]] = self.depth

    def handle_endtag(self, tag):
        if tag == "ul" and self.inside:
            self.depth -= 1
            self.inside = self.depth > 0


def test_report_is_written_into_the_run_dir(report):
    assert report.read_text().startswith("<!doctype html>")


def test_report_loads_nothing_from_outside(report):
    text = report.read_text()
    targets = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert all(t.startswith("#") for t in targets) and "<link" not in text and "@import" not in text


def test_outcome_names_the_winner_and_its_speedups(report):
    outcome = " ".join(report.read_text().split('id="outcome"')[1].split("</div>")[0].split())
    assert "r03-c00</a>: 1.45× vs eager, 1.10× vs torch.compile" in outcome


def test_speedup_chart_has_a_dot_per_correct_candidate_and_baseline(report):
    text = report.read_text()
    assert (text.count("<title>each correct candidate vs eager: "),
            text.count("<title>each correct candidate vs torch.compile: ")) == (2, 2)


def test_verdict_chart_has_a_bar_segment_per_round_and_verdict(report):
    segments = re.findall(r"<title>(round \d): 1 (\w+)</title></rect>", report.read_text())
    assert segments == [("round 1", "incorrect"), ("round 1", "compile_error"), ("round 2", "correct"),
                        ("round 2", "runtime_error"), ("round 3", "correct"), ("round 3", "rejected")]


def test_lineage_nests_each_child_under_its_parent(report):
    parser = _Lineage()
    parser.feed(report.read_text())
    assert parser.found == {"r01-c00": 1, "r02-c01": 2, "r01-c01": 1, "r02-c00": 2, "r03-c00": 3, "r03-c01": 3}


def test_candidate_shows_the_feedback_its_parent_got(report):
    section = report.read_text().split('id="cand-r03-c00"')[1].split("</details>")[0]
    received = section.split("Feedback received")[1].split("Verdict and feedback on it")[0]
    assert "Correct. 0.82x eager, 0.61x torch.compile" in received


def test_candidate_diff_marks_the_added_line(report):
    section = report.read_text().split('id="cand-r03-c00"')[1]
    inserted = re.findall(r'<span class="gi">(.*?)</span>', section.split("</details>")[0])
    assert inserted == ["+++ r03-c00.py", "+        relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)"]


def test_failed_candidate_lists_its_diagnostic_line(report):
    section = report.read_text().split('id="cand-r01-c00"')[1].split("</details>")[0]
    assert "<td>triton_compile</td><td>12</td>" in section


def test_model_output_is_escaped_not_run(tmp_path):
    cands = [Cand("r01-c00", None, Status.INCORRECT, feedback="</pre><script>alert(1)</script>")]
    build_run(tmp_path / "run", cands, solved=False, stop_reason="max_rounds")
    main(["report", str(tmp_path / "run")])
    text = (tmp_path / "run" / "report.html").read_text()
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text


def test_cpu_run_says_nothing_was_timed_instead_of_a_chart(tmp_path):
    build_run(tmp_path / "run", [Cand("r01-c00", None, Status.CORRECT, eager=1.0, compile=1.0)], device="cpu")
    main(["report", str(tmp_path / "run")])
    text = (tmp_path / "run" / "report.html").read_text()
    assert "Nothing was timed (a cpu run)" in text and "best so far vs eager" not in text


def test_missing_run_dir_exits_2_naming_it(tmp_path, capsys):
    assert main(["report", str(tmp_path / "gone")]) == 2
    assert capsys.readouterr().err == f"krefine: error: {tmp_path / 'gone'}: no such run directory\n"


# ---------------------------------------------------------------- in a browser

def chromium(url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
         *extra, url], capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    """Chromium logs every console message, error or log, as an INFO:CONSOLE line."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


@needs_chromium
def test_console_check_catches_page_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><p>x</p><script>console.error('boom'); missing();</script>")
    messages = console_messages(chromium(page.as_uri(), tmp_path, "--dump-dom").stderr)
    assert any("boom" in m for m in messages) and any("missing is not defined" in m for m in messages)


@needs_chromium
@pytest.mark.parametrize("which", ["story", "relu_replay"])
def test_report_renders_in_chromium_with_no_console_messages(which, tmp_path):
    if which == "story":
        run_dir = build_run(tmp_path / "story", story()).root
    else:
        run_dir = recorded(tmp_path)
    assert main(["report", str(run_dir)]) == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"report-{which}.png"
    shot.unlink(missing_ok=True)
    done = chromium((run_dir / "report.html").as_uri(), tmp_path, "--window-size=1280,2400", f"--screenshot={shot}")
    assert console_messages(done.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


@needs_chromium
def test_report_script_opens_the_linked_candidate(report, tmp_path):
    dom = chromium(report.as_uri() + "#cand-r03-c00", tmp_path, "--dump-dom").stdout
    assert re.findall(r'<details class="cand[^"]*" id="cand-([\w-]+)" open="">', dom) == ["r03-c00"]


@needs_chromium
def test_bench_page_renders_in_chromium_with_no_console_messages(tmp_path):
    from agent.bench import suite as bench
    from agent.bench.stats import problem_result
    from agent.loop.runstats import load_run
    build_run(tmp_path / "run", story())
    results = [problem_result(load_run(tmp_path / "run"))]
    settings = [(bench.Setting(f"budget.max_rounds={n}", {}), results) for n in (3, 4)]
    bench.write_results(tmp_path / "out", tmp_path, settings)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "bench.png"
    shot.unlink(missing_ok=True)
    done = chromium((tmp_path / "out" / "bench.html").as_uri(), tmp_path, "--window-size=1280,1600",
                    f"--screenshot={shot}")
    assert console_messages(done.stderr) == [] and shot.stat().st_size > 20_000


def test_interrupted_run_report_says_unfinished_and_how_to_resume(tmp_path):
    build_run(tmp_path / "run", story()[:2], write_summary=False)
    main(["report", str(tmp_path / "run")])
    text = (tmp_path / "run" / "report.html").read_text()
    assert "unfinished" in text and f"krefine resume {tmp_path / 'run'}" in text


def test_the_report_of_a_run_whose_only_correct_kernel_is_the_seed_names_the_seed(tmp_path):
    build_run(tmp_path / "run", [Cand("r00-c00", None, Status.CORRECT, eager=1.2, compile=1.0, origin="inductor_seed")],
              solved=False)
    assert main(["report", str(tmp_path / "run")]) == 0
    html = (tmp_path / "run" / "report.html").read_text()
    assert "no correct candidate beyond the Inductor seed; the seed r00-c00 is correct" in html


def test_the_report_counts_the_seed_and_the_sweep_among_the_candidates_it_judged(tmp_path):
    # a --model none run: no model candidate, yet four were judged (its chart shows four)
    build_run(tmp_path / "run", [Cand("r00-c00", None, Status.CORRECT, origin="inductor_seed"),
                                 *(Cand(f"r00-c0{i}", "r00-c00", Status.CORRECT, origin="sweep") for i in (1, 2, 3))],
              device="cpu", solved=True)
    assert main(["report", str(tmp_path / "run")]) == 0
    html = (tmp_path / "run" / "report.html").read_text()
    assert "4 judged: 1 seed, 3 sweep variants" in html and "candidates evaluated" not in html


def test_the_bench_page_of_an_untimed_suite_shows_unknown_speed_as_a_dash_not_zero(tmp_path):
    from agent.bench import suite as bench
    from agent.bench.stats import problem_result
    from agent.loop.runstats import load_run
    build_run(tmp_path / "run", [Cand("r00-c00", None, Status.CORRECT, origin="inductor_seed"),
                                 Cand("r00-c01", "r00-c00", Status.CORRECT, origin="sweep")], device="cpu", solved=True)
    bench.write_results(tmp_path / "out", tmp_path, [(bench.Setting("default", {}), [problem_result(load_run(tmp_path / "run"))])])
    html = (tmp_path / "out" / "bench.html").read_text()
    row = next(line for line in html.split("<tr>") if "fast_1 vs eager" in line)
    assert "0.00" not in row and "—" in row
    assert "yes (untimed)" in html and "0/0" not in html
