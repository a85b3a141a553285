"""A real headless browser for the tests: Debian's chromium driven over the DevTools protocol
(aiohttp's websocket client, a test dependency), on loopback only.

`Browser.open(url, width)` loads a page and returns what happened: every network request the
page made, console errors, uncaught exceptions, failed loads; `evaluate` reads the rendered
page; `screenshot` captures it as PNG.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

import aiohttp


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Load:
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads


class Browser:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="kvwatch-chromium-")
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._id = 0
        self._session = ""
        self._events: asyncio.Queue = asyncio.Queue()
        self._replies: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None

    async def __aenter__(self) -> "Browser":
        exe = chromium()
        assert exe, "no chromium"
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-extensions", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self._dir.name}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = await asyncio.wait_for(asyncio.to_thread(self._devtools_url), 60)
            self._http = aiohttp.ClientSession()
            self._ws = await self._http.ws_connect(url, max_msg_size=0)
            self._reader = asyncio.create_task(self._read())
            target = (await self.send("Target.createTarget", {"url": "about:blank"}, session=False))["targetId"]
            self._session = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                             session=False))["sessionId"]
            for domain in ("Page", "Network", "Runtime", "Log"):
                await self.send(f"{domain}.enable")
        except BaseException:
            await self.__aexit__(None, None, None)  # never leave a browser behind
            raise
        return self

    def _devtools_url(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:  # chromium says where it listens before anything else matters
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                # keep draining its log, or a full pipe would stall the browser
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return m.group(1)
        raise RuntimeError("chromium exited without a DevTools address")

    async def __aexit__(self, *exc) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._http is not None:
            await self._http.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        self._dir.cleanup()

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._replies:
                fut = self._replies.pop(data["id"])
                if "error" in data:
                    fut.set_exception(RuntimeError(str(data["error"])))
                else:
                    fut.set_result(data.get("result", {}))
            elif "method" in data:
                self._events.put_nowait(data)

    async def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        assert self._ws is not None
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self._session
        fut = asyncio.get_running_loop().create_future()
        self._replies[self._id] = fut
        await self._ws.send_str(json.dumps(msg))
        return await asyncio.wait_for(fut, 30)

    async def open(self, url: str, width: int, height: int = 900, dark: bool = False) -> Load:
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
        await self.send("Emulation.setEmulatedMedia",
                        {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
        while not self._events.empty():
            self._events.get_nowait()
        await self.send("Page.navigate", {"url": url})
        out = Load()
        while True:
            ev = await asyncio.wait_for(self._events.get(), 30)
            m, p = ev["method"], ev.get("params", {})
            if m == "Network.requestWillBeSent":
                out.requests.append(p["request"]["url"])
            elif m == "Network.loadingFailed":
                out.errors.append(f"load failed: {p.get('errorText')} {p.get('blockedReason', '')}")
            elif m == "Runtime.exceptionThrown":
                out.errors.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.errors.append(f"console: {p.get('args')}")
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.errors.append(f"log: {p['entry'].get('text')}")
            elif m == "Page.loadEventFired":
                break
        return out

    async def evaluate(self, expr: str) -> Any:
        res = await self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(str(res["exceptionDetails"]))
        return res["result"].get("value")

    async def print_media(self) -> None:
        await self.send("Emulation.setEmulatedMedia", {"media": "print"})

    async def screenshot(self, path: str | os.PathLike[str], full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = await self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}}
        data = (await self.send("Page.captureScreenshot", params))["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
