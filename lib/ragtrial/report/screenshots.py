"""Screenshots of rendered reports in headless Chromium, as a reader's browser shows them: the check
that tables fit the page, scroll when wide and hide no column (bench/report_screenshots.py takes one
of every report under an outputs folder; tests/report/test_report_page.py one of a synthetic report).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

# The page width the reports are laid out for, and how much of a page one screenshot shows.
WINDOW = (1400, 2000)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Chromium offline and quiet: no sandbox (containers run as root), no GPU, no update, sync or
# first-run traffic, a profile of its own that is thrown away.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium() -> str | None:
    """The Chromium (or Chrome) on PATH, else /usr/bin/chromium if present, else None."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


def screenshot(
    page: Path,
    png: Path,
    window: tuple[int, int] = WINDOW,
    browser: str | None = None,
    timeout_s: float = 120,
) -> Path:
    """A PNG of `page` (an HTML file) at `png`, as headless Chromium draws it in a `window` (width,
    height) in pixels. Raises FileNotFoundError without a browser, RuntimeError when it draws nothing.
    """
    browser = browser or chromium()
    if browser is None:
        raise FileNotFoundError(
            "no Chromium found (chromium, chromium-browser or google-chrome on PATH, or /usr/bin/chromium); "
            "install it, e.g. `apt-get install chromium`"
        )
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragtrial-chromium-") as profile:
        done = subprocess.run(
            [
                browser,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={window[0]},{window[1]}",
                f"--screenshot={png}",
                Path(page).resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    if done.returncode != 0 or not png.is_file():
        last = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{browser} drew no screenshot of {page} (exit {done.returncode}): {last}")
    return png
