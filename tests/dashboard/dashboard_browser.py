"""Headless Chromium driven over the DevTools protocol, for the dashboard tests.

No browser-automation package: Chromium (Debian package ``chromium``) is started
with ``--remote-debugging-port=0``, and each page is opened as a DevTools target
and spoken to over a websocket (``tornado.websocket``, which Dask already needs).
We collect JavaScript exceptions and console errors, evaluate expressions in the
page, and take PNG screenshots.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import numpy as np

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
         "--mute-audio", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless browser process; :meth:`page` opens a URL in a fresh tab."""

    def __init__(self, binary: str):
        self.profile = tempfile.mkdtemp(prefix="daskhpc-chromium-")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.port = self._wait_for_port()

    def _wait_for_port(self, timeout: float = 30.0) -> int:
        # Chromium writes its chosen port to DevToolsActivePort in the profile.
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            try:
                with open(path) as f:
                    first = f.readline().strip()
                if first.isdigit():
                    return int(first)
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def page(self, url: str, *, probe_js: str, ready, timeout: float = 30.0,
             width: int = 1200, height: int = 800) -> dict:
        """Open ``url``, evaluate ``probe_js`` until ``ready(value)`` is true, take a
        screenshot, close the tab.

        Returns
        -------
        dict
            ``value`` (what ``probe_js`` last returned), ``history`` (every value it
            returned, oldest first), ``png`` (bytes), ``errors`` (console errors and
            uncaught exceptions), ``ready`` (bool).
        """
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank",
                                     method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            target = json.loads(r.read())
        try:
            return asyncio.run(_drive(target["webSocketDebuggerUrl"], url, probe_js, ready,
                                      timeout, width, height))
        finally:
            close = f"http://127.0.0.1:{self.port}/json/close/{target['id']}"
            with urllib.request.urlopen(close, timeout=10):
                pass


async def _drive(ws_url, url, probe_js, ready_fn, timeout, width, height) -> dict:
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(ws_url, max_message_size=256 * 2**20)
    ids = itertools.count(1)
    errors: list[str] = []
    pending: dict[int, asyncio.Future] = {}

    async def reader():
        while True:
            msg = await ws.read_message()
            if msg is None:
                return
            m = json.loads(msg)
            if "id" in m and m["id"] in pending:
                pending.pop(m["id"]).set_result(m)
            elif m.get("method") == "Runtime.exceptionThrown":
                d = m["params"]["exceptionDetails"]
                errors.append("exception: " + d.get("exception", {}).get("description",
                                                                        d.get("text", "")))
            elif m.get("method") == "Runtime.consoleAPICalled" and \
                    m["params"]["type"] in ("error", "assert"):
                errors.append("console: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in m["params"]["args"]))
            elif m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error":
                e = m["params"]["entry"]
                errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}")

    async def call(method, **params):
        i = next(ids)
        fut = asyncio.get_running_loop().create_future()
        pending[i] = fut
        ws.write_message(json.dumps({"id": i, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    task = asyncio.create_task(reader())
    try:
        for domain in ("Runtime", "Log", "Page"):
            await call(f"{domain}.enable")
        await call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                   deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        value, ready, history = None, False, []
        while time.monotonic() < deadline:
            res = await call("Runtime.evaluate", expression=probe_js, returnByValue=True)
            value = res.get("result", {}).get("value")
            if value is not None:
                history.append(value)
            if value is not None and not res.get("exceptionDetails") and ready_fn(value):
                ready = True
                break
            await asyncio.sleep(0.25)
        await asyncio.sleep(0.5)   # one more periodic update and a repaint
        shot = await call("Page.captureScreenshot", format="png")
        return {"value": value, "ready": ready, "errors": errors, "history": history,
                "png": base64.b64decode(shot["data"])}
    finally:
        # wait for the close handshake, or the socket is left for the GC to find
        ws.close()
        try:
            await asyncio.wait_for(task, 5)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()


def colourful_pixels(png: bytes, spread: int = 60) -> int:
    """Pixels whose RGB channels differ by more than ``spread``: plot marks, not
    white background, grey axes or black text."""
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)
    return int(((img.max(axis=2) - img.min(axis=2)) > spread).sum())


def models_js(sources=(), texts=(), visible=()) -> str:
    """JS returning ``{name: total}`` of Bokeh data sources, ``{name: text}`` of Divs and
    ``{name: visible}`` of layouts, read from the page's Bokeh document (None until it
    exists)."""
    return """(() => {
      const doc = window.Bokeh && Bokeh.documents && Bokeh.documents[0];
      if (!doc) return null;
      const out = {totals: {}, texts: {}};
      for (const name of %s) {
        const m = doc.get_model_by_name(name);
        if (!m) continue;
        const data = m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
        const t = data.total;
        out.totals[name] = t && t.length ? Number(t[0]) : 0;
      }
      for (const name of %s) {
        const m = doc.get_model_by_name(name);
        if (m) out.texts[name] = m.text;
      }
      out.visible = {};
      for (const name of %s) {
        const m = doc.get_model_by_name(name);
        if (m) out.visible[name] = m.visible;
      }
      out.nav = Array.from(document.querySelectorAll(".navbar a")).map(a => a.textContent.trim());
      return out;
    })()""" % (json.dumps(list(sources)), json.dumps(list(texts)), json.dumps(list(visible)))
