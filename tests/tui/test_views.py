"""Pure renderers: every state readable in words, GPU bars with the server's share."""

from textual.content import Content

from sgltui import protocol
from sgltui.core import charts
from sgltui.tui import fmt, typed, views
from tests.support.scripted import make_slot, make_telemetry


def plain(markup: str) -> str:
    return Content.from_markup(markup).plain


def test_bar_cells_keep_small_shares_visible_and_sum_right():
    assert fmt.bar_cells([0.5, 0.25], 40) == [20, 10]
    assert fmt.bar_cells([0.001, 0.0], 40) == [1, 0]  # a tiny server still shows
    assert sum(fmt.bar_cells([0.7, 0.6], 30)) == 30  # never overflows
    # the one fill rule of every bar: a GPU at 99.7% is not drawn full, as in `top` and reports
    assert sum(fmt.bar_cells([0.5, 0.497], 40)) == 39 == charts.filled_cells(0.997, 40)


def test_gpu_bar_shows_server_share_and_simulated_label():
    tel = make_telemetry(server_gib=70.5)
    total_gib = tel["gpus"][0]["total_bytes"] / 2**30
    lines = [plain(l) for l in views.gpu_lines(protocol.telemetry_view(tel), 80)]
    assert "72.5/140.4 GiB" in lines[0]  # binary, and labelled so
    bar = lines[0][5 : lines[0].index(" ", 6)]
    assert bar.count("█") == round(70.5 / total_gib * (80 - 26))
    assert "(simulated)" in lines[1] and "slot 0 70.5 GiB" in lines[1]


def detail(width: int, **gpu: object) -> str:
    g = make_telemetry(server_gib=80.0)["gpus"][0] | gpu
    return plain(views.gpu_detail(protocol.telemetry_view({"gpus": [g]}).gpus[0], width))


def test_gpu_detail_shows_util_power_and_temperature_in_full_where_it_fits():
    line = detail(80)
    assert line.strip() == "NVIDIA H200 (simulated) · util 87% · 420 W · 61°C · █ slot 0 80.0 GiB"
    assert detail(66).strip() == "H200 (sim) · util 87% · 420 W · 61°C · █ slot 0 80.0 GiB"


def test_gpu_detail_abbreviates_util_power_and_temperature_never_cuts_them():
    # the memory pane's width at 100 and 80 terminal columns (tests/tui/test_memory_pane.py)
    assert detail(54).strip() == "(sim) util 87% · 420 W · 61°C · █ slot 0 80.0 GiB"
    assert detail(38).strip() == "(sim) 87% 420W 61°C · █ 80.0 GiB"
    assert detail(30).strip() == "(sim) 87% 420W 61°C"
    for width in range(30, 120):
        line = detail(width)
        assert len(line) <= width, width
        assert "87%" in line and "420" in line and "61°C" in line, width


def test_gpu_detail_of_a_real_gpu_and_missing_readings():
    nvml = {"name": "NVIDIA H100 80GB HBM3", "simulated": False}
    assert detail(39, **nvml).strip() == "87% 420W 61°C · █ slot 0 80.0 GiB"
    assert "sim" not in detail(100, **nvml) and "NVIDIA H100 80GB HBM3" in detail(100, **nvml)
    # NVML without power readings (some boards): the rest still shows, no placeholder
    assert (
        detail(100, power_w=None).strip()
        == "NVIDIA H200 (simulated) · util 87% · 61°C · █ slot 0 80.0 GiB"
    )
    two = {"server_bytes": {"0": 40 * 2**30, "1": 30 * 2**30}}
    assert detail(50, **two).strip() == "(sim) 87% 420W 61°C · █ 0:40.0 1:30.0 GiB"
    assert detail(39, **two).strip() == "H200 (sim) · 87% 420W 61°C"  # the bar shows the shares


def test_no_gpu_source_is_a_plain_message():
    tel = {
        "gpus": [],
        "gpu_source": {"kind": "none", "message": "no NVIDIA driver (NVML not found)"},
    }
    view = protocol.telemetry_view(tel)
    assert plain(views.gpu_lines(view, 80)[0]) == "GPU: no NVIDIA driver (NVML not found)"


def test_launching_slot_shows_phase_progress_and_eta():
    slot = make_slot(state="launching", phase="capturing CUDA graphs", progress=0.5, eta_s=75)
    text = plain(views.slot_details(typed.slot(slot)))
    assert "launching" in text and "capturing CUDA graphs" in text
    assert " 50%" in text and "ETA 1m15s" in text


def test_failed_slot_shows_cause_fix_and_evidence():
    cause = {
        "kind": "port",
        "summary": "port 30000 is already in use",
        "fix": "stop the other server or set port",
        "lines": ["[Errno 98] error while attempting to bind on address"],
        "exit_code": 1,
    }
    text = plain(views.slot_details(typed.slot(make_slot(state="failed", cause=cause))))
    assert "failed" in text and "cause port 30000 is already in use" in text
    assert "fix   stop the other server or set port" in text and "[Errno 98]" in text


def test_a_crashed_slot_says_what_the_restart_policy_did():
    note = "gave up restarting: 3 crashes in 10 minutes (last: killed by SIGKILL)"
    slot = make_slot(state="crashed", restart=note)
    text = plain(views.slot_details(typed.slot(slot)))
    assert f"restart {note}" in text


def test_capacity_card_says_when_limits_were_reset():
    text = plain(
        "\n".join(
            views.capacity_lines(
                protocol.CapacityCard(
                    max_running_requests=4,
                    requested_max_running_requests=8,
                    kv_pool_tokens=1000,
                    notes=["reset to 4"],
                )
            )
        )
    )
    assert "max running 4 (asked 8)" in text and "KV 1,000 tok" in text and "! reset to 4" in text


def test_profile_names_with_markup_are_escaped():
    text = plain(views.profile_option(typed.profile({"name": "[b]odd", "key": "7"}), []))
    assert "[b]odd" in text


def test_chart_grows_with_the_terminal():
    from sgltui.tui.widgets.throughput import plot_rows_for

    heights = [plot_rows_for(h) for h in (24, 30, 40, 50, 80)]
    assert heights == sorted(heights) and heights[0] == 2 and heights[-1] > heights[2] > 2


def test_every_fill_bar_uses_the_one_rule():
    """views.progress_bar, the Jobs pane's bar, `top`'s GPU bar and hbar fill the same cells."""
    import re

    from sgltui.commands.top_text import bar as top_bar
    from sgltui.core import charts
    from sgltui.tui.views import progress_bar
    from sgltui.tui.widgets.jobs import _bar as job_bar

    for frac in (0.0, 0.001, 0.04, 0.5, 0.56, 0.97, 0.999, 1.0, 1.5):
        want = charts.filled_cells(frac, 20)
        filled = re.search(r"\[\$accent\](█*)\[/\]", progress_bar(frac, 20))
        assert filled is not None and len(filled.group(1)) == want, (frac, progress_bar(frac, 20))
        assert job_bar(frac, 20).count("█") == want, frac
        assert top_bar(frac, 20).count("#") == want, frac
        assert charts.hbar(frac, 1.0, 20).count("█") == charts.filled_cells(frac, 160) // 8
    assert progress_bar(0.999, 20).endswith(" 99%")  # the label does not say done either
