#!/usr/bin/env python3
"""Loads a `harness report` page in headless Chromium and checks what a reader would see.

Standard library only. Chromium is driven over its DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4), not by anything in the
page. The check fails when
  - the console logs an error or an assertion, a script throws, or Chromium logs an error
    (a resource that failed to load, a blocked request, ...);
  - a <figure> has no <svg>, an <svg> laid out with no size (width or height 0), or fewer than
    MIN_DRAWN shapes with a non-empty bounding box; or the page has fewer figures than
    --expect-figures;
  - a link does not resolve: an #anchor with no element of that id, a <use> pointing at no id, a
    file: link to a missing file, a data: link with nothing in it, any http(s): link (the page
    must work offline);
  - printed (A4, print stylesheet) a figure or table row may be split across pages, or a figure
    is taller than a page.
With --self-test it also breaks copies of the page (an empty figure, a console error, an anchor to
nowhere, a link to a missing file, a figure allowed to split when printed) and fails unless the
check rejects every one of them: the check is shown to fail when it should.

usage: report_browser_test.py PAGE [--expect-figures N] [--screenshot PNG] [--clip-height PX]
                              [--pdf PDF] [--self-test]
exit: 0 pass, 1 fail, 77 Chromium not installed.
"""
import argparse
import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

MIN_DRAWN = 10           # shapes with a non-empty bounding box in a drawn gnuplot figure
A4_CONTENT_PX = (680, 1009)  # A4 less the stylesheet's 1.5 cm margins, in CSS pixels (96 dpi)
TIMEOUT_S = 30


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with a DevTools session on one page, over a pipe."""

    def __init__(self, executable, profile):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Above 4, so that dup2 onto 3 and 4 in the child cannot clobber them.
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)

        def child_fds():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                "--user-data-dir=" + profile, "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=child_fds, pass_fds=(3, 4))
        for fd in (to_child_r, from_child_w, high_r, high_w):
            os.close(fd)
        self.out = os.fdopen(to_child_w, "wb", buffering=0)
        self.inp = os.fdopen(from_child_r, "rb", buffering=0)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("no answer from Chromium in %d s" % TIMEOUT_S)
            chunk = self.inp.read(65536)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe (exit %s)" % self.proc.poll())
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self.out.write(json.dumps(message).encode() + b"\0")
        deadline = time.time() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method):
        deadline = time.time() + TIMEOUT_S
        while True:
            for e in self.events:
                if e.get("method") == method:
                    return e
            self.events.append(self._read_message(deadline))

    def attach_to_page(self):
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(domain + ".enable")

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError("evaluation failed: %s" % result["exceptionDetails"])
        return result["result"]["value"]

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# Evaluated in the page by the test (the page has no script of its own).
LAYOUT = r"""(() => {
  const figures = [...document.querySelectorAll('figure')].map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    let drawn = 0;
    if (svg) for (const e of svg.querySelectorAll('path, line, polyline, polygon, rect, circle, use, text')) {
      const b = e.getBBox();
      if (b.width > 0 || b.height > 0) drawn++;
    }
    return {id: f.id, svg: !!svg, width: box.width, height: box.height, drawn,
            height_with_caption: f.getBoundingClientRect().height,
            break_inside: getComputedStyle(f).breakInside};
  });
  const ids = new Set([...document.querySelectorAll('[id]')].map(e => e.id));
  const links = [...document.querySelectorAll('a[href]')].map(a => ({raw: a.getAttribute('href'), url: a.href}));
  const uses = [...document.querySelectorAll('use')].map(u => u.getAttribute('href') || u.getAttribute('xlink:href'));
  const sources = [...document.querySelectorAll('[src]')].map(e => e.getAttribute('src'));
  const rows = [...document.querySelectorAll('tr')].slice(0, 50).map(r => getComputedStyle(r).breakInside);
  return {figures, ids: [...ids], links, uses, sources, rows, title: document.title};
})()"""


def console_problems(events):
    problems = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            problems.append("console.%s: %s" % (p["type"], text))
        elif method == "Runtime.exceptionThrown":
            problems.append("exception: %s" % p["exceptionDetails"].get("text", p["exceptionDetails"]))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            problems.append("log error: %s %s" % (p["entry"].get("text"), p["entry"].get("url", "")))
    return problems


def link_problems(layout):
    problems = []
    ids = set(layout["ids"])
    for link in layout["links"]:
        raw, url = link["raw"], link["url"]
        scheme = urllib.parse.urlsplit(url).scheme
        if raw.startswith("#"):
            if urllib.parse.unquote(raw[1:]) not in ids:
                problems.append("anchor %s: no element with that id" % raw)
        elif scheme == "data":
            if not url.split(",", 1)[1:] or not url.split(",", 1)[1]:
                problems.append("data: link with nothing in it")
        elif scheme == "file":
            path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
            if not os.path.exists(path):
                problems.append("link %s: %s does not exist" % (raw, path))
        else:
            problems.append("link %s: not a file, data: or #anchor link (the page must work offline)" % raw)
    for href in layout["uses"]:
        if not href or not href.startswith("#") or href[1:] not in ids:
            problems.append("<use> %s: no element with that id" % href)
    for src in layout["sources"]:
        problems.append("src=%s: the page loads nothing" % src)
    return problems


def figure_problems(layout, expect_figures):
    problems = []
    figures = layout["figures"]
    if len(figures) < max(expect_figures, 1):
        problems.append("%d figures, expected %d" % (len(figures), max(expect_figures, 1)))
    for f in figures:
        if not f["svg"]:
            problems.append("figure %s: no <svg>" % f["id"])
        elif f["width"] <= 0 or f["height"] <= 0:
            problems.append("figure %s: laid out %gx%g" % (f["id"], f["width"], f["height"]))
        elif f["drawn"] < MIN_DRAWN:
            problems.append("figure %s: %d shapes drawn (< %d)" % (f["id"], f["drawn"], MIN_DRAWN))
    return problems


def print_problems(layout):
    problems = []
    for f in layout["figures"]:
        if f["break_inside"] != "avoid":
            problems.append("printed, figure %s may split across pages (break-inside: %s)" % (f["id"], f["break_inside"]))
        if f["height_with_caption"] > A4_CONTENT_PX[1]:
            problems.append("printed, figure %s is taller than a page" % f["id"])
    for style in layout["rows"]:
        if style != "avoid":
            problems.append("printed, a table row may split across pages (break-inside: %s)" % style)
            break
    return problems


def check(page, expect_figures=0, screenshot=None, clip_height=0, pdf=None):
    """The problems found in `page` (empty: it passes)."""
    profile = tempfile.mkdtemp(prefix="report-browser-")
    browser = Browser(chromium_path(), profile)
    try:
        browser.attach_to_page()
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1100, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        browser.send("Page.navigate", {"url": "file://" + urllib.parse.quote(os.path.abspath(page))})
        browser.wait_for("Page.loadEventFired")
        browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        layout = browser.evaluate(LAYOUT)
        problems = figure_problems(layout, expect_figures) + link_problems(layout)
        if screenshot:
            height = clip_height or browser.evaluate("document.documentElement.scrollHeight")
            shot = browser.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1100, "height": height, "scale": 1}})
            with open(screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        # As printed: the print stylesheet at the width of an A4 page's content.
        browser.send("Emulation.setEmulatedMedia", {"media": "print"})
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": A4_CONTENT_PX[0], "height": A4_CONTENT_PX[1], "deviceScaleFactor": 1, "mobile": False})
        problems += print_problems(browser.evaluate(LAYOUT))
        if pdf:
            printed = browser.send("Page.printToPDF", {"paperWidth": 8.27, "paperHeight": 11.69, "preferCSSPageSize": True})
            with open(pdf, "wb") as f:
                f.write(base64.b64decode(printed["data"]))
        time.sleep(0.2)
        browser.evaluate("1")  # collects the events that came meanwhile
        return console_problems(browser.events) + problems
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


def broken_copies(html):
    """(name, page text, the problem the check must report) for each way of breaking the page."""
    svg = re.search(r"<svg[\s\S]*?</svg>", html)
    empty_figure = html[:svg.start()] + '<svg role="img" aria-label="empty"></svg>' + html[svg.end():]
    end = html.rindex("</body>")
    return [
        ("empty-figure", empty_figure, "shapes drawn"),
        ("console-error", html[:end] + "<script>console.error('planted error')</script>" + html[end:], "planted error"),
        ("dangling-anchor", html[:end] + '<p><a href="#nowhere">x</a></p>' + html[end:], "#nowhere"),
        ("missing-file", html[:end] + '<p><a href="missing.csv">x</a></p>' + html[end:], "missing.csv"),
        ("split-figure", html.replace("figure, tr, .keep {", ".keep {"), "may split"),
    ]


def self_test(page, expect_figures):
    """Fails (returns problems) unless the check rejects every broken copy for its reason."""
    with open(page, encoding="utf-8") as f:
        html = f.read()
    failures = []
    for name, text, expected in broken_copies(html):
        copy = os.path.join(os.path.dirname(os.path.abspath(page)), "broken-%s.html" % name)
        with open(copy, "w", encoding="utf-8") as f:
            f.write(text)
        found = check(copy, expect_figures)
        os.remove(copy)
        if not any(expected in p for p in found):
            failures.append("self-test %s: the check did not report '%s' (found: %s)" % (name, expected, found))
        else:
            print("self-test %s: rejected as expected (%s)" % (name, next(p for p in found if expected in p)))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("page")
    parser.add_argument("--expect-figures", type=int, default=0)
    parser.add_argument("--screenshot")
    parser.add_argument("--clip-height", type=int, default=0, help="screenshot only the top PX pixels")
    parser.add_argument("--pdf")
    parser.add_argument("--self-test", action="store_true")
    a = parser.parse_args()
    if not chromium_path():
        print("SKIP: chromium not installed (Debian package chromium; scripts/install-deps.sh installs it)")
        return 77
    if not os.path.isfile(a.page):
        print("error: %s: no such page" % a.page)
        return 1
    problems = check(a.page, a.expect_figures, a.screenshot, a.clip_height, a.pdf)
    if a.self_test:
        problems += self_test(a.page, a.expect_figures)
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("pass: %s loads with no console error, every figure drawn, every link resolving%s" %
              (a.page, "; screenshot " + a.screenshot if a.screenshot else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
