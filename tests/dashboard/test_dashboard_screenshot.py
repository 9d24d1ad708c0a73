"""The way docs/dashboard.md gives to take a screenshot of a page works, where a plain
headless Chromium screenshot is empty (Bokeh draws after the load event)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

from dashboard_browser import colourful_pixels, find_chromium

from daskhpc import dashboard
from daskhpc.runtime import worker_addresses

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: A heatmap with data has thousands of coloured pixels; an empty page none.
MIN_COLOURFUL = 5_000


def _recipe() -> str:
    text = (ROOT / "docs" / "dashboard.md").read_text()
    section = text.split("## Taking a screenshot of a page", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_screenshot_has_the_plot_a_plain_one_has_not(dash_client, browser,
                                                                      tmp_path):
    # (``browser``: skips without Chromium)
    workers = worker_addresses(dash_client)
    assert dashboard.publish(dash_client, "run", name="shot", workflow="demo", workers=workers)
    assert dashboard.publish(dash_client, "plan", matrix=[[0, 4e6], [2e6, 0]], workers=workers,
                             scope="run")
    base = dash_client.dashboard_link.rsplit("/", 1)[0]
    url = base + "/individual-daskhpc-comm"
    # the recipe as the docs print it, on this scheduler's page
    code = _recipe().replace('"http://localhost:8787/individual-daskhpc-comm"', repr(url))
    assert repr(url) in code
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(
                       [str(ROOT / "tests" / "dashboard"), os.environ.get("PYTHONPATH", "")])})
    good = colourful_pixels((tmp_path / "comm.png").read_bytes())
    # what the docs say a plain screenshot gives
    plain = tmp_path / "plain.png"
    subprocess.run([find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={plain}",
                    "--window-size=1200,800", url], check=True, timeout=120,
                   capture_output=True)
    assert good > MIN_COLOURFUL > colourful_pixels(plain.read_bytes()), \
        (good, colourful_pixels(plain.read_bytes()))
