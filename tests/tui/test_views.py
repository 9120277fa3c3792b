"""Pure renderers: every state readable in words, GPU bars with the server's share."""

from textual.content import Content

from sgltui.tui import fmt, views
from sgltui.tui.scripted import make_slot, make_telemetry


def plain(markup: str) -> str:
    return Content.from_markup(markup).plain


def test_bar_cells_keep_small_shares_visible_and_sum_right():
    assert fmt.bar_cells([0.5, 0.25], 40) == [20, 10]
    assert fmt.bar_cells([0.001, 0.0], 40) == [1, 0]  # a tiny server still shows
    assert sum(fmt.bar_cells([0.7, 0.6], 30)) == 30  # never overflows


def test_gpu_bar_shows_server_share_and_simulated_label():
    lines = [plain(l) for l in views.gpu_lines(make_telemetry(server_gb=70.5), 80)]
    assert "82.5/141.0 GB".replace("82.5", fmt.gb(72.5e9)) in lines[0]
    bar = lines[0][5 : lines[0].index(" ", 6)]
    assert bar.count("█") == round(70.5 / 141 * (80 - 26))
    assert "simulated" in lines[1] and "slot 0 70.5G" in lines[1]


def test_no_gpu_source_is_a_plain_message():
    tel = {
        "gpus": [],
        "gpu_source": {"kind": "none", "message": "no NVIDIA driver (NVML not found)"},
    }
    assert plain(views.gpu_lines(tel, 80)[0]) == "GPU: no NVIDIA driver (NVML not found)"


def test_launching_slot_shows_phase_progress_and_eta():
    slot = make_slot(state="launching", phase="capturing CUDA graphs", progress=0.5, eta_s=75)
    text = plain(views.slot_details(slot))
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
    text = plain(views.slot_details(make_slot(state="failed", cause=cause)))
    assert "failed" in text and "cause port 30000 is already in use" in text
    assert "fix   stop the other server or set port" in text and "[Errno 98]" in text


def test_capacity_card_says_when_limits_were_reset():
    text = plain(
        "\n".join(
            views.capacity_lines(
                {
                    "max_running_requests": 4,
                    "requested_max_running_requests": 8,
                    "kv_pool_tokens": 1000,
                    "notes": ["reset to 4"],
                }
            )
        )
    )
    assert "max running 4 (asked 8)" in text and "KV 1,000 tok" in text and "! reset to 4" in text


def test_profile_names_with_markup_are_escaped():
    text = plain(views.profile_option({"name": "[b]odd", "key": "7"}, []))
    assert "[b]odd" in text


def test_chart_buckets_average_and_keep_the_newest_on_the_right():
    from sgltui.tui.widgets.throughput import buckets, spark_rows

    assert buckets([1, 3, 5, 7], 2) == [2.0, 6.0]
    assert buckets([1, 2], 10) == [1, 2]  # fewer points than columns: drawn as they are
    rows = spark_rows([0, 5, 10], 3, 1)
    assert rows == [" ▄█"]
    tall = spark_rows([0, 5, 10], 3, 2)
    assert tall == ["  █", " ██"]  # 5 of 10 fills the lower row; 10 fills both
    assert spark_rows([0.01, 10], 2, 1)[0][0] == "▁"  # small but not zero is visible
