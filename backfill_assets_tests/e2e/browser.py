"""Debian's Chromium, headless, driven by Playwright; every failure reports what the page showed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page, ViewportSize

CHROMIUM = "/usr/bin/chromium"
# The machine's network is closed: no background, update or sync traffic, no QUIC.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: ViewportSize = {"width": 1920, "height": 1080}
DOCS_IMG_ENV = "BACKFILL_E2E_DOCS_IMG"


class UiStepFailed(AssertionError):
    pass


def chromium_path() -> str | None:
    found = shutil.which("chromium")
    return CHROMIUM if Path(CHROMIUM).exists() else found


@contextlib.contextmanager
def chromium_page(executable: str) -> Iterator[Page]:
    """A page in a fresh profile of the system Chromium (Playwright's own browsers are not used)."""
    from playwright.sync_api import expect, sync_playwright

    # A page of the webserver can take seconds to settle on a machine busy with Spark.
    expect.set_options(timeout=20_000)
    profile = tempfile.mkdtemp(prefix="e2e-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=executable,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport=VIEWPORT,
            )
            try:
                context.set_default_timeout(30_000)
                # What Dagster's "Join the community" dialog stores when a person clicks Skip: it
                # otherwise comes up over whatever page is open, a second or more after the first.
                context.add_init_script("window.localStorage.setItem('communityNux', '\"1\"')")
                yield context.new_page()
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class Ui:
    """The page, the base URL, and the folder screenshots go to."""

    page: Page
    base_url: str
    out: Path
    server_log: Path | None = None
    shots: list[Path] = field(default_factory=list)

    def goto(self, path: str) -> None:
        self.page.goto(self.base_url + path)

    def screenshot(self, name: str, docs: str | None = None) -> Path:
        """A screenshot into the output folder; one with a ``docs`` name is also copied under it
        into $BACKFILL_E2E_DOCS_IMG when that is set (`make screenshots`: README's pictures)."""
        path = self.out / f"{name}.png"
        self.page.screenshot(path=str(path))
        self.shots.append(path)
        print(f"screenshot: {path}")
        docs_dir = os.environ.get(DOCS_IMG_ENV)
        if docs and docs_dir:
            Path(docs_dir).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(docs_dir) / docs)
        return path

    def body_text(self) -> str:
        try:
            return self.page.inner_text("body", timeout=5_000)
        except Exception as exc:
            return f"(page text unavailable: {exc})"

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Run one user step; on failure, say which, with a screenshot and what the page showed."""
        try:
            yield
        except Exception as exc:
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            shot: Path | str
            try:
                shot = self.screenshot(f"FAILED-{slug}")
            except Exception as shot_exc:
                shot = f"(no screenshot: {shot_exc})"
            text = re.sub(r"\n\s*\n+", "\n", self.body_text()).strip()
            raise UiStepFailed(
                f"UI step {name!r} failed: {type(exc).__name__}: {exc}\n"
                f"url: {self.page.url}\nscreenshot: {shot}\nserver log: {self.server_log}\n"
                f"page showed (first 3000 chars):\n{text[:3000]}"
            ) from exc


# --- what an asset's pages show ---------------------------------------------------------------

PARTITION_STATUSES = ("Failed", "Materialized", "Materializing", "Missing")


def partition_counts(page) -> dict[str, int]:
    """The partition bar's counts as the Partitions tab writes them: "Failed (1)", "Missing (7)",
    ..."""
    from playwright.sync_api import expect

    labels = page.get_by_text(re.compile(rf"^({'|'.join(PARTITION_STATUSES)}) \(\d+\)$"))
    expect(labels.first).to_be_visible()
    counts = {}
    for text in labels.all_inner_texts():
        m = re.match(r"^(\w+) \((\d+)\)$", text)
        assert m is not None, f"not a partition count: {text!r}"
        counts[m.group(1)] = int(m.group(2))
    return counts


def expect_columns_described(ui: Ui, asset: str, described: dict[str, str], columns) -> None:
    """The asset's Overview: its Columns panel lists each of ``columns`` with its description."""
    from playwright.sync_api import expect

    page = ui.page
    ui.goto(f"/assets/{asset}")
    expect(page.get_by_text("Columns", exact=True).first).to_be_visible()
    for column in columns:
        expect(page.get_by_text(column, exact=True).first).to_be_visible()
        expect(page.get_by_text(described[column], exact=True).first).to_be_visible()
