"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client; no selenium).

with Browser() as b:                       # raises BrowserUnavailable when there is no chromium
  page = b.open("file:///.../step.html")   # waits for the load event
  page.evaluate("document.title")
  page.errors                              # console errors and uncaught exceptions so far
  page.screenshot("shot.png")
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import aiohttp

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserUnavailable(RuntimeError):
  """No Chromium binary on PATH, or it did not start."""


def find_chromium() -> str | None:
  for name in CANDIDATES:
    path = shutil.which(name)
    if path:
      return path
  return None


class Page:
  """One tab: the errors it reported, JavaScript evaluation, screenshots."""

  def __init__(self, browser: "Browser", ws):
    self.browser, self.ws = browser, ws
    self.errors: list[str] = []
    self._id = 0
    self._events: list[dict] = []

  def _call(self, method: str, timeout: float = 30.0, **params):
    return self.browser.loop.run_until_complete(self._acall(method, timeout, **params))

  async def _acall(self, method, timeout, **params):
    self._id += 1
    mid = self._id
    await self.ws.send_str(json.dumps({"id": mid, "method": method, "params": params}))
    deadline = time.monotonic() + timeout
    while True:
      msg = await self.ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
      if msg.type != aiohttp.WSMsgType.TEXT:
        raise BrowserUnavailable(f"the DevTools connection closed during {method}")
      data = json.loads(msg.data)
      if data.get("id") == mid:
        if "error" in data:
          raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})
      self._event(data)

  def _event(self, data: dict) -> None:
    method, p = data.get("method"), data.get("params", {})
    self._events.append(data)
    if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
      self.errors.append(
        "console."
        + p["type"]
        + ": "
        + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
      )
    elif method == "Runtime.exceptionThrown":
      d = p.get("exceptionDetails", {})
      self.errors.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
    elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
      self.errors.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))

  def _wait_event(self, name: str, timeout: float = 30.0) -> None:
    async def wait():
      if any(e.get("method") == name for e in self._events):
        return
      deadline = time.monotonic() + timeout
      while True:
        msg = await self.ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
        data = json.loads(msg.data)
        self._event(data)
        if data.get("method") == name:
          return

    self.browser.loop.run_until_complete(wait())

  def navigate(self, url: str) -> None:
    self._events.clear()
    self._call("Page.navigate", url=url)
    self._wait_event("Page.loadEventFired")

  def evaluate(self, expression: str):
    """The JSON value of a JavaScript expression in the page."""
    result = self._call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in result:
      raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
    return result["result"].get("value")

  def screenshot(self, path: str, width: int = 1280, height: int = 900, full_page: bool = False) -> str:
    if full_page:
      height = int(self.evaluate("document.documentElement.scrollHeight"))
    self._call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    data = self._call("Page.captureScreenshot", format="png")["data"]
    with open(path, "wb") as f:
      f.write(base64.b64decode(data))
    return path


class Browser:
  """A headless Chromium process with a DevTools endpoint on a free port (a context manager)."""

  def __init__(self, binary: str | None = None, start_timeout_s: float = 60.0):
    self.binary = binary or find_chromium()
    if not self.binary:
      raise BrowserUnavailable(
        f"no Chromium on PATH (looked for {', '.join(CANDIDATES)}); on Debian/Ubuntu: "
        "apt-get install -y chromium (make test does it when run as root)"
      )
    self.start_timeout_s = start_timeout_s
    self.loop = asyncio.new_event_loop()
    self.proc = self.session = None
    self.profile = tempfile.mkdtemp(prefix="chromium_profile_")
    self._pages = []

  def __enter__(self) -> "Browser":
    args = [
      self.binary,
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--remote-debugging-port=0",
      "--remote-allow-origins=*",
      f"--user-data-dir={self.profile}",
      "about:blank",
    ]
    self._log = tempfile.TemporaryFile()  # a file, not a pipe: a chatty browser never blocks on it
    self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log)
    port_file = os.path.join(self.profile, "DevToolsActivePort")
    deadline = time.monotonic() + self.start_timeout_s
    while not (os.path.exists(port_file) and open(port_file).read().strip()):
      if self.proc.poll() is not None or time.monotonic() > deadline:
        self._log.seek(0)
        err = self._log.read().decode(errors="replace")[-800:]
        self.close()
        raise BrowserUnavailable(f"{self.binary} did not start a DevTools endpoint: {err}")
      time.sleep(0.1)
    self.port = int(open(port_file).read().split()[0])
    self.session = self.loop.run_until_complete(self._session())
    return self

  async def _session(self):
    return aiohttp.ClientSession()

  def open(self, url: str) -> Page:
    """A new tab with console and error reporting enabled, navigated to `url` (load event awaited)."""
    req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
      target = json.load(resp)
    ws = self.loop.run_until_complete(self.session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0))
    page = Page(self, ws)
    self._pages.append(page)
    for domain in ("Page", "Runtime", "Log"):
      page._call(f"{domain}.enable")  # pylint: disable=protected-access
    page.navigate(url)
    return page

  def close(self) -> None:
    for page in self._pages:
      self.loop.run_until_complete(page.ws.close())
    if self.session is not None:
      self.loop.run_until_complete(self.session.close())
    if self.proc is not None and self.proc.poll() is None:
      self.proc.terminate()
      try:
        self.proc.wait(10)
      except subprocess.TimeoutExpired:
        self.proc.kill()
    if getattr(self, "_log", None) is not None:
      self._log.close()
    self.loop.close()
    shutil.rmtree(self.profile, ignore_errors=True)

  def __exit__(self, *exc) -> None:
    self.close()
